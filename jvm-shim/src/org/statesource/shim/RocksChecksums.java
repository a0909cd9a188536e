package org.statesource.shim;

import java.util.zip.CRC32C;
import net.jpountz.xxhash.XXHash32;
import net.jpountz.xxhash.XXHash64;
import net.jpountz.xxhash.XXHashFactory;

/**
 * The block checksums of block-based tables (statesource/flink/rocksdb/checksums.py): each
 * block's 5-byte trailer holds its compression type and a checksum of the block and that type
 * byte, of the kind the footer names: the masked CRC-32C (1), XXH32 (2), the low half of XXH64
 * (3), or XXH3 (4: the low half of XXH3-64 of all but the last byte, XORed with that byte
 * times 0x6b9083d9). From format_version 6 the stored value also depends on where the block
 * lies (the footer's base context checksum).
 */
final class RocksChecksums {
  /** The checksum types' names, by their number in the footer. */
  static final String[] NAMES = {"none", "crc32c", "xxHash", "xxHash64", "XXH3"};
  private static final int LAST_BYTE_PRIME = 0x6B9083D9;
  private static final XXHash32 HASH32 = XXHashFactory.fastestInstance().hash32();
  private static final XXHash64 HASH64 = XXHashFactory.fastestInstance().hash64();

  private final CRC32C crc = new CRC32C();

  /** The checksum of kind {@code kind} of {@code data[offset, offset + length)}. */
  int checksum(int kind, byte[] data, int offset, int length) {
    switch (kind) {
      case 1:
        crc.reset();
        crc.update(data, offset, length);
        long value = crc.getValue();
        return (int) ((((value >>> 15) | (value << 17)) & 0xFFFFFFFFL) + 0xA282EAD8L);
      case 4:
        if (length == 0) {
          return 0;
        }
        int low = (int) Xxh3.hash64(data, offset, length - 1);
        return low ^ ((data[offset + length - 1] & 0xFF) * LAST_BYTE_PRIME);
      case 3:
        return (int) HASH64.hash(data, offset, length, 0);
      case 2:
        return HASH32.hash(data, offset, length, 0);
      default:
        return 0;
    }
  }

  /** Whether {@code stored} is the checksum of the bytes at file offset {@code at}. */
  boolean matches(int kind, byte[] data, int offset, int length, int stored, int base, long at) {
    if (kind == 0) {
      return true;
    }
    int modifier = base == 0 ? 0 : base ^ (int) ((at & 0xFFFFFFFFL) + (at >>> 32));
    return stored == checksum(kind, data, offset, length) + modifier;
  }
}

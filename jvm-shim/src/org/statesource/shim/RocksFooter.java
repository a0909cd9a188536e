package org.statesource.shim;

/**
 * The footer of a block-based table (statesource/flink/rocksdb/footer.py): its last 53 bytes,
 * a checksum type, 40 bytes of block handles (up to format_version 5) or, from version 6, the
 * extended magic, a checksum of the footer, the base context checksum and the metaindex's size,
 * then the format_version and the magic number. Tables of other formats are named and refused.
 */
final class RocksFooter {
  static final int BYTES = 53;
  static final int TRAILER = 5;
  static final long MAGIC = 0x88E241B785F4CFF7L;

  final int formatVersion;
  final int checksumType;
  final int baseContextChecksum;
  final long[] metaindex = new long[2];
  /** The index block's handle, or null from format_version 6 (the metaindex names it). */
  final long[] index;
  /** Where the footer starts: every block ends before it. */
  final long offset;

  /** The footer in {@code footer[0, 53)}, the last bytes of a file of {@code size} bytes. */
  RocksFooter(byte[] footer, long size, RocksPlace place, RocksChecksums checksums) {
    offset = size - BYTES;
    place.set(footer, 0, BYTES, offset, null);
    long magic = RocksCoding.u64(footer, BYTES - 8);
    if (magic != MAGIC) {
      String other = other(magic);
      if (other != null) {
        throw RocksCoding.incompatible(place.name, other);
      }
      throw place.error(BYTES - 8, "not an SST file (magic number 0x"
          + String.format("%016x", magic) + ")");
    }
    long version = RocksCoding.u32(footer, BYTES - 12) & 0xFFFFFFFFL;
    if (version < 2 || version > 7) {
      throw place.error(BYTES - 12, "corrupt or unsupported format_version " + version
          + " (statesource reads 2 to 7)");
    }
    formatVersion = (int) version;
    checksumType = footer[0] & 0xFF;
    if (checksumType >= RocksChecksums.NAMES.length) {
      throw place.error(0, "corrupt or unsupported checksum type " + checksumType);
    }
    if (formatVersion < 6) {
      baseContextChecksum = 0;
      place.pos = 1;
      place.handle(41, "metaindex handle", metaindex);
      index = new long[2];
      place.handle(41, "index handle", index);
      return;
    }
    index = null;
    if (footer[1] != 0x3e || footer[2] != 0 || footer[3] != 0x7a || footer[4] != 0) {
      throw place.error(1, "bad extended magic");
    }
    int stored = RocksCoding.u32(footer, 5);
    baseContextChecksum = RocksCoding.u32(footer, 9);
    if (baseContextChecksum == 0) {
      throw place.error(9, "invalid base context checksum 0");
    }
    byte[] zeroed = footer.clone();
    java.util.Arrays.fill(zeroed, 5, 9, (byte) 0);
    if (!checksums.matches(checksumType, zeroed, 0, BYTES, stored, baseContextChecksum, offset)) {
      throw place.error(5, "footer checksum mismatch");
    }
    for (int i = 33; i < 41; i++) {
      if (footer[i] != 0) {
        throw RocksCoding.incompatible(place.name, "the footer uses a RocksDB feature newer than"
            + " statesource reads (reserved bytes set at byte offset " + (offset + 33) + ")");
      }
    }
    long metaindexSize = RocksCoding.u32(footer, 13) & 0xFFFFFFFFL;
    long start = offset - TRAILER - metaindexSize;
    if (start < 0) {
      throw place.error(13, "metaindex of " + metaindexSize + " bytes starts before the file");
    }
    metaindex[0] = start;
    metaindex[1] = metaindexSize;
  }

  private static String other(long magic) {
    if (magic == 0xDB4775248B80FB57L) {
      return "a block-based table of format_version 0 or 1 (RocksDB before 4.6), which"
          + " statesource does not read";
    }
    if (magic == 0x8242229663BF9564L || magic == 0x4F3418EB7A8F13B8L) {
      return "a plain table, not a block-based one";
    }
    if (magic == 0x926789D0C5F17873L) {
      return "a cuckoo table, not a block-based one";
    }
    return null;
  }
}

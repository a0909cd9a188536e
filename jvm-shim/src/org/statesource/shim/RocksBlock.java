package org.statesource.shim;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The layout of one uncompressed block (statesource/flink/rocksdb/block.py): prefix-compressed
 * entries, the restart array (uint32 each, the first 0, increasing, inside the entries), an
 * optional data block hash index, and a packed uint32 (the restart count in its low 28 bits,
 * bit 31 the hash index, bit 28 RocksDB 11's separated values, bit 30 reserved); and the
 * (key, value) entries of the blocks that are not data blocks (metaindex, properties, range
 * deletions, indexes without delta-encoded values).
 */
final class RocksBlock {
  private static final int HASH_INDEX = 1 << 31;
  private static final int RESERVED = 1 << 30;
  private static final int SEPARATED = 1 << 28;
  private static final int RESTART_MASK = (1 << 28) - 1;

  private RocksBlock() {
  }

  /**
   * Checks the layout of {@code place}'s block and readies {@code restarts} for a walk of its
   * entries; where they end and its restart array starts (absolute).
   */
  static int layout(RocksPlace place, RocksRestarts restarts) {
    int size = place.length();
    byte[] data = place.data;
    int start = place.start;
    if (size < 4) {
      throw place.error(0, "a block of " + size + " bytes cannot hold its restart count");
    }
    int packed = RocksCoding.u32(data, start + size - 4);
    if ((packed & SEPARATED) != 0) {
      throw RocksCoding.incompatible(place.name, "the block at byte offset " + place.offset
          + " keeps its values apart from its keys (RocksDB 11's separated key-value blocks)");
    }
    if ((packed & RESERVED) != 0) {
      throw place.error(size - 4, "reserved bit set in the block's restart count");
    }
    int count = packed & RESTART_MASK;
    int end = size - 4;
    if ((packed & HASH_INDEX) != 0) {
      if (end < 2) {
        throw place.error(end, "no room for the data block hash index");
      }
      int buckets = (data[start + end - 2] & 0xFF) | (data[start + end - 1] & 0xFF) << 8;
      if (buckets == 0 || buckets + 2 > end) {
        throw place.error(end - 2, "data block hash index of " + buckets + " buckets does not fit");
      }
      end -= 2 + buckets;
    }
    if (count * 4L > end) {
      throw place.error(size - 4, count + " restart points do not fit in " + end + " bytes");
    }
    end -= count * 4;
    if (end == 0) {
      if (count > 1 || (count == 1 && RocksCoding.u32(data, start) != 0)) {
        throw place.error(size - 4, count + " restart points in an empty block");
      }
      restarts.reset(data, start, start, 0);
      return start;
    }
    if (count == 0) {
      throw place.error(size - 4, "entries without a restart point");
    }
    int first = RocksCoding.u32(data, start + end);
    if (first != 0) {
      throw place.error(end, "first restart point at " + (first & 0xFFFFFFFFL) + ", not 0");
    }
    long previous = 0;
    for (int i = 1; i < count; i++) {
      long current = RocksCoding.u32(data, start + end + 4 * i) & 0xFFFFFFFFL;
      if (current <= previous || current >= end) {
        throw place.error(end, "restart point " + current + " out of order or past the entries");
      }
      previous = current;
    }
    restarts.reset(data, start, start + end, count);
    return start + end;
  }

  /** Every (key, value) of a block whose entries carry value lengths. */
  static List<byte[][]> entries(RocksPlace place) {
    RocksRestarts restarts = new RocksRestarts();
    int end = layout(place, restarts);
    byte[] data = place.data;
    int base = place.start;
    List<byte[][]> out = new ArrayList<>();
    byte[] key = new byte[0];
    place.pos = base;
    while (place.pos < end) {
      restarts.header(place, end, true);
      int at = restarts.at;
      int shared = restarts.shared;
      int unshared = restarts.unshared;
      int valueLength = restarts.valueLength;
      int keyEnd = place.pos + unshared;
      long valueEnd = (long) keyEnd + valueLength;
      if ((long) place.pos + unshared + valueLength > end) {
        throw place.error(at - base, "entry runs past the block's entries");
      }
      if (shared > key.length) {
        throw place.error(at - base, "entry shares " + shared + " bytes of a " + key.length
            + "-byte key");
      }
      byte[] next = Arrays.copyOf(key, shared + unshared);
      System.arraycopy(data, place.pos, next, shared, unshared);
      key = next;
      out.add(new byte[][] {key, Arrays.copyOfRange(data, keyEnd, (int) valueEnd)});
      place.pos = (int) valueEnd;
    }
    restarts.finish(place);
    return out;
  }
}

package org.statesource.shim;

import java.util.Arrays;
import java.util.List;

/**
 * A table's index, read whole once (statesource/flink/rocksdb/index.py): each data block's
 * separator as a user key (at least its last user key, below the next block's first) and its
 * handle, in file order. Index types: binary search (0), hash search (1, read as binary
 * search), partitioned (2: a top-level index of index partitions), binary search with each
 * block's first key (3). With delta-encoded values (format_version 4 and up) an entry that
 * shares key bytes stores only its block's size, as a difference from the previous one's.
 */
final class RocksIndex {
  static final int TWO_LEVEL = 2;
  static final int WITH_FIRST_KEY = 3;

  int count;
  /** The length of the first index key too short to be an internal key (-1: none): a whole
   * scan does not need the separators, a range scan refuses them. */
  int shortKey = -1;
  byte[] keys = new byte[1 << 12];
  int[] keyStart = new int[65];
  long[] offsets = new long[64];
  long[] sizes = new long[64];

  /** The first block whose separator is not below {@code key} (count: none). */
  int seek(byte[] key) {
    int low = 0;
    int high = count;
    while (low < high) {
      int middle = (low + high) >>> 1;
      if (Arrays.compareUnsigned(keys, keyStart[middle], keyStart[middle + 1], key, 0,
          key.length) < 0) {
        low = middle + 1;
      } else {
        high = middle;
      }
    }
    return low;
  }

  /** Whether block {@code block}'s separator is at or above {@code key}. */
  boolean separatorReaches(int block, byte[] key) {
    return Arrays.compareUnsigned(keys, keyStart[block], keyStart[block + 1], key, 0,
        key.length) >= 0;
  }

  /**
   * The entries of one index block (or partition) in {@code place}, appended;
   * {@code userKeys}: separators are user keys, else internal keys whose trailer is dropped;
   * {@code handles}: for a partitioned index's top level, its partitions' handles instead.
   */
  void read(RocksPlace place, boolean deltaEncoded, boolean firstKey, boolean userKeys,
      LongList handles) {
    if (!deltaEncoded) {
      List<byte[][]> entries = RocksBlock.entries(place);
      long[] handle = new long[2];
      for (byte[][] entry : entries) {
        RocksPlace value = new RocksPlace(place.name).set(entry[1], 0, entry[1].length,
            place.offset, place.inside);
        value.handle(entry[1].length, "block handle", handle);
        if (firstKey) {
          int length = value.varint32(entry[1].length, "length of block's first key");
          if (value.pos + length > entry[1].length) {
            throw place.error(0, "block's first key of " + length + " bytes runs past the end");
          }
          value.pos += length;
        }
        if (value.pos != entry[1].length) {
          throw place.error(0, "index value holds bytes after its block handle");
        }
        add(entry[0], 0, entry[0].length, handle[0], handle[1], userKeys, handles);
      }
      return;
    }
    RocksRestarts restarts = new RocksRestarts();
    int end = RocksBlock.layout(place, restarts);
    byte[] data = place.data;
    int base = place.start;
    byte[] key = new byte[64];
    int keyLength = 0;
    boolean any = false;
    long offset = 0;
    long size = 0;
    place.pos = base;
    long[] handle = new long[2];
    while (place.pos < end) {
      restarts.header(place, end, false);
      int shared = restarts.shared;
      if (shared > keyLength || (long) place.pos + restarts.unshared > end) {
        throw place.error(restarts.at - base, "index entry's key runs past its bounds");
      }
      if (key.length < shared + restarts.unshared) {
        key = Arrays.copyOf(key, Math.max(shared + restarts.unshared, key.length * 2));
      }
      System.arraycopy(data, place.pos, key, shared, restarts.unshared);
      keyLength = shared + restarts.unshared;
      place.pos += restarts.unshared;
      if (shared != 0) {
        if (!any) {
          throw place.error(restarts.at - base, "the first index entry shares key bytes");
        }
        long raw = place.varint64(end, "block size delta");
        long delta = (raw >>> 1) ^ -(raw & 1);
        long next = size + delta;
        if (next < 0 || (delta > 0 && next < size)) {
          throw place.error(restarts.at - base, "block size delta " + delta
              + " makes a negative size");
        }
        offset = offset + size + RocksFooter.TRAILER;
        size = next;
      } else {
        place.handle(end, "block handle", handle);
        offset = handle[0];
        size = handle[1];
      }
      if (firstKey) {
        int length = place.varint32(end, "length of block's first key");
        if ((long) place.pos + length > end) {
          throw place.error(place.pos - base, "block's first key of " + length
              + " bytes runs past the end");
        }
        place.pos += length;
      }
      any = true;
      add(key, 0, keyLength, offset, size, userKeys, handles);
    }
    restarts.finish(place);
  }

  private void add(byte[] key, int from, int length, long offset, long size, boolean userKeys,
      LongList handles) {
    if (handles != null) {
      handles.add(offset);
      handles.add(size);
      return;
    }
    if (!userKeys) {
      if (length < RocksCoding.INTERNAL_BYTES && shortKey < 0) {
        shortKey = length;
      }
      length = Math.max(0, length - RocksCoding.INTERNAL_BYTES);
    }
    if (count == offsets.length) {
      offsets = Arrays.copyOf(offsets, count * 2);
      sizes = Arrays.copyOf(sizes, count * 2);
      keyStart = Arrays.copyOf(keyStart, count * 2 + 1);
    }
    int at = keyStart[count];
    if (keys.length - at < length) {
      keys = Arrays.copyOf(keys, (int) Math.min(Integer.MAX_VALUE - 16,
          Math.max((long) at + length, keys.length * 2L)));
    }
    System.arraycopy(key, from, keys, at, length);
    offsets[count] = offset;
    sizes[count] = size;
    count++;
    keyStart[count] = at + length;
  }

  /** A growable list of longs: a partitioned index's partition handles. */
  static final class LongList {
    long[] values = new long[16];
    int size;

    void add(long value) {
      if (size == values.length) {
        values = Arrays.copyOf(values, size * 2);
      }
      values[size++] = value;
    }
  }
}

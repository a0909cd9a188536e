package org.statesource.shim;

import java.io.IOException;
import java.util.Arrays;

/**
 * The entries of one table in a key range, one at a time, in file order (user key ascending,
 * then newest first), decoded from the data blocks the index places the range in
 * (statesource/flink/rocksdb/block.py's data walk and lookup.py's table range): from the first
 * block whose separator is not below the range's start, until an entry or a separator reaches
 * its stop. Every entry is checked as it is decoded: its varints and bounds, the restart points,
 * its value type, and its order (also across blocks); a whole scan also counts the entries
 * against the properties. The current entry's key is in {@link #key} (the user key its first
 * {@link #userLength} bytes) and its value in {@link #value}, valid until the next call.
 */
final class RocksCursor {
  static final int DELETION = 0;
  static final int VALUE = 1;
  static final int MERGE = 2;
  static final int SINGLE_DELETION = 7;

  final int number;
  byte[] key = new byte[64];
  int userLength;
  long sequence;
  int kind;
  byte[] value;
  int valueOffset;
  int valueLength;

  private final RocksTable table;
  private final RocksPlace place;
  private RocksIndex index;
  private byte[] start;
  private byte[] stop;
  private boolean whole;
  private int block;
  private byte[] data;
  private int base;
  private int pos;
  private int end;
  private final RocksRestarts restarts = new RocksRestarts();
  private int sharable;
  private boolean previous;
  private long entries;

  RocksCursor(RocksTable table, int number) {
    this.table = table;
    this.number = number;
    this.place = new RocksPlace(table.name);
  }

  /** Starts over on [start, stop) (stop null: to the end); false when it holds nothing. */
  boolean seek(byte[] start, byte[] stop) throws IOException {
    this.index = table.index();
    this.start = start;
    this.stop = stop;
    this.whole = start.length == 0 && stop == null;
    if (!whole && index.shortKey >= 0) {
      throw RocksCoding.corrupt(table.name, table.footer.offset, "an index key of "
          + index.shortKey + " bytes");
    }
    block = index.seek(start);
    pos = end = 0;
    data = null;
    previous = false;
    entries = 0;
    return next();
  }

  /** Moves to the next entry in the range; false at its end. */
  boolean next() throws IOException {
    while (true) {
      if (pos >= end) {
        if (!nextBlock()) {
          return false;
        }
        continue;
      }
      decode();
      if (stop != null && Arrays.compareUnsigned(key, 0, userLength, stop, 0, stop.length) >= 0) {
        while (pos < end) {  // the rest of the block is checked as a whole read checks it
          decode();
        }
        restarts.finish(place);
        end = pos = 0;
        block = index.count;
        data = null;
        whole = false;
        return false;
      }
      if (Arrays.compareUnsigned(key, 0, userLength, start, 0, start.length) >= 0) {
        return true;
      }
    }
  }

  private boolean nextBlock() throws IOException {
    if (data != null) {
      restarts.finish(place);
      data = null;
      if (stop != null && index.separatorReaches(block - 1, stop)) {
        block = index.count;
        return false;
      }
    }
    if (block >= index.count) {
      if (whole) {
        long expected = table.properties.numEntries - table.properties.numRangeDeletions;
        whole = false;
        if (entries != expected) {
          throw RocksCoding.corrupt(table.name, table.footer.offset, "the data blocks hold "
              + entries + " entries, the properties " + expected);
        }
      }
      return false;
    }
    table.fetchData(index.offsets[block], index.sizes[block], place);
    block++;
    end = RocksBlock.layout(place, restarts);
    data = place.data;
    base = place.start;
    pos = base;
    sharable = 0;
    return true;
  }

  /** Decodes the entry at {@link #pos}, checked, and moves past it. */
  private void decode() {
    byte[] block = data;
    int at = pos;
    int shared = block[at];
    int unshared = block[at + 1];
    int length = block[at + 2];
    if ((shared | unshared | length) >= 0) {
      pos = at + 3;
    } else {
      place.pos = at;
      shared = place.varint32(end, "shared key bytes");
      unshared = place.varint32(end, "unshared key bytes");
      length = place.varint32(end, "value length");
      pos = place.pos;
    }
    restarts.entry(at, shared, place);
    if ((long) pos + unshared + length > end) {
      throw place.error(at - base, "entry runs past the block's entries");
    }
    if (shared > sharable) {
      throw place.error(at - base, "entry shares " + shared + " bytes of a " + sharable
          + "-byte key");
    }
    int newLength = shared + unshared;
    int newUser = newLength - RocksCoding.INTERNAL_BYTES;
    if (newUser < 0) {
      throw place.error(at - base, "internal key of " + newLength + " bytes");
    }
    int order = 1;
    if (previous) {
      int least = Math.min(newUser, userLength);
      order = shared >= least ? Integer.compare(newUser, userLength)
          : Arrays.compareUnsigned(block, pos, pos + newUser - shared, key, shared, userLength);
    }
    if (key.length < newLength) {
      key = Arrays.copyOf(key, Math.max(newLength, key.length * 2));
    }
    System.arraycopy(block, pos, key, shared, unshared);
    pos += unshared;
    long packed = RocksCoding.u64(key, newUser);
    int type = (int) packed & 0xFF;
    if (type != VALUE && type != MERGE && type != DELETION && type != SINGLE_DELETION) {
      throw refusedType(type, at);
    }
    long seq = packed >>> 8;
    if (order < 0 || (order == 0 && seq >= sequence)) {
      throw place.error(at - base, "key " + RocksCoding.shown(key, 0, newUser) + " (sequence "
          + seq + ") out of order");
    }
    previous = true;
    sharable = newLength;
    userLength = newUser;
    sequence = seq;
    kind = type;
    value = block;
    valueOffset = pos;
    valueLength = length;
    pos += length;
    entries++;
  }

  /** The sequence number the merge sees (an ingested file's entries take the file's). */
  long mergeSequence() {
    long global = table.globalSeqno;
    return global > 0 ? global : sequence;
  }

  private IllegalStateException refusedType(int type, int at) {
    String what;
    switch (type) {
      case 0x11: what = "a reference into a blob file (BlobDB)"; break;
      case 0x14: what = "a deletion with a user-defined timestamp"; break;
      case 0x16: what = "a wide-column entity"; break;
      case 0x18: what = "a value with a preferred sequence number (TimedPut)"; break;
      default:
        return place.error(at - base, "entry of unknown value type 0x" + Integer.toHexString(type));
    }
    return RocksCoding.incompatible(table.name, "a data block at byte offset " + place.offset
        + " holds " + what + ", which Flink never writes");
  }
}

package org.statesource.shim;

/**
 * A block's restart points, met in order as its entries are walked: each must fall on an entry
 * that shares no key bytes, and every one must be met before the entries end (block.py's walk).
 * The entry at offset 0 is the first restart point, checked by the layout.
 */
final class RocksRestarts {
  private byte[] data;
  private int base;
  private int end;
  private int count;
  private int nextIndex;
  private int nextRestart;
  /** The last header read: where the entry starts, its shared and unshared key bytes, and
   * (where entries carry one) its value's length. */
  int at;
  int shared;
  int unshared;
  int valueLength;

  /** A block's entries in {@code data[base, end)}, its {@code count} restart points after. */
  void reset(byte[] data, int base, int end, int count) {
    this.data = data;
    this.base = base;
    this.end = end;
    this.count = count;
    nextIndex = 1;
    nextRestart = count > 1 ? base + RocksCoding.u32(data, end + 4) : end;
  }

  /** The entry at {@code at} (absolute) shares {@code shared} key bytes. */
  void entry(int at, int shared, RocksPlace place) {
    if (at < nextRestart) {
      return;
    }
    if (at > nextRestart) {
      throw place.error(nextRestart - base, "restart point inside an entry");
    }
    nextIndex++;
    nextRestart = nextIndex < count ? base + RocksCoding.u32(data, end + 4 * nextIndex) : end;
    if (shared != 0) {
      throw place.error(at - base, "a restart point shares key bytes");
    }
  }

  /** Reads the header of the entry at {@code place.pos} (before {@code end}), checked against
   * the restart points. */
  void header(RocksPlace place, int end, boolean withValueLength) {
    at = place.pos;
    shared = place.varint32(end, "shared key bytes");
    unshared = place.varint32(end, "unshared key bytes");
    valueLength = withValueLength ? place.varint32(end, "value length") : 0;
    entry(at, shared, place);
  }

  /** The entries ended: no restart point may lie beyond them. */
  void finish(RocksPlace place) {
    if (nextIndex < count) {
      throw place.error(end - base, "restart point past the last entry");
    }
  }
}

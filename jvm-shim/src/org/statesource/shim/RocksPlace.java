package org.statesource.shim;

/**
 * The contents of one block (or footer) being decoded, and where they came from, so that an
 * error names the file and the offset: a position in a block stored uncompressed is a file
 * offset; in a decompressed block the error gives the block's file offset and the position
 * among its decompressed bytes. Decoding reads {@code data[start, end)}; positions are
 * relative to {@code start}. Holds a position ({@link #pos}) for the varint readers.
 */
final class RocksPlace {
  /** What errors call the file. */
  final String name;
  byte[] data;
  int start;
  int end;
  /** The block's offset in the file. */
  long offset;
  /** What the bytes are, where they were decompressed (null: they are the file's). */
  String inside;
  /** Where the varint readers are. */
  int pos;

  RocksPlace(String name) {
    this.name = name;
  }

  RocksPlace set(byte[] data, int start, int end, long offset, String inside) {
    this.data = data;
    this.start = start;
    this.end = end;
    this.offset = offset;
    this.inside = inside;
    this.pos = start;
    return this;
  }

  int length() {
    return end - start;
  }

  /** An error at {@code position} (relative to the contents' start). */
  IllegalStateException error(long position, String what) {
    if (inside == null) {
      return RocksCoding.corrupt(name, offset + position, what);
    }
    return RocksCoding.corrupt(name, offset, what + " (byte " + position + " of " + inside + ")");
  }

  /** The varint at {@link #pos} (at most {@code limit} bytes, before {@code bound}). */
  long varint(int bound, int limit, String what) {
    long result = 0;
    int at = pos;
    int shift = 0;
    while (true) {
      if (pos >= bound || pos - at >= limit) {
        throw error(at - start, "truncated or overlong varint (" + what + ")");
      }
      int b = data[pos++] & 0xFF;
      if (shift == 63 && b > 1) {
        throw error(at - start, "varint64 out of range (" + what + ")");
      }
      result |= (long) (b & 0x7F) << shift;
      if (b < 0x80) {
        break;
      }
      shift += 7;
    }
    if (limit == 5 && (result & 0xFFFFFFFFL) != result) {
      throw error(at - start, "varint32 out of range (" + what + ")");
    }
    return result;
  }

  /** A varint32 (lengths, counts) that must also fit a Java int. */
  int varint32(int bound, String what) {
    long value = varint(bound, 5, what);
    if (value > Integer.MAX_VALUE) {
      throw error(pos - start, what + " of " + value + " runs past the end");
    }
    return (int) value;
  }

  long varint64(int bound, String what) {
    return varint(bound, 10, what);
  }

  /** A block handle (varint64 offset, varint64 size) into {@code handle}. */
  void handle(int bound, String what, long[] handle) {
    handle[0] = varint64(bound, what + " offset");
    handle[1] = varint64(bound, what + " size");
  }
}

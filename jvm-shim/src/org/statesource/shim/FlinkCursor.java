package org.statesource.shim;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/**
 * Reads Flink's big-endian encodings from a key group's bytes, within a limit: every read is
 * bounds-checked, and what does not fit is a {@link FlinkDataException} naming the position.
 */
final class FlinkCursor {
  private static final VarHandle SHORT =
      MethodHandles.byteArrayViewVarHandle(short[].class, ByteOrder.BIG_ENDIAN);
  private static final VarHandle INT =
      MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.BIG_ENDIAN);
  private static final VarHandle LONG =
      MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);

  final byte[] data;
  int pos;
  int limit;
  /**
   * Set while passing over values no row holds: a Java string may hold a lone surrogate,
   * which only a row's text cannot (the per-value decoder refuses it when it makes a row).
   */
  boolean passing;
  /**
   * Set on reading bytes Flink never writes for a value (a varint whose last group is zero, a
   * boolean or flag other than 0 and 1): equal values then differ in bytes, so bytes no longer
   * tell map keys apart.
   */
  boolean loose;

  FlinkCursor(byte[] data) {
    this.data = data;
  }

  FlinkCursor at(int from, int to) {
    pos = from;
    limit = to;
    return this;
  }

  boolean atEnd() {
    return pos >= limit;
  }

  void need(int bytes) {
    if (bytes > limit - pos) {
      throw new FlinkDataException("truncated: needs " + bytes + " bytes, " + (limit - pos)
          + " left", pos);
    }
  }

  void skip(int bytes) {
    need(bytes);
    pos += bytes;
  }

  int u8() {
    need(1);
    return data[pos++] & 0xFF;
  }

  boolean bool() {
    int flag = u8();
    loose |= flag > 1;
    return flag != 0;
  }

  short i16() {
    need(2);
    short value = (short) SHORT.get(data, pos);
    pos += 2;
    return value;
  }

  int i32() {
    need(4);
    int value = (int) INT.get(data, pos);
    pos += 4;
    return value;
  }

  long i64() {
    need(8);
    long value = (long) LONG.get(data, pos);
    pos += 8;
    return value;
  }

  /** Flink's 7-bit varint, low group first. */
  int varint() {
    int start = pos;
    long value = 0;
    for (int shift = 0; ; shift += 7) {
      if (shift > 35) {
        throw new FlinkDataException("invalid variable-length integer", start);
      }
      int b = u8();
      value |= (long) (b & 0x7F) << shift;
      if (b < 0x80) {
        loose |= b == 0 && shift > 0;
        break;
      }
    }
    if (value > Integer.MAX_VALUE) {
      throw new FlinkDataException("a length of " + value + " in a variable-length integer",
          start);
    }
    return (int) value;
  }

  static int intAt(byte[] data, int at) {
    return (int) INT.get(data, at);
  }
}

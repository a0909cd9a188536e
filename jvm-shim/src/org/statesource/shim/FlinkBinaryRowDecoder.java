package org.statesource.shim;

import com.fasterxml.jackson.databind.JsonNode;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;

/**
 * Flink SQL's {@code BinaryRowData}, the keys and values of SQL operators' state: an int length,
 * then the row (a header byte holding the row kind, null bits, one 8-byte little-endian slot per
 * field, and a variable part the slots of longer values point into); as a struct of
 * {@code row_kind} (values only) and the fields.
 *
 * <p>Descriptor: {@code {"binaryRow": [field...], "withKind": b}}, each field a name
 * ({@code i1}, {@code i2}, {@code i4}, {@code i8}, {@code f4}, {@code f8}, {@code bool},
 * {@code date}, {@code text}, {@code binary}, {@code tsMillis}, {@code tsMicros}) or
 * {@code {"decimal": precision}} (compact: at most 18 digits). These are the types the Python
 * column decoder of binary rows takes (statesource/flink/serializers/binary_row_columns.py)
 * but {@code TIME}, which Spark's vectors hold otherwise;
 * values decode as statesource's per-value decoder (binary_rows.py) reads them, or fail with
 * the fault and its offset. Text must be UTF-8, as Flink writes it.
 */
final class FlinkBinaryRowDecoder extends FlinkValueDecoder {
  private static final long serialVersionUID = 1L;
  private static final VarHandle LONGS =
      MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
  private static final byte[][] KINDS = {
    "+I".getBytes(StandardCharsets.UTF_8), "-U".getBytes(StandardCharsets.UTF_8),
    "+U".getBytes(StandardCharsets.UTF_8), "-D".getBytes(StandardCharsets.UTF_8)};
  private static final int MIN_DAYS = -719_162;
  private static final int MAX_DAYS = 2_932_896;
  private static final long MILLIS_PER_DAY = 86_400_000L;
  private static final long MIN_MILLIS = MIN_DAYS * MILLIS_PER_DAY;
  private static final long MAX_MILLIS = (MAX_DAYS + 1) * MILLIS_PER_DAY - 1;
  private static final int MAX_INLINE = 7;
  private static final java.util.Set<String> NAMES = java.util.Set.of(
      "i1", "i2", "i4", "i8", "f4", "f8", "bool", "date", "text", "binary", "tsMillis", "tsMicros");

  private final String[] fields;
  private final int[] precisions;
  private final boolean withKind;
  private final int width;
  private final int fixed;

  private FlinkBinaryRowDecoder(String[] fields, int[] precisions, boolean withKind) {
    this.fields = fields;
    this.precisions = precisions;
    this.withKind = withKind;
    this.width = (fields.length + 63 + 8) / 64 * 8;
    this.fixed = width + 8 * fields.length;
  }

  static FlinkBinaryRowDecoder of(JsonNode descriptor) {
    JsonNode list = descriptor.get("binaryRow");
    if (list == null || !list.isArray() || list.isEmpty()) {
      throw new IllegalStateException("flinkstate plan: fields of a binary row are not a list: "
          + list);
    }
    String[] fields = new String[list.size()];
    int[] precisions = new int[list.size()];
    for (int i = 0; i < fields.length; i++) {
      JsonNode field = list.get(i);
      if (field.isTextual() && NAMES.contains(field.textValue())) {
        fields[i] = field.textValue();
      } else if (field.isObject() && field.path("decimal").isInt()
          && field.get("decimal").intValue() >= 1 && field.get("decimal").intValue() <= 18) {
        fields[i] = "decimal";
        precisions[i] = field.get("decimal").intValue();
      } else {
        throw new IllegalStateException("flinkstate plan: unknown binary row field " + field);
      }
    }
    return new FlinkBinaryRowDecoder(fields, precisions, descriptor.path("withKind").asBoolean());
  }

  @Override
  void read(FlinkCursor in, WritableColumnVector out) {
    int at = in.pos;
    int size = in.i32();
    if (size < fixed || size % 8 != 0) {
      throw new FlinkDataException("a binary row of " + fields.length + " fields cannot be "
          + size + " bytes long (its fixed part is " + fixed + ")", at);
    }
    in.need(size);
    int start = in.pos;
    in.pos += size;
    byte[] data = in.data;
    int kind = data[start];
    if (kind < 0 || kind >= KINDS.length) {
      throw new FlinkDataException("unknown row kind " + kind, start);
    }
    int first = withKind ? 1 : 0;
    if (out != null) {
      out.appendStruct(false);
      if (withKind) {
        out.getChild(0).appendByteArray(KINDS[kind], 0, KINDS[kind].length);
      }
    }
    for (int i = 0; i < fields.length; i++) {
      WritableColumnVector child = out == null ? null : out.getChild(i + first);
      int bit = i + 8;
      if ((data[start + (bit >> 3)] >> (bit & 7) & 1) != 0) {
        // Flink zeroes a null field's slot: other bytes make equal rows differ in bytes
        in.loose |= (long) LONGS.get(data, start + width + 8 * i) != 0;
        if (child != null) {
          appendNull(child);
        }
      } else {
        field(i, data, start, size, start + width + 8 * i, child);
      }
    }
  }

  private void field(int index, byte[] data, int start, int size, int at,
                     WritableColumnVector out) {
    long slot = (long) LONGS.get(data, at);
    switch (fields[index]) {
      case "i8" -> {
        if (out != null) {
          out.appendLong(slot);
        }
      }
      case "i4" -> {
        if (out != null) {
          out.appendInt((int) slot);
        }
      }
      case "i2" -> {
        if (out != null) {
          out.appendShort((short) slot);
        }
      }
      case "i1" -> {
        if (out != null) {
          out.appendByte((byte) slot);
        }
      }
      case "f8" -> {
        if (out != null) {
          out.appendDouble(Double.longBitsToDouble(slot));
        }
      }
      case "f4" -> {
        if (out != null) {
          out.appendFloat(Float.intBitsToFloat((int) slot));
        }
      }
      case "bool" -> {
        if (out != null) {
          out.appendBoolean(data[at] != 0);
        }
      }
      case "date" -> {
        int days = (int) slot;
        if (days < MIN_DAYS || days > MAX_DAYS) {
          throw new FlinkDataException("DATE " + days + " days from 1970-01-01 is outside the"
              + " dates statesource reads (years 1 to 9999)", at);
        }
        if (out != null) {
          out.appendInt(days);
        }
      }
      case "decimal" -> decimal(precisions[index], slot, at, out);
      case "text", "binary" -> bytes(data, start, size, at, slot, fields[index].equals("text"), out);
      case "tsMillis" -> {
        if (out != null) {
          out.appendLong(millis(slot, at) * 1000);
        }
      }
      case "tsMicros" -> {
        long nanos = slot & 0xFFFFFFFFL;
        if (nanos >= 1_000_000 || nanos % 1000 != 0) {
          throw new FlinkDataException(nanos + " nanoseconds of a millisecond in a TIMESTAMP of"
              + " microseconds", at);
        }
        int begin = span(slot & 0xFFFFFFFF00000000L | 8, start, size, at);
        long value = millis((long) LONGS.get(data, begin), at) * 1000 + nanos / 1000;
        if (out != null) {
          out.appendLong(value);
        }
      }
      default -> throw new IllegalStateException("flinkstate plan: unknown binary row field "
          + fields[index]);
    }
  }

  private static long millis(long value, int at) {
    if (value < MIN_MILLIS || value > MAX_MILLIS) {
      throw new FlinkDataException("a timestamp of " + value + " epoch milliseconds is outside"
          + " the timestamps statesource reads (years 1 to 9999)", at);
    }
    return value;
  }

  private static void decimal(int precision, long unscaled, int at, WritableColumnVector out) {
    long limit = 1;
    for (int digit = 0; digit < precision; digit++) {
      limit *= 10;
    }
    if (unscaled <= -limit || unscaled >= limit) {
      throw new FlinkDataException(unscaled + " has more than " + precision + " digits", at);
    }
    if (out == null) {
      return;
    }
    if (precision <= 9) { // Spark keeps decimals of up to 9 digits as ints, 18 as longs
      out.appendInt((int) unscaled);
    } else {
      out.appendLong(unscaled);
    }
  }

  /** Where the variable-part bytes a slot points to start (its length: the slot's low word). */
  private int span(long slot, int start, int size, int at) {
    long offset = slot >>> 32;
    long length = slot & 0xFFFFFFFFL;
    if (slot < 0 || offset < fixed || offset + length > size) {
      throw new FlinkDataException("a field points to bytes " + offset + " .. "
          + (offset + length) + " outside the variable part of its " + size + "-byte row", at);
    }
    return start + (int) offset;
  }

  private void bytes(byte[] data, int start, int size, int at, long slot, boolean text,
                     WritableColumnVector out) {
    int begin;
    int length;
    if (slot < 0) {
      length = (int) (slot >>> 56 & 0x7F);
      if (length > MAX_INLINE) {
        throw new FlinkDataException("an inline value of " + length + " bytes (at most "
            + MAX_INLINE + " fit)", at);
      }
      begin = at;
    } else {
      begin = span(slot, start, size, at);
      length = (int) (slot & 0xFFFFFFFFL);
    }
    if (text) {
      utf8(data, begin, length, at);
    }
    if (out != null) {
      out.appendByteArray(data, begin, length);
    }
  }

  private static void utf8(byte[] data, int begin, int length, int at) {
    for (int i = begin; i < begin + length; i++) {
      if (data[i] < 0) {
        try {
          StandardCharsets.UTF_8.newDecoder().decode(ByteBuffer.wrap(data, begin, length));
        } catch (CharacterCodingException e) {
          throw new FlinkDataException("text that is not UTF-8, which Flink never writes (the"
              + " Python reader, format('flinkstate-python'), reads it with replacements)", at);
        }
        return;
      }
    }
  }
}

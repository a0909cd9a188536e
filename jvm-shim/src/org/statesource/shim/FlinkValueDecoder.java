package org.statesource.shim;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.StructType;

/**
 * Reads one value of one Flink serializer and appends it to a Spark column vector (or skips it:
 * {@code out} null, for a column the query does not use).
 *
 * <p>Built from the compact type descriptor the Python planner derives from the state's
 * serializer snapshots (statesource/flink/jvm_layout.py): a name for a scalar ({@code long},
 * {@code int}, {@code short}, {@code byte}, {@code bool}, {@code double}, {@code float},
 * {@code char}, {@code string}, {@code bytes}, {@code void}, {@code window}), or an object:
 * {@code {"nullable": d, "padding": n}}, {@code {"tuple": [d...]}}, {@code {"pojo": [d...]}},
 * {@code {"row": [d...], "kindInMask": b}}, {@code {"binaryRow": [f...], "withKind": b}}
 * ({@link FlinkBinaryRowDecoder}). Values decode as statesource's per-value decoder
 * (each family's module in statesource/flink/serializers/) reads them: the same values, or an
 * error where it has one.
 */
abstract class FlinkValueDecoder implements Serializable {
  private static final long serialVersionUID = 1L;

  abstract void read(FlinkCursor in, WritableColumnVector out);

  /** Whether a value is one byte that holds nothing (VoidNamespace, GlobalWindow). */
  boolean isVoid() {
    return false;
  }

  static FlinkValueDecoder of(JsonNode descriptor) {
    if (descriptor == null) {
      throw new IllegalStateException("flinkstate plan: a type descriptor is missing");
    }
    if (descriptor.isTextual()) {
      return switch (descriptor.textValue()) {
        case "long" -> new Fixed(8);
        case "int" -> new Fixed(4);
        case "short" -> new Fixed(2);
        case "byte" -> new Fixed(1);
        case "bool" -> new Bool();
        case "double" -> new Fixed(-8);
        case "float" -> new Fixed(-4);
        case "char" -> new Char();
        case "string" -> new Text();
        case "bytes" -> new Bytes();
        case "void" -> new Void();
        case "window" -> new Window();
        default -> throw unknown(descriptor);
      };
    }
    if (descriptor.isObject()) {
      if (descriptor.has("nullable")) {
        return new Nullable(of(descriptor.get("nullable")), descriptor.path("padding").asInt());
      }
      if (descriptor.has("tuple")) {
        return new Struct(children(descriptor.get("tuple")), false);
      }
      if (descriptor.has("pojo")) {
        return new Struct(children(descriptor.get("pojo")), true);
      }
      if (descriptor.has("binaryRow")) {
        return FlinkBinaryRowDecoder.of(descriptor);
      }
      if (descriptor.has("row")) {
        return new Row(children(descriptor.get("row")),
            descriptor.path("kindInMask").asBoolean());
      }
    }
    throw unknown(descriptor);
  }

  private static FlinkValueDecoder[] children(JsonNode fields) {
    if (fields == null || !fields.isArray()) {
      throw new IllegalStateException("flinkstate plan: fields of a type descriptor are not a"
          + " list: " + fields);
    }
    FlinkValueDecoder[] decoders = new FlinkValueDecoder[fields.size()];
    for (int i = 0; i < decoders.length; i++) {
      decoders[i] = of(fields.get(i));
      if (decoders[i].isVoid()) {
        throw new IllegalStateException("flinkstate plan: a void field inside a struct");
      }
    }
    return decoders;
  }

  private static IllegalStateException unknown(JsonNode descriptor) {
    return new IllegalStateException("flinkstate plan: unknown type descriptor " + descriptor);
  }

  static void appendNull(WritableColumnVector out) {
    if (out.dataType() instanceof StructType) {
      out.appendStruct(true);
    } else {
      out.appendNull();
    }
  }

  /** Big-endian integers and floating point numbers (negative width: floating point). */
  static final class Fixed extends FlinkValueDecoder {
    private static final long serialVersionUID = 1L;
    private final int width;

    Fixed(int width) {
      this.width = width;
    }

    @Override
    void read(FlinkCursor in, WritableColumnVector out) {
      switch (width) {
        case 8 -> {
          long value = in.i64();
          if (out != null) {
            out.appendLong(value);
          }
        }
        case 4 -> {
          int value = in.i32();
          if (out != null) {
            out.appendInt(value);
          }
        }
        case 2 -> {
          short value = in.i16();
          if (out != null) {
            out.appendShort(value);
          }
        }
        case 1 -> {
          byte value = (byte) in.u8();
          if (out != null) {
            out.appendByte(value);
          }
        }
        case -8 -> {
          long bits = in.i64();
          if (out != null) {
            out.appendDouble(Double.longBitsToDouble(bits));
          }
        }
        default -> {
          int bits = in.i32();
          if (out != null) {
            out.appendFloat(Float.intBitsToFloat(bits));
          }
        }
      }
    }
  }

  /** Any byte but zero is true, as Java's DataInput reads it. */
  static final class Bool extends FlinkValueDecoder {
    private static final long serialVersionUID = 1L;

    @Override
    void read(FlinkCursor in, WritableColumnVector out) {
      boolean value = in.bool();
      if (out != null) {
        out.appendBoolean(value);
      }
    }
  }

  /** A Java char (one UTF-16 unit) as a one-character string; a surrogate is no text. */
  static final class Char extends FlinkValueDecoder {
    private static final long serialVersionUID = 1L;

    @Override
    void read(FlinkCursor in, WritableColumnVector out) {
      int at = in.pos;
      char unit = (char) in.i16();
      if (Character.isSurrogate(unit) && !in.passing) {
        throw new FlinkDataException("a lone surrogate " + Integer.toHexString(unit)
            + " as a char, which no string holds", at);
      }
      if (out != null) {
        byte[] utf8 = String.valueOf(unit).getBytes(StandardCharsets.UTF_8);
        out.appendByteArray(utf8, 0, utf8.length);
      }
    }
  }

  /**
   * Flink's StringValue: a varint of length + 1 (0: null), then UTF-16 units as varints. ASCII
   * text (every unit one byte below 0x80) is copied as it is.
   */
  static final class Text extends FlinkValueDecoder {
    private static final long serialVersionUID = 1L;

    @Override
    void read(FlinkCursor in, WritableColumnVector out) {
      int at = in.pos;
      int encoded = in.varint();
      if (encoded == 0) {
        if (out != null) {
          out.appendNull();
        }
        return;
      }
      int length = encoded - 1;
      byte[] data = in.data;
      int start = in.pos;
      if (length <= in.limit - start) {
        int end = start + length;
        int i = start;
        while (i < end && data[i] >= 0) {
          i++;
        }
        if (i == end) {
          in.pos = end;
          if (out != null) {
            out.appendByteArray(data, start, length);
          }
          return;
        }
      }
      char[] units = new char[Math.min(length, in.limit - start)];
      for (int n = 0; n < length; n++) {
        int unit = in.u8();
        boolean tooLarge = false;
        if (unit >= 0x80) {
          unit &= 0x7F;
          for (int shift = 7; ; shift += 7) {
            int next = in.u8();
            if (shift < 16) {
              unit |= (next & 0x7F) << shift;
            } else {
              tooLarge |= (next & 0x7F) != 0;
            }
            if (next < 0x80) {
              in.loose |= next == 0;
              break;
            }
          }
        }
        if (tooLarge || unit > 0xFFFF) {
          throw new FlinkDataException("invalid character in string", at);
        }
        units[n] = (char) unit;
      }
      for (int n = 0; n < length; n++) {
        char unit = units[n];
        if (Character.isHighSurrogate(unit) && n + 1 < length
            && Character.isLowSurrogate(units[n + 1])) {
          n++;
        } else if (Character.isSurrogate(unit) && !in.passing) {
          throw new FlinkDataException("a lone surrogate " + Integer.toHexString(unit)
              + " in a string, which no UTF-8 text holds", at);
        }
      }
      if (out != null) {
        byte[] utf8 = new String(units, 0, length).getBytes(StandardCharsets.UTF_8);
        out.appendByteArray(utf8, 0, utf8.length);
      }
    }
  }

  /** byte[]: an int length, then the bytes. */
  static final class Bytes extends FlinkValueDecoder {
    private static final long serialVersionUID = 1L;

    @Override
    void read(FlinkCursor in, WritableColumnVector out) {
      int at = in.pos;
      int length = in.i32();
      if (length < 0) {
        throw new FlinkDataException("invalid byte array length " + length, at);
      }
      in.need(length);
      if (out != null) {
        out.appendByteArray(in.data, in.pos, length);
      }
      in.pos += length;
    }
  }

  /** VoidNamespace, GlobalWindow: one byte; the column is all null. */
  static final class Void extends FlinkValueDecoder {
    private static final long serialVersionUID = 1L;

    @Override
    void read(FlinkCursor in, WritableColumnVector out) {
      in.skip(1);
    }

    @Override
    boolean isVoid() {
      return true;
    }
  }

  /** TimeWindow: start and end, as a struct of two longs. */
  static final class Window extends FlinkValueDecoder {
    private static final long serialVersionUID = 1L;

    @Override
    void read(FlinkCursor in, WritableColumnVector out) {
      long start = in.i64();
      long end = in.i64();
      if (out != null) {
        out.appendStruct(false);
        out.getChild(0).appendLong(start);
        out.getChild(1).appendLong(end);
      }
    }
  }

  /** NullableSerializer: a null flag, then the value, or {@code padding} bytes for a null. */
  static final class Nullable extends FlinkValueDecoder {
    private static final long serialVersionUID = 1L;
    private final FlinkValueDecoder inner;
    private final int padding;

    Nullable(FlinkValueDecoder inner, int padding) {
      this.inner = inner;
      this.padding = padding;
    }

    @Override
    void read(FlinkCursor in, WritableColumnVector out) {
      if (in.bool()) {
        in.skip(padding);
        if (out != null) {
          appendNull(out);
        }
      } else {
        inner.read(in, out);
      }
    }
  }

  /**
   * Fields one after another: a Tuple's; a POJO's after a flags byte (1: null; 2: no
   * subclass), each field behind a null flag.
   */
  static final class Struct extends FlinkValueDecoder {
    private static final long serialVersionUID = 1L;
    private static final int NULL = 1;
    private static final int NO_SUBCLASS = 2;
    private final FlinkValueDecoder[] fields;
    private final boolean pojo;

    Struct(FlinkValueDecoder[] fields, boolean pojo) {
      this.fields = fields;
      this.pojo = pojo;
    }

    @Override
    void read(FlinkCursor in, WritableColumnVector out) {
      if (pojo) {
        int at = in.pos;
        int flags = in.u8();
        if ((flags & NULL) != 0) {
          in.loose |= flags != NULL; // Flink writes exactly these flags: others read alike
          if (out != null) {
            out.appendStruct(true);
          }
          return;
        }
        if ((flags & NO_SUBCLASS) == 0) {
          throw new FlinkDataException("a subclass of a POJO (flags 0x" + Integer.toHexString(flags)
              + ") is not supported", at);
        }
        in.loose |= flags != NO_SUBCLASS;
      }
      if (out != null) {
        out.appendStruct(false);
      }
      for (int i = 0; i < fields.length; i++) {
        WritableColumnVector child = out == null ? null : out.getChild(i);
        if (pojo && in.bool()) {
          if (child != null) {
            appendNull(child);
          }
        } else {
          fields[i].read(in, child);
        }
      }
    }
  }

  /**
   * RowSerializer: a null mask, most significant bit first (the row kind in its first two
   * bits where the snapshot says so), then the fields not null; as a struct of {@code row_kind}
   * and the fields.
   */
  static final class Row extends FlinkValueDecoder {
    private static final long serialVersionUID = 1L;
    private static final byte[][] KINDS = {utf8("+I"), utf8("-U"), utf8("+U"), utf8("-D")};
    private final FlinkValueDecoder[] fields;
    private final boolean kindInMask;

    Row(FlinkValueDecoder[] fields, boolean kindInMask) {
      this.fields = fields;
      this.kindInMask = kindInMask;
    }

    private static byte[] utf8(String text) {
      return text.getBytes(StandardCharsets.UTF_8);
    }

    @Override
    void read(FlinkCursor in, WritableColumnVector out) {
      int skipped = kindInMask ? 2 : 0;
      int bits = fields.length + skipped;
      int maskAt = in.pos;
      in.skip((bits + 7) / 8);
      byte[] data = in.data;
      for (int unused = bits; unused % 8 != 0; unused++) {
        in.loose |= bit(data, maskAt, unused) != 0; // Flink leaves the mask's last bits clear
      }
      int kind = kindInMask ? bit(data, maskAt, 0) | (bit(data, maskAt, 1) << 1) : 0;
      if (out != null) {
        out.appendStruct(false);
        out.getChild(0).appendByteArray(KINDS[kind], 0, KINDS[kind].length);
      }
      for (int i = 0; i < fields.length; i++) {
        WritableColumnVector child = out == null ? null : out.getChild(i + 1);
        if (bit(data, maskAt, i + skipped) != 0) {
          if (child != null) {
            appendNull(child);
          }
        } else {
          fields[i].read(in, child);
        }
      }
    }

    private static int bit(byte[] data, int at, int index) {
      return (data[at + index / 8] >> (7 - index % 8)) & 1;
    }
  }
}

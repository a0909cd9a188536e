package org.statesource.shim;

import java.util.Arrays;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * Flink's key-group arithmetic over the values Spark hands a Java UDF.
 *
 * <p>The key type is implied by the Spark value (docs/FORMAT.md section 6): a Spark string is a
 * Flink String or Character (both hash to the same code for one UTF-16 unit), int / bigint /
 * smallint / tinyint / boolean / float / double are the boxed Java types, a struct whose first
 * field is {@code row_kind} is a Flink Row and any other struct a Tuple. The rules and error
 * messages mirror the Python reference in statesource/types.py and statesource/keygroups, so both
 * paths return the same results and fail with the same words.
 */
public final class FlinkKeyGroups {
  public static final int UPPER_BOUND_MAX_PARALLELISM = 1 << 15;
  private static final String ROW_KIND = "row_kind";
  private static final String[] ROW_KINDS = {"+I", "-U", "+U", "-D"};

  private FlinkKeyGroups() {}

  /** The key group Flink assigns {@code key}: murmur of its Java hashCode, modulo maxParallelism. */
  public static int keyGroup(Object key, int maxParallelism) {
    return murmurHash(javaHashCode(key)) % maxParallelism;
  }

  /** The subtask owning {@code keyGroup} under {@code parallelism} (arguments already checked). */
  public static int operatorIndex(int keyGroup, int maxParallelism, int parallelism) {
    return (int) ((long) keyGroup * parallelism / maxParallelism);
  }

  /** The Java hashCode Flink computes for a key of the type this Spark value implies. */
  public static int javaHashCode(Object value) {
    if (value instanceof String text) {
      return text.hashCode();
    }
    if (value instanceof Integer number) {
      return number;
    }
    if (value instanceof Long number) {
      return Long.hashCode(number);
    }
    if (value instanceof Short number) {
      return number;
    }
    if (value instanceof Byte number) {
      return number;
    }
    if (value instanceof Boolean flag) {
      return Boolean.hashCode(flag);
    }
    if (value instanceof Float number) {
      return Float.hashCode(number);
    }
    if (value instanceof Double number) {
      return Double.hashCode(number);
    }
    if (value instanceof Row row) {
      return isFlinkRow(row) ? rowHash(row) : tupleHash(row);
    }
    if (value instanceof byte[]) {
      throw new IllegalArgumentException(
          "bytes cannot be a key type: Java arrays hash by identity, so Flink rejects them as"
              + " keys; wrap the bytes in a row<bytes>");
    }
    throw new IllegalArgumentException(
        "a " + value.getClass().getSimpleName() + " value cannot be a Flink key: key types are"
            + " string, int, bigint, smallint, tinyint, boolean, float, double and structs of"
            + " them (tuples; rows when the first field is row_kind)");
  }

  /** Flink's MathUtils.murmurHash: MurmurHash3_x86_32 of the int's 4 bytes, made non-negative. */
  public static int murmurHash(int code) {
    int k = code * 0xcc9e2d51;
    k = Integer.rotateLeft(k, 15) * 0x1b873593;
    int h = Integer.rotateLeft(k, 13) * 5 + 0xe6546b64;
    h ^= 4;
    h ^= h >>> 16;
    h *= 0x85ebca6b;
    h ^= h >>> 13;
    h *= 0xc2b2ae35;
    h ^= h >>> 16;
    if (h >= 0) {
      return h;
    }
    return h == Integer.MIN_VALUE ? 0 : -h;
  }

  /** A max parallelism argument as an int in 1..32768. */
  public static int checkMaxParallelism(Object value) {
    return checkMaxParallelism(exactInt(value, "max parallelism"));
  }

  /** The same for a primitive argument (no boxing per row in generated code). */
  public static int checkMaxParallelism(long value) {
    return checkRange(value, "max parallelism", 1, UPPER_BOUND_MAX_PARALLELISM, "");
  }

  /** A parallelism argument as an int in 1..maxParallelism. */
  public static int checkParallelism(Object value, int maxParallelism) {
    return checkRange(exactInt(value, "parallelism"), "parallelism", 1, maxParallelism,
        " (the max parallelism)");
  }

  /** A key group argument as an int in 0..maxParallelism-1. */
  public static int checkKeyGroup(Object value, int maxParallelism) {
    return checkRange(exactInt(value, "key group"), "key group", 0, maxParallelism - 1,
        " for max parallelism " + maxParallelism);
  }

  private static long exactInt(Object value, String what) {
    if (value instanceof Integer || value instanceof Long || value instanceof Short
        || value instanceof Byte) {
      return ((Number) value).longValue();
    }
    throw new IllegalArgumentException(what + " must be an int, got " + value);
  }

  private static int checkRange(long value, String what, int low, int high, String context) {
    if (value < low || value > high) {
      throw new IllegalArgumentException(
          what + " " + value + " is outside [" + low + ", " + high + "]" + context);
    }
    return (int) value;
  }

  private static boolean isFlinkRow(Row row) {
    StructType schema = row.schema();
    if (schema == null) {
      return false;
    }
    StructField[] fields = schema.fields();
    return fields.length > 0 && ROW_KIND.equals(fields[0].name());
  }

  /** Tuple.hashCode: fold 31 * h + h(field), a null field counting 0. */
  private static int tupleHash(Row row) {
    int h = 0;
    for (int i = 0; i < row.length(); i++) {
      Object field = row.get(i);
      if (field instanceof byte[]) {
        throw new IllegalArgumentException(
            "tuple field type bytes hashes by identity in Java and cannot be part of a key; use a"
                + " row<...> for byte[] fields");
      }
      h = 31 * h + (field == null ? 0 : javaHashCode(field));
    }
    return h;
  }

  /** Row.hashCode: 31 * kind + deep hash of the fields (31 + h per plain field, 0 for null). */
  private static int rowHash(Row row) {
    int h = 1;
    for (int i = 1; i < row.length(); i++) {
      Object field = row.get(i);
      int element;
      if (field == null) {
        element = 0;
      } else if (field instanceof Row nested && isFlinkRow(nested)) {
        element = rowHash(nested);
      } else if (field instanceof byte[] bytes) {
        element = 31 + Arrays.hashCode(bytes);
      } else {
        element = 31 + javaHashCode(field);
      }
      h = 31 * h + element;
    }
    return 31 * rowKindByte(row.get(0)) + h;
  }

  private static int rowKindByte(Object kind) {
    for (int i = 0; i < ROW_KINDS.length; i++) {
      if (ROW_KINDS[i].equals(kind)) {
        return i;
      }
    }
    String shown = kind == null ? "None" : "'" + kind + "'";
    throw new IllegalArgumentException(
        "unknown row kind " + shown + "; expected one of ['+I', '-U', '+U', '-D']");
  }
}

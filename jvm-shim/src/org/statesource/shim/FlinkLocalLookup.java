package org.statesource.shim;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.stream.IntStream;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.read.LocalScan;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.IsNotNull;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.sql.vectorized.ColumnarBatchRow;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A point lookup of a Flink savepoint, answered on the driver: {@code key = v} or
 * {@code key IN (...)} filters (and the {@code key IS NOT NULL} Spark adds to them), nothing
 * else, on an exact key type, whose key groups are
 * small. Spark then runs no job at all (a {@link LocalScan} becomes a local table scan), which
 * is most of a lookup's cost through a scan.
 *
 * <p>The filters are applied here exactly, and Spark does not apply them again: key groups are
 * those of the keys' Flink hash, rows are kept whose key equals a value of every filter (Java
 * equality of the key's boxed value, or of a string's UTF-8 bytes: Spark's equality for these
 * types). Decoding is the partition reader's, errors included.
 */
final class FlinkLocalLookup implements LocalScan {
  /** Bytes of Flink key groups a lookup may decode on the driver. */
  private static final long MAX_BYTES = 64L << 20;

  private final ReadPlan plan;
  private final StructType schema;
  private final StructType required;
  private final Object[][] keys;

  private FlinkLocalLookup(ReadPlan plan, StructType schema, StructType required,
      Object[][] keys) {
    this.plan = plan;
    this.schema = schema;
    this.required = required;
    this.keys = keys;
  }

  /**
   * The values each filter allows, if the filters are a lookup this can answer exactly; else
   * null (then the scan reads in tasks, and Spark applies the filters).
   */
  static Object[][] keysOf(ReadPlan plan, StructType schema, Filter[] filters) {
    if (plan.flink == null || !plan.filterPushdown || !plan.exactKeys || filters.length == 0
        || !schema.getFieldIndex(FlinkStateScanBuilder.KEY).isDefined()) {
      return null;
    }
    DataType keyType = schema.apply(FlinkStateScanBuilder.KEY).dataType();
    Object[][] keys = new Object[filters.length][];
    for (int i = 0; i < filters.length; i++) {
      String key = FlinkStateScanBuilder.KEY;
      if (filters[i] instanceof EqualTo equal && key.equals(equal.attribute())) {
        keys[i] = new Object[] {equal.value()};
      } else if (filters[i] instanceof In in && key.equals(in.attribute())) {
        keys[i] = in.values();
      } else if (filters[i] instanceof IsNotNull notNull && key.equals(notNull.attribute())) {
        keys[i] = null;  // implied by the others: a lookup returns no null key
        continue;
      } else {
        return null;
      }
      for (Object value : keys[i]) {
        if (!comparable(keyType, value)) {
          return null;
        }
      }
    }
    if (Arrays.stream(keys).allMatch(Objects::isNull)) {
      return null;
    }
    long bytes = 0;
    for (int entry : entries(plan, keys)) {
      bytes += plan.length[entry];
    }
    return bytes <= MAX_BYTES ? keys : null;
  }

  static FlinkLocalLookup of(ReadPlan plan, StructType schema, StructType required,
      Object[][] keys) {
    return new FlinkLocalLookup(plan, schema, required, keys);
  }

  private static boolean comparable(DataType type, Object value) {
    return value instanceof String && type instanceof StringType
        || value instanceof Long && type instanceof LongType
        || value instanceof Integer && type instanceof IntegerType
        || value instanceof Short && type instanceof ShortType
        || value instanceof Byte && type instanceof ByteType
        || value instanceof Boolean && type instanceof BooleanType;
  }

  /** The plan's entries of the key groups the first filter's keys hash to, ascending. */
  private static int[] entries(ReadPlan plan, Object[][] keys) {
    Object[] first = Arrays.stream(keys).filter(Objects::nonNull).findFirst().orElseThrow();
    Set<Integer> groups = new HashSet<>();
    for (Object key : first) {
      groups.add(FlinkKeyGroups.keyGroup(key, plan.maxParallelism));
    }
    return IntStream.range(0, plan.keyGroup.length)
        .filter(entry -> groups.contains(plan.keyGroup[entry])).toArray();
  }

  @Override
  public StructType readSchema() {
    return required;
  }

  @Override
  public String description() {
    return "flinkstate (JVM, Flink key groups) lookup on the driver of key in "
        + Arrays.deepToString(keys);
  }

  @Override
  public InternalRow[] rows() {
    int keyColumn = schema.fieldIndex(FlinkStateScanBuilder.KEY);
    int[] projection = Arrays.stream(required.fieldNames()).mapToInt(schema::fieldIndex)
        .toArray();
    List<InternalRow> rows = new ArrayList<>();
    try (FlinkKeyGroupReader reader = new FlinkKeyGroupReader(plan, schema,
        entries(plan, keys))) {
      while (reader.next()) {
        ColumnarBatch batch = reader.get();
        ColumnVector key = batch.column(keyColumn);
        ColumnVector[] columns = new ColumnVector[batch.numCols()];
        for (int i = 0; i < columns.length; i++) {
          columns[i] = batch.column(i);
        }
        ColumnarBatchRow row = new ColumnarBatchRow(columns);
        for (int r = 0; r < batch.numRows(); r++) {
          if (!key.isNullAt(r) && wanted(key, r)) {
            row.rowId = r;
            InternalRow copy = row.copy();
            Object[] values = new Object[projection.length];
            for (int i = 0; i < projection.length; i++) {
              values[i] = copy.isNullAt(projection[i]) ? null
                  : copy.get(projection[i], schema.fields()[projection[i]].dataType());
            }
            rows.add(new GenericInternalRow(values));
          }
        }
      }
    } catch (IOException error) {
      throw new UncheckedIOException(error);
    }
    return rows.toArray(new InternalRow[0]);
  }

  /** Whether the row's key is a value of every filter. */
  private boolean wanted(ColumnVector key, int row) {
    DataType type = key.dataType();
    Object value;
    if (type instanceof StringType) {
      value = key.getUTF8String(row);
    } else if (type instanceof LongType) {
      value = key.getLong(row);
    } else if (type instanceof IntegerType) {
      value = key.getInt(row);
    } else if (type instanceof ShortType) {
      value = key.getShort(row);
    } else if (type instanceof ByteType) {
      value = key.getByte(row);
    } else {
      value = key.getBoolean(row);
    }
    for (Object[] allowed : keys) {
      if (allowed == null) {
        continue;
      }
      boolean any = false;
      for (Object candidate : allowed) {
        Object expected = candidate instanceof String text ? UTF8String.fromString(text)
            : candidate;
        any |= Objects.equals(value, expected);
      }
      if (!any) {
        return false;
      }
    }
    return true;
  }
}

package org.statesource.shim;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.apache.spark.sql.types.StructType;

/**
 * Plans of Flink savepoints, kept per read options while the savepoint's {@code _metadata} is
 * unchanged, so that a repeated query (a point lookup above all) is planned without a Python
 * worker.
 *
 * <p>A savepoint is immutable once written; what the Python planner reads of it is the
 * {@code _metadata} and the headers of its data files, all named by that {@code _metadata}.
 * The planner stamps a plan with the file's real path, size and modification time
 * ({@link FlinkStatePlan#stamp}) only when the read options name that snapshot directly (not a
 * directory of checkpoints, whose latest one may change); a plan is reused only while the file
 * still has that size and time, and the reader still checks every data file's size.
 */
final class FlinkPlanCache {
  private static final int ENTRIES = 32;

  private record Entry(StructType schema, ReadPlan plan) {
  }

  private static final Map<String, Entry> CACHE = new LinkedHashMap<>(16, 0.75f, true) {
    private static final long serialVersionUID = 1L;

    @Override
    protected boolean removeEldestEntry(Map.Entry<String, Entry> eldest) {
      return size() > ENTRIES;
    }
  };

  private FlinkPlanCache() {
  }

  /** The options as one key: names lower-cased (Spark's are case-insensitive), sorted. */
  static String key(Map<String, String> options) {
    Map<String, String> sorted = new TreeMap<>();
    options.forEach((name, value) -> sorted.put(name.toLowerCase(java.util.Locale.ROOT), value));
    return sorted.toString();
  }

  /** The plan and schema of these options, if planned before from an unchanged snapshot. */
  static synchronized ReadPlan plan(String key, StructType[] schema) {
    Entry entry = CACHE.get(key);
    if (entry == null) {
      return null;
    }
    if (!unchanged(entry.plan.flink)) {
      CACHE.remove(key);
      return null;
    }
    schema[0] = entry.schema;
    return entry.plan;
  }

  static synchronized void keep(String key, StructType schema, ReadPlan plan) {
    if (plan.flink != null && plan.flink.stamp != null) {
      CACHE.put(key, new Entry(schema, plan));
    }
  }

  private static boolean unchanged(FlinkStatePlan flink) {
    FlinkStatePlan.Stamp stamp = flink.stamp;
    try {
      BasicFileAttributes now = Files.readAttributes(Path.of(stamp.path()),
          BasicFileAttributes.class);
      return now.size() == stamp.sizeBytes()
          && now.lastModifiedTime().to(TimeUnit.NANOSECONDS) == stamp.modifiedNs();
    } catch (IOException | RuntimeException gone) {
      return false;
    }
  }
}

package org.statesource.shim;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.List;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructType;

/** Partitions are key-group slices, thinned to the key groups pushed. */
final class FlinkStateScan implements Scan, Batch {
  private final ReadPlan plan;
  private final StructType required;
  private final BitSet allowed;
  private final Filter[] pushed;
  private final Object[] keys;
  private final boolean counting;

  /**
   * {@code keys}: the values of a pushed key filter (null: none); {@code counting}:
   * {@code required} is count(*) columns, answered from the metadata.
   */
  FlinkStateScan(ReadPlan plan, StructType required, BitSet allowed, Filter[] pushed,
      Object[] keys, boolean counting) {
    this.plan = plan;
    this.required = required;
    this.allowed = allowed;
    this.pushed = pushed;
    this.keys = keys;
    this.counting = counting;
  }

  @Override
  public StructType readSchema() {
    return required;
  }

  @Override
  public String description() {
    String source = plan.flink == null ? ") " : ", Flink key groups) ";
    return "flinkstate (JVM columnar" + source + (counting ? "count(*) from the metadata"
        : "pruned by " + Arrays.toString(pushed));
  }

  @Override
  public Batch toBatch() {
    return this;
  }

  /**
   * The Python planner's slices; one partition when no column needs a data file (count(*),
   * key_group, operator_index): those rows come from the metadata, and a task per slice would
   * cost more than it does.
   */
  @Override
  public InputPartition[] planInputPartitions() {
    boolean fromMetadata = plan.flink == null
        && KeyGroupBatchReader.fromMetadata(required.fieldNames());
    if (counting || fromMetadata) {
      int[] members = java.util.stream.IntStream.range(0, plan.keyGroup.length)
          .filter(i -> allowed == null || allowed.get(plan.keyGroup[i])).toArray();
      // A pushed count(*) is one row even over no key group.
      return members.length == 0 && !counting ? new InputPartition[0]
          : new InputPartition[] {new KeyGroupPartition(members)};
    }
    List<InputPartition> partitions = new ArrayList<>();
    int next = 0;
    for (int[] slice : plan.slices) {
      List<Integer> members = new ArrayList<>();
      while (next < plan.keyGroup.length && plan.keyGroup[next] <= slice[1]) {
        int group = plan.keyGroup[next];
        if (group >= slice[0] && (allowed == null || allowed.get(group))) {
          members.add(next);
        }
        next++;
      }
      if (!members.isEmpty()) {
        partitions.add(new KeyGroupPartition(members.stream().mapToInt(Integer::intValue)
            .toArray()));
      }
    }
    return partitions.toArray(new InputPartition[0]);
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    if (plan.flink != null) {
      return new FlinkReaderFactory(plan, required);
    }
    return counting ? new CountReaderFactory(plan, required.size())
        : new KeyGroupReaderFactory(plan, required.fieldNames(), keys);
  }
}

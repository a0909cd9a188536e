package org.statesource.shim;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/** Columnar readers of a Flink savepoint's key groups: {@link FlinkKeyGroupReader}. */
final class FlinkReaderFactory implements PartitionReaderFactory {
  private static final long serialVersionUID = 1L;

  private final ReadPlan plan;
  private final StructType required;

  FlinkReaderFactory(ReadPlan plan, StructType required) {
    this.plan = plan;
    this.required = required;
  }

  @Override
  public boolean supportColumnarReads(InputPartition partition) {
    return true;
  }

  @Override
  public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
    return new FlinkKeyGroupReader(plan, required, ((KeyGroupPartition) partition).entries());
  }

  @Override
  public PartitionReader<InternalRow> createReader(InputPartition partition) {
    throw new UnsupportedOperationException("flinkstate's JVM reader is columnar only");
  }
}

package org.statesource.shim;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/** Columnar readers only: every batch is Arrow vectors read straight from the checkpoint. */
final class KeyGroupReaderFactory implements PartitionReaderFactory {
  private static final long serialVersionUID = 1L;

  private final ReadPlan plan;
  private final String[] columns;
  private final Object[] keys;

  KeyGroupReaderFactory(ReadPlan plan, String[] columns, Object[] keys) {
    this.plan = plan;
    this.columns = columns;
    this.keys = keys;
  }

  @Override
  public boolean supportColumnarReads(InputPartition partition) {
    return true;
  }

  @Override
  public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
    return new KeyGroupBatchReader(plan, columns, ((KeyGroupPartition) partition).entries(),
        keys);
  }

  @Override
  public PartitionReader<InternalRow> createReader(InputPartition partition) {
    throw new UnsupportedOperationException("flinkstate's JVM reader is columnar only");
  }
}

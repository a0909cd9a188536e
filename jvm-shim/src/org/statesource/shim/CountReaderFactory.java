package org.statesource.shim;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/** One row: the metadata's row count of the partition's key groups, in each count(*) column. */
final class CountReaderFactory implements PartitionReaderFactory {
  private static final long serialVersionUID = 1L;

  private final ReadPlan plan;
  private final int columns;

  CountReaderFactory(ReadPlan plan, int columns) {
    this.plan = plan;
    this.columns = columns;
  }

  @Override
  public boolean supportColumnarReads(InputPartition partition) {
    return true;
  }

  @Override
  public PartitionReader<InternalRow> createReader(InputPartition partition) {
    throw new UnsupportedOperationException("flinkstate counts are read as columnar batches");
  }

  @Override
  public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
    long total = 0;
    for (int entry : ((KeyGroupPartition) partition).entries()) {
      total = Math.addExact(total, plan.rows[entry]);
    }
    ColumnVector[] vectors = new ColumnVector[columns];
    for (int i = 0; i < columns; i++) {
      OnHeapColumnVector vector = new OnHeapColumnVector(1, DataTypes.LongType);
      vector.putLong(0, total);
      vectors[i] = vector;
    }
    ColumnarBatch batch = new ColumnarBatch(vectors, 1);
    return new PartitionReader<>() {
      private boolean done;

      @Override
      public boolean next() {
        boolean first = !done;
        done = true;
        return first;
      }

      @Override
      public ColumnarBatch get() {
        return batch;
      }

      @Override
      public void close() {
        batch.close();
      }
    };
  }
}

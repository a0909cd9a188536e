package org.statesource.shim;

import org.apache.arrow.vector.ValueVector;
import org.apache.spark.sql.vectorized.ArrowColumnVector;

/**
 * An ArrowColumnVector over vectors the partition reader owns and reuses.
 *
 * <p>Spark frees each consumed batch's columns ({@code closeIfFreeable}); closing a reused
 * struct vector would drop its children before the next batch is loaded into it. The reader
 * releases all of its memory itself, in {@link KeyGroupBatchReader#close()}.
 */
final class BorrowedArrowColumnVector extends ArrowColumnVector {
  BorrowedArrowColumnVector(ValueVector vector) {
    super(vector);
  }

  @Override
  public void closeIfFreeable() {
    // owned by the reader
  }

  @Override
  public void close() {
    // owned by the reader
  }
}

package org.statesource.shim;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Reads one partition's key groups of a Flink savepoint: each key group's byte range (Snappy
 * unframed where compressed), or, of RocksDB state, its entries framed as a canonical key group
 * ({@link RocksKeyGroupSource}), decoded by {@link FlinkKeyGroupDecoder} into reused on-heap
 * vectors, one batch per non-empty key group, with the state numbering of its file. A batch is
 * valid until the next call to {@link #next()}.
 *
 * <p>The plan's byte ranges and file sizes are checked before anything is read or allocated,
 * and every fault in the bytes is refused naming the file and the byte offset.
 */
final class FlinkKeyGroupReader implements PartitionReader<ColumnarBatch> {
  private static final String KEY_GROUP = "key_group";
  private static final String OPERATOR_INDEX = "operator_index";
  private static final int CAPACITY = 4096;

  private final ReadPlan plan;
  private final FlinkStatePlan state;
  private final StructType required;
  private final int[] entries;
  private final FlinkKeyGroupDecoder decoder;
  /** Per required column: its slot among key, namespace, values, TTL; -1 for a constant. */
  private final int[] slotOf;
  private final WritableColumnVector[] slots;
  private final int[] unframed = new int[1];
  private byte[] buffer = new byte[0];
  private int position;
  private FileChannel channel;
  private int channelFile = -1;
  private ColumnarBatch current;
  /** RocksDB state's key groups, framed from its tables; null for a keyed-state file's. */
  private final RocksKeyGroupSource rocks;

  FlinkKeyGroupReader(ReadPlan plan, StructType required, int[] entries) {
    this.plan = plan;
    this.state = plan.flink;
    this.required = required;
    this.entries = entries;
    this.decoder = new FlinkKeyGroupDecoder(state);
    this.slots = new WritableColumnVector[2 + state.valueColumns()];
    this.slotOf = new int[required.size()];
    this.rocks = state.databases == null ? null : new RocksKeyGroupSource(plan);
    StructField[] fields = required.fields();
    for (int i = 0; i < fields.length; i++) {
      int column = java.util.Arrays.asList(plan.columns).indexOf(fields[i].name());
      if (column < 0) {
        throw new IllegalStateException("flinkstate: column " + fields[i].name()
            + " is not in the plan's " + java.util.Arrays.toString(plan.columns));
      }
      int slot = column - 2;
      boolean voidNamespace = slot == 1 && state.namespace.isVoid();
      slotOf[i] = slot < 0 || voidNamespace ? -1 : slot;
      if (slotOf[i] >= 0) {
        slots[slot] = new OnHeapColumnVector(CAPACITY, fields[i].dataType());
      }
    }
  }

  @Override
  public boolean next() throws IOException {
    while (position < entries.length) {
      int entry = entries[position++];
      int rows = readKeyGroup(entry);
      if (rows > 0) {
        current = batch(entry, rows);
        return true;
      }
    }
    return false;
  }

  @Override
  public ColumnarBatch get() {
    return current;
  }

  @Override
  public void close() throws IOException {
    for (WritableColumnVector slot : slots) {
      if (slot != null) {
        slot.close();
      }
    }
    if (channel != null) {
      channel.close();
    }
    if (rocks != null) {
      rocks.close();
    }
  }

  private int readKeyGroup(int entry) throws IOException {
    for (WritableColumnVector slot : slots) {
      if (slot != null) {
        slot.reset();
      }
    }
    if (rocks != null) {
      int size = rocks.frame(entry);
      try {
        return size == 0 ? 0 : decoder.decode(rocks.buffer(), size, plan.keyGroup[entry],
            state.variantOf(plan.file[entry]), slots);
      } catch (FlinkDataException fault) {
        throw new IllegalStateException("CorruptCheckpointError: " + rocks.source()
            + ": state '" + state.stateName + "': " + fault.getMessage() + " at byte "
            + fault.position + " of key group " + plan.keyGroup[entry] + " as framed from"
            + " its tables");
      }
    }
    int length = read(entry);
    byte[] data = buffer;
    int start = state.nativeFormat ? nativeStart(entry, length) : 0;
    int size = length;
    if (state.compressed) {
      try {
        data = FlinkSnappy.unframe(buffer, start, length, unframed);
      } catch (FlinkDataException fault) {
        throw refused(entry, fault, false);
      }
      start = 0;
      size = unframed[0];
    }
    FlinkStatePlan.Variant variant = state.variantOf(plan.file[entry]);
    try {
      return state.nativeFormat ? decoder.decodeNative(data, start, size, variant, slots)
          : decoder.decode(data, size, plan.keyGroup[entry], variant, slots);
    } catch (FlinkDataException fault) {
      throw refused(entry, fault, state.compressed);
    }
  }

  /**
   * Where a native key group's sections begin: past its id, which must be the plan's (swapped
   * offsets would decode under the wrong key group).
   */
  private int nativeStart(int entry, int length) {
    int expected = plan.keyGroup[entry];
    if (length < 4) {
      throw refused(entry, new FlinkDataException("no room for the key-group id", 0), false);
    }
    int found = FlinkCursor.intAt(buffer, 0);
    if (found != expected) {
      throw refused(entry, new FlinkDataException("expected key group " + expected
          + ", found " + found, 0), false);
    }
    return 4;
  }

  /** The key group's bytes into {@link #buffer}; their count. */
  private int read(int entry) throws IOException {
    int file = plan.file[entry];
    long offset = plan.offset[entry];
    long length = plan.length[entry];
    FileChannel in = channelFor(file);
    if (offset < 0 || length < 0 || length > Integer.MAX_VALUE - 16
        || offset + length > plan.fileSizes[file]) {
      throw new IllegalStateException("CorruptCheckpointError: " + plan.fileNames[file]
          + ": the key group of "
          + plan.keyGroup[entry] + " at byte offset " + offset + " (" + length + " bytes) is"
          + " outside the file's " + plan.fileSizes[file] + " bytes");
    }
    if (buffer.length < length) {
      buffer = new byte[(int) Math.max(length, Math.min(Integer.MAX_VALUE - 16,
          buffer.length * 2L))];
    }
    ByteBuffer target = ByteBuffer.wrap(buffer, 0, (int) length);
    while (target.hasRemaining()) {
      if (in.read(target, offset + target.position()) < 0) {
        throw new IllegalStateException("CorruptCheckpointError: " + plan.fileNames[file]
            + ": short read at byte offset "
            + (offset + target.position()) + ": the file is truncated");
      }
    }
    return (int) length;
  }

  private FileChannel channelFor(int file) throws IOException {
    if (file != channelFile) {
      if (channel != null) {
        channel.close();
        channel = null;
      }
      try {
        channel = FileChannel.open(Path.of(plan.filePaths[file]), StandardOpenOption.READ);
      } catch (NoSuchFileException gone) {
        throw new IllegalStateException("CheckpointNotFoundError: " + plan.fileNames[file]
            + ", a file _metadata names, is missing: the savepoint changed after the query"
            + " was planned, or is incomplete");
      }
      channelFile = file;
      if (channel.size() != plan.fileSizes[file]) {
        throw new IllegalStateException("CorruptCheckpointError: " + plan.fileNames[file]
            + " has " + channel.size()
            + " bytes; _metadata records " + plan.fileSizes[file]
            + ": it was truncated or replaced");
      }
    }
    return channel;
  }

  private ColumnarBatch batch(int entry, int rows) {
    ColumnVector[] vectors = new ColumnVector[slotOf.length];
    StructField[] fields = required.fields();
    for (int i = 0; i < vectors.length; i++) {
      if (slotOf[i] >= 0) {
        vectors[i] = slots[slotOf[i]];
      } else if (KEY_GROUP.equals(fields[i].name()) || OPERATOR_INDEX.equals(fields[i].name())) {
        ConstantColumnVector constant = new ConstantColumnVector(rows, DataTypes.IntegerType);
        int group = plan.keyGroup[entry];
        constant.setInt(KEY_GROUP.equals(fields[i].name()) ? group : plan.operatorIndex(group));
        vectors[i] = constant;
      } else {
        ConstantColumnVector nulls = new ConstantColumnVector(rows, fields[i].dataType());
        nulls.setNull();
        vectors[i] = nulls;
      }
    }
    return new ColumnarBatch(vectors, rows);
  }

  /**
   * The error of a fault: the file and the byte offset (in a Snappy framed key group, the
   * position among its uncompressed bytes too), named by the statesource error the Python
   * reader raises for a corrupt snapshot.
   */
  static IllegalStateException refused(ReadPlan plan, int entry, FlinkDataException fault,
      boolean uncompressedPosition) {
    String file = plan.fileNames[plan.file[entry]];
    long offset = plan.offset[entry];
    String where = uncompressedPosition
        ? " at uncompressed byte " + fault.position + " of the Snappy framed key group "
          + plan.keyGroup[entry] + " at byte offset " + offset
        : " at byte offset " + (offset + fault.position);
    return new IllegalStateException("CorruptCheckpointError: " + file + ": state '"
        + plan.flink.stateName + "': " + fault.getMessage() + where);
  }

  private IllegalStateException refused(int entry, FlinkDataException fault,
      boolean uncompressedPosition) {
    return refused(plan, entry, fault, uncompressedPosition);
  }
}

package org.statesource.shim;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.zip.CRC32;
import org.apache.arrow.flatbuf.Message;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.BitVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.SmallIntVector;
import org.apache.arrow.vector.TinyIntVector;
import org.apache.arrow.vector.TimeStampMilliTZVector;
import org.apache.arrow.vector.TimeStampMilliVector;
import org.apache.arrow.vector.TimeStampMicroTZVector;
import org.apache.arrow.vector.TimeStampMicroVector;
import org.apache.arrow.vector.TimeStampVector;
import org.apache.arrow.vector.ValueVector;
import org.apache.arrow.vector.VectorLoader;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ReadChannel;
import org.apache.arrow.vector.ipc.message.ArrowRecordBatch;
import org.apache.arrow.vector.ipc.message.MessageSerializer;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.arrow.vector.util.TransferPair;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Reads one partition's key groups as docs/FORMAT.md section 4 prescribes: the byte range, its
 * CRC-32, then the encapsulated IPC messages in it, decoded into one reused set of vectors.
 *
 * <p>All Arrow memory comes from a child allocator of this partition, closed in {@link #close()},
 * which Spark calls when the task ends for any reason (done, an early LIMIT, a failure). A batch
 * is valid until the next call to {@link #next()}, as Spark's contract allows.
 */
final class KeyGroupBatchReader implements PartitionReader<ColumnarBatch> {
  private static final String KEY_GROUP = "key_group";
  private static final String OPERATOR_INDEX = "operator_index";
  private static final String KEY = "key";
  /** Rows per batch of columns made from the metadata alone (bounded whatever it claims). */
  private static final int METADATA_BATCH_ROWS = 1 << 16;

  private final ReadPlan plan;
  private final String[] columns;
  private final int[] entries;
  private final boolean metadataOnly;
  private final Object[] keys;
  private final byte[][] keyBytes;
  private long metadataRows;
  private final BufferAllocator allocator;
  private VectorSchemaRoot root;
  private VectorLoader loader;
  private final List<ValueVector> derived = new ArrayList<>();
  private int position;
  private FileChannel channel;
  private int channelFile = -1;
  private ArrowBuf range;
  private long cursor;
  private int remaining;
  private long rangeRows;
  private int entry = -1;
  private ColumnarBatch current;

  /** {@code keys}: the values of a pushed key filter, whose rows are the only ones needed. */
  KeyGroupBatchReader(ReadPlan plan, String[] columns, int[] entries, Object[] keys) {
    this.plan = plan;
    this.columns = columns;
    this.entries = entries;
    this.keys = keys;
    this.keyBytes = keys == null ? null : Arrays.stream(keys)
        .map(k -> k instanceof String text ? text.getBytes(StandardCharsets.UTF_8) : null)
        .toArray(byte[][]::new);
    this.metadataOnly = fromMetadata(columns);
    this.allocator = ShimMemory.ROOT.newChildAllocator("flinkstate-partition", 0, Long.MAX_VALUE);
  }

  /** Whether these columns come from the metadata alone: key_group and operator_index. */
  static boolean fromMetadata(String[] columns) {
    return Arrays.stream(columns).allMatch(c -> KEY_GROUP.equals(c) || OPERATOR_INDEX.equals(c));
  }

  @Override
  public boolean next() throws IOException {
    closeDerived();
    if (metadataOnly) {
      return nextFromMetadata();
    }
    while (true) {
      while (remaining == 0) {
        releaseRange();
        if (position == entries.length) {
          return false;
        }
        openKeyGroup(entries[position++]);
      }
      loadNextBatch();
      int[] span = keySpan();
      if (span[1] > 0) {
        current = new ColumnarBatch(outputVectors(span[0], span[1]), span[1]);
        return true;
      }
    }
  }

  /**
   * The rows {@code [first, first + count)} of the batch that may hold a pushed key: all rows
   * without a key filter. Spark applies every filter to what is returned, so the span needs only
   * to cover the matches; a key of a type this cannot compare keeps the whole batch.
   */
  private int[] keySpan() {
    int rows = root.getRowCount();
    if (keys == null) {
      return new int[] {0, rows};
    }
    FieldVector key = root.getVector(KEY);
    int first = -1;
    int last = -1;
    for (int row = 0; row < rows; row++) {
      if (mayMatch(key, row)) {
        first = first < 0 ? row : first;
        last = row;
      }
    }
    return first < 0 ? new int[] {0, 0} : new int[] {first, last - first + 1};
  }

  private boolean mayMatch(FieldVector key, int row) {
    if (key.isNull(row)) {
      return false;
    }
    for (int i = 0; i < keys.length; i++) {
      Object value = keys[i];
      if (value != null && mayEqual(key, row, value, keyBytes[i])) {
        return true;
      }
    }
    return false;
  }

  private static boolean mayEqual(FieldVector key, int row, Object value, byte[] utf8) {
    if (key instanceof VarCharVector text && utf8 != null) {
      int start = text.getStartOffset(row);
      if (text.getEndOffset(row) - start != utf8.length) {
        return false;
      }
      ArrowBuf data = text.getDataBuffer();
      for (int i = 0; i < utf8.length; i++) {
        if (data.getByte(start + i) != utf8[i]) {
          return false;
        }
      }
      return true;
    }
    if (key instanceof BigIntVector longs && value instanceof Long number) {
      return longs.get(row) == number;
    }
    if (key instanceof IntVector ints && value instanceof Integer number) {
      return ints.get(row) == number;
    }
    if (key instanceof SmallIntVector shorts && value instanceof Short number) {
      return shorts.get(row) == number;
    }
    if (key instanceof TinyIntVector bytes && value instanceof Byte number) {
      return bytes.get(row) == number;
    }
    if (key instanceof BitVector bits && value instanceof Boolean flag) {
      return (bits.get(row) == 1) == flag;
    }
    return true;
  }

  @Override
  public ColumnarBatch get() {
    return current;
  }

  @Override
  public void close() throws IOException {
    try {
      closeDerived();
      releaseRange();
      if (root != null) {
        root.close();
      }
      if (channel != null) {
        channel.close();
      }
    } finally {
      allocator.close();
    }
  }

  /**
   * count(*), and queries that use only key_group and operator_index (GROUP BY key_group), need
   * no data file: every row of a key group's range has that key group, and the metadata counts
   * its rows. Batches are bounded, whatever count the metadata holds.
   */
  private boolean nextFromMetadata() {
    while (metadataRows == 0) {
      if (position == entries.length) {
        return false;
      }
      entry = entries[position++];
      metadataRows = plan.rows[entry];
    }
    int rows = (int) Math.min(metadataRows, METADATA_BATCH_ROWS);
    metadataRows -= rows;
    ColumnVector[] vectors = new ColumnVector[columns.length];
    for (int i = 0; i < columns.length; i++) {
      int value = KEY_GROUP.equals(columns[i])
          ? plan.keyGroup[entry] : plan.operatorIndex(plan.keyGroup[entry]);
      vectors[i] = new BorrowedArrowColumnVector(constant(columns[i], value, rows));
    }
    current = new ColumnarBatch(vectors, rows);
    return true;
  }

  private void openKeyGroup(int index) throws IOException {
    entry = index;
    FileChannel file = channelFor(plan.file[index]);
    long length = plan.length[index];
    if (length > Integer.MAX_VALUE || length < 0) {
      throw corrupt(index, "a byte range of " + length + " bytes");
    }
    range = allocator.buffer(length);
    ByteBuffer target = range.nioBuffer(0, (int) length);
    long at = plan.offset[index];
    while (target.hasRemaining()) {
      int read = file.read(target, at + target.position());
      if (read < 0) {
        throw new IllegalStateException("CorruptCheckpointError: data file " + plan.fileNames[plan.file[index]]
            + ": short read at offset " + at + " (" + target.position() + " of " + length
            + " bytes): the file is truncated");
      }
    }
    CRC32 crc = new CRC32();
    crc.update(range.nioBuffer(0, (int) length));
    if (crc.getValue() != plan.crc32[index]) {
      throw new IllegalStateException("CorruptCheckpointError: data file " + plan.fileNames[plan.file[index]]
          + ": checksum mismatch in bytes " + at + ".." + (at + length) + ": the file is corrupt");
    }
    cursor = 0;
    rangeRows = 0;
    remaining = plan.batchCount[index];
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
        throw new IllegalStateException("CheckpointNotFoundError: data file " + plan.fileNames[file]
            + ", which the checkpoint's metadata names, is missing: the checkpoint was removed"
            + " after the query was planned (retain removes the checkpoints it does not keep);"
            + " read a checkpoint that is kept");
      }
      channelFile = file;
      if (channel.size() != plan.fileSizes[file]) {
        throw new IllegalStateException("CorruptCheckpointError: data file " + plan.fileNames[file] + " is "
            + channel.size() + " bytes, the metadata says " + plan.fileSizes[file]
            + ": it was truncated or replaced");
      }
    }
    return channel;
  }

  /** One encapsulated IPC message: 0xFFFFFFFF, int32 metadata length, Message, body. */
  private void loadNextBatch() throws IOException {
    long length = plan.length[entry];
    if (cursor + 8 > length) {
      throw corrupt(entry, "a message header beyond the byte range");
    }
    ByteBuffer header = range.nioBuffer(cursor, 8).order(ByteOrder.LITTLE_ENDIAN);
    int marker = header.getInt(0);
    int metadataLength = header.getInt(4);
    if (marker != -1 || metadataLength <= 0 || cursor + 8 + metadataLength > length) {
      throw corrupt(entry, "an invalid message header at " + cursor);
    }
    ByteBuffer metadata = range.nioBuffer(cursor + 8, metadataLength)
        .order(ByteOrder.LITTLE_ENDIAN);
    Message message = Message.getRootAsMessage(metadata);
    long bodyStart = cursor + 8 + metadataLength;
    long bodyLength = message.bodyLength();
    if (message.headerType() != MessageHeader.RecordBatch || bodyLength < 0
        || bodyStart + bodyLength > length) {
      throw corrupt(entry, "a message at " + cursor + " that is not a record batch in range");
    }
    if (root == null) {
      root = VectorSchemaRoot.create(fileSchema(), allocator);
      loader = new VectorLoader(root);
    }
    ArrowBuf body = range.slice(bodyStart, bodyLength);
    body.getReferenceManager().retain(); // deserializeRecordBatch releases the body it is given
    try (ArrowRecordBatch batch = MessageSerializer.deserializeRecordBatch(message, body)) {
      loader.load(batch);
    }
    cursor = bodyStart + bodyLength;
    remaining--;
    checkKeyGroup();
    rangeRows += root.getRowCount();
    if (remaining == 0 && (cursor != length || rangeRows != plan.rows[entry])) {
      // The checksum held, so the metadata describes these bytes wrongly: reading fewer
      // batches or rows than are there would be a silently different answer.
      throw new IllegalStateException("CorruptCheckpointError: data file "
          + plan.fileNames[plan.file[entry]] + ": bytes " + plan.offset[entry] + ".."
          + (plan.offset[entry] + length) + " hold " + rangeRows + " rows in " + cursor
          + " bytes of " + plan.batchCount[entry] + " batches, the metadata says "
          + plan.rows[entry] + " rows in " + length + " bytes");
    }
  }

  /** The rows read for a key group must all carry it: anything else is a misplaced range. */
  private void checkKeyGroup() {
    IntVector groups = (IntVector) root.getVector(KEY_GROUP);
    int expected = plan.keyGroup[entry];
    for (int row = 0; row < groups.getValueCount(); row++) {
      if (groups.isNull(row) || groups.get(row) != expected) {
        throw new IllegalStateException("CorruptCheckpointError: data file "
            + plan.fileNames[plan.file[entry]] + ": the bytes recorded for key group " + expected
            + " hold rows of key group " + (groups.isNull(row) ? "null" : groups.get(row)));
      }
    }
  }

  private Schema fileSchema() {
    try {
      ReadChannel in = new ReadChannel(Channels.newChannel(
          new ByteArrayInputStream(plan.fileSchema)));
      return MessageSerializer.deserializeSchema(in);
    } catch (IOException error) {
      throw new UncheckedIOException(error);
    }
  }

  private ColumnVector[] outputVectors(int first, int rows) {
    ColumnVector[] vectors = new ColumnVector[columns.length];
    for (int i = 0; i < columns.length; i++) {
      String column = columns[i];
      if (OPERATOR_INDEX.equals(column)) {
        vectors[i] = new BorrowedArrowColumnVector(operatorIndexes(rows));
      } else {
        FieldVector vector = root.getVector(column);
        if (rows != root.getRowCount()) {
          TransferPair slice = vector.getTransferPair(allocator);
          slice.splitAndTransfer(first, rows);
          vector = (FieldVector) slice.getTo();
          derived.add(vector);
        }
        vectors[i] = new BorrowedArrowColumnVector(sparkReady(vector, rows));
      }
    }
    return vectors;
  }

  /** Every row of a batch is in one key group, so one subtask. */
  private IntVector operatorIndexes(int rows) {
    return constant(OPERATOR_INDEX, plan.operatorIndex(plan.keyGroup[entry]), rows);
  }

  private IntVector constant(String name, int value, int rows) {
    IntVector vector = new IntVector(name, allocator);
    derived.add(vector);
    vector.allocateNew(rows);
    for (int row = 0; row < rows; row++) {
      vector.set(row, value);
    }
    vector.setValueCount(rows);
    return vector;
  }

  /** Spark reads microsecond timestamps only; millisecond ones are widened (exactly). */
  private ValueVector sparkReady(FieldVector vector, int rows) {
    TimeStampVector micros;
    if (vector instanceof TimeStampMilliTZVector millis) {
      micros = new TimeStampMicroTZVector(vector.getName(), allocator, millis.getTimeZone());
    } else if (vector instanceof TimeStampMilliVector) {
      micros = new TimeStampMicroVector(vector.getName(), allocator);
    } else {
      return vector;
    }
    derived.add(micros);
    TimeStampVector millis = (TimeStampVector) vector;
    micros.allocateNew(rows);
    for (int row = 0; row < rows; row++) {
      if (millis.isNull(row)) {
        micros.setNull(row);
      } else {
        micros.set(row, Math.multiplyExact(millis.get(row), 1000L));
      }
    }
    micros.setValueCount(rows);
    return micros;
  }

  private IllegalStateException corrupt(int index, String what) {
    return new IllegalStateException("CorruptCheckpointError: data file " + plan.fileNames[plan.file[index]]
        + ": cannot decode record batches at offset " + plan.offset[index] + ": " + what);
  }

  private void closeDerived() {
    for (ValueVector vector : derived) {
      vector.close();
    }
    derived.clear();
    current = null;
  }

  private void releaseRange() {
    if (range != null) {
      range.close();
      range = null;
    }
  }
}

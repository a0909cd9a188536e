package org.statesource.shim;

import java.io.Closeable;
import java.io.IOException;
import java.util.Arrays;

/**
 * The key groups of a RocksDB state, each framed as a canonical key group of that one state, for
 * {@link FlinkKeyGroupDecoder#decode}.
 *
 * <p>Flink's RocksDB backend keeps each state in a column family whose keys are the composite keys
 * a canonical savepoint holds (key-group prefix first) and whose values are the values it holds;
 * a canonical savepoint of a RocksDB job is written by iterating them. So a key group's rows are
 * the column family's live entries over the key group's prefix range, {@code [prefix(kg),
 * prefix(kg + 1))}, merged as RocksDB merges them ({@link RocksColumnFamily}), framed as one
 * section: the state's id in its database's numbering, each pair's int length and key, int length
 * and value, the last key's first byte flagged, then the end mark. A key group with no entries
 * frames nothing.
 *
 * <p>One {@link RocksColumnFamily} is open at a time, that of the current key group's database: a
 * partition's key groups ascend, so each database's are read one after another, its tables opened
 * once.
 */
final class RocksKeyGroupSource implements RocksEntrySink, Closeable {
  private static final int END_OF_KEY_GROUP = 0xFFFF;
  private static final int META_DATA_FOLLOWS = 0x80;
  /** The largest key group framed: what a Java array holds. */
  private static final long MAX_BYTES = Integer.MAX_VALUE - 16;

  private final ReadPlan plan;
  private final FlinkStatePlan state;
  private final byte[] start;
  private final byte[] stop;
  private byte[] buffer = new byte[1 << 16];
  private int size;
  private int lastKey;
  private int entries;
  private FlinkStatePlan.Database database;
  private RocksColumnFamily family;
  private int keyGroup;

  RocksKeyGroupSource(ReadPlan plan) {
    this.plan = plan;
    this.state = plan.flink;
    this.start = new byte[state.prefixBytes];
    this.stop = new byte[state.prefixBytes];
  }

  /** The bytes framed by the last {@link #frame}. */
  byte[] buffer() {
    return buffer;
  }

  /** What errors call the database the last {@link #frame} read. */
  String source() {
    return database.source();
  }

  /** Frames entry {@code entry}'s key group into {@link #buffer}; its size, 0 if it has none. */
  int frame(int entry) throws IOException {
    keyGroup = plan.keyGroup[entry];
    open(state.databaseAt(plan.file[entry]));
    prefix(keyGroup, start);
    prefix(keyGroup + 1, stop);
    int own = state.variantOf(plan.file[entry]).stateId();
    buffer[0] = (byte) (own >>> 8);
    buffer[1] = (byte) own;
    size = 2;
    entries = 0;
    family.scan(start, stop, this);
    if (entries == 0) {
      return 0;
    }
    buffer[lastKey] |= (byte) META_DATA_FOLLOWS;
    ensure(2);
    buffer[size++] = (byte) (END_OF_KEY_GROUP >>> 8);
    buffer[size++] = (byte) END_OF_KEY_GROUP;
    return size;
  }

  @Override
  public void accept(byte[] key, int keyOffset, int keyLength, byte[] value, int valueOffset,
      int valueLength) {
    if (keyLength <= state.prefixBytes) {
      throw new IllegalStateException("CorruptCheckpointError: " + tables() + ": state '"
          + state.stateName + "' holds the key '" + hex(key, keyOffset, keyLength) + "', no"
          + " longer than a key-group prefix (max parallelism " + plan.maxParallelism + ")");
    }
    ensure(8L + keyLength + valueLength);
    putInt(keyLength);
    lastKey = size;
    System.arraycopy(key, keyOffset, buffer, size, keyLength);
    size += keyLength;
    putInt(valueLength);
    System.arraycopy(value, valueOffset, buffer, size, valueLength);
    size += valueLength;
    entries++;
  }

  @Override
  public void close() throws IOException {
    if (family != null) {
      family.close();
      family = null;
    }
  }

  private void open(FlinkStatePlan.Database wanted) throws IOException {
    if (wanted == database) {
      return;
    }
    close();
    int from = wanted.firstFile();
    int to = from + wanted.fileCount();
    family = new RocksColumnFamily(Arrays.copyOfRange(plan.filePaths, from, to),
        Arrays.copyOfRange(plan.fileNames, from, to), Arrays.copyOfRange(plan.fileSizes, from,
        to), wanted.largestSeqnos());
    database = wanted;
  }

  /** Key group {@code group}'s prefix, big-endian, into {@code into}. */
  private static void prefix(int group, byte[] into) {
    for (int i = into.length - 1, value = group; i >= 0; i--, value >>>= 8) {
      into[i] = (byte) value;
    }
  }

  private void ensure(long more) {
    long needed = size + more;
    if (needed > MAX_BYTES) {
      throw new IllegalStateException("IncompatibleCheckpointError: key group " + keyGroup
          + " of state '" + state.stateName + "' in " + database.source() + " holds more than "
          + MAX_BYTES + " bytes, more than the JVM reader frames; read it with the Python"
          + " source (format flinkstate-python)");
    }
    if (needed > buffer.length) {
      buffer = Arrays.copyOf(buffer, (int) Math.min(MAX_BYTES, Math.max(needed,
          buffer.length * 2L)));
    }
  }

  private void putInt(int value) {
    buffer[size] = (byte) (value >>> 24);
    buffer[size + 1] = (byte) (value >>> 16);
    buffer[size + 2] = (byte) (value >>> 8);
    buffer[size + 3] = (byte) value;
    size += 4;
  }

  /** The database's tables, as the Python reader names them in this error. */
  private String tables() {
    int from = database.firstFile();
    return String.join(", ", Arrays.copyOfRange(plan.fileNames, from,
        from + database.fileCount()));
  }

  private static String hex(byte[] data, int offset, int length) {
    StringBuilder out = new StringBuilder(2 * length);
    for (int i = offset; i < offset + length; i++) {
      out.append(Character.forDigit((data[i] >> 4) & 0xF, 16))
          .append(Character.forDigit(data[i] & 0xF, 16));
    }
    return out.toString();
  }
}

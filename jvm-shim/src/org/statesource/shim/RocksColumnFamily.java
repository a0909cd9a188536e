package org.statesource.shim;

import java.io.Closeable;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The live SST tables of one column family of one RocksDB database, read as RocksDB reads them
 * with Flink's merge operator (statesource/flink/rocksdb/merge.py and lookup.py): the tables'
 * entries in a key range, merged on (user key ascending, sequence number descending) by a
 * small heap of table cursors, then each key's versions resolved ({@link RocksMerge}). Opens
 * its tables on the first scan and keeps them (footers, indexes, range deletions) until
 * closed. Not thread-safe: one scan at a time.
 */
final class RocksColumnFamily implements Closeable {
  private static final byte[] EMPTY = new byte[0];

  private final String[] paths;
  private final String[] names;
  private final long[] sizes;
  private final long[] largestSeqnos;
  private RocksTable[] tables;
  private RocksCursor[] cursors;
  private RocksCursor[] heap;
  private RocksMerge merge;

  /**
   * paths: real local paths; names: what errors call each file; sizes: the sizes the snapshot
   * records (checked on open: a different size is CorruptCheckpointError "truncated or
   * replaced"). Opens nothing until the first scan; keeps each table's footer/index (and range
   * deletions) open across scans.
   */
  RocksColumnFamily(String[] paths, String[] names, long[] sizes) {
    this(paths, names, sizes, null);
  }

  /**
   * As above, with each table's largest sequence number as the MANIFEST records it (-1:
   * unknown), which gives an ingested table's entries their sequence number where its
   * properties do not (RocksDB's global sequence number).
   */
  RocksColumnFamily(String[] paths, String[] names, long[] sizes, long[] largestSeqnos) {
    if (paths.length != names.length || paths.length != sizes.length
        || (largestSeqnos != null && largestSeqnos.length != paths.length)) {
      throw new IllegalArgumentException("one path, name and size per table");
    }
    this.paths = paths.clone();
    this.names = names.clone();
    this.sizes = sizes.clone();
    this.largestSeqnos = largestSeqnos == null ? null : largestSeqnos.clone();
  }

  /**
   * Every live user key in [start, stop) bytewise-unsigned (stop == null: to the end),
   * ascending, with its merged value. Reads only the data blocks whose index separators can
   * hold the range.
   */
  void scan(byte[] start, byte[] stop, RocksEntrySink sink) throws IOException {
    open();
    byte[] from = start == null ? EMPTY : start;
    if (stop != null && Arrays.compareUnsigned(stop, from) <= 0) {
      return;
    }
    int size = 0;
    for (RocksCursor cursor : cursors) {
      if (cursor.seek(from, stop)) {
        heap[size++] = cursor;
      }
    }
    for (int i = size / 2 - 1; i >= 0; i--) {
      down(i, size);
    }
    merge.begin(sink);
    while (size > 0) {
      RocksCursor top = heap[0];
      merge.accept(top.key, top.userLength, top.mergeSequence(), top.kind, top.value,
          top.valueOffset, top.valueLength);
      if (!top.next()) {
        heap[0] = heap[--size];
        heap[size] = null;
      }
      if (size > 1) {
        down(0, size);
      }
    }
    merge.finish();
  }

  /** The data blocks the scans so far have read, over every table. */
  long dataBlocksRead() {
    long read = 0;
    for (RocksTable table : tables == null ? new RocksTable[0] : tables) {
      read += table.dataBlocksRead;
    }
    return read;
  }

  private void open() throws IOException {
    if (tables != null) {
      return;
    }
    List<RocksTable> opened = new ArrayList<>();
    try {
      for (int i = 0; i < paths.length; i++) {
        opened.add(new RocksTable(paths[i], names[i], sizes[i],
            largestSeqnos == null ? -1 : largestSeqnos[i]));
      }
      for (RocksTable table : opened) {
        if (!table.bytewise()) {
          throw RocksCoding.incompatible(table.name, "keys ordered by the comparator '"
              + table.properties.comparator + "', not bytewise as Flink's are");
        }
      }
      List<byte[]> ranges = new ArrayList<>();
      List<Long> sequences = new ArrayList<>();
      for (RocksTable table : opened) {
        table.rangeDeletions(ranges, sequences);
      }
      merge = new RocksMerge(new RocksTombstones(ranges, sequences), String.join(", ", names));
    } catch (IOException | RuntimeException e) {
      for (RocksTable table : opened) {
        table.close();
      }
      throw e;
    }
    tables = opened.toArray(new RocksTable[0]);
    cursors = new RocksCursor[tables.length];
    for (int i = 0; i < tables.length; i++) {
      cursors[i] = new RocksCursor(tables[i], i);
    }
    heap = new RocksCursor[tables.length];
  }

  private void down(int at, int size) {
    RocksCursor moving = heap[at];
    while (true) {
      int child = 2 * at + 1;
      if (child >= size) {
        break;
      }
      if (child + 1 < size && before(heap[child + 1], heap[child])) {
        child++;
      }
      if (!before(heap[child], moving)) {
        break;
      }
      heap[at] = heap[child];
      at = child;
    }
    heap[at] = moving;
  }

  /** Whether a's entry comes first: user key ascending, then newest first, then table order. */
  private static boolean before(RocksCursor a, RocksCursor b) {
    int order = Arrays.compareUnsigned(a.key, 0, a.userLength, b.key, 0, b.userLength);
    if (order != 0) {
      return order < 0;
    }
    long x = a.mergeSequence();
    long y = b.mergeSequence();
    return x != y ? x > y : a.number < b.number;
  }

  @Override
  public void close() throws IOException {
    if (tables == null) {
      return;
    }
    IOException failed = null;
    for (RocksTable table : tables) {
      try {
        table.close();
      } catch (IOException e) {
        failed = failed == null ? e : failed;
      }
    }
    tables = null;
    if (failed != null) {
      throw failed;
    }
  }
}

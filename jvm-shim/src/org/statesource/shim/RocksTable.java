package org.statesource.shim;

import java.io.Closeable;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * One SST file (statesource/flink/rocksdb/table.py), opened once: its footer, metaindex and
 * properties on open, refusing what no Flink state uses; its index and range deletions on
 * first use; and its blocks fetched by positional reads (data blocks through a read-ahead
 * window, since a scan reads them in file order), each checked against the file, its
 * checksum verified, then decompressed.
 */
final class RocksTable implements Closeable {
  static final long MAX_SEQUENCE = (1L << 56) - 1;
  private static final int READ_AHEAD = 1 << 18;
  private static final String BYTEWISE = "leveldb.BytewiseComparator";

  final String name;
  final RocksFooter footer;
  final RocksProperties properties;
  /** The sequence number every entry takes (an ingested file's), or -1: their own. */
  final long globalSeqno;
  private final FileChannel channel;
  private final Map<String, long[]> metaBlocks = new HashMap<>();
  private final RocksChecksums checksums = new RocksChecksums();
  private final RocksCompression compression = new RocksCompression();
  private final RocksPlace metaPlace;
  private RocksIndex index;
  /** Data blocks fetched so far (what a test holds a range scan's reads to). */
  long dataBlocksRead;
  private byte[] window;
  private long windowStart;
  private int windowLength;

  /** Opens the table at {@code path} (which errors call {@code name}), checking its size. */
  RocksTable(String path, String name, long size, long largestSeqno) throws IOException {
    this.name = name;
    this.metaPlace = new RocksPlace(name);
    try {
      channel = FileChannel.open(Path.of(path), StandardOpenOption.READ);
    } catch (NoSuchFileException gone) {
      throw new IllegalStateException("CheckpointNotFoundError: " + name + ", a table of the"
          + " RocksDB state, is missing: the snapshot changed after the query was planned, or"
          + " is incomplete");
    }
    try {
      long actual = channel.size();
      if (actual != size) {
        throw new IllegalStateException("CorruptCheckpointError: " + name + " has " + actual
            + " bytes; the snapshot records " + size + ": it was truncated or replaced");
      }
      if (size < RocksFooter.BYTES) {
        throw RocksCoding.corrupt(name, 0, "a file of " + size + " bytes is too short to be an"
            + " SST file");
      }
      byte[] tail = new byte[RocksFooter.BYTES];
      readFully(size - RocksFooter.BYTES, tail, 0, tail.length);
      footer = new RocksFooter(tail, size, metaPlace, checksums);
      for (byte[][] entry : RocksBlock.entries(fetchMeta(footer.metaindex, "metaindex block",
          -14))) {
        long[] handle = new long[2];
        RocksPlace value = new RocksPlace(name).set(entry[1], 0, entry[1].length,
            metaPlace.offset, metaPlace.inside);
        String blockName = new String(entry[0], StandardCharsets.UTF_8);
        value.handle(entry[1].length, "meta block handle", handle);
        if (value.pos != entry[1].length) {
          throw metaPlace.error(0, "meta block handle of '" + blockName + "' has trailing bytes");
        }
        metaBlocks.put(blockName, handle);
      }
      long[] propertiesHandle = metaBlocks.get("rocksdb.properties");
      if (propertiesHandle == null) {
        throw RocksCoding.corrupt(name, footer.metaindex[0], "no properties block");
      }
      properties = new RocksProperties(RocksBlock.entries(fetchMeta(propertiesHandle,
          "properties block", -14)), metaPlace);
      refuseUnsupported();
      globalSeqno = globalSeqno(largestSeqno, propertiesHandle[0]);
    } catch (IOException | RuntimeException e) {
      channel.close();
      throw e;
    }
  }

  /** Whether keys are in RocksDB's bytewise order (every table Flink writes). */
  boolean bytewise() {
    return BYTEWISE.equals(properties.comparator);
  }

  /** The index, read whole on first use and kept. */
  RocksIndex index() throws IOException {
    if (index != null) {
      return index;
    }
    long[] handle = footer.index != null ? footer.index : metaBlocks.get("rocksdb.index");
    if (handle == null) {
      throw RocksCoding.corrupt(name, footer.metaindex[0], "no index block");
    }
    int type = properties.indexType;
    if (type < 0 || type > RocksIndex.WITH_FIRST_KEY) {
      throw RocksCoding.incompatible(name, "index type " + type + " is not one statesource"
          + " reads");
    }
    boolean delta = properties.indexValueIsDeltaEncoded;
    boolean userKeys = properties.indexKeyIsUserKey;
    RocksIndex found = new RocksIndex();
    RocksPlace top = fetchMeta(handle, "index block", properties.windowBits);
    if (type == RocksIndex.TWO_LEVEL) {
      RocksIndex.LongList partitions = new RocksIndex.LongList();
      found.read(top, delta, false, userKeys, partitions);
      for (int i = 0; i < partitions.size; i += 2) {
        long[] partition = {partitions.values[i], partitions.values[i + 1]};
        found.read(fetchMeta(partition, "index partition", properties.windowBits), delta, false,
            userKeys, null);
      }
    } else {
      found.read(top, delta, type == RocksIndex.WITH_FIRST_KEY, userKeys, null);
    }
    for (int i = 1; i < found.count; i++) {
      if (found.offsets[i] < found.offsets[i - 1] + found.sizes[i - 1]) {
        throw RocksCoding.corrupt(name, handle[0], "index lists the block at "
            + found.offsets[i] + " before the end of the one at " + found.offsets[i - 1]);
      }
    }
    if (properties.numDataBlocks != 0 && found.count != properties.numDataBlocks) {
      throw RocksCoding.corrupt(name, handle[0], "index lists " + found.count + " data blocks,"
          + " the properties " + properties.numDataBlocks);
    }
    index = found;
    return found;
  }

  /** The table's range deletions: (start, end) user keys and sequence numbers, appended. */
  void rangeDeletions(List<byte[]> bounds, List<Long> sequences) throws IOException {
    long[] handle = metaBlocks.get("rocksdb.range_del");
    if (handle == null) {
      return;
    }
    RocksPlace place = fetchMeta(handle, "range deletion block", properties.windowBits);
    List<byte[][]> entries = RocksBlock.entries(place);
    for (byte[][] entry : entries) {
      byte[] key = entry[0];
      int user = key.length - RocksCoding.INTERNAL_BYTES;
      if (user < 0 || (key[user] & 0xFF) != 0x0F) {
        throw place.error(0, "a range deletion block entry that is no range deletion");
      }
      bounds.add(java.util.Arrays.copyOf(key, user));
      bounds.add(entry[1]);
      sequences.add(globalSeqno >= 0 ? globalSeqno : RocksCoding.u64(key, user) >>> 8);
    }
    if (entries.size() != properties.numRangeDeletions) {
      throw RocksCoding.corrupt(name, handle[0], entries.size() + " range deletions, the"
          + " properties say " + properties.numRangeDeletions);
    }
  }

  /** The contents of the data block at (offset, size), into {@code place}. */
  void fetchData(long offset, long size, RocksPlace place) throws IOException {
    check(offset, size, "data block");
    dataBlocksRead++;
    int length = (int) size + RocksFooter.TRAILER;
    if (window == null || offset < windowStart || offset + length > windowStart + windowLength) {
      int wanted = (int) Math.max(length, Math.min(READ_AHEAD, footer.offset - offset));
      if (window == null || window.length < wanted) {
        window = new byte[wanted];  // a small table's is the table's size
      }
      readFully(offset, window, 0, wanted);
      windowStart = offset;
      windowLength = wanted;
    }
    verified(window, (int) (offset - windowStart), offset, size, place, "data block");
  }

  private RocksPlace fetchMeta(long[] handle, String what, int windowBits) throws IOException {
    check(handle[0], handle[1], what);
    byte[] stored = new byte[(int) handle[1] + RocksFooter.TRAILER];
    readFully(handle[0], stored, 0, stored.length);
    return verified(stored, 0, handle[0], handle[1], metaPlace, what, windowBits);
  }

  private void verified(byte[] data, int at, long offset, long size, RocksPlace place,
      String what) {
    verified(data, at, offset, size, place, what, properties.windowBits);
  }

  private RocksPlace verified(byte[] data, int at, long offset, long size, RocksPlace place,
      String what, int windowBits) {
    int length = (int) size;
    int stored = RocksCoding.u32(data, at + length + 1);
    if (!checksums.matches(footer.checksumType, data, at, length + 1, stored,
        footer.baseContextChecksum, offset)) {
      throw RocksCoding.corrupt(name, offset, what + " checksum mismatch ("
          + RocksChecksums.NAMES[footer.checksumType] + ")");
    }
    place.set(data, at, at + length, offset, null);
    compression.decompress(data[at + length] & 0xFF, place, what, windowBits);
    return place;
  }

  private void check(long offset, long size, String what) {
    long limit = footer.offset - RocksFooter.TRAILER;
    if (offset < 0 || size < 0 || size > limit || offset > limit - size
        || size > Integer.MAX_VALUE - 64) {
      throw RocksCoding.corrupt(name, offset, what + " of " + Long.toUnsignedString(size)
          + " bytes runs past the end of the table's blocks (byte " + footer.offset + ")");
    }
  }

  private void readFully(long offset, byte[] into, int at, int length) throws IOException {
    ByteBuffer target = ByteBuffer.wrap(into, at, length);
    while (target.hasRemaining()) {
      if (channel.read(target, offset + target.position() - at) < 0) {
        throw RocksCoding.corrupt(name, offset + target.position() - at,
            "short read: the file is truncated");
      }
    }
  }

  private void refuseUnsupported() {
    if (metaBlocks.containsKey("rocksdb.compression_dict")) {
      throw RocksCoding.incompatible(name, "blocks compressed with a dictionary"
          + " (max_dict_bytes), which Flink does not configure");
    }
    if (properties.userDefinedIndex) {
      throw RocksCoding.incompatible(name, "the table's primary index is a user-defined one");
    }
    if (properties.comparator.endsWith(".u64ts") || !properties.timestampsPersisted) {
      throw RocksCoding.incompatible(name, "keys carry user-defined timestamps (comparator '"
          + properties.comparator + "'), which Flink never writes");
    }
  }

  private long globalSeqno(long largestSeqno, long propertiesOffset) {
    int version = properties.externalVersion;
    if (version < 0 || version > 2) {
      throw RocksCoding.corrupt(name, propertiesOffset, "external SST file version "
          + Integer.toUnsignedString(version));
    }
    if (version == 0) {
      return -1;
    }
    if (version == 1) {
      return 0;
    }
    long recorded = properties.globalSeqno;
    if (largestSeqno < 0 || largestSeqno >= MAX_SEQUENCE) {
      return recorded;
    }
    if (recorded != 0 && recorded != largestSeqno) {
      throw RocksCoding.corrupt(name, propertiesOffset, "global sequence number "
          + Long.toUnsignedString(recorded) + ", while the MANIFEST gives " + largestSeqno);
    }
    return largestSeqno;
  }

  @Override
  public void close() throws IOException {
    window = null;
    channel.close();
  }
}

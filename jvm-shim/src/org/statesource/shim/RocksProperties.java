package org.statesource.shim;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;

/**
 * What a table's properties block records that a reader needs
 * (statesource/flink/rocksdb/properties.py): RocksDB's counters (varint64s, each checked to fill
 * its value), its names (strings), and the raw properties of the index type, the external file
 * version and global sequence number. Names must come in order.
 */
final class RocksProperties {
  private static final List<String> COUNTERS = Arrays.asList("rocksdb.num.entries",
      "rocksdb.deleted.keys", "rocksdb.merge.operands", "rocksdb.num.range-deletions",
      "rocksdb.num.data.blocks", "rocksdb.format.version", "rocksdb.original.file.number",
      "rocksdb.column.family.id", "rocksdb.index.key.is.user.key",
      "rocksdb.index.value.is.delta.encoded", "rocksdb.udi.is.primary.index",
      "rocksdb.user.defined.timestamps.persisted");

  long numEntries;
  long numRangeDeletions;
  long numDataBlocks;
  boolean indexKeyIsUserKey;
  boolean indexValueIsDeltaEncoded;
  boolean userDefinedIndex;
  boolean timestampsPersisted = true;
  String comparator = "";
  int windowBits = -14;
  int indexType;
  int externalVersion;
  long globalSeqno;

  RocksProperties(List<byte[][]> entries, RocksPlace place) {
    byte[] previous = null;
    for (byte[][] entry : entries) {
      byte[] key = entry[0];
      byte[] value = entry[1];
      if (previous != null && Arrays.compareUnsigned(key, previous) <= 0) {
        throw place.error(0, "properties out of order at " + RocksCoding.shown(key, 0,
            key.length));
      }
      previous = key;
      String name = new String(key, StandardCharsets.UTF_8);
      int counter = COUNTERS.indexOf(name);
      if (counter >= 0) {
        RocksPlace number = new RocksPlace(place.name).set(value, 0, value.length, place.offset,
            place.inside);
        long parsed = number.varint64(value.length, name);
        if (number.pos != value.length) {
          throw place.error(0, "property " + name + " holds bytes after its number");
        }
        counter(counter, parsed);
      } else if (name.equals("rocksdb.comparator")) {
        comparator = new String(value, StandardCharsets.UTF_8);
      } else if (name.equals("rocksdb.compression_options")) {
        windowBits = windowBits(new String(value, StandardCharsets.UTF_8));
      } else if (name.equals("rocksdb.block.based.table.index.type")) {
        indexType = value.length == 4 ? RocksCoding.u32(value, 0) : -1;
      } else if (name.equals("rocksdb.external_sst_file.version")) {
        externalVersion = value.length == 4 ? RocksCoding.u32(value, 0) : 0;
      } else if (name.equals("rocksdb.external_sst_file.global_seqno")) {
        globalSeqno = value.length == 8 ? RocksCoding.u64(value, 0) : 0;
      }
    }
  }

  private void counter(int which, long value) {
    switch (which) {
      case 0: numEntries = value; break;
      case 3: numRangeDeletions = value; break;
      case 4: numDataBlocks = value; break;
      case 8: indexKeyIsUserKey = value != 0; break;
      case 9: indexValueIsDeltaEncoded = value != 0; break;
      case 10: userDefinedIndex = value != 0; break;
      case 11: timestampsPersisted = value != 0; break;
      default: break;
    }
  }

  private static int windowBits(String options) {
    for (String option : options.split(";")) {
      String[] parts = option.strip().split("=", 2);
      if (parts.length == 2 && parts[0].equals("window_bits")
          && parts[1].matches("-?[0-9]{1,9}")) {
        return Integer.parseInt(parts[1]);
      }
    }
    return -14;
  }
}

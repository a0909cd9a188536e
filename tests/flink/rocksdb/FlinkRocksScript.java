import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.rocksdb.BlockBasedTableConfig;
import org.rocksdb.Checkpoint;
import org.rocksdb.ChecksumType;
import org.rocksdb.ColumnFamilyDescriptor;
import org.rocksdb.ColumnFamilyHandle;
import org.rocksdb.ColumnFamilyOptions;
import org.rocksdb.CompressionType;
import org.rocksdb.DBOptions;
import org.rocksdb.FlushOptions;
import org.rocksdb.IndexType;
import org.rocksdb.Options;
import org.rocksdb.RocksDB;
import org.rocksdb.RocksIterator;

/**
 * Runs a script of writes against the RocksDB that Flink ships (FRocksDB, inside flink-dist),
 * with Flink's merge operator ("stringappendtest", as RocksDBResourceContainer sets it), and
 * dumps what RocksDB itself reads back: the independent truth of tests/flink/rocksdb/.
 *
 * <p>One command a line, byte strings in hex ("-" for none):
 * open DIR [option=value ...] | cf NAME | put CF KEY VALUE | merge CF KEY VALUE |
 * delete CF KEY | single_delete CF KEY | delete_range CF BEGIN END | flush CF | compact CF |
 * checkpoint DIR | close | dump DIR OUT (an existing database, opened read-only: every column
 * family's merged entries, one "name key value" line each, in hex). Options: compression
 * (none, snappy, zlib, bzip2, lz4, lz4hc, zstd), format_version, checksum (ChecksumType's
 * name), block_size, restart_interval, index_restart_interval, index_type (IndexType's name).
 */
public class FlinkRocksScript {
    static final String MERGE_OPERATOR = "stringappendtest";

    RocksDB db;
    ColumnFamilyOptions columnOptions;
    DBOptions dbOptions;
    final Map<String, ColumnFamilyHandle> families = new HashMap<>();

    public static void main(String[] args) throws Exception {
        RocksDB.loadLibrary();
        FlinkRocksScript script = new FlinkRocksScript();
        for (String line : Files.readAllLines(Paths.get(args[0]), StandardCharsets.UTF_8)) {
            if (!line.isBlank()) {
                script.run(line.trim().split(" "));
            }
        }
    }

    void run(String[] words) throws Exception {
        switch (words[0]) {
            case "open": open(words); break;
            case "cf":
                families.put(words[1], db.createColumnFamily(
                        new ColumnFamilyDescriptor(bytes(words[1]), columnOptions)));
                break;
            case "put": db.put(families.get(words[1]), bytes(words[2]), bytes(words[3])); break;
            case "merge": db.merge(families.get(words[1]), bytes(words[2]), bytes(words[3])); break;
            case "delete": db.delete(families.get(words[1]), bytes(words[2])); break;
            case "single_delete": db.singleDelete(families.get(words[1]), bytes(words[2])); break;
            case "delete_range":
                db.deleteRange(families.get(words[1]), bytes(words[2]), bytes(words[3]));
                break;
            case "flush":
                try (FlushOptions flush = new FlushOptions().setWaitForFlush(true)) {
                    db.flush(flush, families.get(words[1]));
                }
                break;
            case "compact": db.compactRange(families.get(words[1])); break;
            case "checkpoint":
                try (Checkpoint checkpoint = Checkpoint.create(db)) {
                    checkpoint.createCheckpoint(words[1]);
                }
                break;
            case "close": close(); break;
            case "dump": dump(words[1], Paths.get(words[2])); break;
            default: throw new IllegalArgumentException("unknown command " + words[0]);
        }
    }

    void open(String[] words) throws Exception {
        BlockBasedTableConfig table = new BlockBasedTableConfig();
        columnOptions = new ColumnFamilyOptions().setMergeOperatorName(MERGE_OPERATOR)
                .setDisableAutoCompactions(true);
        for (int i = 2; i < words.length; i++) {
            String[] option = words[i].split("=", 2);
            String value = option[1];
            switch (option[0]) {
                case "compression": columnOptions.setCompressionType(compression(value)); break;
                case "format_version": table.setFormatVersion(Integer.parseInt(value)); break;
                case "checksum": table.setChecksumType(ChecksumType.valueOf(value)); break;
                case "block_size": table.setBlockSize(Long.parseLong(value)); break;
                case "restart_interval": table.setBlockRestartInterval(Integer.parseInt(value)); break;
                case "index_restart_interval":
                    table.setIndexBlockRestartInterval(Integer.parseInt(value));
                    break;
                case "index_type": table.setIndexType(IndexType.valueOf(value)); break;
                default: throw new IllegalArgumentException("unknown option " + option[0]);
            }
        }
        columnOptions.setTableFormatConfig(table);
        dbOptions = new DBOptions().setCreateIfMissing(true).setCreateMissingColumnFamilies(true);
        List<ColumnFamilyDescriptor> descriptors = new ArrayList<>();
        descriptors.add(new ColumnFamilyDescriptor(RocksDB.DEFAULT_COLUMN_FAMILY, columnOptions));
        List<ColumnFamilyHandle> handles = new ArrayList<>();
        db = RocksDB.open(dbOptions, words[1], descriptors, handles);
        families.clear();
        families.put(hex(RocksDB.DEFAULT_COLUMN_FAMILY), handles.get(0));
    }

    void close() {
        for (ColumnFamilyHandle handle : families.values()) {
            handle.close();
        }
        families.clear();
        db.close();
        columnOptions.close();
        dbOptions.close();
    }

    static void dump(String directory, Path out) throws Exception {
        List<byte[]> names;
        try (Options options = new Options()) {
            names = RocksDB.listColumnFamilies(options, directory);
        }
        try (ColumnFamilyOptions columns = new ColumnFamilyOptions()
                     .setMergeOperatorName(MERGE_OPERATOR);
             DBOptions options = new DBOptions();
             PrintWriter writer = new PrintWriter(Files.newBufferedWriter(out))) {
            List<ColumnFamilyDescriptor> descriptors = new ArrayList<>();
            for (byte[] name : names) {
                descriptors.add(new ColumnFamilyDescriptor(name, columns));
            }
            List<ColumnFamilyHandle> handles = new ArrayList<>();
            try (RocksDB readOnly = RocksDB.openReadOnly(options, directory, descriptors, handles)) {
                for (int i = 0; i < handles.size(); i++) {
                    try (RocksIterator entries = readOnly.newIterator(handles.get(i))) {
                        for (entries.seekToFirst(); entries.isValid(); entries.next()) {
                            writer.println(hex(names.get(i)) + " " + hex(entries.key()) + " "
                                    + hex(entries.value()));
                        }
                        entries.status();
                    }
                    handles.get(i).close();
                }
            }
        }
    }

    static CompressionType compression(String name) {
        switch (name) {
            case "none": return CompressionType.NO_COMPRESSION;
            case "snappy": return CompressionType.SNAPPY_COMPRESSION;
            case "zlib": return CompressionType.ZLIB_COMPRESSION;
            case "bzip2": return CompressionType.BZLIB2_COMPRESSION;
            case "lz4": return CompressionType.LZ4_COMPRESSION;
            case "lz4hc": return CompressionType.LZ4HC_COMPRESSION;
            case "zstd": return CompressionType.ZSTD_COMPRESSION;
            default: throw new IllegalArgumentException("unknown compression " + name);
        }
    }

    static byte[] bytes(String hex) {
        if (hex.equals("-")) {
            return new byte[0];
        }
        byte[] out = new byte[hex.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    static String hex(byte[] data) {
        if (data.length == 0) {
            return "-";
        }
        StringBuilder out = new StringBuilder();
        for (byte b : data) {
            out.append(String.format("%02x", b & 0xff));
        }
        return out.toString();
    }
}

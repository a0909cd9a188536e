// Runs the SQL fixture's job (tests/fixtures/flink/SqlJob.java, its very queries and so its operator uids) from a
// savepoint, over a bounded batch of further events, and writes what each query emits: the check that a rewritten
// SQL savepoint restores in the same SQL job (tests/sql_restore.py drives it and models the output).
//
// Args: backend (hashmap or rocksdb), savepoint directory ("" for none), max parallelism, first and last event id
// (last excluded), output directory, timeout in seconds. The source ends after the events, so the job ends: the
// end of input's watermark fires every window and every waiting dedup row. Each sink subtask writes
// <output>/<table>-<subtask>.jsonl, one JSON line per row it received: {"kind": "+I", "row": [...]}, fields in
// raw forms (decimals as plain strings, DATE as epoch days, TIME as milliseconds of the day, timestamps as
// [epoch milliseconds, nanoseconds of the millisecond], bytes as hex, a ROW as its list of fields).
//
// The sinks ("collect-file", registered in META-INF/services by the driver) accept the changelog kinds the
// fixture's blackhole sinks accept (all but UPDATE_BEFORE), so the planner builds the same operators.

import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Collections;
import java.util.HexFormat;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.apache.flink.table.connector.ChangelogMode;
import org.apache.flink.table.connector.sink.DynamicTableSink;
import org.apache.flink.table.connector.sink.SinkV2Provider;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.TimestampData;
import org.apache.flink.table.factories.DynamicTableSinkFactory;
import org.apache.flink.table.factories.FactoryUtil;
import org.apache.flink.table.types.logical.DecimalType;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.RowType;
import org.apache.flink.types.RowKind;

public class SqlRestoreRun {
    static final ConfigOption<String> PATH = ConfigOptions.key("path").stringType().noDefaultValue();

    public static void main(String[] args) throws Exception {
        String backend = args[0];
        String savepoint = args[1];
        int maxParallelism = Integer.parseInt(args[2]);
        long first = Long.parseLong(args[3]);
        long last = Long.parseLong(args[4]);
        String output = args[5];
        long timeout = Long.parseLong(args[6]);
        Configuration conf = new Configuration();
        conf.setString("state.backend.type", backend);
        conf.setString("rest.bind-port", "0");
        conf.setString("restart-strategy.type", "none");
        conf.setString("pipeline.max-parallelism", String.valueOf(maxParallelism));
        conf.setString("table.exec.uid.generation", "ALWAYS");
        if (!savepoint.isEmpty()) {
            conf.setString("execution.state-recovery.path", savepoint);
            conf.setString("execution.state-recovery.claim-mode", "NO_CLAIM");
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(2);
        env.setMaxParallelism(maxParallelism);
        StreamTableEnvironment tEnv = StreamTableEnvironment.create(env);
        SqlJob.queries(env, tEnv, new SqlJob.Events(first, last, false),
                table -> "'connector' = 'collect-file', 'path' = '" + Paths.get(output, table) + "'")
            .execute().await(timeout, TimeUnit.SECONDS);
        System.exit(0);
    }

    /** The "collect-file" connector: a sink of the table's rows into JSON lines. */
    public static class CollectFactory implements DynamicTableSinkFactory {
        public String factoryIdentifier() { return "collect-file"; }

        public Set<ConfigOption<?>> requiredOptions() { return Collections.singleton(PATH); }

        public Set<ConfigOption<?>> optionalOptions() { return Collections.emptySet(); }

        public DynamicTableSink createDynamicTableSink(Context context) {
            FactoryUtil.TableFactoryHelper helper = FactoryUtil.createTableFactoryHelper(this, context);
            helper.validate();
            return new CollectTable(helper.getOptions().get(PATH),
                (RowType) context.getPhysicalRowDataType().getLogicalType());
        }
    }

    static class CollectTable implements DynamicTableSink {
        final String path;
        final RowType type;

        CollectTable(String path, RowType type) {
            this.path = path;
            this.type = type;
        }

        public ChangelogMode getChangelogMode(ChangelogMode requested) {
            ChangelogMode.Builder builder = ChangelogMode.newBuilder();
            for (RowKind kind : requested.getContainedKinds()) {
                if (kind != RowKind.UPDATE_BEFORE) builder.addContainedKind(kind);
            }
            return builder.build();
        }

        public SinkRuntimeProvider getSinkRuntimeProvider(Context context) {
            return SinkV2Provider.of(new CollectSink(path, type));
        }

        public DynamicTableSink copy() { return new CollectTable(path, type); }

        public String asSummaryString() { return "CollectFile"; }
    }

    static class CollectSink implements Sink<RowData> {
        final String path;
        final RowType type;

        CollectSink(String path, RowType type) {
            this.path = path;
            this.type = type;
        }

        public SinkWriter<RowData> createWriter(WriterInitContext context) throws IOException {
            BufferedWriter out = Files.newBufferedWriter(
                Paths.get(path + "-" + context.getTaskInfo().getIndexOfThisSubtask() + ".jsonl"),
                StandardCharsets.UTF_8);
            return new SinkWriter<RowData>() {
                public void write(RowData row, Context ignored) throws IOException {
                    StringBuilder line = new StringBuilder("{\"kind\": \"")
                        .append(row.getRowKind().shortString()).append("\", \"row\": ");
                    fields(line, row, type);
                    out.write(line.append("}\n").toString());
                }

                public void flush(boolean endOfInput) throws IOException { out.flush(); }

                public void close() throws IOException { out.close(); }
            };
        }
    }

    static void fields(StringBuilder b, RowData row, RowType type) {
        b.append('[');
        for (int i = 0; i < type.getFieldCount(); i++) {
            if (i > 0) b.append(", ");
            value(b, row, i, type.getTypeAt(i));
        }
        b.append(']');
    }

    static void value(StringBuilder b, RowData row, int i, LogicalType type) {
        if (row.isNullAt(i)) {
            b.append("null");
            return;
        }
        switch (type.getTypeRoot()) {
            case BOOLEAN: b.append(row.getBoolean(i)); break;
            case TINYINT: b.append(row.getByte(i)); break;
            case SMALLINT: b.append(row.getShort(i)); break;
            case INTEGER: case DATE: case TIME_WITHOUT_TIME_ZONE: b.append(row.getInt(i)); break;
            case BIGINT: b.append(row.getLong(i)); break;
            case FLOAT: b.append(row.getFloat(i)); break;
            case DOUBLE: b.append(row.getDouble(i)); break;
            case CHAR: case VARCHAR:
                b.append('"').append(row.getString(i).toString().replace("\\", "\\\\").replace("\"", "\\\""))
                    .append('"');
                break;
            case BINARY: case VARBINARY: b.append('"').append(HexFormat.of().formatHex(row.getBinary(i))).append('"'); break;
            case DECIMAL: {
                DecimalType decimal = (DecimalType) type;
                b.append('"').append(row.getDecimal(i, decimal.getPrecision(), decimal.getScale())
                    .toBigDecimal().toPlainString()).append('"');
                break;
            }
            case TIMESTAMP_WITHOUT_TIME_ZONE: case TIMESTAMP_WITH_LOCAL_TIME_ZONE: {
                TimestampData at = row.getTimestamp(i, timestampPrecision(type));
                b.append('[').append(at.getMillisecond()).append(", ").append(at.getNanoOfMillisecond()).append(']');
                break;
            }
            case ROW: {
                RowType nested = (RowType) type;
                fields(b, row.getRow(i, nested.getFieldCount()), nested);
                break;
            }
            default: throw new IllegalArgumentException("no JSON form for " + type);
        }
    }

    static int timestampPrecision(LogicalType type) {
        return type instanceof org.apache.flink.table.types.logical.TimestampType
            ? ((org.apache.flink.table.types.logical.TimestampType) type).getPrecision()
            : ((org.apache.flink.table.types.logical.LocalZonedTimestampType) type).getPrecision();
    }
}

// The Flink SQL job of bench/flink_sql_scan.py (compiled and run by it, never by the tests): a GROUP BY
// aggregation over KEYS users, whose state (one accumulator row per user) the bench scans.
//
// One source (parallelism 1) emits EVENTS rows (usr, qty, price): row i is user "user-" + (i % KEYS), qty i % 10
// and price (i % 100000) / 100. The query, at parallelism 2 and max parallelism 128 on the heap backend, is
// SELECT usr, COUNT(*), SUM(qty), MAX(price) FROM events GROUP BY usr into a blackhole sink. Once the source
// emitted every row it idles, and the job takes a canonical savepoint (its barrier follows every row).
// Args: keys, events, output directory.

import java.math.BigDecimal;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.source.legacy.SourceFunction;
import org.apache.flink.table.api.DataTypes;
import org.apache.flink.table.api.StatementSet;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.apache.flink.table.runtime.typeutils.ExternalTypeInfo;
import org.apache.flink.table.types.DataType;
import org.apache.flink.types.Row;

public class SqlAggregationJob {
    static final AtomicLong DONE = new AtomicLong();
    static final DataType EVENT = DataTypes.ROW(
        DataTypes.FIELD("usr", DataTypes.STRING()),
        DataTypes.FIELD("qty", DataTypes.INT()),
        DataTypes.FIELD("price", DataTypes.DECIMAL(10, 2)));

    static class Events implements SourceFunction<Row> {
        final long keys;
        final long events;
        volatile boolean running = true;

        Events(long keys, long events) {
            this.keys = keys;
            this.events = events;
        }

        public void run(SourceContext<Row> ctx) throws Exception {
            for (long i = 0; i < events && running; i++) {
                Row row = Row.of("user-" + (i % keys), (int) (i % 10), BigDecimal.valueOf(i % 100000, 2));
                synchronized (ctx.getCheckpointLock()) { ctx.collect(row); }
                DONE.incrementAndGet();
            }
            while (running) { Thread.sleep(20); }
        }

        public void cancel() { running = false; }
    }

    public static void main(String[] args) throws Exception {
        long keys = Long.parseLong(args[0]);
        long events = Long.parseLong(args[1]);
        String target = args[2];
        Configuration conf = new Configuration();
        String[][] settings = {  // file-system checkpoint storage: else state travels inline in _metadata
            {"state.backend.type", "hashmap"}, {"execution.checkpointing.storage", "filesystem"},
            {"execution.checkpointing.dir", new java.io.File(target, "checkpoints").toURI().toString()},
            {"table.exec.uid.generation", "ALWAYS"}};
        for (String[] setting : settings) {
            conf.setString(setting[0], setting[1]);
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(2);
        env.setMaxParallelism(128);
        StreamTableEnvironment tEnv = StreamTableEnvironment.create(env);
        DataStream<Row> rows = env.addSource(new Events(keys, events), "events", ExternalTypeInfo.of(EVENT))
            .uid("events").setParallelism(1);
        tEnv.createTemporaryView("events", tEnv.fromDataStream(rows));
        tEnv.executeSql("CREATE TABLE agg_sink (usr STRING, cnt BIGINT, total INT, top DECIMAL(10, 2))"
            + " WITH ('connector' = 'blackhole')");
        StatementSet statements = tEnv.createStatementSet();
        statements.addInsertSql("INSERT INTO agg_sink SELECT usr, COUNT(*), SUM(qty), MAX(price) FROM events"
            + " GROUP BY usr");
        JobClient client = statements.execute().getJobClient().get();
        long deadline = System.currentTimeMillis() + 1_800_000;
        while (DONE.get() < events) {
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("the job is too slow");
            Thread.sleep(100);
        }
        System.out.println(client.triggerSavepoint(target + "/canonical", SavepointFormatType.CANONICAL)
            .get(1800, TimeUnit.SECONDS));
        client.cancel().get(60, TimeUnit.SECONDS);
        System.exit(0);
    }
}

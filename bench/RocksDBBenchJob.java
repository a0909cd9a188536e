// The job bench/rocksdb_checkpoint.py measures: a RocksDB backend holding one entry per event, so that a
// retained checkpoint of N events holds N entries. Run by the bench (never by the tests).
//
// Operator "bench" (parallelism 2, max parallelism 128), keyed by "user-<i>" (every event its own key), over
// the numbers 0 .. N-1: "count" (ValueState<Long>) set to i. Incremental checkpoints every few seconds while
// the events flow, so that the last one shares SST files with earlier ones; once every event is processed,
// one more retained checkpoint, and a canonical savepoint of the same state.
// Args: the output directory and N.

import java.io.File;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.source.legacy.SourceFunction;
import org.apache.flink.util.Collector;

public class RocksDBBenchJob {
    static final AtomicLong DONE = new AtomicLong();

    /** The numbers 0 .. n-1, then idle: the job keeps running for the checkpoint and the savepoint. */
    static class Numbers implements SourceFunction<Long> {
        final long n;
        volatile boolean running = true;

        Numbers(long n) { this.n = n; }

        public void run(SourceContext<Long> ctx) throws Exception {
            for (long i = 0; i < n && running; i++) {
                synchronized (ctx.getCheckpointLock()) { ctx.collect(i); }
            }
            while (running) { Thread.sleep(20); }
        }

        public void cancel() { running = false; }
    }

    static class Count extends KeyedProcessFunction<String, Long, Long> {
        transient ValueState<Long> count;

        @Override
        public void processElement(Long i, Context ctx, Collector<Long> out) throws Exception {
            if (count == null) {
                count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
            }
            count.update(i);
            DONE.incrementAndGet();
        }
    }

    static long newestCheckpoint(File dir) {
        long newest = -1;
        File[] jobs = dir.listFiles();
        for (File job : jobs == null ? new File[0] : jobs) {
            File[] checkpoints = job.listFiles();
            for (File chk : checkpoints == null ? new File[0] : checkpoints) {
                if (chk.getName().startsWith("chk-") && new File(chk, "_metadata").isFile()) {
                    newest = Math.max(newest, Long.parseLong(chk.getName().substring(4)));
                }
            }
        }
        return newest;
    }

    public static void main(String[] args) throws Exception {
        String target = args[0];
        long n = Long.parseLong(args[1]);
        File checkpoints = new File(target, "checkpoints");
        Configuration conf = new Configuration();
        conf.setString("state.backend.type", "rocksdb");
        conf.setString("execution.checkpointing.storage", "filesystem");
        conf.setString("execution.checkpointing.dir", checkpoints.toURI().toString());
        conf.setString("execution.checkpointing.interval", "5s");
        conf.setString("execution.checkpointing.incremental", "true");
        conf.setString("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(2);
        env.setMaxParallelism(128);
        env.addSource(new Numbers(n), "numbers", Types.LONG).uid("src").setParallelism(1)
            .keyBy(i -> "user-" + i, Types.STRING)
            .process(new Count(), Types.LONG).uid("bench").name("bench")
            .sinkTo(new org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink<>()).uid("sink");
        JobClient client = env.executeAsync("rocksdb-bench");
        long deadline = System.currentTimeMillis() + 3_600_000;
        while (DONE.get() < n) {
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("the job is too slow");
            Thread.sleep(200);
        }
        long before = newestCheckpoint(checkpoints);
        while (newestCheckpoint(checkpoints) <= before) {
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("no checkpoint");
            Thread.sleep(100);
        }
        System.out.println("checkpoint " + newestCheckpoint(checkpoints));
        System.out.println("canonical " + client.triggerSavepoint(target + "/canonical", SavepointFormatType.CANONICAL).get(1200, TimeUnit.SECONDS));
        client.cancel().get(60, TimeUnit.SECONDS);
        System.exit(0);
    }
}

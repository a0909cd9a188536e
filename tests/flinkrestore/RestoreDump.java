// Restores a Flink savepoint or checkpoint in a real Flink (local MiniCluster) and dumps every
// key of every state it was told about, as JSON lines. Compiled and run by tests/flink_restore.py,
// which documents the spec; this file is the only Java it needs.
//
//   java -cp <classes>:<pyflink/lib/*> RestoreDump <spec.json> <output dir>
//   java -cp <classes>:<pyflink/lib/*> RestoreDump --serve
//
// Status: 0 restored and dumped; 1 Flink refused the snapshot or the job failed (Flink's
// messages on stderr); 2 the spec does not fit the snapshot (e.g. an operator uid that is not in
// it: Flink would start that operator empty without a word); 3 the watchdog gave up.
//
// --serve restores many snapshots in one JVM (a suite pays for starting Flink once): each stdin
// line "<spec.json>\t<output dir>\t<stderr file>" is one restore, its messages written to the
// stderr file, answered by the stdout line "RestoreDump-done <status>". After a status other
// than 0 the JVM exits, so that nothing a failed job left behind meets the next restore.

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.DataInputStream;
import java.io.File;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Collectors;

import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.functions.ReduceFunction;
import org.apache.flink.api.common.serialization.SerializerConfig;
import org.apache.flink.api.common.state.AggregatingStateDescriptor;
import org.apache.flink.api.common.state.AppendingState;
import org.apache.flink.api.common.state.BroadcastState;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ReducingStateDescriptor;
import org.apache.flink.api.common.state.State;
import org.apache.flink.api.common.state.StateDescriptor;
import org.apache.flink.api.common.state.StateTtlConfig;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.BasicArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.typeutils.GenericTypeInfo;
import org.apache.flink.api.java.typeutils.ListTypeInfo;
import org.apache.flink.api.java.typeutils.MapTypeInfo;
import org.apache.flink.api.java.typeutils.ObjectArrayTypeInfo;
import org.apache.flink.api.java.typeutils.PojoField;
import org.apache.flink.api.java.typeutils.PojoTypeInfo;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.api.java.typeutils.TupleTypeInfoBase;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.jobgraph.OperatorID;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.state.StateEntry;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;
import org.apache.flink.runtime.state.heap.StateMap;
import org.apache.flink.runtime.state.heap.StateTable;
import org.apache.flink.runtime.state.internal.InternalKvState;
import org.apache.flink.runtime.state.ttl.TtlValue;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.JsonNodeFactory;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.StringUtils;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.InternalTimer;
import org.apache.flink.streaming.api.operators.InternalTimerService;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.operators.TimerHeapInternalTimer;
import org.apache.flink.streaming.api.operators.Triggerable;
import org.apache.flink.streaming.api.windowing.windows.GlobalWindow;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;
import org.apache.flink.types.RowKind;

@SuppressWarnings({"unchecked", "rawtypes"})
public class RestoreDump {
    // Non-ASCII characters escaped in the JSON: the dump then carries any Java string
    // exactly, lone surrogates included, which UTF-8 cannot encode.
    static final ObjectMapper JSON = new ObjectMapper().enable(
            org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonGenerator.Feature
                    .ESCAPE_NON_ASCII);
    static final JsonNodeFactory NODES = JsonNodeFactory.instance;
    static final String SOURCE_UID = "statesource-restore-source";
    /** TTL of a state declared with "ttl": true: long enough that nothing restored has expired. */
    static final Duration LONG_TTL = Duration.ofDays(365L * 1000);

    static final String DONE = "RestoreDump-done ";

    public static void main(String[] args) throws Exception {
        if (args.length == 1 && args[0].equals("--serve")) {
            serve();
            return;
        }
        JsonNode spec = JSON.readTree(new File(args[0]));
        startWatchdog(spec.path("timeout_seconds").asLong(120));
        System.exit(restoreOnce(spec, Paths.get(args[1])));
    }

    /** Restores what each stdin line names until stdin ends or a restore fails. */
    static void serve() throws IOException {
        BufferedReader requests = new BufferedReader(
            new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream console = System.err;
        for (String line = requests.readLine(); line != null; line = requests.readLine()) {
            String[] parts = line.split("\t");
            int status;
            try (PrintStream messages = new PrintStream(
                    new FileOutputStream(parts[2]), true, StandardCharsets.UTF_8)) {
                System.setErr(messages);
                JsonNode spec = JSON.readTree(new File(parts[0]));
                Thread watchdog = startWatchdog(spec.path("timeout_seconds").asLong(120));
                try {
                    status = restoreOnce(spec, Paths.get(parts[1]));
                } catch (Throwable failure) {
                    report(failure);
                    status = 1;
                } finally {
                    watchdog.interrupt();
                    System.err.flush();
                    System.setErr(console);
                }
            }
            System.out.println(DONE + status);
            System.out.flush();
            if (status != 0) {
                System.exit(status);
            }
        }
    }

    /** One restore and dump: the status the header describes. */
    static int restoreOnce(JsonNode spec, Path out) throws Exception {
        Files.createDirectories(out);
        String savepoint = spec.get("savepoint").asText();
        int maxParallelism = spec.get("max_parallelism").asInt();
        int parallelism = spec.path("parallelism").asInt(1);

        String problem = checkUids(savepoint, spec, out);
        if (problem != null) {
            System.err.println("RestoreDump: " + problem);
            return 2;
        }

        Configuration conf = new Configuration();
        conf.setString("execution.runtime-mode", "STREAMING");
        conf.setString("execution.state-recovery.path", savepoint);
        conf.setString("execution.state-recovery.claim-mode", "NO_CLAIM");
        conf.setString("execution.state-recovery.ignore-unclaimed-state",
            String.valueOf(spec.path("ignore_unclaimed_state").asBoolean(false)));
        conf.setString("pipeline.max-parallelism", String.valueOf(maxParallelism));
        conf.setString("parallelism.default", String.valueOf(parallelism));
        conf.setString("state.backend.type", spec.path("state_backend").asText("hashmap"));
        if (spec.has("timer_service")) {  // RocksDB only: where its timers live (HEAP/ROCKSDB)
            conf.setString("state.backend.rocksdb.timer-service.factory",
                spec.path("timer_service").asText());
        }
        conf.setString("rest.bind-port", "0");
        conf.setString("restart-strategy.type", "none");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(parallelism);
        env.setMaxParallelism(maxParallelism);

        DataStream<Long> nothing = env.fromSequence(0, 0).setParallelism(1).uid(SOURCE_UID)
            .filter(value -> false).setParallelism(1).uid(SOURCE_UID + "-nothing");
        int index = 0;
        for (JsonNode op : spec.get("operators")) {
            String uid = op.get("uid").asText();
            int opParallelism = op.path("parallelism").asInt(parallelism);
            Dump dump = new Dump(JSON.writeValueAsString(op), out.resolve("op" + index).toString(),
                maxParallelism);
            SingleOutputStreamOperator<Long> restored;
            if (op.hasNonNull("key")) {
                TypeInformation keyType = type(op.get("key"));
                restored = nothing.keyBy(new NoKey(), keyType).transform("restore " + uid, Types.LONG, dump);
            } else {
                restored = nothing.transform("restore " + uid, Types.LONG, dump);
            }
            restored.uid(uid).name(uid).setParallelism(opParallelism);
            index++;
        }
        try {
            env.execute("statesource restore");
        } catch (Throwable failure) {
            report(failure);
            return 1;
        }
        return 0;
    }

    /** Every operator of the spec must be in the snapshot; writes the snapshot's operators to snapshot.json. */
    static String checkUids(String savepoint, JsonNode spec, Path out) throws IOException {
        File metadata = new File(savepoint, "_metadata");
        CheckpointMetadata loaded;
        try (DataInputStream in = new DataInputStream(new FileInputStream(metadata))) {
            loaded = Checkpoints.loadCheckpointMetadata(in, RestoreDump.class.getClassLoader(), savepoint);
        }
        Map<OperatorID, OperatorState> byId = new HashMap<>();
        ArrayNode operators = NODES.arrayNode();
        for (OperatorState state : loaded.getOperatorStates()) {
            byId.put(state.getOperatorID(), state);
            ObjectNode o = operators.addObject();
            o.put("uid", operatorUid(state));
            o.put("operatorId", state.getOperatorID().toHexString());
            o.put("parallelism", state.getParallelism());
            o.put("maxParallelism", state.getMaxParallelism());
            o.put("hasState", state.getCoordinatorState() != null
                || state.getStates().stream().anyMatch(OperatorSubtaskState::hasState));
        }
        ObjectNode snapshot = NODES.objectNode();
        snapshot.put("checkpointId", loaded.getCheckpointId());
        snapshot.set("operators", operators);
        Files.writeString(out.resolve("snapshot.json"), JSON.writeValueAsString(snapshot));
        for (JsonNode op : spec.get("operators")) {
            String uid = op.get("uid").asText();
            OperatorID id = new OperatorID(StringUtils.hexStringToByte(op.get("operator_id").asText()));
            if (!byId.containsKey(id) && !op.path("allow_missing").asBoolean(false)) {
                return "operator uid '" + uid + "' (operator id " + id.toHexString() + ") is not in the"
                    + " snapshot " + savepoint + ": Flink would start it empty (set allow_missing to"
                    + " accept that)";
            }
        }
        return null;
    }

    /** A thread that ends the JVM if the restore takes longer; interrupt it once done. */
    static Thread startWatchdog(long seconds) {
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(seconds * 1000);
            } catch (InterruptedException e) {
                return;
            }
            System.err.println("RestoreDump: watchdog: the restore did not end within " + seconds + " s");
            System.err.flush();
            Runtime.getRuntime().halt(3);
        }, "restore-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
        return watchdog;
    }

    /** The full trace, then each distinct message of the cause chain (the tail is what callers show). */
    static void report(Throwable failure) {
        StringWriter trace = new StringWriter();
        failure.printStackTrace(new PrintWriter(trace));
        System.err.println(trace);
        System.err.println("RestoreDump: Flink refused the restore or the job failed:");
        Set<String> seen = new LinkedHashSet<>();
        for (Throwable t = failure; t != null && seen.size() < 20; t = t.getCause()) {
            String line = t.getClass().getName() + ": " + t.getMessage();
            if (seen.add(line)) {
                System.err.println("  " + line);
            }
        }
        System.err.flush();
    }

    /** The uid _metadata records (Flink 2.x; a Flink 1.x _metadata records none). */
    @SuppressWarnings("unchecked")
    static String operatorUid(OperatorState state) {
        try {
            return ((java.util.Optional<String>) OperatorState.class.getMethod("getOperatorUid")
                .invoke(state)).orElse(null);
        } catch (NoSuchMethodException flink1x) {
            return null;
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Never called: the source emits nothing; the key type is given to keyBy. */
    static class NoKey implements KeySelector<Long, Object> {
        public Object getKey(Long value) {
            throw new IllegalStateException("no records are expected");
        }
    }

    // ---------------------------------------------------------------- types and JSON rendering

    static TypeInformation<?> type(JsonNode t) throws ClassNotFoundException {
        if (t == null || t.isNull() || t.isMissingNode()) {
            throw new IllegalArgumentException("a type is missing in the spec");
        }
        if (t.isTextual()) {
            switch (t.asText()) {
                case "String": return Types.STRING;
                case "Long": return Types.LONG;
                case "Integer": case "Int": return Types.INT;
                case "Double": return Types.DOUBLE;
                case "Float": return Types.FLOAT;
                case "Boolean": return Types.BOOLEAN;
                case "Short": return Types.SHORT;
                case "Byte": return Types.BYTE;
                case "Character": return Types.CHAR;
                case "BigInteger": return Types.BIG_INT;
                case "BigDecimal": return Types.BIG_DEC;
                case "Instant": return Types.INSTANT;
                case "LocalDate": return Types.LOCAL_DATE;
                case "LocalTime": return Types.LOCAL_TIME;
                case "LocalDateTime": return Types.LOCAL_DATE_TIME;
                case "byte[]": return PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO;
                default: throw new IllegalArgumentException("unknown type " + t);
            }
        }
        if (t.has("tuple")) {
            List<TypeInformation<?>> fields = new ArrayList<>();
            for (JsonNode f : t.get("tuple")) fields.add(type(f));
            return Types.TUPLE(fields.toArray(new TypeInformation<?>[0]));
        }
        if (t.has("row")) {
            List<String> names = new ArrayList<>();
            List<TypeInformation<?>> fields = new ArrayList<>();
            for (JsonNode f : t.get("row")) {
                boolean named = f.isArray() && f.size() == 2 && f.get(0).isTextual();
                names.add(named ? f.get(0).asText() : "f" + names.size());
                fields.add(type(named ? f.get(1) : f));
            }
            return Types.ROW_NAMED(names.toArray(new String[0]), fields.toArray(new TypeInformation<?>[0]));
        }
        if (t.has("list")) return Types.LIST(type(t.get("list")));
        if (t.has("map")) return Types.MAP(type(t.get("map").get(0)), type(t.get("map").get(1)));
        if (t.has("array")) return Types.OBJECT_ARRAY(type(t.get("array")));
        if (t.has("class")) return TypeInformation.of(loadClass(t.get("class").asText()));
        if (t.has("pojo")) {
            TypeInformation<?> info = TypeInformation.of(loadClass(t.get("pojo").asText()));
            if (!(info instanceof PojoTypeInfo)) {
                throw new IllegalArgumentException(t + " is not a POJO for Flink: " + info);
            }
            return info;
        }
        if (t.has("generic")) return new GenericTypeInfo<>(loadClass(t.get("generic").asText()));
        throw new IllegalArgumentException("unknown type " + t);
    }

    static Class<?> loadClass(String name) throws ClassNotFoundException {
        ClassLoader loader = Thread.currentThread().getContextClassLoader();
        return Class.forName(name, true, loader != null ? loader : RestoreDump.class.getClassLoader());
    }

    /** A value as JSON, guided by its Flink type: tuples as lists, rows and POJOs as objects by field name,
     *  maps as lists of [key, value] pairs (sorted by the key's JSON), byte[] as base64, other objects as
     *  their toString. */
    static JsonNode render(TypeInformation<?> t, Object v) throws IllegalAccessException {
        if (v == null) return NODES.nullNode();
        if (t instanceof RowTypeInfo && v instanceof Row) {
            RowTypeInfo rowType = (RowTypeInfo) t;
            Row row = (Row) v;
            ObjectNode o = NODES.objectNode();
            if (row.getKind() != RowKind.INSERT) o.put("$rowkind", row.getKind().shortString());
            String[] names = rowType.getFieldNames();
            for (int i = 0; i < names.length; i++) o.set(names[i], render(rowType.getTypeAt(i), row.getField(i)));
            return o;
        }
        if (t instanceof TupleTypeInfoBase && v instanceof Tuple) {
            TupleTypeInfoBase<?> tupleType = (TupleTypeInfoBase<?>) t;
            ArrayNode a = NODES.arrayNode();
            for (int i = 0; i < tupleType.getArity(); i++) a.add(render(tupleType.getTypeAt(i), ((Tuple) v).getField(i)));
            return a;
        }
        if (t instanceof PojoTypeInfo) {
            PojoTypeInfo<?> pojo = (PojoTypeInfo<?>) t;
            ObjectNode o = NODES.objectNode();
            for (int i = 0; i < pojo.getArity(); i++) {
                PojoField field = pojo.getPojoFieldAt(i);
                field.getField().setAccessible(true);
                o.set(field.getField().getName(), render(field.getTypeInformation(), field.getField().get(v)));
            }
            return o;
        }
        if (t instanceof ListTypeInfo) {
            return renderAll(((ListTypeInfo<?>) t).getElementTypeInfo(), (Iterable<?>) v);
        }
        if (t instanceof MapTypeInfo) {
            MapTypeInfo<?, ?> mapType = (MapTypeInfo<?, ?>) t;
            return pairs(mapType.getKeyTypeInfo(), mapType.getValueTypeInfo(), ((Map<?, ?>) v).entrySet());
        }
        if (t instanceof ObjectArrayTypeInfo) {
            return renderAll(((ObjectArrayTypeInfo<?, ?>) t).getComponentInfo(), Arrays.asList((Object[]) v));
        }
        if (t instanceof BasicArrayTypeInfo) {
            return renderAll(((BasicArrayTypeInfo<?, ?>) t).getComponentInfo(), Arrays.asList((Object[]) v));
        }
        if (v instanceof byte[]) return NODES.textNode(Base64.getEncoder().encodeToString((byte[]) v));
        if (v.getClass().isArray()) {
            ArrayNode a = NODES.arrayNode();
            for (int i = 0; i < java.lang.reflect.Array.getLength(v); i++) a.add(scalar(java.lang.reflect.Array.get(v, i)));
            return a;
        }
        return scalar(v);
    }

    static ArrayNode renderAll(TypeInformation<?> element, Iterable<?> values) throws IllegalAccessException {
        ArrayNode a = NODES.arrayNode();
        if (values != null) for (Object e : values) a.add(render(element, e));
        return a;
    }

    static ArrayNode pairs(TypeInformation<?> keyType, TypeInformation<?> valueType, Iterable<? extends Map.Entry<?, ?>> entries)
            throws IllegalAccessException {
        TreeMap<String, ArrayNode> sorted = new TreeMap<>();
        if (entries != null) {
            for (Map.Entry<?, ?> e : entries) {
                ArrayNode pair = NODES.arrayNode();
                JsonNode key = render(keyType, e.getKey());
                pair.add(key);
                pair.add(render(valueType, e.getValue()));
                sorted.put(key.toString() + "\u0000" + sorted.size(), pair);
            }
        }
        ArrayNode a = NODES.arrayNode();
        sorted.values().forEach(a::add);
        return a;
    }

    static JsonNode scalar(Object v) {
        if (v == null) return NODES.nullNode();
        if (v instanceof String) return NODES.textNode((String) v);
        if (v instanceof Character) return NODES.textNode(v.toString());
        if (v instanceof Boolean) return NODES.booleanNode((Boolean) v);
        if (v instanceof Long) return NODES.numberNode((Long) v);
        if (v instanceof Integer) return NODES.numberNode((Integer) v);
        if (v instanceof Short) return NODES.numberNode((Short) v);
        if (v instanceof Byte) return NODES.numberNode((Byte) v);
        if (v instanceof Double) {
            double d = (Double) v;
            return Double.isFinite(d) ? NODES.numberNode(d) : NODES.textNode(Double.toString(d));
        }
        if (v instanceof Float) {
            float f = (Float) v;
            return Float.isFinite(f) ? NODES.numberNode(f) : NODES.textNode(Float.toString(f));
        }
        if (v instanceof java.math.BigInteger) return NODES.numberNode((java.math.BigInteger) v);
        if (v instanceof java.math.BigDecimal) return NODES.numberNode((java.math.BigDecimal) v);
        return NODES.textNode(v.toString());
    }

    // ---------------------------------------------------------------- the operator

    /** Registers the spec's states in open(), then writes every restored key, timer and operator state. */
    static class Dump extends AbstractStreamOperator<Long>
            implements OneInputStreamOperator<Long, Long>, Triggerable<Object, Object> {
        final String opSpec;
        final String outPrefix;
        final int maxParallelism;
        transient BufferedWriter writer;
        transient String uid;
        transient int subtask;

        Dump(String opSpec, String outPrefix, int maxParallelism) {
            this.opSpec = opSpec;
            this.outPrefix = outPrefix;
            this.maxParallelism = maxParallelism;
        }

        @Override
        public void processElement(StreamRecord<Long> element) {}

        @Override
        public void onEventTime(InternalTimer<Object, Object> timer) {}

        @Override
        public void onProcessingTime(InternalTimer<Object, Object> timer) {}

        @Override
        public void open() throws Exception {
            super.open();
            JsonNode op = JSON.readTree(opSpec);
            uid = op.get("uid").asText();
            subtask = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
            int parallelism = getRuntimeContext().getTaskInfo().getNumberOfParallelSubtasks();
            ObjectNode done = line("subtask", null);
            done.put("parallelism", parallelism);
            done.put("maxParallelism", getRuntimeContext().getTaskInfo().getMaxNumberOfParallelSubtasks());
            boolean keyed = getKeyedStateBackend() != null;
            if (keyed) {
                done.put("keyedBackend", getKeyedStateBackend().getClass().getSimpleName());
                KeyGroupRange range = KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex(
                    maxParallelism, parallelism, subtask);
                done.set("keyGroupRange", NODES.arrayNode().add(range.getStartKeyGroup()).add(range.getEndKeyGroup()));
                // what the backend restored, before this operator registers anything
                Map<String, ?> tables = (Map<String, ?>) field(getKeyedStateBackend(), "registeredKVStates");
                Object queues = field(getKeyedStateBackend(), "priorityQueuesManager");
                Map<String, ?> pqs = queues == null ? null : (Map<String, ?>) field(queues, "registeredPQStates");
                Map<String, ?> rocks = (Map<String, ?>) field(getKeyedStateBackend(), "kvStateInformation");
                if (tables != null && pqs != null) {
                    Set<String> names = new TreeSet<>(tables.keySet());
                    names.addAll(pqs.keySet());
                    done.set("restoredKeyedStates", JSON.valueToTree(names));
                } else if (rocks != null) {
                    done.set("restoredKeyedStates", JSON.valueToTree(new TreeSet<>(rocks.keySet())));
                }
            }
            Set<String> operatorStates = new TreeSet<>(getOperatorStateBackend().getRegisteredStateNames());
            operatorStates.addAll(getOperatorStateBackend().getRegisteredBroadcastStateNames());
            done.set("restoredOperatorStates", JSON.valueToTree(operatorStates));

            writer = Files.newBufferedWriter(Paths.get(outPrefix + "-" + subtask + ".jsonl"), StandardCharsets.UTF_8);
            try {
                if (keyed) {
                    for (JsonNode state : op.path("keyed_states")) dumpKeyedState(state);
                    for (JsonNode timers : op.path("timers")) dumpTimers(timers);
                } else if (op.path("keyed_states").size() + op.path("timers").size() > 0) {
                    throw new IllegalArgumentException("operator " + uid + " has keyed states or timers but no key type");
                }
                for (JsonNode state : op.path("operator_states")) dumpOperatorState(state);
                write(done);
            } finally {
                writer.close();
            }
        }

        ObjectNode line(String kind, String state) {
            ObjectNode o = NODES.objectNode();
            o.put("operator", uid);
            o.put("subtask", subtask);
            o.put("kind", kind);
            if (state != null) o.put("state", state);
            return o;
        }

        void write(ObjectNode line) throws IOException {
            writer.write(JSON.writeValueAsString(line));
            writer.write('\n');
        }

        TypeSerializer<?> namespaceSerializer(JsonNode ns) throws ClassNotFoundException {
            String name = ns.isTextual() ? ns.asText() : null;
            if (ns.isMissingNode() || ns.isNull() || "void".equals(name)) return VoidNamespaceSerializer.INSTANCE;
            if ("window".equals(name) || "time_window".equals(name)) return new TimeWindow.Serializer();
            if ("global_window".equals(name)) return new GlobalWindow.Serializer();
            return type(ns).createSerializer(serializerConfig());
        }

        SerializerConfig serializerConfig() {
            return getExecutionConfig().getSerializerConfig();
        }

        JsonNode renderNamespace(JsonNode ns, Object namespace) throws Exception {
            if (namespace == null || namespace instanceof VoidNamespace) return NODES.nullNode();
            if (namespace instanceof TimeWindow) {
                TimeWindow w = (TimeWindow) namespace;
                return NODES.objectNode().put("start", w.getStart()).put("end", w.getEnd());
            }
            if (namespace instanceof GlobalWindow) return NODES.textNode("global");
            return render(type(ns), namespace);
        }

        void dumpKeyedState(JsonNode spec) throws Exception {
            String name = spec.get("name").asText();
            String kind = spec.get("kind").asText();
            JsonNode ns = spec.path("namespace");
            TypeInformation keyType = type(JSON.readTree(opSpec).get("key"));
            TypeInformation valueType = null, userKeyType = null;
            StateDescriptor descriptor;
            switch (kind) {
                case "value":
                    valueType = type(spec.get("value"));
                    descriptor = new ValueStateDescriptor<>(name, valueType);
                    break;
                case "list":
                    valueType = type(spec.get("element"));
                    descriptor = new ListStateDescriptor<>(name, valueType);
                    break;
                case "map":
                    userKeyType = type(spec.get("user_key"));
                    valueType = type(spec.get("user_value"));
                    descriptor = new MapStateDescriptor<>(name, userKeyType, valueType);
                    break;
                case "reducing":
                    valueType = type(spec.get("value"));
                    descriptor = new ReducingStateDescriptor<>(name, new Last(), valueType);
                    break;
                case "aggregating":
                    valueType = type(spec.get("value"));  // the accumulator
                    descriptor = new AggregatingStateDescriptor<>(name, new Identity(), valueType);
                    break;
                default:
                    throw new IllegalArgumentException("unknown keyed state kind " + kind);
            }
            JsonNode ttl = spec.path("ttl");
            if (ttl.isNumber() || ttl.asBoolean(false)) {
                Duration timeToLive = ttl.isNumber() ? Duration.ofMillis(ttl.asLong()) : LONG_TTL;
                descriptor.enableTimeToLive(StateTtlConfig.newBuilder(timeToLive)
                    .setUpdateType(StateTtlConfig.UpdateType.OnCreateAndWrite)
                    .setStateVisibility(StateTtlConfig.StateVisibility.NeverReturnExpired)
                    .build());
            }
            State state = getOrCreateKeyedState(namespaceSerializer(ns), descriptor);
            Map<List<Object>, Object[]> stored = storedEntries(name);
            List<Tuple2<Object, Object>> keys = (List<Tuple2<Object, Object>>) getKeyedStateBackend()
                .getKeysAndNamespaces(name).collect(Collectors.toList());
            InternalKvState internal = (InternalKvState) state;
            for (Tuple2<Object, Object> kn : keys) {
                setCurrentKey(kn.f0);
                internal.setCurrentNamespace(kn.f1);
                ObjectNode line = line(kind, name);
                line.set("key", render(keyType, kn.f0));
                line.set("namespace", renderNamespace(ns, kn.f1));
                switch (kind) {
                    case "value":
                        line.set("value", render(valueType, ((ValueState) state).value()));
                        break;
                    case "list":
                        Iterable<?> elements = (Iterable<?>) ((ListState) state).get();
                        line.set("value", elements == null ? NODES.nullNode() : renderAll(valueType, elements));
                        break;
                    case "map":
                        Iterable<Map.Entry<?, ?>> entries = ((MapState) state).entries();
                        line.set("value", entries == null ? NODES.nullNode() : pairs(userKeyType, valueType, entries));
                        break;
                    default:
                        line.set("value", render(valueType, ((AppendingState) state).get()));
                }
                line.put("keyGroup", KeyGroupRangeAssignment.assignToKeyGroup(kn.f0, maxParallelism));
                Object[] raw = stored == null ? null : stored.get(Arrays.asList(kn.f0, kn.f1));
                if (raw != null) {
                    line.put("storedKeyGroup", (Integer) raw[0]);
                    JsonNode ttlTimestamps = ttlTimestamps(kind, userKeyType, raw[1]);
                    if (ttlTimestamps != null) line.set("ttlTimestamp", ttlTimestamps);
                }
                write(line);
            }
        }

        /** Heap backend only: (key, namespace) -> {key group of the map holding it, stored value}. */
        Map<List<Object>, Object[]> storedEntries(String name) {
            Map<String, ?> tables = (Map<String, ?>) field(getKeyedStateBackend(), "registeredKVStates");
            if (tables == null || !(tables.get(name) instanceof StateTable)) return null;
            StateTable<?, ?, ?> table = (StateTable<?, ?, ?>) tables.get(name);
            Map<List<Object>, Object[]> stored = new HashMap<>();
            StateMap<?, ?, ?>[] maps = table.getState();
            for (int i = 0; i < maps.length; i++) {
                for (StateEntry<?, ?, ?> e : maps[i]) {
                    stored.put(Arrays.asList(e.getKey(), e.getNamespace()),
                        new Object[] {table.getKeyGroupOffset() + i, e.getState()});
                }
            }
            return stored;
        }

        /** The last-access timestamps of a TTL state's stored value, in the value's shape. */
        JsonNode ttlTimestamps(String kind, TypeInformation userKeyType, Object raw) throws IllegalAccessException {
            if (raw instanceof TtlValue) return NODES.numberNode(((TtlValue<?>) raw).getLastAccessTimestamp());
            if (raw instanceof List && !((List<?>) raw).isEmpty() && ((List<?>) raw).get(0) instanceof TtlValue) {
                ArrayNode a = NODES.arrayNode();
                for (Object e : (List<?>) raw) a.add(((TtlValue<?>) e).getLastAccessTimestamp());
                return a;
            }
            if (raw instanceof Map && !((Map<?, ?>) raw).isEmpty()
                    && ((Map<?, ?>) raw).values().iterator().next() instanceof TtlValue) {
                List<Map.Entry<?, ?>> entries = new ArrayList<>();
                for (Map.Entry<?, ?> e : ((Map<?, ?>) raw).entrySet()) {
                    entries.add(Map.entry(e.getKey(), ((TtlValue<?>) e.getValue()).getLastAccessTimestamp()));
                }
                return pairs(userKeyType, Types.LONG, entries);
            }
            return null;
        }

        void dumpTimers(JsonNode spec) throws Exception {
            String name = spec.get("name").asText();
            JsonNode ns = spec.path("namespace");
            TypeInformation keyType = type(JSON.readTree(opSpec).get("key"));
            InternalTimerService<Object> service = getInternalTimerService(
                name, (TypeSerializer<Object>) namespaceSerializer(ns), this);
            for (String domain : new String[] {"event", "processing"}) {
                Map<List<Object>, Integer> stored = timerKeyGroups(service, domain + "TimeTimersQueue");
                List<Object[]> timers = new ArrayList<>();
                if (domain.equals("event")) {
                    service.forEachEventTimeTimer((namespace, ts) -> timers.add(new Object[] {getCurrentKey(), namespace, ts}));
                } else {
                    service.forEachProcessingTimeTimer((namespace, ts) -> timers.add(new Object[] {getCurrentKey(), namespace, ts}));
                }
                for (Object[] t : timers) {
                    ObjectNode line = line("timer", name);
                    line.put("domain", domain);
                    line.set("key", render(keyType, t[0]));
                    line.set("namespace", renderNamespace(ns, t[1]));
                    line.put("timestamp", (Long) t[2]);
                    line.put("keyGroup", KeyGroupRangeAssignment.assignToKeyGroup(t[0], maxParallelism));
                    Integer group = stored == null ? null : stored.get(Arrays.asList(t[2], t[0], t[1]));
                    if (group != null) line.put("storedKeyGroup", group);
                    write(line);
                }
            }
        }

        /** Heap timers only: (timestamp, key, namespace) -> key group of the set holding the timer. */
        static Map<List<Object>, Integer> timerKeyGroups(Object service, String queueField) {
            Object queue = field(service, queueField);
            HashMap<?, ?>[] maps = queue == null ? null : (HashMap<?, ?>[]) field(queue, "deduplicationMapsByKeyGroup");
            KeyGroupRange range = queue == null ? null : (KeyGroupRange) field(queue, "keyGroupRange");
            if (maps == null || range == null) return null;
            Map<List<Object>, Integer> groups = new HashMap<>();
            for (int i = 0; i < maps.length; i++) {
                for (Object element : maps[i].keySet()) {
                    TimerHeapInternalTimer<?, ?> timer = (TimerHeapInternalTimer<?, ?>) element;
                    groups.put(Arrays.asList(timer.getTimestamp(), timer.getKey(), timer.getNamespace()),
                        range.getStartKeyGroup() + i);
                }
            }
            return groups;
        }

        void dumpOperatorState(JsonNode spec) throws Exception {
            String name = spec.get("name").asText();
            String mode = spec.get("mode").asText();
            ObjectNode line = line(mode, name);
            switch (mode) {
                case "split":
                case "union": {
                    TypeInformation element = type(spec.get("element"));
                    ListStateDescriptor descriptor = new ListStateDescriptor<>(name, element);
                    ListState<?> state = mode.equals("split")
                        ? getOperatorStateBackend().getListState(descriptor)
                        : getOperatorStateBackend().getUnionListState(descriptor);
                    line.set("value", renderAll(element, state.get()));
                    break;
                }
                case "broadcast": {
                    TypeInformation userKey = type(spec.get("user_key"));
                    TypeInformation userValue = type(spec.get("user_value"));
                    BroadcastState<?, ?> state = getOperatorStateBackend().getBroadcastState(
                        new MapStateDescriptor<>(name, userKey, userValue));
                    line.set("value", pairs(userKey, userValue, (Iterable) state.entries()));
                    break;
                }
                default:
                    throw new IllegalArgumentException("unknown operator state mode " + mode);
            }
            write(line);
        }
    }

    /** The value of a private field, looked up along the class hierarchy; null if there is none. */
    static Object field(Object target, String name) {
        for (Class<?> c = target.getClass(); c != null; c = c.getSuperclass()) {
            try {
                Field f = c.getDeclaredField(name);
                f.setAccessible(true);
                return f.get(target);
            } catch (NoSuchFieldException e) {
                // look in the superclass
            } catch (ReflectiveOperationException | RuntimeException e) {
                return null;
            }
        }
        return null;
    }

    /** Reduce functions are not stored in a snapshot; reading never calls this one. */
    static class Last implements ReduceFunction<Object> {
        public Object reduce(Object a, Object b) {
            return b;
        }
    }

    /** Reading an aggregating state through this function returns the stored accumulator itself. */
    static class Identity implements AggregateFunction<Object, Object, Object> {
        public Object createAccumulator() {
            return null;
        }

        public Object add(Object value, Object accumulator) {
            return value;
        }

        public Object getResult(Object accumulator) {
            return accumulator;
        }

        public Object merge(Object a, Object b) {
            return b;
        }
    }
}

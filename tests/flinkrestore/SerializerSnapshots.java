import java.io.File;
import java.nio.file.Files;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.flink.api.common.ExecutionConfig;
import org.apache.flink.api.common.serialization.SerializerConfig;
import org.apache.flink.api.common.state.StateDescriptor;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshotSerializationUtil;
import org.apache.flink.api.common.typeutils.base.ListSerializer;
import org.apache.flink.api.common.typeutils.base.LongSerializer;
import org.apache.flink.api.common.typeutils.base.MapSerializer;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.runtime.state.RegisteredKeyValueStateBackendMetaInfo;
import org.apache.flink.runtime.state.RegisteredPriorityQueueStateBackendMetaInfo;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;
import org.apache.flink.runtime.state.metainfo.StateMetaInfoSnapshot;
import org.apache.flink.runtime.state.metainfo.StateMetaInfoSnapshotReadersWriters;
import org.apache.flink.runtime.state.ttl.TtlStateFactory;
import org.apache.flink.streaming.api.operators.TimerSerializer;
import org.apache.flink.streaming.api.windowing.windows.GlobalWindow;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * Serializer snapshots as Flink itself writes them, for the byte-exact tests of the snapshots
 * statesource derives (tests/flink/serializers/test_serializer_snapshots_in_flink.py).
 *
 * <p>Usage: {@code SerializerSnapshots cases.json out.json}. Each case has an "id" and one of:
 * "serializer": T (the versioned snapshot of T's serializer); "key": T (the snapshot behind the
 * proxy version, as a keyed-state header holds the key serializer); "state": {name, kind,
 * value | element | user_key + user_value, namespace, ttl} (a keyed state's meta info snapshot);
 * "timers": {name, key, namespace} (a timer queue's meta info snapshot). T is a type of
 * RestoreDump's spec, or "void", "window", "global_window", {"ttl": T}, {"timer": [K, N]}. The
 * output maps each id to the base64 of the bytes.
 */
public class SerializerSnapshots {

    static final ObjectMapper JSON = new ObjectMapper();
    static final SerializerConfig CONFIG = new ExecutionConfig().getSerializerConfig();

    /** A POJO whose superclass declares some of its fields. */
    public static class Base {
        public long id;
        public String zeta;
    }

    /** Declared out of name order, with boxed, primitive and nested POJO fields. */
    public static class Child extends Base {
        public String name;
        public int alpha;
        public Double score;
        public Inner inner;
    }

    /** The primitive Java types as POJO fields. */
    public static class Inner {
        public short s;
        public byte b;
        public char c;
        public boolean flag;
        public float f;
        public byte[] raw;
    }

    /** Collections as Flink 2.x's type extraction sees them: nullable, or Kryo (not here). */
    public static class Bag {
        public List<String> tags;
        public Map<String, Long> counts;
        public Set<Integer> ids;
        public List<Inner> inners;
        public Map<Inner, String> byInner;
        public Map<String, byte[]> blobs;
        public Tuple2<List<Long>, String> pair;
    }

    public static void main(String[] args) throws Exception {
        JsonNode cases = JSON.readTree(new File(args[0]));
        ObjectNode out = JSON.createObjectNode();
        for (JsonNode c : cases) {
            out.put(c.get("id").asText(), Base64.getEncoder().encodeToString(bytes(c)));
        }
        Files.write(new File(args[1]).toPath(), JSON.writeValueAsBytes(out));
    }

    static byte[] bytes(JsonNode c) throws Exception {
        DataOutputSerializer out = new DataOutputSerializer(256);
        if (c.has("serializer")) {
            TypeSerializerSnapshot.writeVersionedSnapshot(
                    out, serializer(c.get("serializer")).snapshotConfiguration());
        } else if (c.has("key")) {
            TypeSerializerSnapshotSerializationUtil.writeSerializerSnapshot(
                    out, serializer(c.get("key")).snapshotConfiguration());
        } else if (c.has("state")) {
            StateMetaInfoSnapshotReadersWriters.getWriter().writeStateMetaInfoSnapshot(state(c.get("state")), out);
        } else if (c.has("timers")) {
            JsonNode t = c.get("timers");
            TimerSerializer<?, ?> timers =
                    new TimerSerializer<>(serializer(t.get("key")), serializer(t.get("namespace")));
            StateMetaInfoSnapshot snapshot =
                    new RegisteredPriorityQueueStateBackendMetaInfo<>(t.get("name").asText(), timers).snapshot();
            StateMetaInfoSnapshotReadersWriters.getWriter().writeStateMetaInfoSnapshot(snapshot, out);
        } else {
            throw new IllegalArgumentException("unknown case " + c);
        }
        return out.getCopyOfBuffer();
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static TypeSerializer<?> serializer(JsonNode t) throws Exception {
        if (t.isTextual()) {
            switch (t.asText()) {
                case "void": return VoidNamespaceSerializer.INSTANCE;
                case "window": return new TimeWindow.Serializer();
                case "global_window": return new GlobalWindow.Serializer();
                default: break;
            }
        }
        if (t.has("ttl")) {
            return new TtlStateFactory.TtlSerializer(LongSerializer.INSTANCE, serializer(t.get("ttl")));
        }
        if (t.has("timer")) {
            return new TimerSerializer<>(serializer(t.get("timer").get(0)), serializer(t.get("timer").get(1)));
        }
        return RestoreDump.type(t).createSerializer(CONFIG);
    }

    /** As Flink's state descriptors and TtlStateFactory make a keyed state's serializers. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static StateMetaInfoSnapshot state(JsonNode s) throws Exception {
        String kind = s.get("kind").asText();
        boolean ttl = s.path("ttl").asBoolean(false);
        TypeSerializer stored;
        switch (kind) {
            case "list":
                stored = new ListSerializer(ttled(serializer(s.get("element")), ttl));
                break;
            case "map":
                stored = new MapSerializer(serializer(s.get("user_key")), ttled(serializer(s.get("user_value")), ttl));
                break;
            default:
                stored = ttled(serializer(s.get("value")), ttl);
        }
        TypeSerializer namespace = serializer(s.has("namespace") ? s.get("namespace") : JSON.getNodeFactory().textNode("void"));
        StateDescriptor.Type type = StateDescriptor.Type.valueOf(kind.toUpperCase());
        return new RegisteredKeyValueStateBackendMetaInfo(type, s.get("name").asText(), namespace, stored).snapshot();
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static TypeSerializer ttled(TypeSerializer serializer, boolean ttl) {
        return ttl ? new TtlStateFactory.TtlSerializer(LongSerializer.INSTANCE, serializer) : serializer;
    }
}

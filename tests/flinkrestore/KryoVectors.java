import org.apache.flink.api.common.ExecutionConfig;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializer;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;

import java.io.File;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.Date;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.LinkedList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;

/**
 * The truth for statesource's Kryo codecs (tests only): builds Java values from JSON specs and
 * writes them with the KryoSerializer of the Flink on the classpath (1.20 or 2.3), printing the
 * bytes, and, with "snapshot", the serializer's snapshot as Flink writes it.
 *
 * Input: a JSON array of cases {"id", "declared": class name, "value": spec} or
 * {"id", "snapshot": class name}. A spec is null or [tag, ...]: ["str", s], ["int"|"long"|
 * "short"|"byte", n], ["float", int bits], ["double", long bits as string], ["bool", b],
 * ["char", code], ["uuid", msb, lsb] (strings), ["bigdec", unscaled, scale], ["bigint", s],
 * ["date", millis], ["enum", class, name], ["list"|"linkedlist"|"hashset"|"linkedhashset"|
 * "treeset", [specs]], ["hashmap"|"linkedhashmap"|"treemap", [[k, v], ...]], ["ref", n]
 * (the n-th object built in this case, for shared references). With "check" (base64 bytes,
 * statesource's), the serializer must read those bytes back to an object equal to the value.
 * With "registered" (class names), the job registers those classes with Kryo
 * (pipeline.serialization-config, as a job's configuration does). Output: {id: base64}.
 */
public class KryoVectors {
    private final ArrayList<Object> built = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        ObjectMapper mapper = new ObjectMapper();
        JsonNode cases = mapper.readTree(new File(args[0]));
        Map<String, String> out = new LinkedHashMap<>();
        for (JsonNode c : cases) {
            String id = c.get("id").asText();
            ExecutionConfig config = new ExecutionConfig();
            if (c.has("registered")) {
                List<String> entries = new ArrayList<>();
                for (JsonNode name : c.get("registered")) {
                    entries.add(name.asText() + ": {type: kryo}");
                }
                Configuration settings = new Configuration();
                settings.setString("pipeline.serialization-config", String.join(";", entries));
                config.getSerializerConfig().configure(settings, KryoVectors.class.getClassLoader());
            }
            DataOutputSerializer target = new DataOutputSerializer(64);
            if (c.has("snapshot")) {
                KryoSerializer<?> serializer =
                        new KryoSerializer<>(Class.forName(c.get("snapshot").asText()), config.getSerializerConfig());
                TypeSerializerSnapshot.writeVersionedSnapshot(target, serializer.snapshotConfiguration());
            } else {
                Class<?> declared = Class.forName(c.get("declared").asText());
                @SuppressWarnings({"unchecked", "rawtypes"})
                TypeSerializer<Object> serializer =
                        (TypeSerializer) new KryoSerializer<>(declared, config.getSerializerConfig());
                Object value = new KryoVectors().build(c.get("value"));
                serializer.serialize(value, target);
                if (c.has("check")) {
                    byte[] ours = Base64.getDecoder().decode(c.get("check").asText());
                    DataInputDeserializer in = new DataInputDeserializer(ours);
                    Object read = serializer.deserialize(in);
                    if (!Objects.equals(read, value) || in.available() != 0) {
                        throw new IllegalStateException(id + ": statesource's bytes read as " + read);
                    }
                }
                Object back = serializer.deserialize(new DataInputDeserializer(target.getCopyOfBuffer()));
                if (!Objects.equals(back, value)) {
                    throw new IllegalStateException(id + ": read back " + back + ", not " + value);
                }
            }
            out.put(id, Base64.getEncoder().encodeToString(target.getCopyOfBuffer()));
        }
        Files.write(Paths.get(args[1]), mapper.writeValueAsString(out).getBytes(StandardCharsets.UTF_8));
    }

    private Object build(JsonNode spec) throws Exception {
        if (spec.isNull()) {
            return null;
        }
        String tag = spec.get(0).asText();
        if (tag.equals("ref")) {
            return built.get(spec.get(1).asInt());
        }
        Object value = make(tag, spec);
        built.add(value);
        return value;
    }

    private Object make(String tag, JsonNode spec) throws Exception {
        switch (tag) {
            case "str": return spec.get(1).asText();
            case "int": return spec.get(1).asInt();
            case "long": return spec.get(1).asLong();
            case "short": return (short) spec.get(1).asInt();
            case "byte": return (byte) spec.get(1).asInt();
            case "float": return Float.intBitsToFloat(spec.get(1).asInt());
            case "double": return Double.longBitsToDouble(Long.parseLong(spec.get(1).asText()));
            case "bool": return spec.get(1).asBoolean();
            case "char": return (char) spec.get(1).asInt();
            case "uuid": return new UUID(Long.parseLong(spec.get(1).asText()), Long.parseLong(spec.get(2).asText()));
            case "bigdec": return new BigDecimal(new BigInteger(spec.get(1).asText()), spec.get(2).asInt());
            case "bigint": return new BigInteger(spec.get(1).asText());
            case "date": return new Date(spec.get(1).asLong());
            case "enum": return enumConstant(spec.get(1).asText(), spec.get(2).asText());
            case "list": return fill(new ArrayList<>(), spec.get(1));
            case "linkedlist": return fill(new LinkedList<>(), spec.get(1));
            case "hashset": return fill(new HashSet<>(), spec.get(1));
            case "linkedhashset": return fill(new LinkedHashSet<>(), spec.get(1));
            case "treeset": return fill(new TreeSet<>(), spec.get(1));
            case "hashmap": return put(new HashMap<>(), spec.get(1));
            case "linkedhashmap": return put(new LinkedHashMap<>(), spec.get(1));
            case "treemap": return put(new TreeMap<>(), spec.get(1));
            default: throw new IllegalArgumentException("unknown spec " + spec);
        }
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    private static Object enumConstant(String className, String name) throws Exception {
        return Enum.valueOf((Class) Class.forName(className), name);
    }

    private Collection<Object> fill(Collection<Object> target, JsonNode items) throws Exception {
        for (JsonNode item : items) {
            target.add(build(item));
        }
        return target;
    }

    private Map<Object, Object> put(Map<Object, Object> target, JsonNode pairs) throws Exception {
        for (JsonNode pair : pairs) {
            target.put(build(pair.get(0)), build(pair.get(1)));
        }
        return target;
    }
}

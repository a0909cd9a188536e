package org.statesource.shim;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.Serializable;

/**
 * The {@code flink} part of a plan: how to decode one keyed state from the key groups of a Flink
 * savepoint or checkpoint (statesource/flink/jvm_layout.py writes it).
 *
 * <p>Fields: {@code compressed} (Snappy framed key groups), {@code prefixBytes} (1 or 2: the
 * key-group prefix of every key), {@code states} (how many states the header lists),
 * {@code stateId}, {@code stateName}, {@code kind} ({@code value}, {@code list}, {@code map},
 * or {@code timer}: the key is the sign-flipped timestamp, key and namespace, the value empty),
 * {@code ambiguous} (a varint length follows key and namespace), {@code ttl} (values carry
 * their last-access timestamp), and the type descriptors ({@link FlinkValueDecoder})
 * {@code key}, {@code namespace}, {@code userKey} (map state only) and {@code value};
 * {@code native} (the heap backend's own layout, whose values carry no lengths) and, there,
 * {@code sections}: every state's plan by state id (the same fields, without these two; the
 * wanted state's own section is decoded by this plan itself), since a native key group is
 * walked through every section before the wanted one, in no fixed order; and,
 * where the read options name the snapshot directly, {@code stamp}: its {@code _metadata}'s
 * real {@code path}, {@code sizeBytes} and {@code modifiedNs}, for {@link FlinkPlanCache}.
 */
final class FlinkStatePlan implements Serializable {
  private static final long serialVersionUID = 1L;

  static final int VALUE = 0;
  static final int LIST = 1;
  static final int MAP = 2;
  static final int TIMER = 3;

  final boolean compressed;
  final int prefixBytes;
  final int states;
  final int stateId;
  final String stateName;
  final int kind;
  final boolean ambiguous;
  final boolean ttl;
  final FlinkValueDecoder key;
  final FlinkValueDecoder namespace;
  final FlinkValueDecoder userKey;
  final FlinkValueDecoder value;
  private final JsonNode[] descriptors;
  /** Whether this is the plan itself, not one of its sections. */
  private final boolean whole;
  final boolean nativeFormat;
  /** Native only: the plan of each state's section, by state id. */
  final FlinkStatePlan[] sections;
  final Stamp stamp;

  /** The {@code _metadata} a plan was made from, as it was. */
  record Stamp(String path, long sizeBytes, long modifiedNs) implements Serializable {
  }

  FlinkStatePlan(JsonNode node) {
    this(node, true);
  }

  private FlinkStatePlan(JsonNode node, boolean whole) {
    if (!node.isObject()) {
      throw new IllegalStateException("flinkstate plan: field flink is not an object");
    }
    this.whole = whole;
    compressed = required(node, "compressed").asBoolean();
    prefixBytes = required(node, "prefixBytes").asInt();
    states = required(node, "states").asInt();
    stateId = required(node, "stateId").asInt();
    stateName = required(node, "stateName").asText();
    kind = switch (required(node, "kind").asText()) {
      case "value" -> VALUE;
      case "list" -> LIST;
      case "map" -> MAP;
      case "timer" -> TIMER;
      default -> throw new IllegalStateException("flinkstate plan: unknown state kind "
          + node.get("kind"));
    };
    ambiguous = required(node, "ambiguous").asBoolean();
    ttl = required(node, "ttl").asBoolean();
    key = FlinkValueDecoder.of(required(node, "key"));
    namespace = FlinkValueDecoder.of(required(node, "namespace"));
    userKey = kind == MAP ? FlinkValueDecoder.of(required(node, "userKey")) : null;
    value = kind == TIMER ? null : FlinkValueDecoder.of(required(node, "value"));
    descriptors = new JsonNode[] {node.get("key"), node.get("namespace"),
        kind == MAP ? node.get("userKey") : null,
        kind == TIMER ? null : node.get("value")};
    nativeFormat = !whole || required(node, "native").asBoolean();
    sections = whole && nativeFormat ? sections(required(node, "sections")) : null;
    JsonNode stamped = node.get("stamp");
    stamp = stamped == null || stamped.isNull() ? null : new Stamp(
        required(stamped, "path").asText(), required(stamped, "sizeBytes").asLong(),
        required(stamped, "modifiedNs").asLong());
    if (prefixBytes != 1 && prefixBytes != 2) {
      throw new IllegalStateException("flinkstate plan: prefixBytes " + prefixBytes);
    }
    if (stateId < 0 || stateId >= states) {
      throw new IllegalStateException("flinkstate plan: state id " + stateId + " of " + states);
    }
  }

  private FlinkStatePlan[] sections(JsonNode listed) {
    if (!listed.isArray() || listed.size() != states) {
      throw new IllegalStateException("flinkstate plan: sections are not a list of " + states
          + " states: " + listed);
    }
    FlinkStatePlan[] plans = new FlinkStatePlan[states];
    for (int id = 0; id < states; id++) {
      plans[id] = new FlinkStatePlan(listed.get(id), false);
      if (plans[id].stateId != id) {
        throw new IllegalStateException("flinkstate plan: section " + id + " has state id "
            + plans[id].stateId);
      }
    }
    return plans;
  }

  /**
   * The output columns after key and namespace: the values, then the TTL timestamp (a timer's
   * timestamp).
   */
  int valueColumns() {
    return (kind == MAP ? 2 : 1) + (ttl ? 1 : 0);
  }

  /**
   * What was read, for the plan contract's echo (ReadPlan.describe): the fields as parsed, the
   * type descriptors as given (each was built into a decoder, or refused).
   */
  ObjectNode describe(ObjectMapper mapper) {
    ObjectNode out = mapper.createObjectNode();
    out.put("compressed", compressed);
    out.put("prefixBytes", prefixBytes);
    out.put("states", states);
    out.put("stateId", stateId);
    out.put("stateName", stateName);
    out.put("kind", new String[] {"value", "list", "map", "timer"}[kind]);
    out.put("ambiguous", ambiguous);
    out.put("ttl", ttl);
    String[] names = {"key", "namespace", "userKey", "value"};
    for (int i = 0; i < names.length; i++) {
      if (descriptors[i] != null) {
        out.set(names[i], descriptors[i]);
      }
    }
    if (whole) {
      out.put("native", nativeFormat);
    }
    if (sections != null) {
      ArrayNode listed = out.putArray("sections");
      for (FlinkStatePlan section : sections) {
        listed.add(section.describe(mapper));
      }
    }
    if (stamp != null) {
      out.putObject("stamp").put("path", stamp.path()).put("sizeBytes", stamp.sizeBytes())
          .put("modifiedNs", stamp.modifiedNs());
    }
    return out;
  }

  private static JsonNode required(JsonNode node, String name) {
    JsonNode value = node.get(name);
    if (value == null || value.isNull()) {
      throw new IllegalStateException("flinkstate plan: field flink." + name + " is missing");
    }
    return value;
  }
}

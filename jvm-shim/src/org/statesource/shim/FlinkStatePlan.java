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
 * key-group prefix of every key), {@code stateId} (the state's id among the operator's states,
 * merged by name across its files), {@code stateName}, {@code kind} ({@code value},
 * {@code list}, {@code map}, or {@code timer}: the key is the sign-flipped timestamp, key and
 * namespace, the value empty), {@code ambiguous} (a varint length follows key and namespace),
 * {@code ttl} (values carry their last-access timestamp), and the type descriptors
 * ({@link FlinkValueDecoder}) {@code key}, {@code namespace}, {@code userKey} (map state only)
 * and {@code value}; {@code native} (the heap backend's own layout, whose values carry no
 * lengths) and, there, {@code sections}: every state's plan by merged state id (the same
 * fields but {@code native}, {@code sections}, {@code variants}, {@code fileVariants} and
 * {@code stamp}; the wanted state's own section is decoded by this plan itself), since a
 * native key group is walked through every section before the wanted one, in no fixed order;
 * {@code variants}, how the files number their states, each a list of the merged id of every
 * state of a file by the file's own id (a job that obtains states lazily writes files that
 * lack states or number them otherwise; each file is decoded with its own numbering, and one
 * without the wanted state is not in the plan), and {@code fileVariants}, per entry of the
 * plan's {@code files}, its variant; where the key groups are RocksDB databases' (neither
 * native nor compressed), {@code rocksdb}: each database a run of the plan's {@code files}, the
 * live tables of the state's column family, {@code {firstFile, fileCount, largestSeqnos,
 * source}} ({@link Database}), and each key group's entry names its database's first file
 * (its bytes are the framed pairs of its range of keys: {@link RocksKeyGroupSource}); and,
 * where the read options name the snapshot directly, {@code stamp}: its {@code _metadata}'s
 * real {@code path}, {@code sizeBytes} and {@code modifiedNs}, for {@link FlinkPlanCache}.
 */
final class FlinkStatePlan implements Serializable {
  private static final long serialVersionUID = 2L;

  static final int VALUE = 0;
  static final int LIST = 1;
  static final int MAP = 2;
  static final int TIMER = 3;

  final boolean compressed;
  final int prefixBytes;
  /** The state's id in the operator's merged numbering. */
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
  /** Native only: the plan of each state's section, by merged state id. */
  final FlinkStatePlan[] sections;
  /** The plan itself only: how the files number their states. */
  private final Variant[] variants;
  /** The plan itself only: each file's index into {@link #variants}. */
  private final int[] fileVariants;
  final Stamp stamp;
  /** The plan itself only, of RocksDB state: its databases; else null. */
  final Database[] databases;

  /** The {@code _metadata} a plan was made from, as it was. */
  record Stamp(String path, long sizeBytes, long modifiedNs) implements Serializable {
  }

  /**
   * How one file numbers its states: {@code ids}, the merged id of each of its states by its own
   * id (the id its key groups carry), and {@code stateId}, the wanted state's own id.
   */
  record Variant(int[] ids, int stateId) implements Serializable {
  }

  /**
   * One RocksDB database: the plan's files {@code firstFile} on, {@code fileCount} of them (the
   * live tables of the state's column family), the largest sequence number the MANIFEST records
   * of each (an ingested table's entries have it where the table records none), and what errors
   * call it.
   */
  record Database(int firstFile, int fileCount, long[] largestSeqnos, String source)
      implements Serializable {
  }

  /** The plan of a read of {@code files} data files. */
  FlinkStatePlan(JsonNode node, int files) {
    this(node, true, files);
  }

  private FlinkStatePlan(JsonNode node, boolean whole, int files) {
    if (!node.isObject()) {
      throw new IllegalStateException("flinkstate plan: field flink is not an object");
    }
    this.whole = whole;
    compressed = required(node, "compressed").asBoolean();
    prefixBytes = required(node, "prefixBytes").asInt();
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
    variants = whole ? variants(required(node, "variants")) : null;
    fileVariants = whole ? fileVariants(required(node, "fileVariants"), files) : null;
    JsonNode stamped = node.get("stamp");
    stamp = stamped == null || stamped.isNull() ? null : new Stamp(
        required(stamped, "path").asText(), required(stamped, "sizeBytes").asLong(),
        required(stamped, "modifiedNs").asLong());
    JsonNode rocksdb = whole ? node.get("rocksdb") : null;
    databases = rocksdb == null || rocksdb.isNull() ? null : databases(rocksdb, files);
    if (prefixBytes != 1 && prefixBytes != 2) {
      throw new IllegalStateException("flinkstate plan: prefixBytes " + prefixBytes);
    }
    if (stateId < 0) {
      throw new IllegalStateException("flinkstate plan: state id " + stateId);
    }
  }

  private FlinkStatePlan[] sections(JsonNode listed) {
    if (!listed.isArray() || listed.size() <= stateId) {
      throw new IllegalStateException("flinkstate plan: sections are not a list reaching"
          + " state id " + stateId + ": " + listed);
    }
    FlinkStatePlan[] plans = new FlinkStatePlan[listed.size()];
    for (int id = 0; id < plans.length; id++) {
      plans[id] = new FlinkStatePlan(listed.get(id), false, 0);
      if (plans[id].stateId != id) {
        throw new IllegalStateException("flinkstate plan: section " + id + " has state id "
            + plans[id].stateId);
      }
    }
    return plans;
  }

  /**
   * The variants, each checked: merged ids, none twice, each with a section where the layout is
   * native, and the wanted state's among them (a file without it has no place in the plan).
   */
  private Variant[] variants(JsonNode listed) {
    if (!listed.isArray()) {
      throw new IllegalStateException("flinkstate plan: variants are not a list: " + listed);
    }
    Variant[] found = new Variant[listed.size()];
    for (int v = 0; v < found.length; v++) {
      JsonNode variant = listed.get(v);
      String where = "flinkstate plan: variants[" + v + "] ";
      if (!variant.isArray()) {
        throw new IllegalStateException(where + "is not a list of state ids: " + variant);
      }
      int[] ids = new int[variant.size()];
      int own = -1;
      for (int i = 0; i < ids.length; i++) {
        ids[i] = variant.get(i).isInt() ? variant.get(i).intValue() : -1;
        if (ids[i] < 0 || sections != null && ids[i] >= sections.length) {
          throw new IllegalStateException(where + "gives own state " + i + " the state id "
              + variant.get(i) + ", which is not " + (sections == null ? "an id"
              : "the id of one of the " + sections.length + " sections"));
        }
        for (int j = 0; j < i; j++) {
          if (ids[j] == ids[i]) {
            throw new IllegalStateException(where + "lists state id " + ids[i] + " twice");
          }
        }
        if (ids[i] == stateId) {
          own = i;
        }
      }
      if (own < 0) {
        throw new IllegalStateException(where + "does not list state id " + stateId + " ('"
            + stateName + "'), the state read");
      }
      found[v] = new Variant(ids, own);
    }
    return found;
  }

  /** Each file's variant, one per file of the plan. */
  private int[] fileVariants(JsonNode listed, int files) {
    if (!listed.isArray() || listed.size() != files) {
      throw new IllegalStateException("flinkstate plan: fileVariants are not a list of one"
          + " variant per file (" + files + " files): " + listed);
    }
    int[] found = new int[files];
    for (int f = 0; f < files; f++) {
      JsonNode variant = listed.get(f);
      if (!variant.isInt() || variant.intValue() < 0 || variant.intValue() >= variants.length) {
        throw new IllegalStateException("flinkstate plan: fileVariants[" + f + "] = " + variant
            + " is not an index into variants (" + variants.length + " variants)");
      }
      found[f] = variant.intValue();
    }
    return found;
  }

  /**
   * The databases, each checked: runs of the files in order, none empty, none overlapping, one
   * variant for all of a database's files; only of a plan neither native nor compressed.
   */
  private Database[] databases(JsonNode listed, int files) {
    if (!listed.isArray() || nativeFormat || compressed) {
      throw new IllegalStateException("flinkstate plan: field flink.rocksdb is not a list of"
          + " databases of canonical, uncompressed key groups: " + listed);
    }
    Database[] found = new Database[listed.size()];
    int next = 0;
    for (int d = 0; d < found.length; d++) {
      JsonNode entry = listed.get(d);
      String where = "flinkstate plan: flink.rocksdb[" + d + "] ";
      if (!entry.isObject()) {
        throw new IllegalStateException(where + "is not an object: " + entry);
      }
      int first = required(entry, "firstFile").asInt(-1);
      int count = required(entry, "fileCount").asInt(-1);
      if (first < next || count < 1 || (long) first + count > files) {
        throw new IllegalStateException(where + "names files " + first + " on, " + count
            + " of them: not a run of the " + files + " files after those of the databases"
            + " before it");
      }
      for (int f = first; f < first + count; f++) {
        if (fileVariants[f] != fileVariants[first]) {
          throw new IllegalStateException(where + "has files of two variants");
        }
      }
      JsonNode seqnos = required(entry, "largestSeqnos");
      if (!seqnos.isArray() || seqnos.size() != count) {
        throw new IllegalStateException(where + "has not one largest sequence number per"
            + " file: " + seqnos);
      }
      long[] largest = new long[count];
      for (int f = 0; f < count; f++) {
        if (!seqnos.get(f).canConvertToLong() || seqnos.get(f).asLong() < 0) {
          throw new IllegalStateException(where + "has the largest sequence number "
              + seqnos.get(f));
        }
        largest[f] = seqnos.get(f).asLong();
      }
      found[d] = new Database(first, count, largest, required(entry, "source").asText());
      next = first + count;
    }
    return found;
  }

  /** The database whose first file is {@code file} (RocksDB state only), or null. */
  Database databaseAt(int file) {
    for (Database database : databases) {
      if (database.firstFile() == file) {
        return database;
      }
    }
    return null;
  }

  /** How file {@code file} of the plan numbers its states. */
  Variant variantOf(int file) {
    return variants[fileVariants[file]];
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
    if (whole) {
      ArrayNode listed = out.putArray("variants");
      for (Variant variant : variants) {
        ArrayNode ids = listed.addArray();
        for (int id : variant.ids()) {
          ids.add(id);
        }
      }
      ArrayNode files = out.putArray("fileVariants");
      for (int variant : fileVariants) {
        files.add(variant);
      }
    }
    if (databases != null) {
      ArrayNode listed = out.putArray("rocksdb");
      for (Database database : databases) {
        ObjectNode described = listed.addObject().put("firstFile", database.firstFile())
            .put("fileCount", database.fileCount());
        ArrayNode seqnos = described.putArray("largestSeqnos");
        for (long seqno : database.largestSeqnos()) {
          seqnos.add(seqno);
        }
        described.put("source", database.source());
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

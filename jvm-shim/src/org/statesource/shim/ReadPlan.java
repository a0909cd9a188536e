package org.statesource.shim;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.function.Predicate;

/**
 * The plan the Python source hands the JVM reader (statesource/spark/jvm/plan.py), as JSON: confined
 * data files, and per non-empty key group its file, byte range, batch count, rows and CRC-32, in
 * ascending key-group order. Small and serializable: it travels to every task.
 *
 * <p>Fields, version {@value #VERSION}:
 *
 * <ul>
 *   <li>{@code planVersion}: {@value #VERSION}; a plan without it, or of another version, is
 *       refused, since the Python package and this shim then disagree on what the fields mean.
 *   <li>{@code servable}: false when the JVM reader does not serve the request; then only
 *       {@code reason} follows, and the provider hands the request to the Python source.
 *   <li>{@code maxParallelism}, {@code parallelism}: the operator's; they map key groups to
 *       subtasks.
 *   <li>{@code exactKeys}: whether Spark's equality on the key is Java's (key filters prune key
 *       groups only then); {@code filterPushdown}: whether to prune at all.
 *   <li>{@code fileSchema}: the Arrow schema of the data files, IPC-serialized, base64.
 *   <li>{@code columns}: the output columns, in order.
 *   <li>{@code files}: the data files, each {@code {path, name, sizeBytes}} (a real local path,
 *       the name errors give, the size the metadata records).
 *   <li>{@code keyGroups}: one entry per non-empty key group, as parallel arrays of one length:
 *       {@code keyGroup} (ascending, below maxParallelism), {@code file} (an index into files),
 *       {@code batchCount}, {@code offset}, {@code length}, {@code rows}, {@code crc32}.
 *   <li>{@code slices}: {@code [first, last]} key-group ranges, one Spark partition each.
 *   <li>{@code flink}: present for a Flink snapshot's key groups, how to decode the state
 *       ({@link FlinkStatePlan}: also how each file numbers its states); then {@code files}
 *       are the snapshot's files holding the state, {@code length} is each key group's byte
 *       range in its file, and {@code fileSchema}, {@code batchCount}, {@code rows} and
 *       {@code crc32} carry nothing (rows are counted only by decoding); of RocksDB state
 *       ({@code flink.rocksdb}), {@code files} are the databases' live tables, each key group's
 *       {@code file} its database's first table, and {@code length} its share of the tables'
 *       bytes (a weight: what a key group holds is known only once read).
 * </ul>
 *
 * <p>Every field of a servable plan is required and type-checked; a plan that lacks one is refused
 * with a message naming it. A field Java does not know is ignored here, but {@link #describe}
 * echoes only what was read, and the contract test (tests/jvm/test_plan_contract.py) compares
 * that echo with what Python wrote.
 */
final class ReadPlan implements Serializable {
  private static final long serialVersionUID = 2L;

  /** The plan version this shim reads: PLAN_VERSION in statesource/spark/jvm/plan.py. */
  static final int VERSION = 5;

  private static final String[] GROUP_FIELDS =
      {"keyGroup", "file", "batchCount", "offset", "length", "rows", "crc32"};

  private final boolean servable;
  private final String reason;
  final int maxParallelism;
  final int parallelism;
  final boolean exactKeys;
  final boolean filterPushdown;
  final byte[] fileSchema;
  final String[] columns;
  final String[] filePaths;
  final String[] fileNames;
  final long[] fileSizes;
  final int[] keyGroup;
  final int[] file;
  final int[] batchCount;
  final long[] offset;
  final long[] length;
  final long[] rows;
  final long[] crc32;
  final int[][] slices;
  final FlinkStatePlan flink;

  private ReadPlan(JsonNode root) {
    if (!root.isObject()) {
      throw refused("the plan is not a JSON object");
    }
    checkVersion(root.get("planVersion"));
    servable = bool(root, "servable");
    if (!servable) {
      reason = text(root, "reason");
      maxParallelism = 0;
      parallelism = 0;
      exactKeys = false;
      filterPushdown = false;
      fileSchema = null;
      columns = new String[0];
      filePaths = new String[0];
      fileNames = new String[0];
      fileSizes = new long[0];
      keyGroup = file = batchCount = new int[0];
      offset = length = rows = crc32 = new long[0];
      slices = new int[0][];
      flink = null;
      return;
    }
    reason = null;
    maxParallelism = integer(root, "maxParallelism");
    parallelism = integer(root, "parallelism");
    exactKeys = bool(root, "exactKeys");
    filterPushdown = bool(root, "filterPushdown");
    try {
      fileSchema = Base64.getDecoder().decode(text(root, "fileSchema"));
    } catch (IllegalArgumentException error) {
      throw refused("field fileSchema is not base64: " + error.getMessage());
    }
    JsonNode names = array(root, "columns");
    columns = new String[names.size()];
    for (int i = 0; i < columns.length; i++) {
      columns[i] = text(names, i, "columns");
    }
    JsonNode files = array(root, "files");
    filePaths = new String[files.size()];
    fileNames = new String[files.size()];
    fileSizes = new long[files.size()];
    for (int i = 0; i < files.size(); i++) {
      JsonNode entry = files.get(i);
      String where = "files[" + i + "]";
      if (!entry.isObject()) {
        throw refused("field " + where + " is not an object");
      }
      filePaths[i] = text(entry, "path", where + ".");
      fileNames[i] = text(entry, "name", where + ".");
      fileSizes[i] = longInteger(entry, "sizeBytes", where + ".");
    }
    JsonNode groups = root.get("keyGroups");
    if (groups == null) {
      throw refused("field keyGroups is missing");
    }
    if (!groups.isObject()) {
      throw refused("field keyGroups is not an object");
    }
    JsonNode[] columnsOfGroups = new JsonNode[GROUP_FIELDS.length];
    for (int i = 0; i < GROUP_FIELDS.length; i++) {
      columnsOfGroups[i] = array(groups, GROUP_FIELDS[i], "keyGroups.");
      if (columnsOfGroups[i].size() != columnsOfGroups[0].size()) {
        throw refused("the arrays of keyGroups differ in length: keyGroups." + GROUP_FIELDS[0]
            + " has " + columnsOfGroups[0].size() + " entries, keyGroups." + GROUP_FIELDS[i]
            + " has " + columnsOfGroups[i].size());
      }
    }
    keyGroup = ints(columnsOfGroups[0], "keyGroups.keyGroup");
    file = ints(columnsOfGroups[1], "keyGroups.file");
    batchCount = ints(columnsOfGroups[2], "keyGroups.batchCount");
    offset = longs(columnsOfGroups[3], "keyGroups.offset");
    length = longs(columnsOfGroups[4], "keyGroups.length");
    rows = longs(columnsOfGroups[5], "keyGroups.rows");
    crc32 = longs(columnsOfGroups[6], "keyGroups.crc32");
    for (int i = 0; i < keyGroup.length; i++) {
      if (i > 0 && keyGroup[i] <= keyGroup[i - 1]) {  // slices are cut from this order
        throw refused("key groups out of order at entry " + i);
      }
      if (keyGroup[i] < 0 || keyGroup[i] >= maxParallelism) {
        throw refused("keyGroups.keyGroup[" + i + "] = " + keyGroup[i]
            + " is outside [0, maxParallelism " + maxParallelism + ")");
      }
      if (file[i] < 0 || file[i] >= filePaths.length) {
        throw refused("keyGroups.file[" + i + "] = " + file[i] + " is not an index into files ("
            + filePaths.length + " files)");
      }
    }
    JsonNode planned = array(root, "slices");
    slices = new int[planned.size()][];
    for (int i = 0; i < planned.size(); i++) {
      JsonNode slice = planned.get(i);
      if (!slice.isArray() || slice.size() != 2) {
        throw refused("field slices[" + i + "] is not a [first, last] pair");
      }
      slices[i] = ints(slice, "slices[" + i + "]");
    }
    JsonNode flinkPart = root.get("flink");
    flink = flinkPart == null || flinkPart.isNull() ? null
        : new FlinkStatePlan(flinkPart, filePaths.length);
    for (int i = 0; flink != null && flink.databases != null && i < file.length; i++) {
      if (flink.databaseAt(file[i]) == null) {
        throw refused("keyGroups.file[" + i + "] = " + file[i] + " is not the first file of a"
            + " database of flink.rocksdb");
      }
    }
  }

  static ReadPlan parse(String json) {
    JsonNode root;
    try {
      root = new ObjectMapper().readTree(json);
    } catch (IOException error) {
      throw new IllegalStateException("unreadable flinkstate plan from the Python source", error);
    }
    if (root == null) {
      throw refused("the plan is empty");
    }
    return new ReadPlan(root);
  }

  boolean servable() {
    return servable;
  }

  /** Why the JVM reader does not serve the request (null for a servable plan). */
  String reason() {
    return reason;
  }

  /** The subtask owning {@code group} under the plan's parallelism. */
  int operatorIndex(int group) {
    return FlinkKeyGroups.operatorIndex(group, maxParallelism, parallelism);
  }

  /**
   * Everything {@link #parse} read from {@code json}, written back as a plan's JSON: the plan Python
   * wrote, less any field Java ignores. The contract test compares the two.
   */
  static String describe(String json) {
    ReadPlan plan = parse(json);
    ObjectMapper mapper = new ObjectMapper();
    ObjectNode out = mapper.createObjectNode();
    out.put("planVersion", VERSION);
    out.put("servable", plan.servable);
    if (!plan.servable) {
      out.put("reason", plan.reason);
      return out.toString();
    }
    out.put("maxParallelism", plan.maxParallelism);
    out.put("parallelism", plan.parallelism);
    out.put("exactKeys", plan.exactKeys);
    out.put("filterPushdown", plan.filterPushdown);
    out.put("fileSchema", Base64.getEncoder().encodeToString(plan.fileSchema));
    ArrayNode columns = out.putArray("columns");
    for (String column : plan.columns) {
      columns.add(column);
    }
    ArrayNode files = out.putArray("files");
    for (int i = 0; i < plan.filePaths.length; i++) {
      files.addObject().put("path", plan.filePaths[i]).put("name", plan.fileNames[i])
          .put("sizeBytes", plan.fileSizes[i]);
    }
    ObjectNode groups = out.putObject("keyGroups");
    putInts(groups, "keyGroup", plan.keyGroup);
    putInts(groups, "file", plan.file);
    putInts(groups, "batchCount", plan.batchCount);
    putLongs(groups, "offset", plan.offset);
    putLongs(groups, "length", plan.length);
    putLongs(groups, "rows", plan.rows);
    putLongs(groups, "crc32", plan.crc32);
    ArrayNode slices = out.putArray("slices");
    for (int[] slice : plan.slices) {
      slices.addArray().add(slice[0]).add(slice[1]);
    }
    if (plan.flink != null) {
      out.set("flink", plan.flink.describe(mapper));
    }
    return out.toString();
  }

  /**
   * The contract test's way in, without Spark: one plan per line of standard input, one line of
   * output each, {@code {"plan": <describe>}} or {@code {"refused": <message>}} (UTF-8).
   */
  public static void main(String[] args) throws IOException {
    ObjectMapper mapper = new ObjectMapper();
    PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in,
        StandardCharsets.UTF_8));
    for (String line = in.readLine(); line != null; line = in.readLine()) {
      if (line.isBlank()) {
        continue;
      }
      ObjectNode answer = mapper.createObjectNode();
      try {
        answer.set("plan", mapper.readTree(describe(line)));
      } catch (IllegalStateException error) {
        answer.put("refused", error.getMessage());
      }
      out.println(answer);
    }
  }

  private static void checkVersion(JsonNode version) {
    String written;
    if (version == null) {
      written = "no plan version (a package older than versioned plans)";
    } else if (version.isInt() && version.asInt() == VERSION) {
      return;
    } else {
      written = "plan version " + version;
    }
    throw new IllegalStateException("flinkstate plan: the statesource Python package and its JVM"
        + " shim disagree on the plan version: the Python package wrote " + written
        + ", this shim reads plan version " + VERSION + ". The shim must be the one built from"
        + " the installed statesource: rebuild it with `statesource jvm build` and load it with"
        + " statesource.spark.session() (a shim jar added by hand, e.g. on spark.jars, from"
        + " another statesource version does not match)");
  }

  private static IllegalStateException refused(String what) {
    return new IllegalStateException("flinkstate plan from the Python source: " + what);
  }

  private static JsonNode field(JsonNode node, String name, String prefix) {
    JsonNode value = node.get(name);
    if (value == null || value.isNull()) {
      throw refused("field " + prefix + name + " is missing");
    }
    return value;
  }

  private static final Predicate<JsonNode> INT = v -> v.isIntegralNumber() && v.canConvertToInt();
  private static final Predicate<JsonNode> LONG =
      v -> v.isIntegralNumber() && v.canConvertToLong();

  /** {@code value}, the plan's field {@code where}, if it is {@code what}; else a refusal. */
  private static JsonNode checked(
      JsonNode value, String where, Predicate<JsonNode> ok, String what) {
    if (!ok.test(value)) {
      throw refused("field " + where + " is not " + what + ": " + value);
    }
    return value;
  }

  private static JsonNode typed(
      JsonNode node, String name, String prefix, Predicate<JsonNode> ok, String what) {
    return checked(field(node, name, prefix), prefix + name, ok, what);
  }

  private static boolean bool(JsonNode node, String name) {
    return typed(node, name, "", JsonNode::isBoolean, "a boolean").booleanValue();
  }

  private static int integer(JsonNode node, String name) {
    return typed(node, name, "", INT, "a 32-bit integer").intValue();
  }

  private static long longInteger(JsonNode node, String name, String prefix) {
    return typed(node, name, prefix, LONG, "a 64-bit integer").longValue();
  }

  private static String text(JsonNode node, String name) {
    return text(node, name, "");
  }

  private static String text(JsonNode node, String name, String prefix) {
    return typed(node, name, prefix, JsonNode::isTextual, "a string").textValue();
  }

  private static String text(JsonNode array, int index, String name) {
    return checked(array.get(index), name + "[" + index + "]", JsonNode::isTextual, "a string")
        .textValue();
  }

  private static JsonNode array(JsonNode node, String name) {
    return array(node, name, "");
  }

  private static JsonNode array(JsonNode node, String name, String prefix) {
    return typed(node, name, prefix, JsonNode::isArray, "an array");
  }

  private static int[] ints(JsonNode node, String name) {
    int[] values = new int[node.size()];
    for (int i = 0; i < values.length; i++) {
      values[i] = checked(node.get(i), name + "[" + i + "]", INT, "a 32-bit integer").intValue();
    }
    return values;
  }

  private static long[] longs(JsonNode node, String name) {
    long[] values = new long[node.size()];
    for (int i = 0; i < values.length; i++) {
      values[i] = checked(node.get(i), name + "[" + i + "]", LONG, "a 64-bit integer").longValue();
    }
    return values;
  }

  private static void putInts(ObjectNode node, String name, int[] values) {
    ArrayNode array = node.putArray(name);
    for (int value : values) {
      array.add(value);
    }
  }

  private static void putLongs(ObjectNode node, String name, long[] values) {
    ArrayNode array = node.putArray(name);
    for (long value : values) {
      array.add(value);
    }
  }
}

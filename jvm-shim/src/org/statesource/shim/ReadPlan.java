package org.statesource.shim;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.Serializable;
import java.util.Base64;

/**
 * The plan the Python source hands the JVM reader (statesource/spark/jvm/plan.py): confined data
 * files, and per non-empty key group its file, byte range, batch count, rows and CRC-32, in
 * ascending key-group order. Small and serializable: it travels to every task.
 */
final class ReadPlan implements Serializable {
  private static final long serialVersionUID = 1L;

  private final boolean servable;
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

  private ReadPlan(JsonNode root) {
    servable = root.path("servable").asBoolean(false);
    maxParallelism = root.path("maxParallelism").asInt();
    parallelism = root.path("parallelism").asInt();
    exactKeys = root.path("exactKeys").asBoolean(false);
    filterPushdown = root.path("filterPushdown").asBoolean(false);
    fileSchema = servable ? Base64.getDecoder().decode(root.path("fileSchema").asText()) : null;
    columns = strings(root.path("columns"));
    JsonNode files = root.path("files");
    filePaths = new String[files.size()];
    fileNames = new String[files.size()];
    fileSizes = new long[files.size()];
    for (int i = 0; i < files.size(); i++) {
      filePaths[i] = files.get(i).path("path").asText();
      fileNames[i] = files.get(i).path("name").asText();
      fileSizes[i] = files.get(i).path("sizeBytes").asLong();
    }
    JsonNode groups = root.path("keyGroups");
    keyGroup = ints(groups.path("keyGroup"));
    file = ints(groups.path("file"));
    batchCount = ints(groups.path("batchCount"));
    offset = longs(groups.path("offset"));
    length = longs(groups.path("length"));
    rows = longs(groups.path("rows"));
    crc32 = longs(groups.path("crc32"));
    for (int i = 1; i < keyGroup.length; i++) {
      if (keyGroup[i] <= keyGroup[i - 1]) {  // slices are cut from this order
        throw new IllegalStateException("flinkstate plan: key groups out of order at entry " + i);
      }
    }
    JsonNode planned = root.path("slices");
    slices = new int[planned.size()][];
    for (int i = 0; i < planned.size(); i++) {
      slices[i] = new int[] {planned.get(i).get(0).asInt(), planned.get(i).get(1).asInt()};
    }
  }

  static ReadPlan parse(String json) {
    try {
      return new ReadPlan(new ObjectMapper().readTree(json));
    } catch (IOException error) {
      throw new IllegalStateException("unreadable flinkstate plan from the Python source", error);
    }
  }

  boolean servable() {
    return servable;
  }

  /** The subtask owning {@code group} under the plan's parallelism. */
  int operatorIndex(int group) {
    return FlinkKeyGroups.operatorIndex(group, maxParallelism, parallelism);
  }

  private static String[] strings(JsonNode node) {
    String[] values = new String[node.size()];
    for (int i = 0; i < values.length; i++) {
      values[i] = node.get(i).asText();
    }
    return values;
  }

  private static int[] ints(JsonNode node) {
    int[] values = new int[node.size()];
    for (int i = 0; i < values.length; i++) {
      values[i] = node.get(i).asInt();
    }
    return values;
  }

  private static long[] longs(JsonNode node) {
    long[] values = new long[node.size()];
    for (int i = 0; i < values.length; i++) {
      values[i] = node.get(i).asLong();
    }
    return values;
  }
}

package org.statesource.shim;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

/**
 * Scans a column family's SST files with the shim's RocksColumnFamily and echoes what it
 * found, for tests/flink/rocksdb/test_sst_in_java.py (no Spark session).
 *
 * <p>Each stdin line is {"paths": [...], "names": [...], "sizes": [...], "seqnos": [...] (optional,
 * -1: unknown), "ranges": [[start hex, stop hex or null]...], "count": bool (optional)}; the
 * ranges are scanned in turn by one RocksColumnFamily, and the answer is {"scans": [[[key hex,
 * value hex]...]...], "blocks": [data blocks read...]} (with "count": {"counts": [n...], "nanos":
 * [t...]}), or {"error": message}.
 * A line {"xxh3": [hex...]} is answered {"hashes": [unsigned decimal...]}.
 */
public final class SstEcho {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final HexFormat HEX = HexFormat.of();

  public static void main(String[] args) throws Exception {
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in,
        StandardCharsets.UTF_8));
    PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    for (String line = in.readLine(); line != null; line = in.readLine()) {
      out.println(JSON.writeValueAsString(answer(JSON.readTree(line))));
      out.flush();
    }
  }

  private static ObjectNode answer(JsonNode request) throws Exception {
    ObjectNode answer = JSON.createObjectNode();
    if (request.has("xxh3")) {
      ArrayNode hashes = answer.putArray("hashes");
      for (JsonNode data : request.get("xxh3")) {
        byte[] bytes = HEX.parseHex(data.textValue());
        hashes.add(Long.toUnsignedString(Xxh3.hash64(bytes, 0, bytes.length)));
      }
      return answer;
    }
    int n = request.get("paths").size();
    String[] paths = new String[n];
    String[] names = new String[n];
    long[] sizes = new long[n];
    long[] seqnos = new long[n];
    for (int i = 0; i < n; i++) {
      paths[i] = request.get("paths").get(i).textValue();
      names[i] = request.get("names").get(i).textValue();
      sizes[i] = request.get("sizes").get(i).asLong();
      seqnos[i] = request.has("seqnos") ? request.get("seqnos").get(i).asLong() : -1;
    }
    boolean count = request.path("count").asBoolean();
    ArrayNode scans = JSON.createArrayNode();
    ArrayNode counts = answer.putArray("counts");
    ArrayNode nanos = answer.putArray("nanos");
    ArrayNode blocks = answer.putArray("blocks");
    try (RocksColumnFamily family = new RocksColumnFamily(paths, names, sizes, seqnos)) {
      for (JsonNode range : request.get("ranges")) {
        byte[] start = HEX.parseHex(range.get(0).textValue());
        byte[] stop = range.get(1).isNull() ? null : HEX.parseHex(range.get(1).textValue());
        ArrayNode entries = scans.addArray();
        long[] seen = new long[1];
        long read = family.dataBlocksRead();
        long began = System.nanoTime();
        family.scan(start, stop, (key, keyOffset, keyLength, value, valueOffset, valueLength) -> {
          seen[0]++;
          if (!count) {
            entries.addArray().add(HEX.formatHex(key, keyOffset, keyOffset + keyLength))
                .add(HEX.formatHex(value, valueOffset, valueOffset + valueLength));
          }
        });
        nanos.add(System.nanoTime() - began);
        counts.add(seen[0]);
        blocks.add(family.dataBlocksRead() - read);
      }
    } catch (IllegalStateException e) {
      ObjectNode error = JSON.createObjectNode();
      error.put("error", e.getMessage());
      return error;
    } catch (RuntimeException e) {
      ObjectNode error = JSON.createObjectNode();
      error.put("error", "unexpected " + e);
      return error;
    }
    if (!count) {
      answer.set("scans", scans);
    }
    return answer;
  }
}

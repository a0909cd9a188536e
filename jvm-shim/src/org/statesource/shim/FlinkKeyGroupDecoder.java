package org.statesource.shim;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;

/**
 * One keyed state's rows of one key group, canonical or native ({@link #decodeNative}),
 * appended to Spark column vectors.
 *
 * <p>Each key group is decoded with the numbering of the file it is in (its
 * {@link FlinkStatePlan.Variant}): state ids are the file's own.
 *
 * <p>A canonical key group is a state id (u16), then that state's pairs (int length + key, int
 * length + value; the key starts with the key-group prefix, its first byte flagged 0x80 on the
 * state's last pair), then the next state id, ..., then 0xFFFF. The walk checks what
 * statesource's per-value decoder checks (statesource/flink/layouts/keyed.py), in the same order,
 * and stops once the wanted state's section has ended, as it does. Rows come out as it gives them:
 * a value state's one per pair, a list state's one per element, a map state's one per user key.
 */
final class FlinkKeyGroupDecoder {
  private static final int END_OF_KEY_GROUP = 0xFFFF;
  private static final int META_DATA_FOLLOWS = 0x80;
  private static final byte LIST_DELIMITER = ',';

  /** Where a section passed over goes: nowhere. */
  private static final WritableColumnVector[] PASSED = new WritableColumnVector[5];

  private final FlinkStatePlan plan;
  private final Set<ByteBuffer> entries = new HashSet<>();
  private final Set<ByteBuffer> userKeys = new HashSet<>();
  /** Where the last key read ended (with its length, where one follows it). */
  private int keyEnd;
  /** Where the parts of the last pair checked lie, and whether it is its state's last. */
  private int pairKey;
  private int pairKeyEnd;
  private int pairValue;
  private boolean lastOfState;

  FlinkKeyGroupDecoder(FlinkStatePlan plan) {
    this.plan = plan;
  }

  /**
   * Fills the empty {@code out} (key, namespace, the value columns, the TTL timestamp; null:
   * not wanted) with the state's rows of the key group in {@code data[0, size)}; how many.
   */
  int decode(byte[] data, int size, int keyGroup, FlinkStatePlan.Variant variant,
      WritableColumnVector[] out) {
    FlinkCursor frame = new FlinkCursor(data).at(0, size);
    int stateId = frame.i16() & 0xFFFF;
    while (stateId != END_OF_KEY_GROUP) {
      if (stateId >= variant.ids().length) {
        throw new FlinkDataException("unknown state id " + stateId, frame.pos - 2);
      }
      if (stateId == variant.stateId()) {
        return wantedSection(data, size, keyGroup, frame.pos, out);
      }
      int pos = frame.pos;
      do {
        pos = pairAt(data, pos, size, keyGroup);
      } while (!lastOfState);
      frame.pos = pos;
      stateId = frame.i16() & 0xFFFF;
    }
    if (frame.pos != size) {
      throw new FlinkDataException("bytes after the end of the key group", frame.pos);
    }
    return 0;
  }

  private int wantedSection(byte[] data, int size, int keyGroup, int start,
      WritableColumnVector[] out) {
    FlinkCursor keys = new FlinkCursor(data);
    FlinkCursor values = new FlinkCursor(data);
    entries.clear();
    ByteBuffer lastEntry = null;
    int rows = 0;
    int pos = start;
    do {
      pos = pairAt(data, pos, size, keyGroup);
      keys.at(pairKey + plan.prefixBytes, pairKeyEnd);
      values.at(pairValue, pos);
      if (plan.kind == FlinkStatePlan.MAP) {
        lastEntry = mapPair(keys, values, out, lastEntry);
        if (lastEntry == null) {
          for (WritableColumnVector column : out) {
            if (column != null) {
              column.reset();
            }
          }
          return gathered(data, size, keyGroup, start, out);
        }
        rows++;
      } else if (plan.kind == FlinkStatePlan.TIMER) {
        timerPair(keys, values, out);
        rows++;
      } else if (plan.kind == FlinkStatePlan.LIST) {
        rows += listPair(keys, values, out);
      } else {
        valuePair(keys, values, out);
        rows++;
      }
    } while (!lastOfState);
    return rows;
  }

  /**
   * Fills the empty {@code out} with the state's rows of the native key group whose sections
   * are {@code data[start, size)}; how many. Each section is a state id, an entry count and
   * the entries, (namespace, key, value) with the state's own serializers (a timer: the
   * timestamp, key and namespace); nothing delimits a value, so every section before the
   * wanted one is decoded to be passed, checked as the per-value decoder checks it.
   */
  int decodeNative(byte[] data, int start, int size, FlinkStatePlan.Variant variant,
      WritableColumnVector[] out) {
    FlinkCursor in = new FlinkCursor(data).at(start, size);
    FlinkCursor again = new FlinkCursor(data).at(start, size);
    while (!in.atEnd()) {
      int at = in.pos;
      int stateId = in.i16() & 0xFFFF;
      if (stateId >= variant.ids().length) {
        throw new FlinkDataException("unknown state id " + stateId, at);
      }
      boolean wanted = stateId == variant.stateId();
      FlinkStatePlan section = wanted ? plan : plan.sections[variant.ids()[stateId]];
      WritableColumnVector[] into = wanted ? out : PASSED;
      int entries = count(in, "entry count");
      int rows = 0;
      in.passing = !wanted;
      for (int i = 0; i < entries; i++) {
        rows += nativeEntry(section, in, again, into);
      }
      if (wanted) {
        return rows;
      }
    }
    return 0;
  }

  /** One native entry's rows: a list's one per element, a map's one per user key. */
  private int nativeEntry(FlinkStatePlan section, FlinkCursor in, FlinkCursor again,
      WritableColumnVector[] out) {
    if (section.kind == FlinkStatePlan.TIMER) {
      timer(section, in, out);
      return 1;
    }
    int entry = in.pos;
    if (section.kind == FlinkStatePlan.VALUE) {
      section.namespace.read(in, out[1]);
      section.key.read(in, out[0]);
      ttlAndValue(section, in, out, 2);
      return 1;
    }
    boolean passing = in.passing;
    in.passing = true;  // read again, and checked, for each element's row
    section.namespace.read(in, null);
    section.key.read(in, null);
    in.passing = passing;
    boolean list = section.kind == FlinkStatePlan.LIST;
    int items = count(in, list ? "list length" : "map size");
    userKeys.clear();
    for (int i = 0; i < items; i++) {
      if (i == 0 || out[0] != null || out[1] != null) {
        again.pos = entry;
        again.passing = passing;
        section.namespace.read(again, out[1]);
        section.key.read(again, out[0]);
      }
      if (list) {
        ttlAndValue(section, in, out, 2);
      } else {
        nativeMapPair(section, in, out);
      }
    }
    return items;
  }

  /** A native map's user key (refused where it repeats), null flag and value. */
  private void nativeMapPair(FlinkStatePlan section, FlinkCursor in,
      WritableColumnVector[] out) {
    int userKey = in.pos;
    in.loose = false;
    section.userKey.read(in, out[2]);
    exact(in, userKey, section.stateName);
    if (!userKeys.add(ByteBuffer.wrap(in.data, userKey, in.pos - userKey).slice())) {
      throw new FlinkDataException("state '" + section.stateName + "': duplicate user key in"
          + " one map", userKey);
    }
    mapValue(section, in, out);
  }

  /**
   * A map value after its null flag (columns 3 and 4 of {@code out}: the value and its TTL
   * timestamp); whether it was null (in a canonical pair, Flink's null follows, unread).
   */
  private static boolean mapValue(FlinkStatePlan section, FlinkCursor in,
      WritableColumnVector[] out) {
    int at = in.pos;
    if (in.bool()) {
      if (section.ttl) {
        throw new FlinkDataException("state '" + section.stateName + "': a null value in a"
            + " map with TTL, where Flink wraps every value", at);
      }
      if (out[3] != null) {
        FlinkValueDecoder.appendNull(out[3]);
      }
      return true;
    }
    ttlAndValue(section, in, out, 3);
    return false;
  }

  /**
   * Map keys are told apart by their bytes, as the per-value decoder tells them apart by their
   * values: refused where the bytes just read could encode a value another way.
   */
  private static void exact(FlinkCursor in, int at, String state) {
    if (in.loose) {
      throw new FlinkDataException("state '" + state + "': a map key encoded as Flink"
          + " never encodes it (a varint whose last group is zero, a flag byte other than 0 and"
          + " 1), which the JVM reader cannot compare: read this state with"
          + " format('flinkstate-python')", at);
    }
  }

  /** A non-negative int count, at most what is left (each item at least a byte). */
  private static int count(FlinkCursor in, String what) {
    int at = in.pos;
    int value = in.i32();
    if (value < 0 || value > in.limit - in.pos) {
      throw new FlinkDataException("invalid " + what + " " + value, at);
    }
    return value;
  }

  /**
   * A map state whose pairs of one entry lie apart (no Flink writes them so, yet its restore
   * would put them in one map): its rows entry by entry, in the order the entries first occur
   * and each entry's pairs in file order, as the per-value decoder gathers them.
   */
  private int gathered(byte[] data, int size, int keyGroup, int start,
      WritableColumnVector[] out) {
    FlinkCursor keys = new FlinkCursor(data);
    Map<ByteBuffer, List<Integer>> pairsOfEntry = new LinkedHashMap<>();
    int pos = start;
    do {
      int pair = pos;
      pos = pairAt(data, pos, size, keyGroup);
      keys.at(pairKey + plan.prefixBytes, pairKeyEnd);
      int entryStart = keys.pos;
      keys.loose = false;
      keyAndNamespace(keys, null, null);
      exact(keys, entryStart, plan.stateName);
      int entryEnd = plan.namespace.isVoid() ? keyEnd : keys.pos;
      pairsOfEntry.computeIfAbsent(ByteBuffer.wrap(data, entryStart, entryEnd - entryStart)
          .slice(), entry -> new ArrayList<>()).add(pair);
    } while (!lastOfState);
    FlinkCursor values = new FlinkCursor(data);
    entries.clear();
    ByteBuffer lastEntry = null;
    int rows = 0;
    for (List<Integer> pairs : pairsOfEntry.values()) {
      for (int pair : pairs) {
        int end = pairAt(data, pair, size, keyGroup);
        keys.at(pairKey + plan.prefixBytes, pairKeyEnd);
        values.at(pairValue, end);
        lastEntry = mapPair(keys, values, out, lastEntry);
        rows++;
      }
    }
    return rows;
  }

  /**
   * Checks the pair at {@code pos} (lengths inside the key group, the key's key-group prefix)
   * and notes where its parts lie; where it ends.
   */
  private int pairAt(byte[] data, int pos, int size, int keyGroup) {
    long start = pos + 4L;
    if (start > size) {
      throw new FlinkDataException("truncated: no room for a key length", pos);
    }
    int keyLength = FlinkCursor.intAt(data, pos);
    long keyEndsAt = start + keyLength;
    if (keyLength < plan.prefixBytes || keyEndsAt + 4 > size) {
      throw new FlinkDataException("invalid key length " + keyLength, pos);
    }
    int valueLength = FlinkCursor.intAt(data, (int) keyEndsAt);
    long end = keyEndsAt + 4 + valueLength;
    if (valueLength < 0 || end > size) {
      throw new FlinkDataException("invalid value length " + valueLength, (int) keyEndsAt);
    }
    int first = data[(int) start] & 0xFF;
    int found = first & 0x7F;
    if (plan.prefixBytes == 2) {
      found = (found << 8) | (data[(int) start + 1] & 0xFF);
    }
    if (found != keyGroup) {
      throw new FlinkDataException("entry of key group " + found + " in key group "
          + keyGroup, (int) start);
    }
    pairKey = (int) start;
    pairKeyEnd = (int) keyEndsAt;
    pairValue = pairKeyEnd + 4;
    lastOfState = (first & META_DATA_FOLLOWS) != 0;
    return (int) end;
  }

  /** Key and namespace (each followed by its length where both vary in size). */
  private void keyAndNamespace(FlinkCursor keys, WritableColumnVector key,
      WritableColumnVector namespace) {
    int start = keys.pos;
    plan.key.read(keys, key);
    if (plan.ambiguous) {
      lengthAfter(keys, keys.pos - start, "key");
    }
    keyEnd = keys.pos;
    int namespaceStart = keys.pos;
    plan.namespace.read(keys, namespace);
    if (plan.ambiguous) {
      lengthAfter(keys, keys.pos - namespaceStart, "namespace");
    }
  }

  /**
   * The length Flink writes after a part, low byte first while any is left: other bytes would
   * make equal entries differ in bytes, which is how map entries are told apart here.
   */
  private static void lengthAfter(FlinkCursor keys, int length, String part) {
    int at = keys.pos;
    int left = length;
    do {
      if (keys.u8() != (left & 0xFF)) {
        throw new FlinkDataException("the length after the " + part + " is not its " + length
            + " bytes", at);
      }
      left >>>= 8;
    } while (left != 0);
  }

  private void valuePair(FlinkCursor keys, FlinkCursor values, WritableColumnVector[] out) {
    int keyStart = keys.pos;
    keyAndNamespace(keys, out[0], out[1]);
    ttlAndValue(plan, values, out, 2);
    checkEnds(keys, values, keyStart);
  }

  private void timerPair(FlinkCursor keys, FlinkCursor values, WritableColumnVector[] out) {
    int keyStart = keys.pos;
    timer(plan, keys, out);
    checkEnds(keys, values, keyStart);
  }

  /** A timer: the timestamp (sign bit flipped, so that bytes sort as numbers), key, namespace. */
  private static void timer(FlinkStatePlan section, FlinkCursor in,
      WritableColumnVector[] out) {
    long timestamp = in.i64() ^ Long.MIN_VALUE;
    section.key.read(in, out[0]);
    section.namespace.read(in, out[1]);
    if (out[2] != null) {
      out[2].appendLong(timestamp);
    }
  }

  private int listPair(FlinkCursor keys, FlinkCursor values, WritableColumnVector[] out) {
    int keyStart = keys.pos;
    int elements = 0;
    while (true) {
      keys.pos = keyStart;
      keyAndNamespace(keys, out[0], out[1]);
      ttlAndValue(plan, values, out, 2);
      elements++;
      if (values.atEnd()) {
        break;
      }
      if (values.data[values.pos] != LIST_DELIMITER) {
        throw new FlinkDataException("state '" + plan.stateName + "': missing list delimiter",
            values.pos);
      }
      values.pos++;
    }
    checkEnds(keys, values, keyStart);
    return elements;
  }

  /**
   * One user key and its value (a null flag first; after a null, Flink still writes the null,
   * which is skipped); the pair's entry, or null where that entry's pairs lie apart (nothing
   * appended). A user key repeated within an entry is refused, as the per-value decoder does.
   */
  private ByteBuffer mapPair(FlinkCursor keys, FlinkCursor values, WritableColumnVector[] out,
      ByteBuffer lastEntry) {
    int keyStart = keys.pos;
    keys.loose = false;
    keyAndNamespace(keys, out[0], out[1]);
    int entryEnd = plan.namespace.isVoid() ? keyEnd : keys.pos;
    ByteBuffer entry = ByteBuffer.wrap(keys.data, keyStart, entryEnd - keyStart).slice();
    if (!entry.equals(lastEntry)) {
      if (!entries.add(entry)) {
        return null;
      }
      userKeys.clear();
    }
    int userKeyStart = keys.pos;
    plan.userKey.read(keys, out[2]);
    exact(keys, keyStart, plan.stateName);
    if (!userKeys.add(ByteBuffer.wrap(keys.data, userKeyStart, keys.pos - userKeyStart)
        .slice())) {
      throw new FlinkDataException("state '" + plan.stateName + "': duplicate user key in one"
          + " map entry", userKeyStart);
    }
    if (mapValue(plan, values, out)) {
      values.pos = values.limit;
    }
    checkEnds(keys, values, keyStart);
    return entry;
  }

  /**
   * A value into {@code out[column]}, after its last-access timestamp (into the next column,
   * which only a state with TTL has) where the state has TTL.
   */
  private static void ttlAndValue(FlinkStatePlan section, FlinkCursor in,
      WritableColumnVector[] out, int column) {
    if (section.ttl) {
      ttl(in, out[column + 1]);
    }
    section.value.read(in, out[column]);
  }

  private static void ttl(FlinkCursor values, WritableColumnVector out) {
    int at = values.pos;
    long millis = values.i64();
    if (out != null) {
      try {
        out.appendLong(Math.multiplyExact(millis, 1000L));
      } catch (ArithmeticException overflow) {
        throw new FlinkDataException("TTL timestamp " + millis + " ms is beyond Spark's"
            + " timestamps", at);
      }
    }
  }

  private void checkEnds(FlinkCursor keys, FlinkCursor values, int keyStart) {
    if (!keys.atEnd() || !values.atEnd()) {
      throw new FlinkDataException("state '" + plan.stateName + "': trailing bytes in an entry",
          keyStart);
    }
  }
}

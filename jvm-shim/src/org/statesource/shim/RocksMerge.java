package org.statesource.shim;

import java.util.Arrays;

/**
 * Resolves the versions of each key, newest first, into its value as RocksDB reads it with
 * Flink's merge operator (statesource/flink/rocksdb/merge.py's resolved): merge operands are
 * collected until a full value, a deletion or single deletion, a range deletion covering the
 * key at that age, or the oldest version; the value is then the operands, oldest first,
 * appended to that full value (if any), each after ','; a deletion with no operands above it
 * leaves the key absent. Keys, values and operands are copied, since a cursor's bytes change
 * as it moves.
 */
final class RocksMerge {
  static final byte DELIMITER = ',';

  private final RocksTombstones tombstones;
  private final String names;
  private RocksEntrySink sink;
  private byte[] current = new byte[64];
  private int currentLength = -1;
  private long previousSequence;
  private boolean done;
  private long deletedBelow;
  private byte[] base = new byte[256];
  private int baseLength = -1;
  private byte[] operands = new byte[256];
  private int[] operandEnds = new int[16];
  private int operandCount;
  private byte[] out = new byte[256];

  RocksMerge(RocksTombstones tombstones, String names) {
    this.tombstones = tombstones;
    this.names = names;
  }

  void begin(RocksEntrySink sink) {
    this.sink = sink;
    currentLength = -1;
    baseLength = -1;
    operandCount = 0;
  }

  /** The next version, in (user key ascending, sequence descending) order. */
  void accept(byte[] key, int keyLength, long sequence, int kind, byte[] value, int valueOffset,
      int valueLength) {
    if (keyLength != currentLength
        || !Arrays.equals(key, 0, keyLength, current, 0, currentLength)) {
      emit();
      if (current.length < keyLength) {
        current = new byte[Math.max(keyLength, current.length * 2)];
      }
      System.arraycopy(key, 0, current, 0, keyLength);
      currentLength = keyLength;
      done = false;
      deletedBelow = tombstones.isEmpty() ? 0 : tombstones.covering(key, keyLength);
    } else if (sequence == previousSequence) {
      throw RocksCoding.corrupt(names, 0, "two versions of key " + RocksCoding.shown(key, 0,
          keyLength) + " with sequence number " + sequence);
    }
    previousSequence = sequence;
    if (done) {
      return;
    }
    if (sequence < deletedBelow) {
      done = true;
    } else if (kind == RocksCursor.MERGE) {
      addOperand(value, valueOffset, valueLength);
    } else {
      done = true;
      if (kind == RocksCursor.VALUE) {
        if (base.length < valueLength) {
          base = new byte[Math.max(valueLength, base.length * 2)];
        }
        System.arraycopy(value, valueOffset, base, 0, valueLength);
        baseLength = valueLength;
      }
    }
  }

  /** Emits the last key. */
  void finish() {
    emit();
    currentLength = -1;
  }

  private void addOperand(byte[] value, int offset, int length) {
    int at = operandCount == 0 ? 0 : operandEnds[operandCount - 1];
    if (operands.length - at < length) {
      operands = Arrays.copyOf(operands, (int) Math.min(Integer.MAX_VALUE - 16,
          Math.max((long) at + length, operands.length * 2L)));
    }
    System.arraycopy(value, offset, operands, at, length);
    if (operandCount == operandEnds.length) {
      operandEnds = Arrays.copyOf(operandEnds, operandCount * 2);
    }
    operandEnds[operandCount++] = at + length;
  }

  private void emit() {
    if (currentLength < 0) {
      return;
    }
    if (operandCount == 0) {
      if (baseLength >= 0) {
        sink.accept(current, 0, currentLength, base, 0, baseLength);
      }
      baseLength = -1;
      return;
    }
    long total = (baseLength >= 0 ? baseLength + 1L : 0L) + operandEnds[operandCount - 1]
        + operandCount - 1;
    if (total > Integer.MAX_VALUE - 16) {
      throw RocksCoding.corrupt(names, 0, "the value of key " + RocksCoding.shown(current, 0,
          currentLength) + " is larger than a Java array");
    }
    if (out.length < total) {
      out = new byte[(int) Math.max(total, Math.min(Integer.MAX_VALUE - 16, out.length * 2L))];
    }
    int at = 0;
    if (baseLength >= 0) {
      System.arraycopy(base, 0, out, 0, baseLength);
      at = baseLength;
      out[at++] = DELIMITER;
    }
    for (int i = operandCount - 1; i >= 0; i--) {
      int from = i == 0 ? 0 : operandEnds[i - 1];
      System.arraycopy(operands, from, out, at, operandEnds[i] - from);
      at += operandEnds[i] - from;
      if (i > 0) {
        out[at++] = DELIMITER;
      }
    }
    operandCount = 0;
    baseLength = -1;
    sink.accept(current, 0, currentLength, out, 0, at);
  }
}

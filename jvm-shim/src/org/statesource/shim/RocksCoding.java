package org.statesource.shim;

import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

/**
 * The errors of the SST reader, named as the Python reader names them (the shim's
 * convention: the statesource error's name, the file, what, the byte offset), and RocksDB's
 * little-endian integers. Every error is made here so that every refusal has one shape.
 */
final class RocksCoding {
  static final int INTERNAL_BYTES = 8;

  private RocksCoding() {
  }

  /** A fault in a file: the file, what is wrong, the byte offset. */
  static IllegalStateException corrupt(String name, long offset, String what) {
    return new IllegalStateException("CorruptCheckpointError: " + name + ": " + what
        + " at byte offset " + offset);
  }

  /** What RocksDB can write but no Flink state uses. */
  static IllegalStateException incompatible(String name, String what) {
    return new IllegalStateException("IncompatibleCheckpointError: " + name + ": " + what
        + "; statesource reads the RocksDB files Flink writes");
  }

  static int u32(byte[] data, int at) {
    return (data[at] & 0xFF) | (data[at + 1] & 0xFF) << 8 | (data[at + 2] & 0xFF) << 16
        | (data[at + 3] & 0xFF) << 24;
  }

  static long u64(byte[] data, int at) {
    return (u32(data, at) & 0xFFFFFFFFL) | (long) u32(data, at + 4) << 32;
  }

  /** Bytes for an error message: printable ASCII as is, the rest as hex. */
  static String shown(byte[] data, int offset, int length) {
    boolean printable = true;
    for (int i = offset; i < offset + length && printable; i++) {
      printable = data[i] >= 0x20 && data[i] < 0x7F;
    }
    return printable ? "'" + new String(data, offset, length, StandardCharsets.US_ASCII) + "'"
        : "0x" + HexFormat.of().formatHex(data, offset, offset + length);
  }
}

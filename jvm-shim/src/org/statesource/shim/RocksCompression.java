package org.statesource.shim;

import com.github.luben.zstd.Zstd;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.util.Arrays;
import java.util.zip.DataFormatException;
import java.util.zip.Inflater;
import net.jpountz.lz4.LZ4Factory;
import net.jpountz.lz4.LZ4SafeDecompressor;
import org.apache.commons.compress.compressors.bzip2.BZip2CompressorInputStream;
import org.xerial.snappy.Snappy;

/**
 * Decompressing one block, whatever its trailer's type byte says
 * (statesource/flink/rocksdb/compression.py): Snappy (1, its own length preamble), and, after
 * a varint32 uncompressed size, zlib (2, raw deflate as RocksDB writes it), bzip2 (3), LZ4 and
 * LZ4HC (4, 5), ZSTD (7 and 0x40). The size a block claims is checked against a ceiling and
 * against the most its codec can expand the bytes there before anything is allocated (bzip2,
 * which has no useful bound, grows its buffer as it decompresses), and the codec must produce
 * exactly that many bytes.
 */
final class RocksCompression {
  static final int NONE = 0;
  static final int SNAPPY = 1;
  static final int ZLIB = 2;
  static final int BZIP2 = 3;
  static final int LZ4 = 4;
  static final int LZ4HC = 5;
  static final int XPRESS = 6;
  static final int ZSTD = 7;
  static final int ZSTD_NOT_FINAL = 0x40;
  static final int MAX_BLOCK_BYTES = 1 << 30;
  private static final LZ4SafeDecompressor LZ4_DECOMPRESSOR =
      LZ4Factory.fastestInstance().safeDecompressor();

  /** Decompressed blocks, grown to the largest one (nothing for a table stored uncompressed). */
  private byte[] out = new byte[0];

  /**
   * The contents of the block stored as {@code place}'s bytes with compression {@code kind},
   * into {@code place} itself (its bytes then this decompressor's buffer, valid until its next
   * use); {@code windowBits}: the table's zlib setting.
   */
  void decompress(int kind, RocksPlace place, String what, int windowBits) {
    if (kind == NONE) {
      return;
    }
    String name = name(kind);
    if (name == null || kind == XPRESS || kind >= 0x80) {
      if (name == null) {
        throw place.error(place.length(), "unknown compression type 0x"
            + Integer.toHexString(kind));
      }
      throw RocksCoding.incompatible(place.name, "a block at byte offset " + place.offset
          + " is compressed with " + name + ", which statesource cannot decompress (it reads"
          + " Snappy, zlib, bzip2, LZ4 and ZSTD)");
    }
    int expected = place.varint32(place.end, kind == SNAPPY ? "Snappy length preamble"
        : "uncompressed block size");
    int payload = kind == SNAPPY ? place.start : place.pos;
    int stored = place.end - payload;
    long factor = kind == SNAPPY ? 24 : kind == LZ4 || kind == LZ4HC ? 256 : kind == ZLIB ? 1032
        : kind == BZIP2 ? 0 : 32768;
    long slack = kind == SNAPPY || kind == LZ4 || kind == LZ4HC ? 64 : 1024;
    if (expected > MAX_BLOCK_BYTES || (factor != 0 && expected > factor * stored + slack)) {
      throw place.error(0, name + " block of " + stored + " bytes claims " + expected
          + " uncompressed, more than it can hold");
    }
    if (kind != BZIP2) {
      room(expected);
    }
    byte[] data = place.data;
    long written;
    String fault = null;
    try {
      switch (kind) {
        case SNAPPY:
          written = Snappy.uncompress(data, payload, stored, out, 0);
          break;
        case LZ4:
        case LZ4HC:
          written = LZ4_DECOMPRESSOR.decompress(data, payload, stored, out, 0, expected);
          break;
        case ZLIB:
          written = inflate(data, payload, stored, expected, windowBits, place);
          break;
        case BZIP2:
          written = bunzip(data, payload, stored, expected);
          break;
        default:
          written = Zstd.decompressByteArray(out, 0, expected, data, payload, stored);
          if (Zstd.isError(written)) {
            fault = Zstd.getErrorName(written);
          }
      }
    } catch (IOException | RuntimeException | DataFormatException e) {
      written = -1;
      fault = String.valueOf(e.getMessage());
    }
    if (fault != null) {
      throw place.error(payload - place.start, "invalid " + name + " block (" + fault + ")");
    }
    if (written != expected) {
      throw place.error(payload - place.start, name + " block holds " + written
          + " bytes, not the " + expected + " it claims");
    }
    place.set(out, 0, expected, place.offset, "the decompressed " + what);
  }

  static String name(int kind) {
    switch (kind) {
      case NONE: return "none";
      case SNAPPY: return "Snappy";
      case ZLIB: return "zlib";
      case BZIP2: return "bzip2";
      case LZ4: return "LZ4";
      case LZ4HC: return "LZ4HC";
      case XPRESS: return "XPRESS";
      case ZSTD:
      case ZSTD_NOT_FINAL:
        return "ZSTD";
      default:
        return kind >= 0x80 ? "custom (0x" + Integer.toHexString(kind) + ")" : null;
    }
  }

  private long inflate(byte[] data, int at, int length, int expected, int windowBits,
      RocksPlace place) throws DataFormatException {
    if (windowBits > 15) {
      throw RocksCoding.incompatible(place.name, "a block at byte offset " + place.offset
          + " is compressed with gzip-wrapped zlib (window_bits " + windowBits + "), which the"
          + " JVM reader does not decompress");
    }
    Inflater inflater = new Inflater(windowBits < 0);
    try {
      inflater.setInput(data, at, length);
      int written = 0;
      while (written < expected && !inflater.finished() && !inflater.needsInput()
          && !inflater.needsDictionary()) {
        written += inflater.inflate(out, written, expected - written);
      }
      if (written == expected && !inflater.finished() && !inflater.needsInput()) {
        written += inflater.inflate(new byte[1]);  // reaches the end of the stream, or more
      }
      if (written != expected || !inflater.finished()) {
        throw new DataFormatException("it does not hold the " + expected + " bytes it claims");
      }
      return written;
    } finally {
      inflater.end();
    }
  }

  /** Makes {@link #out} hold at least {@code needed} bytes, at least doubling it. */
  private void room(int needed) {
    if (out.length < needed) {
      out = Arrays.copyOf(out, Math.max(needed, (int) Math.min(MAX_BLOCK_BYTES,
          out.length * 2L)));
    }
  }

  /**
   * bzip2 has no useful bound on how far it expands the bytes there, so its output buffer
   * grows as the bytes arrive rather than to the size the block claims.
   */
  private long bunzip(byte[] data, int at, int length, int expected) throws IOException {
    try (BZip2CompressorInputStream in = new BZip2CompressorInputStream(
        new ByteArrayInputStream(data, at, length), false)) {
      int written = 0;
      while (written < expected) {
        if (written == out.length) {
          room(written + 1);
        }
        int read = in.read(out, written, Math.min(expected, out.length) - written);
        if (read < 0) {
          break;
        }
        written += read;
      }
      if (written != expected || in.read() >= 0) {
        throw new IOException("it does not hold the " + expected + " bytes it claims");
      }
      return written;
    }
  }
}

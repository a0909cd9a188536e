package org.statesource.shim;

import java.io.IOException;
import java.util.zip.CRC32C;
import org.xerial.snappy.Snappy;

/**
 * Flink's snapshot compression: xerial Snappy framed streams, one after another. Chunks are a
 * type byte, a 3-byte little-endian length and the body; data chunks start with the masked
 * CRC-32C of their uncompressed bytes. Every length is checked against the range and every
 * block against the 64 KiB a frame may hold, before anything is allocated for it; a fault is a
 * {@link FlinkDataException} at its position in the compressed range.
 */
final class FlinkSnappy {
  private static final int COMPRESSED = 0x00;
  private static final int STORED = 0x01;
  private static final int IDENTIFIER = 0xFF;
  private static final int MAX_CHUNK = 1 << 16;
  private static final byte[] MAGIC = {'s', 'N', 'a', 'P', 'p', 'Y'};

  private FlinkSnappy() {
  }

  /** The uncompressed bytes of every stream in {@code data[start, length)}, and their count. */
  static byte[] unframe(byte[] data, int start, int length, int[] size) {
    byte[] out = new byte[Math.max(16, length * 2)];
    int written = 0;
    int pos = start;
    CRC32C crc = new CRC32C();
    while (pos < length) {
      if (pos + 4 > length) {
        throw new FlinkDataException("truncated Snappy chunk header", pos);
      }
      int kind = data[pos] & 0xFF;
      int chunk = (data[pos + 1] & 0xFF) | (data[pos + 2] & 0xFF) << 8
          | (data[pos + 3] & 0xFF) << 16;
      int body = pos + 4;
      if (chunk > length - body) {
        throw new FlinkDataException("Snappy chunk of " + chunk + " bytes runs past the range",
            pos);
      }
      if (kind == IDENTIFIER) {
        if (chunk != MAGIC.length || !java.util.Arrays.equals(data, body, body + chunk, MAGIC,
            0, MAGIC.length)) {
          throw new FlinkDataException("bad Snappy stream identifier", pos);
        }
      } else if (kind == COMPRESSED || kind == STORED) {
        if (chunk < 4) {
          throw new FlinkDataException("Snappy chunk too short for its checksum", pos);
        }
        int expected = (data[body] & 0xFF) | (data[body + 1] & 0xFF) << 8
            | (data[body + 2] & 0xFF) << 16 | (data[body + 3] & 0xFF) << 24;
        int payload = body + 4;
        int payloadLength = chunk - 4;
        int produced;
        if (kind == STORED) {
          produced = payloadLength;
          out = room(out, written, produced);
          System.arraycopy(data, payload, out, written, produced);
        } else {
          produced = uncompressedLength(data, payload, payloadLength);
          out = room(out, written, produced);
          try {
            int actual = Snappy.uncompress(data, payload, payloadLength, out, written);
            if (actual != produced) {
              throw new FlinkDataException("invalid Snappy block (" + actual + " bytes, its"
                  + " preamble says " + produced + ")", payload);
            }
          } catch (IOException | RuntimeException error) {
            if (error instanceof FlinkDataException fault) {
              throw fault;
            }
            throw new FlinkDataException("invalid Snappy block (" + error.getMessage() + ")",
                payload);
          }
        }
        crc.reset();
        crc.update(out, written, produced);
        long value = crc.getValue();
        int masked = (int) ((((value >>> 15) | (value << 17)) & 0xFFFFFFFFL) + 0xA282EAD8L);
        if (masked != expected) {
          throw new FlinkDataException("Snappy chunk checksum mismatch", pos);
        }
        written += produced;
      } else if (kind < 0x80) {
        throw new FlinkDataException("unknown Snappy chunk type 0x" + Integer.toHexString(kind),
            pos);
      }
      pos = body + chunk;
    }
    size[0] = written;
    return out;
  }

  /** A block's preamble (a varint), checked against a frame's 64 KiB. */
  private static int uncompressedLength(byte[] data, int at, int length) {
    long value = 0;
    int pos = at;
    for (int shift = 0; ; shift += 7) {
      if (pos >= at + length || shift > 28) {
        throw new FlinkDataException("bad Snappy length preamble", pos);
      }
      int b = data[pos++] & 0xFF;
      value |= (long) (b & 0x7F) << shift;
      if (b < 0x80) {
        break;
      }
    }
    if (value > MAX_CHUNK) {
      throw new FlinkDataException("Snappy block of " + value + " bytes exceeds a frame's "
          + MAX_CHUNK, at);
    }
    return (int) value;
  }

  private static byte[] room(byte[] out, int written, int more) {
    if (out.length - written >= more) {
      return out;
    }
    long wanted = Math.max((long) out.length * 2, (long) written + more);
    if (wanted > Integer.MAX_VALUE - 16) {
      throw new FlinkDataException("a key group of more than 2 GiB uncompressed", 0);
    }
    return java.util.Arrays.copyOf(out, (int) wanted);
  }
}

package org.statesource.shim;

import java.util.HexFormat;

/**
 * XXH3-64 with seed 0 (the final XXH3 of xxHash 0.8, the checksum RocksDB 7 and later write:
 * Flink 2.x's tables), written from the xxHash specification: no jar of Spark has it. Inputs
 * of 0..16 bytes, 17..128, 129..240 and longer ones each take their own path.
 */
final class Xxh3 {
  private static final long PRIME32_1 = 0x9E3779B1L;
  private static final long PRIME32_2 = 0x85EBCA77L;
  private static final long PRIME32_3 = 0xC2B2AE3DL;
  private static final long PRIME64_1 = 0x9E3779B185EBCA87L;
  private static final long PRIME64_2 = 0xC2B2AE3D27D4EB4FL;
  private static final long PRIME64_3 = 0x165667B19E3779F9L;
  private static final long PRIME64_4 = 0x85EBCA77C2B2AE63L;
  private static final long PRIME64_5 = 0x27D4EB2F165667C5L;
  private static final long PRIME_MX1 = 0x165667919E3779F9L;
  private static final long PRIME_MX2 = 0x9FB21C651E98DF25L;
  private static final byte[] SECRET = HexFormat.of().parseHex(
      "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671f"
      + "cb79e64eccc0e578825ad07dccff7221b8084674f743248ee03590e6813a264c"
      + "3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
      + "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364"
      + "eac5ac8334d3ebc3c581a0fffa1363eb170ddd51b7f0da49d316552629d4689e"
      + "2b16be587d47a1fc8ff8b8d17ad031ce45cb3a8f95160428afd7fbcabb4b407e");
  private static final int STRIPE = 64;
  private static final int STRIPES_PER_BLOCK = (SECRET.length - STRIPE) / 8;
  private static final int BLOCK = STRIPE * STRIPES_PER_BLOCK;

  private Xxh3() {
  }

  /** XXH3-64 (seed 0) of {@code data[offset, offset + length)}. */
  static long hash64(byte[] data, int offset, int length) {
    if (length <= 16) {
      return upTo16(data, offset, length);
    }
    if (length <= 128) {
      long acc = length * PRIME64_1;
      if (length > 32) {
        if (length > 64) {
          if (length > 96) {
            acc += mix16(data, offset + 48, 96);
            acc += mix16(data, offset + length - 64, 112);
          }
          acc += mix16(data, offset + 32, 64);
          acc += mix16(data, offset + length - 48, 80);
        }
        acc += mix16(data, offset + 16, 32);
        acc += mix16(data, offset + length - 32, 48);
      }
      acc += mix16(data, offset, 0);
      acc += mix16(data, offset + length - 16, 16);
      return avalanche(acc);
    }
    if (length <= 240) {
      long acc = length * PRIME64_1;
      int rounds = length / 16;
      for (int i = 0; i < 8; i++) {
        acc += mix16(data, offset + 16 * i, 16 * i);
      }
      acc = avalanche(acc);
      for (int i = 8; i < rounds; i++) {
        acc += mix16(data, offset + 16 * i, 16 * (i - 8) + 3);
      }
      acc += mix16(data, offset + length - 16, 136 - 17);
      return avalanche(acc);
    }
    return long64(data, offset, length);
  }

  private static long upTo16(byte[] data, int offset, int length) {
    if (length > 8) {
      long low = RocksCoding.u64(data, offset) ^ (secret64(24) ^ secret64(32));
      long high = RocksCoding.u64(data, offset + length - 8) ^ (secret64(40) ^ secret64(48));
      long acc = length + Long.reverseBytes(low) + high + fold(low, high);
      return avalanche(acc);
    }
    if (length >= 4) {
      long first = RocksCoding.u32(data, offset) & 0xFFFFFFFFL;
      long last = RocksCoding.u32(data, offset + length - 4) & 0xFFFFFFFFL;
      long keyed = (last + (first << 32)) ^ (secret64(8) ^ secret64(16));
      keyed ^= Long.rotateLeft(keyed, 49) ^ Long.rotateLeft(keyed, 24);
      keyed *= PRIME_MX2;
      keyed ^= (keyed >>> 35) + length;
      keyed *= PRIME_MX2;
      return keyed ^ (keyed >>> 28);
    }
    if (length > 0) {
      int c1 = data[offset] & 0xFF;
      int c2 = data[offset + (length >> 1)] & 0xFF;
      int c3 = data[offset + length - 1] & 0xFF;
      long combined = ((long) c1 << 16 | (long) c2 << 24 | c3 | (long) length << 8) & 0xFFFFFFFFL;
      long flip = (RocksCoding.u32(SECRET, 0) ^ RocksCoding.u32(SECRET, 4)) & 0xFFFFFFFFL;
      return avalanche64(combined ^ flip);
    }
    return avalanche64(secret64(56) ^ secret64(64));
  }

  private static long long64(byte[] data, int offset, int length) {
    long[] acc = {PRIME32_3, PRIME64_1, PRIME64_2, PRIME64_3, PRIME64_4, PRIME32_2, PRIME64_5,
        PRIME32_1};
    int blocks = (length - 1) / BLOCK;
    for (int n = 0; n < blocks; n++) {
      for (int s = 0; s < STRIPES_PER_BLOCK; s++) {
        accumulate(acc, data, offset + n * BLOCK + s * STRIPE, s * 8);
      }
      scramble(acc, SECRET.length - STRIPE);
    }
    int stripes = ((length - 1) - BLOCK * blocks) / STRIPE;
    for (int s = 0; s < stripes; s++) {
      accumulate(acc, data, offset + blocks * BLOCK + s * STRIPE, s * 8);
    }
    accumulate(acc, data, offset + length - STRIPE, SECRET.length - STRIPE - 7);
    long result = length * PRIME64_1;
    for (int i = 0; i < 4; i++) {
      result += fold(acc[2 * i] ^ secret64(11 + 16 * i), acc[2 * i + 1] ^ secret64(19 + 16 * i));
    }
    return avalanche(result);
  }

  private static void accumulate(long[] acc, byte[] data, int at, int secretAt) {
    for (int i = 0; i < 8; i++) {
      long value = RocksCoding.u64(data, at + 8 * i);
      long key = value ^ secret64(secretAt + 8 * i);
      acc[i ^ 1] += value;
      acc[i] += (key & 0xFFFFFFFFL) * (key >>> 32);
    }
  }

  private static void scramble(long[] acc, int secretAt) {
    for (int i = 0; i < 8; i++) {
      long value = acc[i];
      value ^= value >>> 47;
      value ^= secret64(secretAt + 8 * i);
      acc[i] = value * PRIME32_1;
    }
  }

  private static long mix16(byte[] data, int at, int secretAt) {
    return fold(RocksCoding.u64(data, at) ^ secret64(secretAt),
        RocksCoding.u64(data, at + 8) ^ secret64(secretAt + 8));
  }

  /** The 128-bit product of two unsigned 64-bit numbers, its halves XORed. */
  private static long fold(long a, long b) {
    long high = Math.multiplyHigh(a, b) + ((a >> 63) & b) + ((b >> 63) & a);
    return (a * b) ^ high;
  }

  private static long secret64(int at) {
    return RocksCoding.u64(SECRET, at);
  }

  private static long avalanche(long h) {
    h ^= h >>> 37;
    h *= PRIME_MX1;
    return h ^ (h >>> 32);
  }

  private static long avalanche64(long h) {
    h ^= h >>> 33;
    h *= PRIME64_2;
    h ^= h >>> 29;
    h *= PRIME64_3;
    return h ^ (h >>> 32);
  }
}

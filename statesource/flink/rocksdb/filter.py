"""A table's full filter: whether a user key may be in the table, without reading its blocks.

Flink leaves filters off by default (``state.backend.rocksdb.use-bloom-filter``); a job that
turns them on, or a database made by other tools, has one meta block
``fullfilter.<policy>`` per table, over every whole user key
(``rocksdb.block.based.table.whole.key.filtering`` = ``1``). Its last five bytes say which
filter it is (``table/block_based/filter_policy.cc``, ``GetBuiltinFilterBitsReader``):

- ``-1`` then a sub-implementation byte 0: the *FastLocalBloom* of ``format_version`` 5 and
  up (``util/bloom_impl.h``): a 64-bit hash of the key, XXPH3 (``util/xxph3.h``: the preview
  release of XXH3 that RocksDB standardized on, not the final XXH3 of the ``xxhash``
  package); its low half picks a 64-byte cache line, its high half, multiplied by
  ``0x9e3779b9`` between probes, the bits inside it (top 9 bits each); then a byte of block
  size (top 3 bits, 0: 64 bytes) and probe count (low 5 bits), then two reserved zero bytes;
- a probe count 1..127: the legacy Bloom of older tables: RocksDB's 32-bit MurmurHash1 of
  the key (seed ``0xbc9f1d34``) picks a cache line (``h % lines``), then probes step by
  the hash rotated right by 17; then the number of cache lines (``uint32``);
- ``-2``: a Ribbon filter, ``0``: "always may match", other values reserved.

Only a filter that answers exactly as RocksDB's does is used; anything else (Ribbon,
partitioned filters, prefix-only filters, reserved markers) answers "may match", so that
a lookup reads the blocks the index gives, which is never wrong. A filter whose geometry
does not fit its own bytes is refused as corrupt. XXPH3 is computed here for keys of up to
128 bytes (Flink's keys are short); for longer keys the filter is not consulted.
"""

from __future__ import annotations

from typing import Protocol

from statesource.flink.rocksdb.coding import Place

FULL_FILTER_PREFIX = "fullfilter."
WHOLE_KEY_FILTERING = "rocksdb.block.based.table.whole.key.filtering"
METADATA_BYTES = 5
CACHE_LINE_BYTES = 64
MAX_HASHED_KEY = 128
"""Longest key :func:`xxph3` hashes (longer ones are never ruled out)."""
_MASK32 = 0xFFFFFFFF
_MASK64 = (1 << 64) - 1
_PRIME32_1 = 0x9E3779B1
_PRIME64_1, _PRIME64_2, _PRIME64_3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
_SECRET = bytes.fromhex(
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671f"
    "cb79e64eccc0e578825ad07dccff7221b8084674f743248ee03590e6813a264c"
    "3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
    "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364")
"""The first 128 bytes of XXPH3's default secret (``kSecret``), all that keys of up to 128
bytes use."""


class KeyFilter(Protocol):
    """Whether a table may hold a user key (False: it certainly does not)."""

    def may_contain(self, key: bytes) -> bool: ...


class MayMatch:
    """A filter that rules nothing out (no filter, or one statesource does not evaluate)."""

    def may_contain(self, key: bytes) -> bool:
        return True


class FastLocalBloom:
    """``format_version`` 5's Bloom filter: one 64-byte cache line per key."""

    def __init__(self, bits: bytes, probes: int) -> None:
        self.bits = bits
        self.probes = probes
        self.lines = len(bits) // CACHE_LINE_BYTES

    def may_contain(self, key: bytes) -> bool:
        if len(key) > MAX_HASHED_KEY:
            return True
        h = xxph3(key)
        line = ((h & _MASK32) * self.lines >> 32) * CACHE_LINE_BYTES
        bits = self.bits
        probe = h >> 32
        for _ in range(self.probes):
            position = probe >> 23  # 9 bits: a bit of the 512-bit line
            if not bits[line + (position >> 3)] >> (position & 7) & 1:
                return False
            probe = probe * 0x9E3779B9 & _MASK32
        return True


class LegacyBloom:
    """The Bloom filter of tables before ``format_version`` 5 (full filter, cache-local)."""

    def __init__(self, bits: bytes, probes: int, lines: int, log2_line_bytes: int) -> None:
        self.bits = bits
        self.probes = probes
        self.lines = lines
        self.log2_line_bytes = log2_line_bytes

    def may_contain(self, key: bytes) -> bool:
        h = murmur1(key, 0xBC9F1D34)
        base = (h % self.lines) << self.log2_line_bytes
        mask = (1 << (self.log2_line_bytes + 3)) - 1
        delta = ((h >> 17) | (h << 15)) & _MASK32
        bits = self.bits
        for _ in range(self.probes):
            position = h & mask
            if not bits[base + (position >> 3)] >> (position & 7) & 1:
                return False
            h = (h + delta) & _MASK32
        return True


def xxph3(key: bytes) -> int:
    """RocksDB's ``Hash64`` of a key of at most 128 bytes (XXPH3 with seed 0)."""
    size = len(key)
    if size > 16:
        acc = size * _PRIME64_1
        for depth in range((size - 1) // 32, -1, -1):  # the outermost pairs first, as XXPH3
            acc += _mix16(key, 16 * depth, 32 * depth) + _mix16(key, size - 16 * (depth + 1),
                                                                32 * depth + 16)
        return _avalanche(acc & _MASK64)
    if size > 8:
        low = _le64(key, 0) ^ _le64(_SECRET, 0)
        high = _le64(key, size - 8) ^ _le64(_SECRET, 8)
        return _avalanche((size + low + high + _fold(low, high)) & _MASK64)
    if size >= 4:
        keyed = (_le32(key, 0) | _le32(key, size - 4) << 32) ^ _le64(_SECRET, 0)
        mixed = (size + (keyed ^ keyed >> 51) * _PRIME32_1) & _MASK64
        return _avalanche((mixed ^ mixed >> 47) * _PRIME64_2 & _MASK64)
    if size:
        combined = key[0] | key[size >> 1] << 8 | key[size - 1] << 16 | size << 24
        return _avalanche((combined ^ _le32(_SECRET, 0)) * _PRIME64_1 & _MASK64)
    return _fold(_le64(_SECRET, 0), _PRIME64_2)  # RocksDB's own value for the empty key


def _mix16(data: bytes, at: int, secret_at: int) -> int:
    return _fold(_le64(data, at) ^ _le64(_SECRET, secret_at),
                 _le64(data, at + 8) ^ _le64(_SECRET, secret_at + 8))


def _fold(left: int, right: int) -> int:
    product = left * right
    return (product ^ product >> 64) & _MASK64


def _avalanche(h: int) -> int:
    h ^= h >> 37
    h = h * _PRIME64_3 & _MASK64
    return h ^ h >> 32


def _le64(data: bytes, at: int) -> int:
    return int.from_bytes(data[at:at + 8], "little")


def _le32(data: bytes, at: int) -> int:
    return int.from_bytes(data[at:at + 4], "little")


def murmur1(data: bytes, seed: int) -> int:
    """RocksDB's ``Hash``: MurmurHash1, its trailing bytes sign-extended as RocksDB does."""
    m = 0xC6A4A793
    h = (seed ^ (len(data) * m)) & _MASK32
    whole = len(data) - len(data) % 4
    for pos in range(0, whole, 4):
        h = (h + int.from_bytes(data[pos:pos + 4], "little")) * m & _MASK32
        h ^= h >> 16
    tail = data[whole:]
    if tail:
        for shift, byte in reversed(list(enumerate(tail))):
            signed = byte - 256 if byte >= 128 else byte
            h = (h + ((signed << (8 * shift)) & _MASK32)) & _MASK32
        h = h * m & _MASK32
        h ^= h >> 24
    return h


def parse_filter(contents: bytes, place: Place) -> KeyFilter:
    """The filter a full filter block's ``contents`` hold (checked against its own bytes)."""
    size = len(contents)
    if size <= METADATA_BYTES:  # RocksDB: an empty filter, of a table without keys
        return MayMatch()
    length = size - METADATA_BYTES
    marker = contents[length]
    if marker == 0xFF:  # -1: a newer Bloom
        sub_implementation, block_and_probes = contents[length + 1], contents[length + 2]
        probes = block_and_probes & 31
        if (sub_implementation != 0 or block_and_probes >> 5 != 0
                or contents[length + 3:] != b"\0\0" or not 1 <= probes <= 30):
            return MayMatch()  # reserved: RocksDB itself then reads the table unfiltered
        if length % CACHE_LINE_BYTES:
            raise place.error(length, f"a Bloom filter of {length} bytes, not whole cache lines")
        return FastLocalBloom(bytes(contents[:length]), probes)
    if marker == 0 or marker >= 0x80:  # 0: always may match; -2: Ribbon; others reserved
        return MayMatch()
    lines = int.from_bytes(contents[length + 1:], "little")
    log2_line_bytes = 0
    while lines and (lines << log2_line_bytes) < length:
        log2_line_bytes += 1
    if not lines or lines << log2_line_bytes != length:
        raise place.error(length + 1, f"a legacy Bloom filter of {lines} cache lines does not"
                                      f" fill its {length} bytes")
    return LegacyBloom(bytes(contents[:length]), marker, lines, log2_line_bytes)

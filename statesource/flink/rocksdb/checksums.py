"""The block checksums of RocksDB's block-based tables (``table/format.cc``).

Every block is followed by a 5-byte trailer: its compression type, then a ``uint32``
checksum of the block *and* that type byte, of the kind the footer names:

- ``kCRC32c`` (1): the masked CRC-32C, as Snappy frames store it (Flink 1.x's RocksDB 6.20);
- ``kxxHash`` (2): XXH32 with seed 0;
- ``kxxHash64`` (3): the low 32 bits of XXH64 with seed 0;
- ``kXXH3`` (4, RocksDB's default since 7.x, so Flink 2.x's RocksDB 8.10): the low 32 bits
  of XXH3-64 of all but the last byte, XORed with that last byte times ``0x6b9083d9`` (so
  that the type byte needs no streaming hash); zero for no bytes at all.

From ``format_version`` 6 each checksum also depends on where the block lies: the footer
holds a ``base_context_checksum``, and the stored value is the checksum plus
``base ^ (low 32 bits of offset + high 32 bits of offset)``, so a block copied elsewhere
no longer verifies.
"""

from __future__ import annotations

import xxhash

from statesource.flink.binary.crc32c import masked_crc32c

NO_CHECKSUM, CRC32C, XXHASH32, XXHASH64, XXH3 = 0, 1, 2, 3, 4
NAMES = {NO_CHECKSUM: "none", CRC32C: "crc32c", XXHASH32: "xxHash", XXHASH64: "xxHash64",
         XXH3: "XXH3"}
_LAST_BYTE_PRIME = 0x6B9083D9
_U32 = 0xFFFFFFFF


def checksum(kind: int, data: bytes | memoryview) -> int:
    """The checksum of kind ``kind`` of ``data`` (a block and its type byte, or a footer)."""
    if kind == CRC32C:
        return masked_crc32c(data)
    if kind == XXH3:
        if not data:
            return 0
        view = memoryview(data)
        low = xxhash.xxh3_64_intdigest(view[:-1]) & _U32
        return low ^ ((view[-1] * _LAST_BYTE_PRIME) & _U32)
    if kind == XXHASH64:
        return xxhash.xxh64_intdigest(data) & _U32
    if kind == XXHASH32:
        return xxhash.xxh32_intdigest(data)
    return 0


def context_modifier(base_context_checksum: int, offset: int) -> int:
    """What ``format_version`` >= 6 adds to the checksum of the block at ``offset``."""
    if base_context_checksum == 0:
        return 0
    return base_context_checksum ^ (((offset & _U32) + (offset >> 32)) & _U32)


def stored_matches(kind: int, data: bytes | memoryview, stored: int, base_context_checksum: int,
                   offset: int) -> bool:
    """Whether ``stored`` is the checksum of ``data`` at ``offset`` (always so for none)."""
    if kind == NO_CHECKSUM:
        return True
    expected = (checksum(kind, data) + context_modifier(base_context_checksum, offset)) & _U32
    return stored == expected

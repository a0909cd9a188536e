"""The contents of one (uncompressed) block: prefix-compressed entries over restart points.

From RocksDB's ``table/block_based/block_builder.cc``, ``block.cc`` and ``data_block_footer.cc``,
a block is a run of entries, then the restart array, then a packed ``uint32``:

- each entry is ``shared`` (bytes of the previous key it reuses), ``non_shared`` and, except
  in delta-encoded index blocks, ``value_length`` (three varint32s, one byte each when all
  are below 128), the key's unshared bytes, then the value;
- every ``restart_interval`` entries one is a *restart point*: it shares nothing, and its
  offset is listed in the restart array (``uint32`` each, the first one 0);
- the packed ``uint32`` holds the number of restarts in its low 28 bits; bit 31 says a hash
  index of the data block (``kDataBlockBinaryAndHash``: one byte per bucket, then a
  ``uint16`` count of buckets) sits between the restart array and it; bit 29 marks keys as
  uniformly spread (a search hint); bit 28 says values are kept apart from keys (a RocksDB
  11 layout statesource does not read) and bit 30 is reserved.

Everything is checked as it is read: the restart array must fit and increase, each
restart point must fall on an entry that shares nothing, every key and value must end
inside the entries, and the entries must end exactly where the restart array starts. A data
block's internal keys are split into user key, sequence number and value type in the same
pass, and their types and order checked there: a full scan spends its time in this loop.
"""

from __future__ import annotations

import struct
from typing import Any

from statesource.errors import UnsupportedFormatVersionError
from statesource.flink.rocksdb import keys
from statesource.flink.rocksdb.coding import Place, varint32

_HASH_INDEX, _RESERVED, _UNIFORM, _SEPARATED = 1 << 31, 1 << 30, 1 << 29, 1 << 28
_RESTART_MASK = (1 << 28) - 1


def layout(block: bytes, place: Place) -> tuple[int, list[int]]:
    """Where the entries of ``block`` end, and its restart points (checked)."""
    size = len(block)
    if size < 4:
        raise place.error(0, f"a block of {size} bytes cannot hold its restart count")
    packed = int.from_bytes(block[size - 4:], "little")
    if packed & _SEPARATED:
        raise UnsupportedFormatVersionError(
            f"{place.source}: the block at byte offset {place.offset} keeps its values apart"
            " from its keys (RocksDB 11's separated key-value blocks), which statesource does"
            " not read")
    if packed & _RESERVED:
        raise place.error(size - 4, "reserved bit set in the block's restart count")
    count = packed & _RESTART_MASK
    end = size - 4
    if packed & _HASH_INDEX:
        if end < 2:
            raise place.error(end, "no room for the data block hash index")
        buckets = int.from_bytes(block[end - 2:end], "little")
        if buckets == 0 or buckets + 2 > end:
            raise place.error(end - 2, f"data block hash index of {buckets} buckets does not fit")
        end -= 2 + buckets
    if count * 4 > end:
        raise place.error(size - 4, f"{count} restart points do not fit in {end} bytes")
    end -= count * 4
    restarts = list(struct.unpack_from(f"<{count}I", block, end))
    if not end:  # an empty block: RocksDB still lists its one restart point, at 0
        if restarts not in ([], [0]):
            raise place.error(size - 4, f"{count} restart points in an empty block")
        return 0, []
    if count == 0:
        raise place.error(size - 4, "entries without a restart point")
    if restarts and restarts[0] != 0:
        raise place.error(end, f"first restart point at {restarts[0]}, not 0")
    for previous, current in zip(restarts, restarts[1:]):
        if current <= previous or current >= end:
            raise place.error(end, f"restart point {current} out of order or past the entries")
    return end, restarts


def entries(block: bytes, place: Place) -> list[tuple[bytes, bytes]]:
    """Every (key, value) of a block whose entries carry value lengths (metaindex, properties,
    range deletions, and index blocks without delta-encoded values)."""
    return _walk(block, place, internal=False, check_order=False)


def data_entries(block: bytes, place: Place, check_order: bool
                 ) -> list[tuple[bytes, int, int, bytes]]:
    """Every (user key, sequence number, value type, value) of a data block, its internal keys
    split as they are read (one pass: this is where a full scan spends its time), each value
    type checked, and, with ``check_order`` (bytewise tables), the block's order too."""
    return _walk(block, place, internal=True, check_order=check_order)


def _walk(block: bytes, place: Place, internal: bool, check_order: bool
          ) -> list[tuple[Any, ...]]:
    end, restarts = layout(block, place)
    out: list[tuple[Any, ...]] = []
    append = out.append
    from_bytes = int.from_bytes
    point_types = keys.POINT_TYPES
    key = previous = b""
    previous_sequence = keys.MAX_SEQUENCE_NUMBER + 1  # nothing comes before the first key
    pos = 0
    restart_count = len(restarts)
    next_restart_index = 1
    next_restart = restarts[1] if restart_count > 1 else end
    while pos < end:
        start = pos
        shared, non_shared, value_length = block[pos], block[pos + 1], block[pos + 2]
        if (shared | non_shared | value_length) < 0x80:
            pos += 3
        else:
            shared, pos = varint32(block, pos, end, place, "shared key bytes")
            non_shared, pos = varint32(block, pos, end, place, "unshared key bytes")
            value_length, pos = varint32(block, pos, end, place, "value length")
        if start >= next_restart:
            if start > next_restart:
                raise place.error(next_restart, "restart point inside an entry")
            next_restart_index += 1
            next_restart = (restarts[next_restart_index]
                            if next_restart_index < restart_count else end)
            if shared:
                raise place.error(start, "a restart point shares key bytes")
        key_end = pos + non_shared
        value_end = key_end + value_length
        if value_end > end:
            raise place.error(start, "entry runs past the block's entries")
        if shared:
            if shared > len(key):
                raise place.error(start, f"entry shares {shared} bytes of a {len(key)}-byte key")
            key = key[:shared] + block[pos:key_end]
        else:
            key = block[pos:key_end]
        pos = value_end
        if not internal:
            append((key, block[key_end:value_end]))
            continue
        user_bytes = len(key) - 8  # keys.INTERNAL_BYTES, a constant in the hottest loop
        if user_bytes < 0:
            raise place.error(start, f"internal key of {len(key)} bytes")
        packed = from_bytes(key[user_bytes:], "little")
        kind = packed & 0xFF
        if kind not in point_types:
            raise keys.refused_type(kind, place, start)
        user_key, sequence = key[:user_bytes], packed >> 8
        if check_order and user_key <= previous and (
                user_key < previous or sequence >= previous_sequence):
            raise place.error(start, f"key {user_key!r} (sequence {sequence}) out of order")
        previous, previous_sequence = user_key, sequence
        append((user_key, sequence, kind, block[key_end:value_end]))
    if next_restart_index < restart_count:
        raise place.error(end, "restart point past the last entry")
    return out

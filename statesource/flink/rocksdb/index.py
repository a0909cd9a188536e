"""A table's index: one entry per data block, a separator key and where that block is.

From ``table/format.cc`` (``IndexValue``) and ``table/block_based/index_builder.cc``:

- an index key is at least the last key of its block and less than the first of the next
  one: an internal key, or (``rocksdb.index.key.is.user.key``) a user key;
- its value is the block's handle, then, for the index type ``kBinarySearchWithFirstKey``,
  the block's first internal key (length-prefixed);
- with ``rocksdb.index.value.is.delta.encoded`` (``format_version`` 4 and up) entries carry no
  value length, and an entry that shares key bytes with the one before stores only its
  block's size, as a signed difference from the previous block's (the block itself starts
  right after the previous one and its trailer);
- a partitioned index (``kTwoLevelIndexSearch``) is a top-level index of the same form whose
  entries point at index partitions, each an index of data blocks.

Data block handles are checked by the fetch that reads each block; here, only that an
index's entries decode and that its blocks come in file order without overlapping.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from statesource.errors import UnsupportedFormatVersionError
from statesource.flink.rocksdb.block import entries, layout
from statesource.flink.rocksdb.coding import (
    Place,
    TableData,
    length_prefixed,
    signed_varint,
    varint32,
)
from statesource.flink.rocksdb.fetch import read_block
from statesource.flink.rocksdb.footer import BLOCK_TRAILER_BYTES, BlockHandle, Footer, decode_handle
from statesource.flink.rocksdb.keys import INTERNAL_BYTES

BINARY_SEARCH, HASH_SEARCH, TWO_LEVEL, BINARY_SEARCH_WITH_FIRST_KEY = 0, 1, 2, 3


class IndexEntry(NamedTuple):
    """One data block, as the index describes it."""

    separator: bytes  # >= the block's last key, < the next block's first
    handle: BlockHandle
    first_key: bytes | None  # the block's first internal key, where the index keeps it


def data_blocks(data: TableData, index: BlockHandle, footer: Footer, source: str,
                index_type: int, delta_encoded: bool, window_bits: int) -> list[IndexEntry]:
    """Every data block of the table ``data`` whose (top-level) index is at ``index``
    (``window_bits``: the table's zlib setting, should its index be compressed so)."""
    if index_type not in (BINARY_SEARCH, HASH_SEARCH, TWO_LEVEL, BINARY_SEARCH_WITH_FIRST_KEY):
        raise UnsupportedFormatVersionError(
            f"{source}: index type {index_type} is not one statesource reads")
    contents, place = read_block(data, index, footer, source, "index block", window_bits)
    found = index_entries(contents, place, delta_encoded,
                          index_type == BINARY_SEARCH_WITH_FIRST_KEY)
    if index_type == TWO_LEVEL:
        partitions = found
        found = []
        for partition in partitions:
            contents, place = read_block(data, partition.handle, footer, source,
                                         "index partition", window_bits)
            found += index_entries(contents, place, delta_encoded, False)
    for previous, current in zip(found, found[1:]):
        if current.handle.offset < previous.handle.offset + previous.handle.size:
            raise Place(source, index.offset).error(
                0, f"index lists the block at {current.handle.offset} before the end of the"
                   f" one at {previous.handle.offset}")
    return found


def index_entries(block: bytes, place: Place, delta_encoded: bool, first_key: bool
                  ) -> list[IndexEntry]:
    """The entries of one index block (or partition)."""
    if not delta_encoded:
        return [_full_value(key, value, place, first_key) for key, value in entries(block, place)]
    end, restarts = layout(block, place)
    visited: list[int] = []
    found = list(_delta_entries(block, place, first_key, 0, end, set(restarts), visited))
    if len(visited) != len(restarts):
        raise place.error(end, "restart point inside or past the index entries")
    return found


def seek_entries(block: bytes, place: Place, delta_encoded: bool, first_key: bool,
                 user_keys: bool, target: bytes) -> Iterator[IndexEntry]:
    """The entries of one index block from the first whose separator's user key is not below
    ``target`` on, found by binary search over the restart points (each holds a whole key
    and, delta-encoded, a whole handle), then decoded one by one: a lookup decodes a few
    entries of an index of thousands."""
    end, restarts = layout(block, place)
    low, high = 0, len(restarts)
    while low < high:  # the first restart point whose key is not below the target
        middle = (low + high) // 2
        key = _restart_key(block, place, restarts[middle], end, delta_encoded)
        if (key if user_keys else key[:-INTERNAL_BYTES]) < target:
            low = middle + 1
        else:
            high = middle
    start = restarts[max(low - 1, 0)] if restarts else end
    skipped = True
    for entry in (_delta_entries(block, place, first_key, start, end, set(restarts))
                  if delta_encoded else _plain_entries(block, place, first_key, start, end)):
        if skipped and (entry.separator if user_keys
                        else entry.separator[:-INTERNAL_BYTES]) < target:
            continue
        skipped = False
        yield entry


def _restart_key(block: bytes, place: Place, pos: int, end: int, delta_encoded: bool) -> bytes:
    shared, pos = varint32(block, pos, end, place, "shared key bytes")
    non_shared, pos = varint32(block, pos, end, place, "unshared key bytes")
    if not delta_encoded:
        _, pos = varint32(block, pos, end, place, "value length")
    if shared or pos + non_shared > end:
        raise place.error(pos, "a restart point of the index shares key bytes or runs past it")
    return bytes(block[pos:pos + non_shared])


def _plain_entries(block: bytes, place: Place, first_key: bool, pos: int, end: int
                   ) -> Iterator[IndexEntry]:
    key = b""
    while pos < end:
        start = pos
        shared, pos = varint32(block, pos, end, place, "shared key bytes")
        non_shared, pos = varint32(block, pos, end, place, "unshared key bytes")
        value_length, pos = varint32(block, pos, end, place, "value length")
        if shared > len(key) or pos + non_shared + value_length > end:
            raise place.error(start, "index entry runs past its bounds")
        key = key[:shared] + block[pos:pos + non_shared]
        pos += non_shared
        yield _full_value(key, bytes(block[pos:pos + value_length]), place, first_key)
        pos += value_length


def _delta_entries(block: bytes, place: Place, first_key: bool, pos: int, end: int,
                   restart_points: set[int], visited: list[int] | None = None
                   ) -> Iterator[IndexEntry]:
    """Delta-encoded entries from ``pos`` (a restart point) to ``end`` (the restart points
    met noted in ``visited``)."""
    key = b""
    previous: BlockHandle | None = None
    while pos < end:
        start = pos
        shared, pos = varint32(block, pos, end, place, "shared key bytes")
        non_shared, pos = varint32(block, pos, end, place, "unshared key bytes")
        if start in restart_points:
            if shared:
                raise place.error(start, "a restart point shares key bytes")
            if visited is not None:
                visited.append(start)
        if shared > len(key) or pos + non_shared > end:
            raise place.error(start, "index entry's key runs past its bounds")
        key = key[:shared] + block[pos:pos + non_shared]
        pos += non_shared
        if shared:
            if previous is None:
                raise place.error(start, "the first index entry shares key bytes")
            delta, pos = signed_varint(block, pos, end, place, "block size delta")
            size = previous.size + delta
            if size < 0:
                raise place.error(start, f"block size delta {delta} makes a negative size")
            handle = BlockHandle(previous.offset + previous.size + BLOCK_TRAILER_BYTES, size)
        else:
            handle, pos = decode_handle(block, pos, end, place, "block handle")
        first = None
        if first_key:
            first, pos = length_prefixed(block, pos, end, place, "block's first key")
        yield IndexEntry(key, handle, first)
        previous = handle


def _full_value(key: bytes, value: bytes, place: Place, first_key: bool) -> IndexEntry:
    handle, pos = decode_handle(value, 0, len(value), place, "block handle")
    first = None
    if first_key:
        first, pos = length_prefixed(value, pos, len(value), place, "block's first key")
    if pos != len(value):
        raise place.error(0, "index value holds bytes after its block handle")
    return IndexEntry(key, handle, first)

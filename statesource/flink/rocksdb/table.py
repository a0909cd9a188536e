"""One SST file (a RocksDB block-based table), opened and read entry by entry.

Opening reads the footer, the metaindex (the names of the table's meta blocks and where they
are), the properties block and, on first use, the index; :meth:`SstFile.entries` then reads
each data block in file order, checks and decompresses it, and yields every entry as
(user key, sequence number, value type, value). Range deletions live in a meta block of
their own (``rocksdb.range_del``) and come from :meth:`SstFile.range_deletions`.

What is checked besides each block: the properties' counts against what the blocks hold,
and, for tables in bytewise order (every table Flink writes), that keys come in order.
A table made by ``SstFileWriter`` holds sequence number 0 throughout; once ingested, its
entries take the sequence number its properties or the MANIFEST give it (``largest_seqno``),
as ``BlockBasedTable::GetGlobalSequenceNumber`` decides.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from functools import cached_property
from typing import NamedTuple

from statesource.errors import UnsupportedFormatVersionError
from statesource.flink.rocksdb import keys
from statesource.flink.rocksdb.block import data_entries, entries
from statesource.flink.rocksdb.coding import Place, TableData, corrupt
from statesource.flink.rocksdb.fetch import read_block
from statesource.flink.rocksdb.filter import (
    FULL_FILTER_PREFIX,
    WHOLE_KEY_FILTERING,
    KeyFilter,
    MayMatch,
    parse_filter,
)
from statesource.flink.rocksdb.footer import BlockHandle, Footer, decode_handle, read_footer
from statesource.flink.rocksdb.index import (
    BINARY_SEARCH,
    BINARY_SEARCH_WITH_FIRST_KEY,
    HASH_SEARCH,
    IndexEntry,
    data_blocks,
    seek_entries,
)
from statesource.flink.rocksdb.properties import TableProperties, parse_properties

PROPERTIES_BLOCK, INDEX_BLOCK, RANGE_DELETION_BLOCK = ("rocksdb.properties", "rocksdb.index",
                                                       "rocksdb.range_del")
DICTIONARY_BLOCK = "rocksdb.compression_dict"


Entry = tuple[bytes, int, int, bytes]
"""One version of one key, as a table stores it: (user key, sequence number, value type, value),
the type one of :mod:`.keys`' ``VALUE``, ``MERGE``, ``DELETION`` and ``SINGLE_DELETION``. (A
plain tuple: a full scan makes one per entry, and a named tuple costs a tenth more time.)"""


class RangeTombstone(NamedTuple):
    """A range deletion: every version of a key in [start, end) older than ``sequence``."""

    start: bytes
    end: bytes
    sequence: int


class SstFile:
    """A block-based table held in ``data`` (its whole file), named ``source`` in errors.

    ``largest_seqno`` is the MANIFEST's largest sequence number of the file, which gives an
    ingested file's entries their sequence number where its properties do not.
    """

    def __init__(self, data: TableData, source: str, largest_seqno: int | None = None) -> None:
        self.data = data
        self.source = source
        self.footer: Footer = read_footer(data, source)
        contents, place = read_block(data, self.footer.metaindex, self.footer, source,
                                     "metaindex block")
        self.meta_blocks: dict[str, BlockHandle] = {}
        for name, value in entries(contents, place):
            handle, end = decode_handle(value, 0, len(value), place, "meta block handle")
            if end != len(value):
                raise place.error(0, f"meta block handle of {name!r} has trailing bytes")
            self.meta_blocks[name.decode("utf-8", "replace")] = handle
        if PROPERTIES_BLOCK not in self.meta_blocks:
            raise corrupt(source, self.footer.metaindex.offset, "no properties block")
        contents, place = read_block(data, self.meta_blocks[PROPERTIES_BLOCK], self.footer,
                                     source, "properties block")
        self.properties: TableProperties = parse_properties(entries(contents, place), place)
        self._refuse_unsupported()
        self.global_seqno = self._global_seqno(largest_seqno)
        self.bytewise = self.properties.comparator == keys.BYTEWISE_COMPARATOR

    @cached_property
    def data_blocks(self) -> list[IndexEntry]:
        """Every data block, in file order (the index read once, on first use)."""
        handle = self.footer.index or self.meta_blocks.get(INDEX_BLOCK)
        if handle is None:
            raise corrupt(self.source, self.footer.metaindex.offset, "no index block")
        properties = self.properties
        found = data_blocks(self.data, handle, self.footer, self.source, properties.index_type,
                            bool(properties.index_value_is_delta_encoded),
                            properties.window_bits)
        if properties.num_data_blocks and len(found) != properties.num_data_blocks:
            raise corrupt(self.source, handle.offset,
                          f"index lists {len(found)} data blocks, the properties"
                          f" {properties.num_data_blocks}")
        return found

    def blocks_from(self, start: bytes) -> Iterator[tuple[bytes, BlockHandle]]:
        """(separator as a user key, handle) of each data block from the first that can hold
        the user key ``start`` on, in file order: by binary search over the index block's
        restart points where the index is one block not read whole yet, so that a lookup
        decodes a few of its entries."""
        properties = self.properties
        if "data_blocks" in self.__dict__ or properties.index_type not in (
                BINARY_SEARCH, HASH_SEARCH, BINARY_SEARCH_WITH_FIRST_KEY):
            separators = self.separators
            for index in range(bisect.bisect_left(separators, start), len(separators)):
                yield separators[index], self.data_blocks[index].handle
            return
        contents, place = self._index_block
        user_keys = bool(properties.index_key_is_user_key)
        previous_end = 0
        for entry in seek_entries(contents, place, bool(properties.index_value_is_delta_encoded),
                                  properties.index_type == BINARY_SEARCH_WITH_FIRST_KEY,
                                  user_keys, start):
            if entry.handle.offset < previous_end:
                raise place.error(0, f"index lists the block at {entry.handle.offset} before"
                                     " the end of the one before it")
            previous_end = entry.handle.offset + entry.handle.size
            yield (entry.separator if user_keys
                   else entry.separator[:-keys.INTERNAL_BYTES]), entry.handle

    @cached_property
    def _index_block(self) -> tuple[bytes, Place]:
        handle = self.footer.index or self.meta_blocks.get(INDEX_BLOCK)
        if handle is None:
            raise corrupt(self.source, self.footer.metaindex.offset, "no index block")
        return read_block(self.data, handle, self.footer, self.source, "index block",
                          self.properties.window_bits)

    @cached_property
    def separators(self) -> list[bytes]:
        """Each data block's separator as a user key, in file order: a block holds no user key
        above its separator, and the next block none below it (a lookup's binary search)."""
        if self.properties.index_key_is_user_key:
            return [block.separator for block in self.data_blocks]
        found = []
        for block in self.data_blocks:
            if len(block.separator) < keys.INTERNAL_BYTES:
                raise corrupt(self.source, self.footer.offset,
                              f"an index key of {len(block.separator)} bytes")
            found.append(block.separator[:-keys.INTERNAL_BYTES])
        return found

    @cached_property
    def key_filter(self) -> KeyFilter:
        """The table's whole-key filter (:mod:`.filter`), read once; one that rules nothing
        out where the table has none statesource evaluates."""
        if self.properties.raw.get(WHOLE_KEY_FILTERING, b"1") != b"1":
            return MayMatch()
        names = [name for name in self.meta_blocks if name.startswith(FULL_FILTER_PREFIX)]
        if len(names) != 1:
            return MayMatch()
        contents, place = read_block(self.data, self.meta_blocks[names[0]], self.footer,
                                     self.source, "filter block", self.properties.window_bits)
        return parse_filter(contents, place)

    def block_entries(self, handle: BlockHandle) -> list[Entry]:
        """The entries of the data block at ``handle``, checked."""
        contents, place = read_block(self.data, handle, self.footer, self.source, "data block",
                                     self.properties.window_bits)
        found = data_entries(contents, place, self.bytewise)
        global_seqno = self.global_seqno
        if global_seqno:  # an ingested file's keys hold 0 (SstFileWriter writes no other)
            found = [(key, global_seqno, kind, value) for key, _, kind, value in found]
        return found

    def entries(self) -> Iterator[Entry]:
        """Every point entry, in file order: by user key, then newest version first."""
        check_order = self.bytewise
        previous: Entry | None = None
        count = 0
        for block in self.data_blocks:
            found = self.block_entries(block.handle)
            if not found:
                continue
            first = found[0]
            if check_order and previous is not None and first[0] <= previous[0] and (
                    first[0] < previous[0] or first[1] >= previous[1]):
                raise corrupt(self.source, block.handle.offset,
                              f"key {first[0]!r} (sequence {first[1]}) out of order")
            previous = found[-1]
            count += len(found)
            yield from found
        expected = self.properties.num_entries - self.properties.num_range_deletions
        if count != expected:
            raise corrupt(self.source, self.footer.offset,
                          f"the data blocks hold {count} entries, the properties {expected}")

    def range_deletions(self) -> list[RangeTombstone]:
        """The table's range deletions (Flink writes them when a restore clips key groups),
        read once."""
        return list(self._range_deletions)

    @cached_property
    def _range_deletions(self) -> list[RangeTombstone]:
        handle = self.meta_blocks.get(RANGE_DELETION_BLOCK)
        if handle is None:
            return []
        contents, place = read_block(self.data, handle, self.footer, self.source,
                                     "range deletion block", self.properties.window_bits)
        found = []
        for internal_key, end in entries(contents, place):
            split = keys.split_internal_key(internal_key)
            if split is None or split[2] != keys.RANGE_DELETION:
                raise place.error(0, "a range deletion block entry that is no range deletion")
            start, sequence, _ = split
            found.append(RangeTombstone(start, end, sequence if self.global_seqno is None
                                        else self.global_seqno))
        if len(found) != self.properties.num_range_deletions:
            raise corrupt(self.source, handle.offset,
                          f"{len(found)} range deletions, the properties say"
                          f" {self.properties.num_range_deletions}")
        return found

    def _refuse_unsupported(self) -> None:
        if DICTIONARY_BLOCK in self.meta_blocks:
            raise UnsupportedFormatVersionError(
                f"{self.source}: blocks compressed with a dictionary (max_dict_bytes), which"
                " Flink does not configure and statesource does not read")
        properties = self.properties
        if properties.user_defined_index:
            raise UnsupportedFormatVersionError(
                f"{self.source}: the table's primary index is a user-defined one")
        if properties.comparator.endswith(".u64ts") or not (
                properties.user_defined_timestamps_persisted):
            raise UnsupportedFormatVersionError(
                f"{self.source}: keys carry user-defined timestamps (comparator"
                f" {properties.comparator!r}), which Flink never writes")

    def _global_seqno(self, largest_seqno: int | None) -> int | None:
        version = self.properties.external_version
        if version not in (0, 1, 2):
            raise corrupt(self.source, self.meta_blocks[PROPERTIES_BLOCK].offset,
                          f"external SST file version {version}")
        if version == 0:
            return None
        if version == 1:
            return 0
        recorded = self.properties.global_seqno
        if largest_seqno is None or largest_seqno >= keys.MAX_SEQUENCE_NUMBER:
            return recorded
        if recorded and recorded != largest_seqno:
            raise corrupt(self.source, self.meta_blocks[PROPERTIES_BLOCK].offset,
                          f"global sequence number {recorded}, while the MANIFEST gives"
                          f" {largest_seqno}")
        return largest_seqno

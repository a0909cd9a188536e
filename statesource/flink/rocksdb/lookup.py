"""Point lookups: one key's (or one key range's) contents, reading only the blocks that can hold it.

A full read converts every block of every table; a lookup of a key in a database of
millions reads, in each live table of the column family, at most the data blocks the index
places the key in: the first block whose separator (at least its last user key) is not
below the range's start, and the blocks after it while their separators stay below the
range's end (a key's versions may run on into the next block). For a single key, a table
whose whole-key filter (:mod:`.filter`) rules the key out is not read at all. What is found
is merged across the tables as a full read merges it (:func:`.merge.resolved`: newest
version first, deletions, range deletions, list merge operands), so a lookup answers
exactly what a full read answers for the same keys.

:class:`BlockReads` counts what was read, so that tests can hold a lookup to its promise.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from statesource.errors import UnsupportedFormatVersionError
from statesource.flink.rocksdb.keys import MERGE
from statesource.flink.rocksdb.merge import LIST_DELIMITER, Tombstones, newest_first, resolved
from statesource.flink.rocksdb.table import Entry, SstFile


@dataclass
class BlockReads:
    """What lookups read: data blocks (by table and block offset) and tables a filter skipped."""

    data_blocks: list[tuple[str, int]] = field(default_factory=list)
    filtered_out: int = 0


def range_entries(tables: Sequence[SstFile], start: bytes, stop: bytes | None,
                  reads: BlockReads | None = None, delimiter: bytes = LIST_DELIMITER
                  ) -> Iterator[tuple[bytes, bytes]]:
    """Every live (user key, value) of the column family ``tables`` hold with ``start`` <= key
    < ``stop`` (None: no end), by key, reading only the blocks that can hold such keys."""
    return _merged_range(tables, tables, start, stop, reads, delimiter)


def prefix_entries(tables: Sequence[SstFile], prefix: bytes, reads: BlockReads | None = None
                   ) -> Iterator[tuple[bytes, bytes]]:
    """Every live (user key, value) whose key starts with ``prefix``, by key."""
    return range_entries(tables, prefix, prefix_end(prefix), reads)


def get(tables: Sequence[SstFile], key: bytes, reads: BlockReads | None = None) -> bytes | None:
    """The value of ``key`` (None: absent), not reading the tables whose filter rules it out
    (their range deletions still apply to the others)."""
    candidates = []
    for table in tables:
        if table.key_filter.may_contain(key):
            candidates.append(table)
        elif reads is not None:
            reads.filtered_out += 1
    for found, value in _merged_range(candidates, tables, key, key + b"\0", reads,
                                      LIST_DELIMITER):
        return value if found == key else None
    return None


def _merged_range(tables: Sequence[SstFile], deleting: Sequence[SstFile], start: bytes,
                  stop: bytes | None, reads: BlockReads | None, delimiter: bytes
                  ) -> Iterator[tuple[bytes, bytes]]:
    """The keys in [start, stop) of ``tables``, merged, under the range deletions of
    ``deleting`` (every live table of the column family)."""
    _check_bytewise(deleting)
    tombstones = Tombstones(t for table in deleting for t in table.range_deletions()
                            if t.end > start and (stop is None or t.start < stop))
    streams = [_table_range(table, start, stop, reads) for table in tables]
    if not streams:
        return iter(())
    ordered: Iterator[Entry] = (streams[0] if len(streams) == 1
                                else heapq.merge(*streams, key=newest_first))
    return resolved(ordered, tombstones, delimiter, tables)


def prefix_end(prefix: bytes) -> bytes | None:
    """The least key above every key that starts with ``prefix`` (None: there is none)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def _table_range(table: SstFile, start: bytes, stop: bytes | None, reads: BlockReads | None
                 ) -> Iterator[Entry]:
    """The entries of ``table`` in [start, stop), reading its blocks from the first that can
    hold ``start``. A point lookup stops at a block whose separator is the key itself once the
    key's newest version here is a full value or a deletion: the next block can only hold
    older versions of it, which no longer count (only merge operands reach further)."""
    point = stop == start + b"\0"
    decided = False
    for separator, handle in table.blocks_from(start):
        if reads is not None:
            reads.data_blocks.append((table.source, handle.offset))
        for entry in table.block_entries(handle):
            if stop is not None and entry[0] >= stop:
                return
            if entry[0] >= start:
                decided = decided or entry[2] != MERGE
                yield entry
        if stop is not None and separator >= stop or point and decided:
            return


def _check_bytewise(tables: Sequence[SstFile]) -> None:
    for table in tables:
        if not table.bytewise:
            raise UnsupportedFormatVersionError(
                f"{table.source}: keys ordered by the comparator"
                f" {table.properties.comparator!r}, not bytewise as Flink's are")

"""The contents of a column family: its live tables merged by key, as a read of RocksDB sees it.

Every table is sorted by user key and, within a key, newest version first; merging them on
(user key ascending, sequence number descending) puts all versions of a key together, newest
first, whatever level or file they are in. Each key is then resolved from its newest
version down, as RocksDB's ``MergeHelper`` does with Flink's ``StringAppendTESTOperator``:

- merge operands are collected until a full value, a deletion, a range deletion that covers
  the key at that age, or the oldest version;
- the key's value is then the operands, oldest first, appended to that full value (if
  any), each after the delimiter ``,`` (Flink's list state: one operand per ``add``); with
  no operands it is the full value; with a deletion and no operands the key is absent.

A range deletion hides every version of the keys in [start, end) that is older than it;
all of a column family's range deletions are fragmented once into disjoint intervals, each
with the newest deletion covering it, and walked along with the sorted keys.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable, Iterator, Sequence

from statesource.errors import UnsupportedFormatVersionError
from statesource.flink.rocksdb import keys
from statesource.flink.rocksdb.coding import corrupt
from statesource.flink.rocksdb.table import Entry, RangeTombstone, SstFile

LIST_DELIMITER = b","
"""What Flink's RocksDB backend appends list elements with (``StringAppendTESTOperator``)."""


class Tombstones:
    """Range deletions as disjoint intervals: for a key, the newest deletion covering it."""

    def __init__(self, tombstones: Iterable[RangeTombstone]) -> None:
        by_start = sorted((t for t in tombstones if t.start < t.end), reverse=True)
        self.bounds = sorted({t.start for t in by_start} | {t.end for t in by_start})
        self.newest: list[int] = []
        active: list[tuple[int, bytes]] = []  # a max-heap of (-sequence, end)
        for bound in self.bounds[:-1]:  # the interval [bound, next bound)
            while by_start and by_start[-1].start == bound:
                start, end, sequence = by_start.pop()
                heapq.heappush(active, (-sequence, end))
            while active and active[0][1] <= bound:
                heapq.heappop(active)
            self.newest.append(-active[0][0] if active else 0)

    def covering(self, key: bytes) -> int:
        """The sequence number of the newest deletion whose range holds ``key`` (0: none)."""
        interval = bisect.bisect_right(self.bounds, key) - 1
        if 0 <= interval < len(self.newest):
            return self.newest[interval]
        return 0


def merged_entries(tables: Sequence[SstFile], delimiter: bytes = LIST_DELIMITER
                   ) -> Iterator[tuple[bytes, bytes]]:
    """Every live (user key, value) of the column family held by ``tables``, by user key.

    ``tables`` are all the live tables of one column family, in any order.
    """
    for table in tables:
        if not table.bytewise:
            raise UnsupportedFormatVersionError(
                f"{table.source}: keys ordered by the comparator"
                f" {table.properties.comparator!r}, not bytewise as Flink's are")
    tombstones = Tombstones(t for table in tables for t in table.range_deletions())
    streams = [table.entries() for table in tables]
    if len(streams) == 1:
        ordered: Iterator[Entry] = streams[0]
    else:
        ordered = heapq.merge(*streams, key=newest_first)
    return resolved(ordered, tombstones, delimiter, tables)


def newest_first(entry: Entry) -> tuple[bytes, int]:
    return entry[0], -entry[1]


def resolved(ordered: Iterator[Entry], tombstones: Tombstones, delimiter: bytes,
             tables: Sequence[SstFile]) -> Iterator[tuple[bytes, bytes]]:
    check_tombstones = bool(tombstones.newest)
    merge, value_kind = keys.MERGE, keys.VALUE  # locals: this loop runs once per entry
    current: bytes | None = None
    previous_sequence = 0
    done = False  # the current key's value is decided (a full value or a deletion was seen)
    operands: list[bytes] = []
    base: bytes | None = None
    deleted_below = 0
    for key, sequence, kind, value in ordered:
        if key != current:
            if operands:
                yield current, _value(base, operands, delimiter)  # type: ignore[misc]
                operands = []
            elif base is not None:
                yield current, base  # type: ignore[misc]
            current, base, done = key, None, False
            if check_tombstones:
                deleted_below = tombstones.covering(key)
        elif sequence == previous_sequence:
            raise corrupt(", ".join(t.source for t in tables), 0,
                          f"two versions of key {key!r} with sequence number {sequence}")
        previous_sequence = sequence
        if done:
            continue
        if sequence < deleted_below:
            done = True
        elif kind == merge:
            operands.append(value)
        else:
            done = True
            if kind == value_kind:
                base = value
    if current is not None and (operands or base is not None):
        yield current, _value(base, operands, delimiter)


def _value(base: bytes | None, operands: list[bytes], delimiter: bytes) -> bytes:
    """The full value of a key: ``operands`` were collected newest first."""
    if not operands:
        assert base is not None
        return base
    operands.reverse()
    if base is not None:
        operands.insert(0, base)
    return delimiter.join(operands)

"""Counting a Flink snapshot's state as ``inspect`` counts a statesource checkpoint's.

A statesource checkpoint records entries, rows and bytes per key group in its
metadata; a Flink snapshot records only where each key group's bytes lie.
Entries (``(key, namespace)`` pairs), rows (one per value, list element or
map entry, as statesource counts them) and each state's share of the bytes
are known only once decoded. An operator's key groups hold all its keyed
states and timers in one stream, so each key group is read and decoded once,
for every state together (column-wise where every state allows:
:meth:`FlinkCheckpoint.columnar_sections`; else value by value).

What a snapshot's format cannot deliver is reported, not raised: in a native
snapshot a state with Kryo values ends the walk through every key group
(its values are not framed), so it and the states after it are listed with
the reason and left out of the rows, and the operator's skew is told in
bytes, which every key group's byte range gives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from statesource.errors import IncompatibleCheckpointError
from statesource.flink.declarations import value_avro
from statesource.flink.handles import OperatorSnapshot
from statesource.flink.layouts.base import DecodedSection
from statesource.flink.layouts.keyed import KeyGroupState
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.statefiles.keyed_header import KeyedHeader, StateInfo
from statesource.flink.statefiles.operator_state import read_operator_states
from statesource.format.columns import KEY, NAMESPACE
from statesource.format.entries import entry_starts
from statesource.model import StateKind
from statesource.skew import Distribution, OperatorCounts, StateCounts, format_bytes

KeyGroupProgress = Callable[[str, int, int, int, int], None]
"""Called after each decoded key group with the operator's label, the key groups decoded
and in all, and their bytes decoded and in all."""

_COLLECTIONS = (StateKind.LIST, StateKind.MAP)


@dataclass(frozen=True)
class SnapshotCounts:
    """Every operator of a Flink snapshot counted, and what the counting read."""

    operators: tuple[OperatorCounts, ...]
    key_groups: int
    """Key groups decoded (all operators)."""
    key_group_bytes: int
    unchecked: tuple[str, ...]
    """What could not be decoded, so neither counted nor checked, one phrase each."""


def count_snapshot(checkpoint: FlinkCheckpoint,
                   progress: KeyGroupProgress | None = None) -> SnapshotCounts:
    """Every operator's states counted by decoding every key group once."""
    operators, key_groups, size, unchecked = [], 0, 0, []
    for op in checkpoint.snapshot.operators:
        tally = _Tally.of(checkpoint, op, progress)
        operators.append(tally.counts(checkpoint, op))
        key_groups += tally.key_groups
        size += sum(tally.on_disk)
        unchecked += tally.unchecked(op)
    return SnapshotCounts(tuple(operators), key_groups, size, tuple(unchecked))


def count_operator(checkpoint: FlinkCheckpoint, op: OperatorSnapshot) -> OperatorCounts:
    """One operator's states counted as :func:`count_snapshot` counts them: for a caller that
    spreads the operators over workers (the metadata view's Spark partitions)."""
    return _Tally.of(checkpoint, op, None).counts(checkpoint, op)


def _rows(info: StateInfo, stored: list) -> int:
    """Rows of one state's entries: a list's elements and a map's entries count one each."""
    if info.is_timer or info.kind not in _COLLECTIONS:
        return len(stored)
    return sum(map(len, stored))


class _Tally:
    """Per state and per key group, what one operator's decoded key groups hold."""

    def __init__(self, header: KeyedHeader | None, max_parallelism: int,
                 blockers: dict[str, str]) -> None:
        self.header = header
        self.states = header.states if header else ()
        self.blockers = blockers
        self.stop_at = tuple(info.state_id for info in self.states if info.name in blockers)
        count = len(self.states)
        self.entries = [[0] * max_parallelism for _ in range(count)]
        self.rows = [[0] * max_parallelism for _ in range(count)]
        self.sizes = [0] * count
        self.seen = [0] * count
        self.key_groups = 0
        self.on_disk = [0] * max_parallelism
        self.compressed = bool(header and header.compressed)
        self.failure: str | None = None

    @classmethod
    def of(cls, checkpoint: FlinkCheckpoint, op: OperatorSnapshot,
           progress: KeyGroupProgress | None) -> _Tally:
        """The operator's key groups decoded, or why its keyed state cannot be (a serializer
        statesource does not know, a value that does not fit its type)."""
        try:
            return cls._decoded(checkpoint, op, progress)
        except IncompatibleCheckpointError as error:
            failed = cls(None, op.max_parallelism, {})
            failed.failure = str(error)
            return failed

    @classmethod
    def _decoded(cls, checkpoint: FlinkCheckpoint, op: OperatorSnapshot,
                 progress: KeyGroupProgress | None) -> _Tally:
        snapshot = checkpoint.snapshot
        header = snapshot.header(op)
        tally = cls(header, op.max_parallelism, checkpoint.unreadable_states(op.operator_id))
        if header is None:
            return tally
        pieces = snapshot.key_group_bytes(op)
        total = sum(p.end - p.begin for p in pieces)
        done = 0
        for index, piece in enumerate(pieces):
            data = snapshot.piece_bytes(piece)
            sections = checkpoint.columnar_sections(op, piece, data)
            if sections is None:
                tally.add(piece.key_group, len(data),
                          snapshot.decode_piece(op, piece, data, None, tally.stop_at))
            else:
                tally.add_columnar(piece.key_group, len(data), sections)
            done += len(data)
            if progress is not None:
                progress(op.label, index + 1, len(pieces), done, total)
        return tally

    def add(self, key_group: int, size: int, decoded: dict[int, KeyGroupState]) -> None:
        self.key_groups += 1
        self.on_disk[key_group] += size
        for state_id, found in decoded.items():
            self.seen[state_id] += 1
            self.entries[state_id][key_group] += len(found.keys)
            self.rows[state_id][key_group] += _rows(self.states[state_id], found.stored)
            self.sizes[state_id] += found.size_bytes

    def add_columnar(self, key_group: int, size: int, sections: list[DecodedSection]) -> None:
        """A key group decoded column-wise: a pair is an entry, but a map's pairs are its
        entries' user keys (together in a canonical key group, as the decoding checked)."""
        self.key_groups += 1
        self.on_disk[key_group] += size
        for section in sections:
            state_id, table = section.state_id, section.table
            self.seen[state_id] += 1
            info = self.states[state_id]
            entries = section.pairs
            if not info.is_timer and info.kind is StateKind.MAP:
                entries = len(entry_starts(table.column(KEY), table.column(NAMESPACE))) - 1
            self.entries[state_id][key_group] += entries
            self.rows[state_id][key_group] += table.num_rows
            self.sizes[state_id] += section.size_bytes

    def why_not(self, info: StateInfo) -> str | None:
        """Why a state was not counted, or None when it was."""
        if info.name in self.blockers:
            return self.blockers[info.name]
        if self.stop_at and self.seen[info.state_id] < self.key_groups:
            first = ", ".join(repr(i.name) for i in self.states if i.state_id in self.stop_at)
            return (f"it follows {first} in the key groups of this native snapshot, whose Kryo"
                    " values are not framed: read it from a canonical savepoint")
        return None

    def counts(self, checkpoint: FlinkCheckpoint, op: OperatorSnapshot) -> OperatorCounts:
        states = []
        counted_rows, counted_entries = [0] * op.max_parallelism, [0] * op.max_parallelism
        complete = True
        for info in self.states:
            types = ({"namespace": info.timer.namespace.data_type().name} if info.is_timer
                     else value_avro(info))
            kind = "timers" if info.is_timer else info.kind.value
            reason = self.why_not(info)
            if reason is not None:
                complete = False
                states.append(StateCounts(info.name, kind, None, None, None, types, reason))
                continue
            rows, entries = self.rows[info.state_id], self.entries[info.state_id]
            counted_rows = [a + b for a, b in zip(counted_rows, rows)]
            counted_entries = [a + b for a, b in zip(counted_entries, entries)]
            states.append(StateCounts(info.name, kind, sum(entries), sum(rows),
                                      self.sizes[info.state_id], types))
        notes = [] if self.failure is None else [f"keyed state not counted: {self.failure}"]
        try:
            shares = read_operator_states(checkpoint.snapshot, op)
        except IncompatibleCheckpointError as error:
            shares = {}
            notes.append(f"operator state not read: {error}")
        states += [StateCounts(name, f"operator-{share.mode.value}", share.rows, share.rows,
                               share.size_bytes, {r: s.avro for r, s in share.schemas.items()})
                   for name, share in sorted(shares.items())]
        label = op.label + (f" ({op.name})" if op.name and op.name != op.uid else "")
        if self.header is None:
            return OperatorCounts(op.label, label, op.parallelism, op.max_parallelism,
                                  None if self.failure is None else "unknown", tuple(states),
                                  None, notes=tuple(notes), name=op.name,
                                  operator_id=op.operator_id)
        distribution = Distribution(counted_rows, self.on_disk, counted_entries)
        has_timers = any(info.is_timer for info in self.states)
        return OperatorCounts(
            op.label, label, op.parallelism, op.max_parallelism,
            self.header.key.data_type().name, tuple(states), distribution,
            skew_by="rows" if complete else "bytes",
            skew_of=(f"rows of all keyed states{' and timers' if has_timers else ''}"
                     if complete else "bytes of the key groups: not every state's rows could"
                     " be counted"),
            notes=(self._note(), *notes), name=op.name, operator_id=op.operator_id)

    def _note(self) -> str:
        total = format_bytes(sum(self.on_disk))
        counted = f"counted by decoding {self.key_groups:,} key groups ({total})"
        if self.compressed:
            return (f"{counted}; a keyed state's bytes: its sections of the key groups as"
                    " serialized before Snappy compression")
        return f"{counted}; a keyed state's bytes: its sections of the key groups' byte ranges"

    def unchecked(self, op: OperatorSnapshot) -> list[str]:
        """What of the operator's key groups was not decoded, as phrases."""
        if self.failure is not None:
            return [f"the keyed state of operator {op.label!r}"]
        names = [info.name for info in self.states if self.why_not(info) is not None]
        if not names:
            return []
        return [f"states {', '.join(map(repr, names))} of operator {op.label!r}"]

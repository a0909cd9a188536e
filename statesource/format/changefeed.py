"""The change feed: what changed in one keyed state between two checkpoints of a root.

Rows carry a ``change_type`` (``insert``, ``update``, ``delete``) and the old
and new value. Value, reducing and aggregating states change per (key,
namespace); a list state per element position (``element_index``), a map
state per user key (``user_key``): appending to a list is one insert, and
putting one map entry is one insert or update. With TTL the old and new last
access come too, so a refreshed timestamp alone is an update.

Checkpoints of one root share data files (incremental checkpoints reference
unchanged key groups), so a key group whose rows are the same byte ranges of
the same files in both checkpoints did not change, and it is skipped without
reading it. Where the end checkpoint's key group is the start's plus delta runs
(format version 4), the changes are read from those runs alone: their upserts
and tombstones say what the entries became, their prior rows what they were
(:meth:`~statesource.format.deltas.SortedRuns.changes`). Only where neither holds (a
compaction or a full checkpoint intervened) are both sides read whole and diffed.

The diff itself knows nothing of where rows come from: :class:`KeyGroupChangeFeed`
diffs the key-group tables that a :class:`KeyGroupSides` delivers. Statesource
checkpoints deliver them from the format's data files (:class:`ChangeFeed`);
the ``flink`` bridge delivers them decoded from Flink snapshots.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs

from statesource.errors import IncompatibleCheckpointError, InvalidArgumentError
from statesource.format.changefeed_arrow import KeyGroupPair, arrow_diffable, diff_tables
from statesource.format.columns import (
    KEY,
    KEY_GROUP,
    NAMESPACE,
    TTL_ARROW_TYPE,
    data_schema,
    decode_entries,
)
from statesource.format.deltas import SortedRuns
from statesource.format.keyed_state_meta import KeyedStateMeta
from statesource.format.metadata import OperatorMeta
from statesource.format.reader import Checkpoint
from statesource.format.storage import PathOrLocation
from statesource.model import VALUE_ROLES, StateDeclaration, StateKind
from statesource.schema import ValueSchema
from statesource.types import DataType

CHANGE_TYPE = "change_type"
ELEMENT_INDEX = "element_index"
USER_KEY = "user_key"
OLD_VALUE, NEW_VALUE = "old_value", "new_value"
OLD_TTL, NEW_TTL = "old_ttl_timestamp", "new_ttl_timestamp"
INSERT, UPDATE, DELETE = "insert", "update", "delete"
CHUNK_ROWS = 1 << 18
"""Rows (of both sides) diffed together by the vectorised diff."""


def change_schema(key_type: DataType, declaration: StateDeclaration) -> pa.Schema:
    """The columns of a state's change rows (docs/SPARK.md, "Change feed")."""
    kind = declaration.kind
    value_role = VALUE_ROLES[kind][-1]  # value, accumulator, element or user_value
    fields = [pa.field(KEY_GROUP, pa.int32()), pa.field(CHANGE_TYPE, pa.string()),
              pa.field(KEY, key_type.arrow_type),
              pa.field(NAMESPACE, declaration.namespace_type.arrow_type)]
    if kind is StateKind.LIST:
        fields.append(pa.field(ELEMENT_INDEX, pa.int32()))
    elif kind is StateKind.MAP:
        fields.append(pa.field(USER_KEY, declaration.schemas["user_key"].arrow_type))
    value_type = declaration.schemas[value_role].arrow_type
    fields += [pa.field(OLD_VALUE, value_type), pa.field(NEW_VALUE, value_type)]
    if declaration.ttl is not None:
        fields += [pa.field(OLD_TTL, TTL_ARROW_TYPE), pa.field(NEW_TTL, TTL_ARROW_TYPE)]
    return pa.schema(fields)


@dataclass(frozen=True)
class ChangeCounts:
    """How many change rows of each type, and the key groups holding them."""

    inserts: int
    updates: int
    deletes: int
    key_groups: tuple[int, ...]
    read_key_groups: int
    """Key groups read from both checkpoints (all others were skipped unread)."""


class KeyGroupSides(Protocol):
    """Where a change feed's rows come from: one keyed state at both ends, by key group."""

    def changed_key_groups(self) -> list[int]:
        """Key groups that may differ, ascending; all others are unchanged and never read."""
        ...

    def pairs(self, key_groups: list[int]) -> Iterator[KeyGroupPair]:
        """``(key group, start rows, end rows)`` for ``key_groups`` (ascending), in the
        format's data schema, None for a side without rows. A key group found unchanged
        while reading (its bytes equal at both ends) may be left out."""
        ...


class KeyGroupChangeFeed:
    """The changes of one keyed state between two snapshots, diffed key group by key group.

    ``start_id`` and ``end_id`` are the snapshots' checkpoint ids; ``end_operator``
    describes the operator in the end snapshot (its key type and key groups),
    ``operator`` and ``state`` are the names there.
    """

    def __init__(self, end_operator: OperatorMeta, declaration: StateDeclaration,
                 sides: KeyGroupSides, *, state: str, start_id: int, end_id: int) -> None:
        self.end_operator = end_operator
        self.key_type = end_operator.keyed_key_type
        self.declaration = declaration
        self.sides = sides
        self.operator, self.state = end_operator.uid, state
        self.start_id, self.end_id = start_id, end_id
        self.schema = change_schema(self.key_type, declaration)

    def changed_key_groups(self) -> list[int]:
        """Key groups whose rows may differ (known from metadata alone): the rest are skipped."""
        return self.sides.changed_key_groups()

    def read(self, key_groups: Any = None) -> Iterator[pa.Table]:
        """Tables of change rows in key-group order, each of one or more whole key groups.

        ``key_groups`` (a collection) restricts the feed; key groups outside
        :meth:`changed_key_groups` have no changes and are never read. Both
        sides are read a few key groups at a time (up to about ``CHUNK_ROWS``
        rows), so memory does not grow with the state.
        """
        wanted = [kg for kg in self.changed_key_groups()
                  if key_groups is None or kg in key_groups]
        if not wanted:
            return
        if arrow_diffable(self.key_type, self.declaration):
            stored = data_schema(self.key_type, self.declaration)
            for chunk in _chunks(self.sides.pairs(wanted)):
                table = diff_tables(chunk, self.declaration, stored, self.schema)
                if table.num_rows:
                    yield table
            return
        differ = _Differ(self.declaration, self.schema, self.key_type)
        for key_group, before, after in self.sides.pairs(wanted):
            table = differ.table(key_group, self._entries(before), self._entries(after))
            if table.num_rows:
                yield table

    def counts(self) -> ChangeCounts:
        """Per change type, how many rows the feed has (for ``statesource diff``)."""
        totals = {INSERT: 0, UPDATE: 0, DELETE: 0}
        groups: set[int] = set()
        for table in self.read():
            groups.update(table.column(KEY_GROUP).unique().to_pylist())
            types, counts = np.unique(np.array(table.column(CHANGE_TYPE).to_pylist()),
                                      return_counts=True)
            for change_type, count in zip(types.tolist(), counts.tolist()):
                totals[change_type] += count
        return ChangeCounts(totals[INSERT], totals[UPDATE], totals[DELETE], tuple(sorted(groups)),
                            len(self.changed_key_groups()))

    def _entries(self, table: pa.Table | None) -> dict[Any, tuple[Any, Any, Any]]:
        """Identity of (key, namespace) -> (key, namespace, stored), for the Python diff."""
        if table is None:
            return {}
        identity = _identity_of(self.key_type, self.declaration.namespace_type)
        return {identity(key, namespace): (key, namespace, stored)
                for key, namespace, stored in decode_entries(self.key_type, self.declaration,
                                                             table)}


def check_forward(start_id: int, end_id: int) -> None:
    """A change feed runs from an earlier checkpoint to a later one (or the same: no changes)."""
    if start_id > end_id:
        raise InvalidArgumentError(
            f"a change feed runs forward: start checkpoint {start_id} is after"
            f" end checkpoint {end_id}"
        )


class ChangeFeed(KeyGroupChangeFeed):
    """The changes of one keyed state from checkpoint ``start`` to checkpoint ``end`` of a root."""

    def __init__(self, start: Checkpoint, end: Checkpoint, *, operator: str | None = None,
                 state: str | None = None) -> None:
        check_forward(start.checkpoint_id, end.checkpoint_id)
        if start.root != end.root:
            raise InvalidArgumentError(
                f"checkpoints {start.location} and {end.location} are not of one root"
            )
        self.start, self.end = start, end
        self.root = end.root
        end_op = end.operator(operator)
        self.end_state = end_op.keyed_state(state)
        self.start_state = _same_state(start, end_op, self.end_state)
        super().__init__(end_op, self.end_state.declaration,
                         _CheckpointSides(start, end, end_op.uid, self.start_state,
                                          self.end_state),
                         state=self.end_state.name, start_id=start.checkpoint_id,
                         end_id=end.checkpoint_id)

    @classmethod
    def open(cls, path: PathOrLocation, start_id: int, end_id: int | None = None, *,
             operator: str | None = None, state: str | None = None,
             filesystem: pafs.FileSystem | None = None) -> ChangeFeed:
        """The feed between checkpoints ``start_id`` and ``end_id`` (default: the newest)."""
        end = Checkpoint.open(path, checkpoint_id=end_id, filesystem=filesystem)
        start = Checkpoint.open(end.root, checkpoint_id=start_id)
        return cls(start, end, operator=operator, state=state)


class _CheckpointSides:
    """Key groups of a state in two statesource checkpoints, read from their data files."""

    def __init__(self, start: Checkpoint, end: Checkpoint, operator: str,
                 start_state: KeyedStateMeta | None, end_state: KeyedStateMeta) -> None:
        self.start, self.end, self.operator = start, end, operator
        self.start_state, self.end_state = start_state, end_state
        self._before, self._after = _chains(start_state), _chains(end_state)
        self._end_runs = end_state.runs_of()

    def changed_key_groups(self) -> list[int]:
        """Key groups whose rows are not the same byte ranges of the same files in both."""
        before, after = self._before, self._after
        return sorted(kg for kg in before.keys() | after.keys() if before.get(kg) != after.get(kg))

    def pairs(self, key_groups: list[int]) -> Iterator[KeyGroupPair]:
        new_runs = {kg: count for kg in key_groups if (count := self._new_runs(kg)) is not None}
        whole = [kg for kg in key_groups if kg not in new_runs]
        return _merge_pairs(
            _merge_sides(whole, self._tables(self.start, self.start_state, whole),
                         self._tables(self.end, self.end_state, whole)),
            self._run_pairs(new_runs))

    def _new_runs(self, key_group: int) -> int | None:
        """How many runs the end checkpoint's key group has beyond the start's, when it is
        the start's plus runs (None: it is not)."""
        before = self._before.get(key_group, (None, ()))
        after = self._after.get(key_group)
        if after is None or before[0] != after[0] or after[1][:len(before[1])] != before[1]:
            return None
        return len(after[1]) - len(before[1])

    def _run_pairs(self, new_runs: dict[int, int]) -> Iterator[KeyGroupPair]:
        """Before and after of the entries the new runs change, reading only those runs
        (``new_runs``: per key group, how many there are, ascending by key group)."""
        runs = {kg: self._end_runs[kg][-count:] for kg, count in new_runs.items() if count}
        changes = SortedRuns(self.end.read_runs(self.end_state.name, operator=self.operator,
                                                runs=runs), priors=True).changes()
        for key_group in new_runs:
            before, after = changes.get(key_group, (None, None))
            yield key_group, before, after

    def _tables(self, checkpoint: Checkpoint, state: KeyedStateMeta | None,
                key_groups: list[int]) -> Iterator[tuple[int, pa.Table]]:
        if state is None or not key_groups:
            return
        for table in checkpoint.read_keyed_state(state.name, operator=self.operator,
                                                 key_groups=key_groups):
            yield table.column(KEY_GROUP)[0].as_py(), table


def _merge_pairs(*streams: Iterator[KeyGroupPair]) -> Iterator[KeyGroupPair]:
    """Pairs of several streams, each ascending by key group, in one ascending stream."""
    return heapq.merge(*streams, key=lambda pair: pair[0])


def _merge_sides(key_groups: list[int], before: Iterator[tuple[int, pa.Table]],
                after: Iterator[tuple[int, pa.Table]]) -> Iterator[KeyGroupPair]:
    """``(key group, start rows, end rows)`` of each key group, None where a side has none.

    ``before`` and ``after`` yield ``(key group, rows)`` in ascending key-group order.
    """
    sides = [before, after]
    heads = [next(side, None) for side in sides]
    for key_group in key_groups:
        pair: list[pa.Table | None] = [None, None]
        for index, side in enumerate(sides):
            head = heads[index]
            if head is not None and head[0] == key_group:
                pair[index] = head[1]
                heads[index] = next(side, None)
        yield key_group, pair[0], pair[1]


def _chunks(pairs: Iterator[KeyGroupPair]) -> Iterator[list[KeyGroupPair]]:
    """Consecutive key groups, gathered until they hold about ``CHUNK_ROWS`` rows."""
    chunk: list[KeyGroupPair] = []
    rows = 0
    for pair in pairs:
        chunk.append(pair)
        rows += sum(t.num_rows for t in pair[1:] if t is not None)
        if rows >= CHUNK_ROWS:
            yield chunk
            chunk, rows = [], 0
    if chunk:
        yield chunk


def _same_state(start: Checkpoint, end_op: OperatorMeta, end_state: KeyedStateMeta
                ) -> KeyedStateMeta | None:
    """The state in the start checkpoint (None: it had none), refusing different types."""
    uid = end_op.uid
    op = next((o for o in start.metadata.operators if o.uid == uid), None)
    state = None if op is None else next(
        (s for s in op.keyed_states if s.name == end_state.name), None)
    if state is None:
        return None
    assert op is not None
    if (op.key_type, op.max_parallelism) != (end_op.key_type, end_op.max_parallelism):
        raise IncompatibleCheckpointError(
            f"operator {uid!r} has key type {op.key_type} and max parallelism"
            f" {op.max_parallelism} in checkpoint {start.checkpoint_id} but {end_op.key_type}"
            f" and {end_op.max_parallelism} later: a change feed needs the same key groups"
        )
    if not state.declaration.same_types(end_state.declaration):
        raise IncompatibleCheckpointError(
            f"state {end_state.name!r} of operator {uid!r} is {state.declaration.describe()}"
            f" in checkpoint {start.checkpoint_id} but {end_state.declaration.describe()} later:"
            " a change feed needs the same types"
        )
    return state


Piece = tuple[str, int, int, int]
"""A byte range as the change feed compares them: path, offset, length, CRC-32."""


def _chains(state: KeyedStateMeta | None) -> dict[int, tuple[Piece | None, tuple[Piece, ...]]]:
    """Each stored key group's base range (None: none) and delta runs, oldest first."""
    if state is None:
        return {}
    bases = {loc.key_group: (f.path, loc.offset, loc.length, loc.crc32)
             for f, loc in state.key_group_locations()}
    runs = state.runs_of()
    return {kg: (bases.get(kg), tuple((d.path, loc.offset, loc.length, loc.crc32)
                                      for d, loc in runs.get(kg, ())))
            for kg in bases.keys() | runs.keys()}


def _identity_of(*types: DataType) -> Any:
    """How to compare keys and namespaces as Java does: floats by their bits.

    Python's ``0.0 == -0.0`` and ``nan != nan`` differ from Java's ``equals``.
    """
    if not any(word in t.name for t in types for word in ("float", "double")):
        return lambda key, namespace: (key, namespace)
    return lambda key, namespace: (_exact(key), _exact(namespace))


def _exact(value: Any) -> Any:
    """A stand-in for ``value`` whose Python equality is Java's (floats by their bits)."""
    if isinstance(value, float):
        return ("float", b"nan" if value != value else struct.pack(">d", value))
    if isinstance(value, tuple):
        return (type(value), getattr(value, "kind", None), tuple(_exact(v) for v in value))
    if isinstance(value, list):
        return ("list", tuple(_exact(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((_exact(k), _exact(v)) for k, v in value.items()))
    return value


class _Differ:
    """Diffs one key group's entries into change rows of the state's schema."""

    def __init__(self, declaration: StateDeclaration, schema: pa.Schema,
                 key_type: DataType) -> None:
        self.kind = declaration.kind
        self.ttl = declaration.ttl is not None
        self.declaration = declaration
        self.schema = schema
        self.key_type = key_type
        roles = VALUE_ROLES[self.kind]
        self.value_schema: ValueSchema = declaration.schemas[roles[-1]]
        avro = str([s.avro for s in declaration.schemas.values()])
        self.same = _exact_equal if "float" in avro or "double" in avro else _equal

    def table(self, key_group: int, before: dict, after: dict) -> pa.Table:
        rows: list[tuple[str, Any, Any, Any, Any, Any]] = []
        for identity in [*before, *(i for i in after if i not in before)]:
            old, new = before.get(identity), after.get(identity)
            key, namespace, _ = after[identity] if new is not None else before[identity]
            self._entry_rows(rows, key, namespace, None if old is None else old[2],
                             None if new is None else new[2])
        return self._to_table(key_group, rows)

    def _entry_rows(self, rows: list, key: Any, namespace: Any, old: Any, new: Any) -> None:
        """Rows (change type, key, namespace, position, old stored, new stored) of one entry."""
        if self.kind is StateKind.LIST:
            old_items, new_items = old or [], new or []
            for index in range(max(len(old_items), len(new_items))):
                self._row(rows, key, namespace, index,
                          old_items[index] if index < len(old_items) else None,
                          new_items[index] if index < len(new_items) else None)
        elif self.kind is StateKind.MAP:
            old_items, new_items = old or {}, new or {}
            for user_key in [*old_items, *(k for k in new_items if k not in old_items)]:
                self._row(rows, key, namespace, user_key, old_items.get(user_key),
                          new_items.get(user_key))
        else:
            self._row(rows, key, namespace, None, old, new)

    def _row(self, rows: list, key: Any, namespace: Any, position: Any, old: Any,
             new: Any) -> None:
        if old is None:
            rows.append((INSERT, key, namespace, position, None, new))
        elif new is None:
            rows.append((DELETE, key, namespace, position, old, None))
        elif not self.same(old, new):
            rows.append((UPDATE, key, namespace, position, old, new))

    def _to_table(self, key_group: int, rows: list) -> pa.Table:
        change_types, keys, namespaces, positions, olds, news = (
            [list(c) for c in zip(*rows)] if rows else [[] for _ in range(6)])
        columns = [pa.array(np.full(len(rows), key_group, dtype=np.int32)),
                   pa.array(change_types, pa.string()),
                   self.key_type.to_arrow(keys),
                   self.declaration.namespace_type.to_arrow(namespaces)]
        if self.kind is StateKind.LIST:
            columns.append(pa.array(positions, pa.int32()))
        elif self.kind is StateKind.MAP:
            columns.append(self.declaration.schemas["user_key"].to_arrow(positions))
        values: tuple[list[Any], ...] = (olds, news)
        if self.ttl:
            values = tuple([None if s is None else s[0] for s in side] for side in (olds, news))
        columns += [_nullable(self.value_schema, side) for side in values]
        if self.ttl:
            columns += [pa.array([None if s is None else s[1] for s in side], TTL_ARROW_TYPE)
                        for side in (olds, news)]
        return pa.Table.from_arrays(columns, schema=self.schema)


def _nullable(schema: ValueSchema, values: list[Any]) -> pa.Array:
    """``values`` as a column of ``schema`` where None marks no value (insert or delete)."""
    present = [v for v in values if v is not None]
    indices, next_index = [], 0
    for value in values:
        indices.append(None if value is None else next_index)
        next_index += value is not None
    return schema.to_arrow(present).take(pa.array(indices, pa.int64()))


def _equal(a: Any, b: Any) -> bool:
    return bool(a == b)


def _exact_equal(a: Any, b: Any) -> bool:
    return bool(_exact(a) == _exact(b))

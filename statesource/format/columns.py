"""Rows of a keyed-state data file: their schema, and conversion from and to stored state.

One row per value, per list element or per map entry, so every column is a
plain typed column that Spark can scan and prune without unnesting. Rows of
one (key, namespace) entry are contiguous and in list order, which is what
lets a reader regroup them without sorting.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import pyarrow as pa

from statesource.errors import StateSourceError
from statesource.format.entries import entry_starts
from statesource.format.ipc import split_batches
from statesource.keyequality import decoded_key_canonicalizer
from statesource.model import VALUE_ROLES, StateDeclaration, StateKind, snapshot_expirer_for
from statesource.schema import hashable_record
from statesource.types import DataType

KEY_GROUP = "key_group"
KEY = "key"
NAMESPACE = "namespace"
TTL_TIMESTAMP = "ttl_timestamp"
TTL_ARROW_TYPE = pa.timestamp("ms", tz="UTC")

COLUMN_OF_ROLE = {"value": "value", "element": "list_element", "user_key": "user_key",
                  "user_value": "user_value", "accumulator": "accumulator"}
"""The data-file column that holds each value role."""

VALUE_COLUMNS: dict[StateKind, tuple[tuple[str, str], ...]] = {
    kind: tuple((COLUMN_OF_ROLE[role], role) for role in roles)
    for kind, roles in VALUE_ROLES.items()
}
"""Per kind: (column name, schema role) of the value columns, in column order."""


TIMER_TIMESTAMP = "timestamp"


def timer_schema(key_type: DataType, namespace_type: DataType) -> pa.Schema:
    """Rows of a timer state (Flink's, which the format reads but does not store): one per
    registered timer."""
    return pa.schema([pa.field(KEY_GROUP, pa.int32()), pa.field(KEY, key_type.arrow_type),
                      pa.field(NAMESPACE, namespace_type.arrow_type),
                      pa.field(TIMER_TIMESTAMP, pa.int64())])


def data_schema(key_type: DataType, declaration: StateDeclaration) -> pa.Schema:
    """The Arrow schema of a data file of this state (derived, never stored apart)."""
    fields = [
        pa.field(KEY_GROUP, pa.int32()),
        pa.field(KEY, key_type.arrow_type),
        pa.field(NAMESPACE, declaration.namespace_type.arrow_type),
    ]
    for column, role in VALUE_COLUMNS[declaration.kind]:
        fields.append(pa.field(column, declaration.schemas[role].arrow_type))
    if declaration.ttl is not None:
        fields.append(pa.field(TTL_TIMESTAMP, TTL_ARROW_TYPE))
    return pa.schema(fields)


DELTA_KIND = "delta_kind"
UPSERT, TOMBSTONE, PRIOR = 0, 1, 2
"""Values of :data:`DELTA_KIND`, the column a delta run adds (:mod:`statesource.format.deltas`)."""
BASE_ROW = "base_row"
"""The column a row-addressed delta file adds last (format version 5): where a state row's
entry lies in its key group's base rows, or -1."""
DELTA_COLUMNS = [DELTA_KIND, BASE_ROW]
"""The columns of delta runs that data rows lack (those a row-addressed file has)."""


def searchable(schema: pa.Schema) -> bool:
    """Whether rows of ``schema`` have one row per entry once their keys ascend: an integer
    key and the void namespace."""
    return pa.types.is_integer(schema.field(KEY).type) \
        and pa.types.is_null(schema.field(NAMESPACE).type)


def in_key_order(table: pa.Table) -> pa.Table:
    """``table`` (rows ascending by key group) with each key group's rows in ascending key
    order, prior rows after the others within a run's; unchanged unless :func:`searchable`.

    The sort is stable, so an entry's rows stay contiguous and in their order.
    """
    order = key_order(table)
    return table if order is None else table.take(pa.array(order))


def key_order(table: pa.Table) -> np.ndarray | None:
    """The row order :func:`in_key_order` puts ``table`` in; None to leave it as it is."""
    if not searchable(table.schema) or table.num_rows < 2 or table.column(KEY).null_count:
        return None
    keys = table.column(KEY).to_numpy()
    groups = table.column(KEY_GROUP).to_numpy()
    if DELTA_KIND in table.column_names:
        segments = groups.astype(np.uint16) * 2 + (table.column(DELTA_KIND).to_numpy() == PRIOR)
    elif np.all((keys[1:] >= keys[:-1]) | (groups[1:] != groups[:-1])):
        return None  # already in order, as keys inserted in order leave a state map
    else:
        segments = groups.astype(np.uint16)
    # Two stable sorts (by key, then by segment: a radix sort of 16-bit values) order the
    # rows as one lexicographic sort would, in a fraction of its time.
    order = np.argsort(keys, kind="stable")
    return order[np.argsort(segments[order], kind="stable")]


CHUNK_ROWS = 1 << 12
"""Key groups with fewer rows are gathered up to this many before conversion, so that
thousands of tiny key groups do not each pay pyarrow's per-call cost."""


@dataclass
class Rows:
    """One key group's rows as Python column lists."""

    key_group: int
    keys: list[Any]
    namespaces: list[Any]
    values: tuple[list[Any], ...]
    timestamps: list[int]
    entries: int

    def __len__(self) -> int:
        return len(self.keys)


class RowEncoder:
    """Turns one state's stored entries into record batches, key group by key group.

    The input is Python columns per key group (keys, namespaces, stored states
    in the shapes of :mod:`statesource.model`), as a state map snapshot or any
    other producer hands them out. Expired values are dropped when the state
    asks for full-snapshot cleanup. A key group converts straight from the
    given lists; only small ones are copied together first.
    Full-snapshot cleanup follows Flink's transformers (``snapshot_expirer_for``).
    """

    def __init__(self, key_type: DataType, declaration: StateDeclaration,
                 expire_at_ms: int | None, *, key_order: bool = False) -> None:
        """``key_order`` puts each key group's rows in key order (:func:`in_key_order`), as
        checkpoints are written; readers of other formats keep their files' order."""
        self.key_order = key_order
        self.key_type = key_type
        self.declaration = declaration
        self.schema = data_schema(key_type, declaration)
        self._kind = declaration.kind
        self._ttl = declaration.ttl is not None
        self._expire: Callable[[Any], Any] | None = None
        ttl = declaration.ttl
        if ttl is not None and expire_at_ms is not None and ttl.cleanup_full_snapshot:
            expire, now = snapshot_expirer_for(declaration.kind, ttl), expire_at_ms
            self._expire = lambda stored: expire(stored, now)

    def encode(self, key_groups: Iterable[tuple[int, list, list, list]]
               ) -> Iterator[tuple[int, list[pa.RecordBatch], int]]:
        """``(key group, batches, entries)`` of every key group with rows, in order.

        ``key_groups`` yields ``(key group, keys, namespaces, stored states)``.
        """
        chunk: list[Rows] = []
        chunk_rows = 0
        for key_group, keys, namespaces, states in key_groups:
            rows = self.rows_of(key_group, keys, namespaces, states)
            if len(rows):
                chunk.append(rows)
                chunk_rows += len(rows)
            if chunk_rows >= CHUNK_ROWS:
                yield from self._encode_chunk(chunk)
                chunk, chunk_rows = [], 0
        yield from self._encode_chunk(chunk)

    @property
    def filters(self) -> bool:
        """Whether full-snapshot cleanup may drop stored states (else :meth:`live` keeps all)."""
        return self._expire is not None

    def live(self, stored: Any) -> Any:
        """``stored`` as a checkpoint holds it: None when full-snapshot cleanup drops it all."""
        return stored if self._expire is None else self._expire(stored)

    def rows_of(self, key_group: int, keys: list, namespaces: list, states: list) -> Rows:
        """The rows of one key group's entries (the snapshot's own lists where possible)."""
        if self._expire is not None:
            expire = self._expire
            kept = [(k, n, live) for k, n, stored in zip(keys, namespaces, states)
                    if (live := expire(stored)) is not None]
            keys, namespaces, states = (list(c) for c in zip(*kept)) if kept else ([], [], [])
        kind, ttl = self._kind, self._ttl
        if kind is not StateKind.LIST and kind is not StateKind.MAP:
            if not ttl:
                return Rows(key_group, keys, namespaces, (states,), [], len(keys))
            return Rows(key_group, keys, namespaces, ([s[0] for s in states],),
                        [s[1] for s in states], len(keys))
        rows = Rows(key_group, [], [], ([], []) if kind is StateKind.MAP else ([],), [],
                    len(keys))
        values = rows.values
        for key, namespace, stored in zip(keys, namespaces, states):
            count = len(stored)
            rows.keys.extend([key] * count)
            rows.namespaces.extend([namespace] * count)
            if kind is StateKind.LIST:
                items, target = stored, values[0]
            else:
                values[0].extend(stored.keys())
                items, target = stored.values(), values[1]
            if ttl:
                for value, timestamp in items:
                    target.append(value)
                    rows.timestamps.append(timestamp)
            else:
                target.extend(items)
        return rows

    def _encode_chunk(self, chunk: list[Rows]) -> Iterator[tuple[int, list[pa.RecordBatch], int]]:
        if not chunk:
            return
        table = self.table(chunk)
        if self.key_order:
            table = in_key_order(table)
        start = 0
        for rows in chunk:
            yield rows.key_group, split_batches(table, start, len(rows)), rows.entries
            start += len(rows)

    def table(self, chunk: list[Rows]) -> pa.Table:
        """The chunk's rows as a table of :func:`data_schema`; type errors name the state."""

        def joined(pick: Callable[[Rows], list]) -> list:
            return pick(chunk[0]) if len(chunk) == 1 else list(
                chain.from_iterable(pick(rows) for rows in chunk))

        groups = np.repeat(np.array([r.key_group for r in chunk], dtype=np.int32),
                           np.array([len(r) for r in chunk], dtype=np.int64))
        try:
            columns = [
                pa.array(groups),
                self.key_type.to_arrow(joined(lambda r: r.keys)),
                self.declaration.namespace_type.to_arrow(joined(lambda r: r.namespaces)),
            ]
            for index, (_, role) in enumerate(VALUE_COLUMNS[self._kind]):
                values = joined(functools.partial(_values_at, index))
                columns.append(self.declaration.schemas[role].to_arrow(values))
        except StateSourceError as error:
            raise type(error)(f"state {self.declaration.name!r}: {error}") from None
        except (pa.ArrowException, OverflowError, TypeError, ValueError) as error:
            raise StateSourceError(
                f"state {self.declaration.name!r}: cannot encode keys or values: {error}"
            ) from None
        if self._ttl:
            columns.append(pa.array(joined(lambda r: r.timestamps), TTL_ARROW_TYPE))
        return pa.Table.from_arrays(columns, schema=self.schema)


def _values_at(index: int, rows: Rows) -> list:
    return rows.values[index]


def canonical_column(data_type: DataType, values: list[Any]) -> list[Any]:
    """Decoded keys or namespaces in their Java-equality form (``statesource.keyequality``).

    Rows belong to one entry exactly when Java calls their keys equal: a NaN key's
    rows stay together and a ``-0.0`` key's rows stay apart from a ``0.0`` key's.
    """
    canonical = decoded_key_canonicalizer(data_type)
    return values if canonical is None else [None if v is None else canonical(v)
                                             for v in values]


def decode_entries(key_type: DataType, declaration: StateDeclaration,
                   rows: pa.Table | pa.RecordBatch) -> Iterator[tuple[Any, Any, Any]]:
    """Regroup one key group's rows into ``(key, namespace, stored_state)`` entries."""
    keys = canonical_column(key_type, key_type.from_arrow(rows.column(KEY)))
    namespace_type = declaration.namespace_type
    namespaces = canonical_column(namespace_type, namespace_type.from_arrow(rows.column(NAMESPACE)))
    values = [declaration.schemas[role].to_python(rows.column(column))
              for column, role in VALUE_COLUMNS[declaration.kind]]
    timestamps = (rows.column(TTL_TIMESTAMP).cast(pa.int64()).to_pylist()
                  if declaration.ttl is not None else None)
    kind = declaration.kind
    if kind is not StateKind.LIST and kind is not StateKind.MAP:
        stored = values[0] if timestamps is None else list(zip(values[0], timestamps))
        yield from zip(keys, namespaces, stored)
        return
    items = values[0] if kind is StateKind.LIST else values[1]
    if timestamps is not None:
        items = list(zip(items, timestamps))
    starts = entry_starts(rows.column(KEY), rows.column(NAMESPACE)).tolist()
    for start, end in zip(starts, starts[1:]):
        entry: list | dict = (items[start:end] if kind is StateKind.LIST
                              else dict(zip(map(hashable_record, values[0][start:end]),
                                            items[start:end])))
        yield keys[start], namespaces[start], entry

"""Rows of a keyed-state data file: their schema, and conversion from and to stored state.

One row per value, per list element or per map entry, so every column is a
plain typed column that Spark can scan and prune without unnesting. Rows of
one (key, namespace) entry are contiguous and in list order, which is what
lets a reader regroup them without sorting.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from statesource.errors import StateSourceError
from statesource.state.descriptors import StateDescriptor, StateKind
from statesource.state.expiry import Expirer, expirer_for
from statesource.types import DataType

KEY_GROUP = "key_group"
KEY = "key"
NAMESPACE = "namespace"
TTL_TIMESTAMP = "ttl_timestamp"
TTL_ARROW_TYPE = pa.timestamp("ms", tz="UTC")

VALUE_COLUMNS: dict[StateKind, tuple[tuple[str, str], ...]] = {
    StateKind.VALUE: (("value", "value"),),
    StateKind.REDUCING: (("value", "value"),),
    StateKind.AGGREGATING: (("accumulator", "accumulator"),),
    StateKind.LIST: (("list_element", "element"),),
    StateKind.MAP: (("user_key", "user_key"), ("user_value", "user_value")),
}
"""Per kind: (column name, schema role) of the value columns, in column order."""


def data_schema(key_type: DataType, declaration: StateDescriptor) -> pa.Schema:
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


@dataclass
class RowBuffer:
    """Python column lists being filled for one data file (key groups as runs)."""

    key_group_runs: list[tuple[int, int]]
    keys: list[Any]
    namespaces: list[Any]
    values: tuple[list[Any], ...]
    timestamps: list[int]
    entries: int = 0

    @classmethod
    def empty(cls, value_columns: int) -> RowBuffer:
        return cls([], [], [], tuple([] for _ in range(value_columns)), [])

    def __len__(self) -> int:
        return len(self.keys)


class RowEncoder:
    """Turns stored state objects of one state into rows (dropping expired ones if asked)."""

    def __init__(self, key_type: DataType, declaration: StateDescriptor,
                 expire_at_ms: int | None) -> None:
        self.key_type = key_type
        self.declaration = declaration
        self.schema = data_schema(key_type, declaration)
        self._kind = declaration.kind
        self._ttl = declaration.ttl is not None
        self._expire: Expirer | None = None
        if self._ttl and expire_at_ms is not None and declaration.ttl.cleanup_full_snapshot:
            self._expire = expirer_for(declaration.kind, declaration.ttl)
        self._expire_at = expire_at_ms

    def add(self, buffer: RowBuffer, key_group: int, keys: list, namespaces: list,
            states: list) -> None:
        """Append the rows of one key group's entries to ``buffer``."""
        if self._expire is not None:
            expire, now = self._expire, self._expire_at
            kept = [(k, n, live) for k, n, stored in zip(keys, namespaces, states)
                    if (live := expire(stored, now)) is not None]
            keys, namespaces, states = (list(c) for c in zip(*kept)) if kept else ([], [], [])
        start = len(buffer)
        kind, ttl, values = self._kind, self._ttl, buffer.values
        if kind is StateKind.LIST or kind is StateKind.MAP:
            for key, namespace, stored in zip(keys, namespaces, states):
                count = len(stored)
                buffer.keys.extend([key] * count)
                buffer.namespaces.extend([namespace] * count)
                if kind is StateKind.LIST:
                    items = stored
                    target = values[0]
                else:
                    values[0].extend(stored.keys())
                    items = stored.values()
                    target = values[1]
                if ttl:
                    for value, timestamp in items:
                        target.append(value)
                        buffer.timestamps.append(timestamp)
                else:
                    target.extend(items)
        else:
            buffer.keys.extend(keys)
            buffer.namespaces.extend(namespaces)
            if ttl:
                values[0].extend(s[0] for s in states)
                buffer.timestamps.extend(s[1] for s in states)
            else:
                values[0].extend(states)
        if len(buffer) > start:
            buffer.key_group_runs.append((key_group, len(buffer) - start))
        buffer.entries += len(keys)

    def to_table(self, buffer: RowBuffer, name: str) -> pa.Table:
        """The buffered rows as a table of :func:`data_schema`; type errors name the state."""
        try:
            columns = [
                pa.array(_repeat_runs(buffer.key_group_runs)),
                self.key_type.to_arrow(buffer.keys),
                self.declaration.namespace_type.to_arrow(buffer.namespaces),
            ]
            for (_, role), values in zip(VALUE_COLUMNS[self._kind], buffer.values):
                columns.append(self.declaration.schemas[role].to_arrow(values))
        except StateSourceError as error:
            raise type(error)(f"state {name!r}: {error}") from None
        except (pa.ArrowException, OverflowError, TypeError, ValueError) as error:
            raise StateSourceError(f"state {name!r}: cannot encode keys or values: {error}") \
                from None
        if self._ttl:
            columns.append(pa.array(buffer.timestamps, TTL_ARROW_TYPE))
        return pa.Table.from_arrays(columns, schema=self.schema)


def _repeat_runs(runs: list[tuple[int, int]]) -> np.ndarray:
    groups, counts = zip(*runs) if runs else ((), ())
    return np.repeat(np.array(groups, dtype=np.int32), np.array(counts, dtype=np.int64))


def entry_starts(keys: list[Any], namespaces: list[Any]) -> list[int]:
    """Row index where each (key, namespace) entry starts, plus the row count at the end."""
    starts = [0] if keys else []
    for row in range(1, len(keys)):
        if keys[row] != keys[row - 1] or namespaces[row] != namespaces[row - 1]:
            starts.append(row)
    starts.append(len(keys))
    return starts


def decode_entries(key_type: DataType, declaration: StateDescriptor,
                   rows: pa.Table | pa.RecordBatch) -> Iterator[tuple[Any, Any, Any]]:
    """Regroup one key group's rows into ``(key, namespace, stored_state)`` entries."""
    keys = key_type.from_arrow(rows.column(KEY))
    namespaces = declaration.namespace_type.from_arrow(rows.column(NAMESPACE))
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
    starts = entry_starts(keys, namespaces)
    for start, end in zip(starts, starts[1:]):
        if kind is StateKind.LIST:
            stored: Any = items[start:end]
        else:
            stored = dict(zip(values[0][start:end], items[start:end]))
        yield keys[start], namespaces[start], stored

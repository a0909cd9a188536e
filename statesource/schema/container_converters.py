"""Converters of the Avro types that hold other types: record, array and map.

Both paths recurse into the children: ``check`` walks one value, ``column``
turns a column of records into one column per field and a column of arrays or
maps into one flat column of items, which the children convert in one call.
"""

from __future__ import annotations

from itertools import chain
from operator import countOf, itemgetter
from typing import Any

import numpy as np
import pyarrow as pa

from statesource.schema.converter import (
    NONE_TYPE,
    Column,
    Mismatch,
    Node,
    describe,
    null_mismatch,
)
from statesource.schema.leaf_converters import StringLeaf, check_str


def _containers(
    values: Column, accepted: tuple[type, ...], nullable: bool, parent_nulls: int
) -> tuple[int, Column, pa.Array | None]:
    """Column-path guard shared by record/array/map: returns (nulls, non-null values, mask)."""
    types = set(map(type, values))
    nulls = 0
    if NONE_TYPE in types:
        types.discard(NONE_TYPE)
        nulls = countOf(values, None)
    if not nullable and nulls != parent_nulls:
        raise Mismatch("null")
    for t in types:
        if not issubclass(t, accepted):
            raise Mismatch(f"type {t.__name__}")
    if not nulls:
        return 0, values, None
    mask = pa.array([v is None for v in values], type=pa.bool_())
    return nulls, [v for v in values if v is not None], mask


def _offsets(values: Column, nulls: int) -> pa.Array:
    lengths = [0 if v is None else len(v) for v in values] if nulls else list(map(len, values))
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] > 2**31 - 1:
        raise Mismatch("more than 2**31 - 1 items")
    return pa.array(offsets.astype(np.int32), type=pa.int32())


class RecordNode(Node):
    def __init__(self, label: str) -> None:
        self.label = label
        self.fields: list[
            tuple[str, Node, bool]
        ] = []  # set by finish() once the children are compiled

    def finish(self, fields: list[tuple[str, Node, bool]]) -> None:
        self.fields = fields
        self.names = frozenset(name for name, _, _ in fields)
        self._arrow_fields = [pa.field(n, node.arrow_type, nullable=True) for n, node, _ in fields]
        self.arrow_type = pa.struct(self._arrow_fields)
        self._checks = [(n, node.check, nullable, node.label) for n, node, nullable in fields]
        fixes = [(n, node.fix) for n, node, _ in fields if node.fix is not None]
        if fixes:

            def fix(v: dict) -> dict:
                for name, f in fixes:
                    x = v[name]
                    if x is not None:
                        v[name] = f(x)
                return v

            self.fix = fix

    def check(self, v: object) -> dict[Any, Any]:
        if not isinstance(v, dict):
            raise Mismatch(f"expected dict for {self.label}, got {describe(v)}")
        changed: dict[Any, Any] | None = None
        present = 0
        for name, check, nullable, label in self._checks:
            if name in v:
                present += 1
                x = v[name]
                if x is None:
                    if nullable:
                        continue
                    m = null_mismatch(label)
                    m.path.append(("field", name))
                    raise m
            elif nullable:
                continue
            else:
                raise Mismatch(f"missing field {name!r} (not nullable) in {self.label}")
            try:
                y = check(x)
            except Mismatch as m:
                m.path.append(("field", name))
                raise
            if y is not x:
                if changed is None:
                    changed = dict(v)
                changed[name] = y
        if present != len(v):
            extra = sorted(repr(k) for k in v if k not in self.names)
            raise Mismatch(f"unknown field(s) {', '.join(extra)} for {self.label}")
        return v if changed is None else changed

    def column(self, values: Column, nullable: bool, parent_nulls: int) -> pa.Array:
        if not self.fields:
            raise Mismatch("no fields")  # StructArray.from_arrays needs a child for the length
        nulls, present, mask = _containers(values, (dict,), nullable, parent_nulls)
        # every field present in every record (a missing key, even of a nullable
        # field, goes to the checked path); then no extra key iff the sizes add up
        if sum(map(len, present)) != len(present) * len(self.fields):
            raise Mismatch("missing or extra keys")
        children = []
        for name, node, field_nullable in self.fields:
            if nulls:
                col = [None if r is None else r[name] for r in values]
            else:
                col = list(map(itemgetter(name), values))
            children.append(node.column(col, field_nullable, nulls))
        return pa.StructArray.from_arrays(children, fields=self._arrow_fields, mask=mask)


class ArrayNode(Node):
    def __init__(self, items: Node, nullable: bool) -> None:
        self.items, self.items_nullable = items, nullable
        self.label = f"array<{items.label}>"
        self.arrow_type = pa.list_(pa.field("item", items.arrow_type, nullable=True))
        if items.fix is not None:
            f = items.fix
            self.fix = lambda v: [None if x is None else f(x) for x in v]

    def check(self, v: object) -> list[Any] | tuple[Any, ...]:
        if not isinstance(v, (list, tuple)):
            raise Mismatch(f"expected list for {self.label}, got {describe(v)}")
        check, nullable, label = self.items.check, self.items_nullable, self.items.label
        out: list[Any] | None = None
        for i, x in enumerate(v):
            try:
                if x is None:
                    if nullable:
                        continue
                    raise null_mismatch(label)
                y = check(x)
            except Mismatch as m:
                m.path.append(("index", i))
                raise
            if y is not x:
                if out is None:
                    out = list(v)
                out[i] = y
        return v if out is None else out

    def column(self, values: Column, nullable: bool, parent_nulls: int) -> pa.Array:
        nulls, present, mask = _containers(values, (list, tuple), nullable, parent_nulls)
        offsets = _offsets(values, nulls)
        child = self.items.column(list(chain.from_iterable(present)), self.items_nullable, 0)
        return pa.ListArray.from_arrays(offsets, child, type=self.arrow_type, mask=mask)


_KEYS = StringLeaf("a map key")


class MapNode(Node):
    def __init__(self, values: Node, nullable: bool) -> None:
        self.values, self.values_nullable = values, nullable
        self.label = f"map<{values.label}>"
        self.arrow_type = pa.map_(pa.string(), pa.field("value", values.arrow_type, nullable=True))
        f = values.fix
        if f is None:
            self.fix = dict
        else:
            self.fix = lambda v: {k: None if x is None else f(x) for k, x in v}

    def check(self, v: object) -> dict[Any, Any]:
        if not isinstance(v, dict):
            raise Mismatch(f"expected dict for {self.label}, got {describe(v)}")
        check, nullable, label = self.values.check, self.values_nullable, self.values.label
        out: dict[Any, Any] | None = None
        for k, x in v.items():
            try:
                if type(k) is not str or not k.isascii():
                    check_str(k, "a map key")
                if x is None:
                    if nullable:
                        continue
                    raise null_mismatch(label)
                y = check(x)
            except Mismatch as m:
                m.path.append(("key", k))
                raise
            if y is not x:
                if out is None:
                    out = dict(v)
                out[k] = y
        return v if out is None else out

    def column(self, values: Column, nullable: bool, parent_nulls: int) -> pa.Array:
        nulls, present, mask = _containers(values, (dict,), nullable, parent_nulls)
        offsets = _offsets(values, nulls)
        keys = _KEYS.column(list(chain.from_iterable(present)), False, 0)
        items = self.values.column(
            list(chain.from_iterable(map(dict.values, present))), self.values_nullable, 0
        )
        return pa.MapArray.from_arrays(offsets, keys, items, type=self.arrow_type, mask=mask)

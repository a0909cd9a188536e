"""The converter protocol behind :class:`statesource.schema.ValueSchema`, and its error path.

The converters themselves are in :mod:`~statesource.schema.leaf_converters`
(types that hold no other type) and :mod:`~statesource.schema.container_converters`
(record, array, map); this module holds their base, :class:`Node`, the internal
mismatch exceptions and the fallback that names the first bad value.

One *node* per Avro type (named types referenced twice share a node). A node
knows its Arrow type, checks a single non-null Python value (``check``),
converts a whole column (``to_arrow``) and turns ``Array.to_pylist()`` output
back into the values the user wrote (``fix``, ``None`` when nothing to do).

Nullability is not part of a node: a container holds ``(child, nullable)``
pairs, so a named type can be used both inside and outside a nullable union.

The column path for leaf types is vectorised: pyarrow converts the whole list
and only the error path walks the values in Python to name the first bad one.
pyarrow is lax in ways that would corrupt data silently (``1.5`` into an int
column truncates, ``str`` into a binary column is encoded, a ``datetime`` into
a date column drops the time, a naive ``datetime`` into a UTC column is taken
as UTC, ...), so each leaf kind uses one of two strict-but-cheap guards:

* *inferred*: ``pa.array(values)`` without a type, then a check of the
  inferred type family and a safe cast (int family, boolean, string family).
  Inference rejects mixed Python types on its own (``[1, True]``, ``[1, "a"]``).
* *typed*: ``set(map(type, values))`` (a C-level pass, no Python loop) checked
  against the accepted Python types, then ``pa.array(values, type=...)``
  (float, bytes, fixed, decimal, date/time/timestamps).

Complex types are converted column-wise too: a record column becomes one
column per field (``itemgetter``), an array/map column is flattened
(``chain.from_iterable``) with offsets from ``map(len, ...)``, the leaf paths
convert the flat columns and ``StructArray``/``ListArray``/``MapArray.from_arrays``
assemble the result. Null structs leave placeholder Nones in their children,
counted by ``parent_nulls`` so a non-nullable child still rejects real Nones.

Whenever the column path fails (for whatever reason, including cases it does
not handle such as a record dict missing a nullable field) ``to_arrow`` falls
back to the checked path: ``check`` each value in Python (naming the first bad
one with its index and field path), then one ``pa.array`` call on the
normalised values. ``check`` is the reference semantics; the column path must
accept exactly what it accepts (tested).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa

ARROW_ERRORS = (
    pa.ArrowInvalid,
    pa.ArrowTypeError,
    pa.ArrowNotImplementedError,
    OverflowError,
    TypeError,
    ValueError,
    UnicodeError,
)
NONE_TYPE = type(None)
# A column of user values: what ``to_arrow`` is given, or a child column built from one.
Column: TypeAlias = list[Any] | tuple[Any, ...] | np.ndarray


class Mismatch(Exception):
    """Internal: a value does not match; ``path`` holds segments innermost first."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.path: list[tuple[str, object]] = []

    def render_path(self) -> str:
        out = ""
        for kind, seg in reversed(self.path):
            if kind == "field":
                out = f"{out}.{seg}" if out else str(seg)
            elif kind == "index":
                out += f"[{seg}]"
            else:
                out += f"[{json.dumps(seg, ensure_ascii=False)}]"
        return out


def describe(value: object) -> str:
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{text} ({type(value).__name__})"


def null_mismatch(label: str) -> Mismatch:
    return Mismatch(f"null is not allowed: Avro type {label} is not a nullable union")


class Node:
    """Base of all converters."""

    arrow_type: pa.DataType
    label: str  # Avro type as named in messages: "long", "enum Color", ...
    fix: Callable[[Any], Any] | None = None  # to_pylist output -> user value

    def check(self, v: object) -> object:
        """Check one non-null value; return it, or its normalised form for pyarrow."""
        raise NotImplementedError

    def check_nullable(self, v: object, nullable: bool) -> object:
        if v is None:
            if nullable:
                return None
            raise null_mismatch(self.label)
        return self.check(v)

    # ---- column conversion -------------------------------------------------
    def to_arrow(self, values: Column, nullable: bool) -> pa.Array:
        """Convert a column. Raises :class:`ColumnMismatch` naming the first bad value.

        Tries the vectorised :meth:`column` path; if it fails for any reason,
        walks the values in Python to name the first bad one, and if every
        value is fine after all, converts the normalised values in one call.
        """
        try:
            return self.column(values, nullable, 0)
        except Exception as exc:  # noqa: BLE001 - any failure: let the checked path decide
            fast_error = exc
        raise_first_bad(self, values, nullable)
        normalised = [None if v is None else self.check(v) for v in _as_list(values)]
        try:
            return pa.array(normalised, type=self.arrow_type)
        except ARROW_ERRORS:
            raise_unconvertible(self, normalised, fast_error)
            raise  # pragma: no cover

    def column(self, values: Column, nullable: bool, parent_nulls: int) -> pa.Array:
        """Vectorised conversion without error reporting: raises anything on a bad value.

        ``values`` may hold ``parent_nulls`` placeholder Nones (positions where an
        enclosing struct is null); other Nones are allowed only if ``nullable``.
        """
        raise NotImplementedError

    def to_python(self, array: pa.Array | pa.ChunkedArray) -> list:
        out = array.to_pylist()
        fix = self.fix
        if fix is not None:
            out = [None if v is None else fix(v) for v in out]
        return out


class ColumnMismatch(Exception):
    """Internal: carries index and Mismatch out of a column conversion."""

    def __init__(
        self, index: int | None, value: object, mismatch: Mismatch | None, detail: str = ""
    ) -> None:
        super().__init__(detail)
        self.index = index
        self.value = value
        self.mismatch = mismatch
        self.detail = detail


def raise_first_bad(node: Node, values: Column, nullable: bool) -> None:
    """Error path: walk values in Python and raise for the first bad one."""
    if isinstance(values, np.ndarray):
        values = values.tolist() if values.dtype.kind in "biuf" else list(values)
    check = node.check_nullable
    for i, v in enumerate(values):
        try:
            check(v, nullable)
        except Mismatch as m:
            raise ColumnMismatch(i, v, m) from None


def raise_unconvertible(node: Node, values: Sequence[object], exc: BaseException) -> None:
    """Error path when every value passed ``check`` but pyarrow still refused."""
    for i, v in enumerate(values):
        try:
            pa.array([v], type=node.arrow_type)
        except ARROW_ERRORS as one:
            raise ColumnMismatch(
                i, v, None, f"pyarrow cannot convert it to {node.arrow_type}: {one}"
            ) from None
    raise ColumnMismatch(
        None, None, None, f"pyarrow cannot convert the values to {node.arrow_type}: {exc}"
    ) from exc


def _as_list(values: Column) -> list[Any] | tuple[Any, ...]:
    return values.tolist() if isinstance(values, np.ndarray) else values

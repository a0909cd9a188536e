"""Value converters behind :class:`statesource.schema.ValueSchema`.

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

import datetime as _dt
import json
import re
import uuid as _uuid
from collections.abc import Callable
from decimal import Decimal
from itertools import chain
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_ARROW_ERRORS = (
    pa.ArrowInvalid,
    pa.ArrowTypeError,
    pa.ArrowNotImplementedError,
    OverflowError,
    TypeError,
    ValueError,
    UnicodeError,
)
_NONE_TYPE = type(None)
_UTC = _dt.timezone.utc
_UUID_RE = r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$"
_UUID_MATCH = re.compile(_UUID_RE).match
_tzinfo = attrgetter("tzinfo")


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


def _null_mismatch(label: str) -> Mismatch:
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
            raise _null_mismatch(self.label)
        return self.check(v)

    # ---- column conversion -------------------------------------------------
    def to_arrow(self, values: list | tuple | np.ndarray, nullable: bool) -> pa.Array:
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
        except _ARROW_ERRORS:
            raise_unconvertible(self, normalised, fast_error)
            raise  # pragma: no cover

    def column(self, values, nullable: bool, parent_nulls: int) -> pa.Array:
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


def raise_first_bad(node: Node, values, nullable: bool) -> None:
    """Error path: walk values in Python and raise for the first bad one."""
    if isinstance(values, np.ndarray):
        values = values.tolist() if values.dtype.kind in "biuf" else list(values)
    check = node.check_nullable
    for i, v in enumerate(values):
        try:
            check(v, nullable)
        except Mismatch as m:
            raise ColumnMismatch(i, v, m) from None


def raise_unconvertible(node: Node, values, exc: BaseException) -> None:
    """Error path when every value passed ``check`` but pyarrow still refused."""
    for i, v in enumerate(values):
        try:
            pa.array([v], type=node.arrow_type)
        except _ARROW_ERRORS as one:
            raise ColumnMismatch(
                i, v, None, f"pyarrow cannot convert it to {node.arrow_type}: {one}"
            ) from None
    raise ColumnMismatch(
        None, None, None, f"pyarrow cannot convert the values to {node.arrow_type}: {exc}"
    ) from exc


# ----------------------------------------------------------------------------
# leaves
# ----------------------------------------------------------------------------
class Leaf(Node):
    """Leaf with the vectorised column path; subclasses define ``_convert``."""

    def column(self, values, nullable: bool, parent_nulls: int) -> pa.Array:
        array = self._convert(values)
        if not nullable and array.null_count != parent_nulls:
            raise Mismatch("null")
        if not self._post_check(array):
            raise Mismatch("post check")
        return array

    def _convert(self, values) -> pa.Array:
        raise NotImplementedError

    def _post_check(self, array) -> bool:
        return True


def _as_list(values):
    return values.tolist() if isinstance(values, np.ndarray) else values


class InferredLeaf(Leaf):
    """int family, boolean, string family: inference is strict enough."""

    def _family_ok(self, t: pa.DataType) -> bool:
        raise NotImplementedError

    def _convert(self, values) -> pa.Array:
        array = pa.array(values)
        t = array.type
        if t == self.arrow_type:
            return array
        if not (pa.types.is_null(t) or self._family_ok(t)):
            raise Mismatch(f"inferred {t}")
        return array.cast(self.arrow_type, safe=True)


class IntLeaf(InferredLeaf):
    def __init__(self, label: str, arrow_type: pa.DataType, bits: int) -> None:
        self.label, self.arrow_type = label, arrow_type
        self.lo, self.hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def _family_ok(self, t):
        return pa.types.is_integer(t)

    def check(self, v):
        t = type(v)
        if t is int or (isinstance(v, (int, np.integer)) and t is not bool):
            if self.lo <= v <= self.hi:
                return v
            raise Mismatch(f"{describe(v)} is out of range for {self.label} [{self.lo}, {self.hi}]")
        raise Mismatch(f"expected int for {self.label}, got {describe(v)}")


class BoolLeaf(InferredLeaf):
    label, arrow_type = "boolean", pa.bool_()

    def _family_ok(self, t):
        return False

    def check(self, v):
        if type(v) is bool or isinstance(v, np.bool_):
            return v
        raise Mismatch(f"expected bool for boolean, got {describe(v)}")


def _check_str(v, label: str) -> str:
    if type(v) is not str and not isinstance(v, str):
        raise Mismatch(f"expected str for {label}, got {describe(v)}")
    if not v.isascii():
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            raise Mismatch(f"{describe(v)} is not valid Unicode (lone surrogate)") from None
    return v


class StringLeaf(InferredLeaf):
    arrow_type = pa.string()

    def __init__(self, label: str = "string") -> None:
        self.label = label

    def _family_ok(self, t):
        return pa.types.is_string(t) or pa.types.is_large_string(t)

    def check(self, v):
        return _check_str(v, self.label)


class EnumLeaf(StringLeaf):
    def __init__(self, label: str, symbols: list[str]) -> None:
        self.label = label
        self.symbols = frozenset(symbols)
        self._value_set = pa.array(symbols, type=pa.string())
        self._listing = (
            ", ".join(symbols) if len(symbols) <= 20 else ", ".join(symbols[:20]) + ", ..."
        )

    def check(self, v):
        _check_str(v, self.label)
        if v not in self.symbols:
            raise Mismatch(f"{describe(v)} is not a symbol of {self.label} ({self._listing})")
        return v

    def _post_check(self, array):
        valid = len(array) - array.null_count
        return valid == 0 or pc.sum(pc.is_in(array, value_set=self._value_set)).as_py() == valid


class CharLeaf(StringLeaf):
    """java.lang.Character: a str of exactly one UTF-16 code unit (a BMP, non-surrogate char)."""

    def check(self, v):
        _check_str(v, self.label)
        if len(v) != 1 or ord(v) > 0xFFFF:
            raise Mismatch(
                f"{describe(v)} is not a single UTF-16 code unit as {self.label} requires"
            )
        return v

    def _post_check(self, array):
        if len(array) == array.null_count:
            return True
        chars = pc.min_max(pc.utf8_length(array)).as_py()
        # a BMP character takes at most 3 UTF-8 bytes, a supplementary one 4
        return chars["min"] == chars["max"] == 1 and pc.max(pc.binary_length(array)).as_py() <= 3


class UuidLeaf(StringLeaf):
    """uuid on string: accepts str (RFC 4122 text form) or uuid.UUID; reads back str."""

    def check(self, v):
        if isinstance(v, _uuid.UUID):
            return str(v)
        _check_str(v, self.label)
        if not _UUID_MATCH(v):
            raise Mismatch(f"{describe(v)} is not a UUID in 8-4-4-4-12 hex form")
        return v

    def _convert(self, values):
        try:
            return super()._convert(values)
        except (
            Mismatch,
            *_ARROW_ERRORS,
        ):  # uuid.UUID objects (pyarrow infers its uuid extension type)
            return super()._convert([str(v) if isinstance(v, _uuid.UUID) else v for v in values])

    def _post_check(self, array):
        valid = len(array) - array.null_count
        return valid == 0 or pc.sum(pc.match_substring_regex(array, _UUID_RE)).as_py() == valid


class TypedLeaf(Leaf):
    """Leaves guarded by the set of Python types present (C-level pass)."""

    intermediate: pa.DataType | None = None  # convert to this first, then safe-cast

    def _type_ok(self, t: type) -> bool:
        raise NotImplementedError

    def _types_ok(self, values) -> bool:
        """Check the Python types present; return whether None is among them."""
        types = set(map(type, values))
        has_none = _NONE_TYPE in types
        types.discard(_NONE_TYPE)
        known = self.__dict__.setdefault("_ok_types", set())
        for t in types - known:
            if not self._type_ok(t):
                raise Mismatch(f"type {t.__name__}")
            known.add(t)
        return has_none

    def _extra_checks(self, values, has_none: bool) -> None:
        pass

    def _convert(self, values):
        has_none = self._types_ok(values)
        self._extra_checks(values, has_none)
        array = pa.array(values, type=self.intermediate or self.arrow_type)
        if self.intermediate is not None:
            array = array.cast(self.arrow_type, safe=True)
        return array


_INT_TYPES = (int, np.integer)
_FLOAT_TYPES = (int, float, np.integer, np.floating)


class FloatLeaf(TypedLeaf):
    def __init__(self, label: str, arrow_type: pa.DataType, exact_int_bits: int) -> None:
        self.label, self.arrow_type = label, arrow_type
        self.max_int = 1 << exact_int_bits

    def _type_ok(self, t):
        return issubclass(t, _FLOAT_TYPES) and not issubclass(t, (bool, np.bool_))

    def _convert(self, values):
        if isinstance(values, np.ndarray) and values.dtype.kind in "fiu":
            return pa.array(values, type=self.arrow_type)
        return super()._convert(values)

    def check(self, v):
        t = type(v)
        if t is float:
            return v
        if not self._type_ok(t):
            raise Mismatch(f"expected float for {self.label}, got {describe(v)}")
        if isinstance(v, _INT_TYPES) and not -self.max_int <= v <= self.max_int:
            raise Mismatch(f"{describe(v)} is not exactly representable as {self.label}")
        return v


class BytesLeaf(TypedLeaf):
    label, arrow_type = "bytes", pa.binary()

    def _type_ok(self, t):
        return issubclass(t, (bytes, bytearray))

    def check(self, v):
        if isinstance(v, (bytes, bytearray)):
            return v
        raise Mismatch(f"expected bytes for {self.label}, got {describe(v)}")


class FixedLeaf(BytesLeaf):
    def __init__(self, label: str, size: int) -> None:
        self.label, self.size = label, size
        self.arrow_type = pa.binary(size)

    def check(self, v):
        super().check(v)
        if len(v) != self.size:
            raise Mismatch(
                f"{describe(v)} has {len(v)} bytes, {self.label} needs exactly {self.size}"
            )
        return v


class DecimalLeaf(TypedLeaf):
    def __init__(self, label: str, precision: int, scale: int) -> None:
        self.label, self.precision, self.scale = label, precision, scale
        self.arrow_type = pa.decimal128(precision, scale)
        self._limit = 10**precision

    def _type_ok(self, t):
        return issubclass(t, Decimal)

    def check(self, v):
        if not isinstance(v, Decimal):
            raise Mismatch(f"expected decimal.Decimal for {self.label}, got {describe(v)}")
        if not v.is_finite():
            raise Mismatch(f"{describe(v)} is not a finite decimal")
        sign, digits, exp = v.as_tuple()
        assert isinstance(exp, int)  # a finite Decimal's exponent is an int, never 'n'/'N'/'F'
        coeff = int("".join(map(str, digits)))
        shift = exp + self.scale
        if coeff == 0:
            unscaled = 0
        elif shift >= 0:
            unscaled = self._limit if shift > self.precision else coeff * 10**shift
        else:
            if -shift > len(digits) or coeff % 10**-shift:
                raise Mismatch(
                    f"{describe(v)} has more than {self.scale} fractional digits for {self.label}"
                )
            unscaled = coeff // 10**-shift
        if unscaled >= self._limit:
            raise Mismatch(f"{describe(v)} does not fit {self.label}")
        if exp == -self.scale:
            return v
        # pyarrow rejects some representable values (e.g. 0E+50, 40 trailing zeros): quantize
        return Decimal((sign, tuple(map(int, str(unscaled))), -self.scale))


class DateLeaf(TypedLeaf):
    label, arrow_type = "int/date", pa.date32()

    def _type_ok(self, t):
        return issubclass(t, _dt.date) and not issubclass(t, _dt.datetime)

    def check(self, v):
        if self._type_ok(type(v)):
            return v
        raise Mismatch(f"expected datetime.date (not datetime) for {self.label}, got {describe(v)}")

    def to_python(self, array):
        return array.to_numpy(zero_copy_only=False).tolist()


class TimeLeaf(TypedLeaf):
    intermediate = pa.time64("us")

    def __init__(self, label: str, arrow_type: pa.DataType, millis: bool) -> None:
        self.label, self.arrow_type, self.millis = label, arrow_type, millis
        if not millis:
            self.intermediate = None

    def _type_ok(self, t):
        return issubclass(t, _dt.time)

    def _extra_checks(self, values, has_none):
        if set(map(_tzinfo, _non_null(values, has_none))) - {None}:
            raise Mismatch("aware time")

    def check(self, v):
        if not isinstance(v, _dt.time):
            raise Mismatch(f"expected datetime.time for {self.label}, got {describe(v)}")
        if v.tzinfo is not None:
            raise Mismatch(
                f"{describe(v)} has a tzinfo; {self.label} is a time of day without time zone"
            )
        if self.millis and v.microsecond % 1000:
            raise Mismatch(
                f"{describe(v)} has sub-millisecond precision, {self.label} holds milliseconds"
            )
        return v


def _non_null(values, has_none: bool):
    return [v for v in values if v is not None] if has_none else values


class TimestampLeaf(TypedLeaf):
    def __init__(self, label: str, millis: bool, utc: bool) -> None:
        self.label, self.millis, self.utc = label, millis, utc
        tz = "UTC" if utc else None
        self.arrow_type = pa.timestamp("ms" if millis else "us", tz=tz)
        self.intermediate = pa.timestamp("us", tz=tz) if millis else None
        if utc:
            self.fix = _to_utc

    def _type_ok(self, t):
        return issubclass(t, _dt.datetime)

    def _extra_checks(self, values, has_none):
        tzinfos = set(map(_tzinfo, _non_null(values, has_none)))
        if (None in tzinfos) if self.utc else bool(tzinfos - {None}):
            raise Mismatch("tz")

    def check(self, v):
        if not isinstance(v, _dt.datetime):
            raise Mismatch(f"expected datetime.datetime for {self.label}, got {describe(v)}")
        if self.utc:
            if v.tzinfo is None or v.utcoffset() is None:
                raise Mismatch(
                    f"{describe(v)} is naive; {self.label} needs a timezone-aware datetime"
                )
        elif v.tzinfo is not None:
            raise Mismatch(f"{describe(v)} is timezone-aware; {self.label} needs a naive datetime")
        if self.millis and v.microsecond % 1000:
            raise Mismatch(
                f"{describe(v)} has sub-millisecond precision, {self.label} holds milliseconds"
            )
        return v

    def to_python(self, array):
        out = array.to_numpy(zero_copy_only=False).tolist()  # naive, UTC wall clock for aware
        if self.utc:
            out = [None if v is None else v.replace(tzinfo=_UTC) for v in out]
        return out


def _to_utc(v: _dt.datetime) -> _dt.datetime:
    return v.replace(tzinfo=_UTC)  # pyarrow gives ZoneInfo('UTC'); same instant, stdlib tzinfo


# ----------------------------------------------------------------------------
# complex types
# ----------------------------------------------------------------------------
def _containers(values, accepted: tuple, nullable: bool, parent_nulls: int):
    """Column-path guard shared by record/array/map: returns (nulls, non-null values, mask)."""
    types = set(map(type, values))
    nulls = 0
    if _NONE_TYPE in types:
        types.discard(_NONE_TYPE)
        nulls = values.count(None)
    if not nullable and nulls != parent_nulls:
        raise Mismatch("null")
    for t in types:
        if not issubclass(t, accepted):
            raise Mismatch(f"type {t.__name__}")
    if not nulls:
        return 0, values, None
    mask = pa.array([v is None for v in values], type=pa.bool_())
    return nulls, [v for v in values if v is not None], mask


def _offsets(values, nulls: int) -> pa.Array:
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

    def check(self, v):
        if not isinstance(v, dict):
            raise Mismatch(f"expected dict for {self.label}, got {describe(v)}")
        changed = None
        present = 0
        for name, check, nullable, label in self._checks:
            if name in v:
                present += 1
                x = v[name]
                if x is None:
                    if nullable:
                        continue
                    m = _null_mismatch(label)
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

    def column(self, values, nullable, parent_nulls):
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

    def check(self, v):
        if not isinstance(v, (list, tuple)):
            raise Mismatch(f"expected list for {self.label}, got {describe(v)}")
        check, nullable, label = self.items.check, self.items_nullable, self.items.label
        out = None
        for i, x in enumerate(v):
            try:
                if x is None:
                    if nullable:
                        continue
                    raise _null_mismatch(label)
                y = check(x)
            except Mismatch as m:
                m.path.append(("index", i))
                raise
            if y is not x:
                if out is None:
                    out = list(v)
                out[i] = y
        return v if out is None else out

    def column(self, values, nullable, parent_nulls):
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

    def check(self, v):
        if not isinstance(v, dict):
            raise Mismatch(f"expected dict for {self.label}, got {describe(v)}")
        check, nullable, label = self.values.check, self.values_nullable, self.values.label
        out = None
        for k, x in v.items():
            try:
                if type(k) is not str or not k.isascii():
                    _check_str(k, "a map key")
                if x is None:
                    if nullable:
                        continue
                    raise _null_mismatch(label)
                y = check(x)
            except Mismatch as m:
                m.path.append(("key", k))
                raise
            if y is not x:
                if out is None:
                    out = dict(v)
                out[k] = y
        return v if out is None else out

    def column(self, values, nullable, parent_nulls):
        nulls, present, mask = _containers(values, (dict,), nullable, parent_nulls)
        offsets = _offsets(values, nulls)
        keys = _KEYS.column(list(chain.from_iterable(present)), False, 0)
        items = self.values.column(
            list(chain.from_iterable(map(dict.values, present))), self.values_nullable, 0
        )
        return pa.MapArray.from_arrays(offsets, keys, items, type=self.arrow_type, mask=mask)

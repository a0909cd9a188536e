"""Converters of the Avro types that hold no other type: primitives, enum, fixed, logical types.

Each guards the vectorised column path with one strict-but-cheap check (see
:mod:`statesource.schema.converter`): *inferred* leaves let pyarrow infer the column
type and check its family, *typed* leaves check the set of Python types present.
"""

from __future__ import annotations

import datetime as _dt
import re
import uuid as _uuid
from decimal import Decimal
from operator import attrgetter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from statesource.schema.converter import (
    ARROW_ERRORS,
    NONE_TYPE,
    Column,
    Mismatch,
    Node,
    describe,
)

_UTC = _dt.timezone.utc
_UUID_RE = r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$"
_UUID_MATCH = re.compile(_UUID_RE).match
_tzinfo = attrgetter("tzinfo")


class Leaf(Node):
    """Leaf with the vectorised column path; subclasses define ``_convert``."""

    def column(self, values: Column, nullable: bool, parent_nulls: int) -> pa.Array:
        array = self._convert(values)
        if not nullable and array.null_count != parent_nulls:
            raise Mismatch("null")
        if not self._post_check(array):
            raise Mismatch("post check")
        return array

    def _convert(self, values: Column) -> pa.Array:
        raise NotImplementedError

    def _post_check(self, array: pa.Array) -> bool:
        return True



class InferredLeaf(Leaf):
    """int family, boolean, string family: inference is strict enough."""

    def _family_ok(self, t: pa.DataType) -> bool:
        raise NotImplementedError

    def _convert(self, values: Column) -> pa.Array:
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

    def _family_ok(self, t: pa.DataType) -> bool:
        return pa.types.is_integer(t)

    def check(self, v: object) -> int | np.integer:
        if type(v) is int or (isinstance(v, (int, np.integer)) and type(v) is not bool):
            if self.lo <= v <= self.hi:
                return v
            raise Mismatch(f"{describe(v)} is out of range for {self.label} [{self.lo}, {self.hi}]")
        raise Mismatch(f"expected int for {self.label}, got {describe(v)}")


class BoolLeaf(InferredLeaf):
    label, arrow_type = "boolean", pa.bool_()

    def _family_ok(self, t: pa.DataType) -> bool:
        return False

    def check(self, v: object) -> bool | np.bool_:
        if type(v) is bool or isinstance(v, np.bool_):
            return v
        raise Mismatch(f"expected bool for boolean, got {describe(v)}")


def check_str(v: object, label: str) -> str:
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

    def _family_ok(self, t: pa.DataType) -> bool:
        return pa.types.is_string(t) or pa.types.is_large_string(t)

    def check(self, v: object) -> str:
        return check_str(v, self.label)


class EnumLeaf(StringLeaf):
    def __init__(self, label: str, symbols: list[str]) -> None:
        self.label = label
        self.symbols = frozenset(symbols)
        self._value_set = pa.array(symbols, type=pa.string())
        self._listing = (
            ", ".join(symbols) if len(symbols) <= 20 else ", ".join(symbols[:20]) + ", ..."
        )

    def check(self, v: object) -> str:
        s = check_str(v, self.label)
        if s not in self.symbols:
            raise Mismatch(f"{describe(s)} is not a symbol of {self.label} ({self._listing})")
        return s

    def _post_check(self, array: pa.Array) -> bool:
        valid = len(array) - array.null_count
        return valid == 0 or pc.sum(pc.is_in(array, value_set=self._value_set)).as_py() == valid


class CharLeaf(StringLeaf):
    """java.lang.Character: a str of exactly one UTF-16 code unit (a BMP, non-surrogate char)."""

    def check(self, v: object) -> str:
        s = check_str(v, self.label)
        if len(s) != 1 or ord(s) > 0xFFFF:
            raise Mismatch(
                f"{describe(s)} is not a single UTF-16 code unit as {self.label} requires"
            )
        return s

    def _post_check(self, array: pa.Array) -> bool:
        if len(array) == array.null_count:
            return True
        chars = pc.min_max(pc.utf8_length(array)).as_py()
        # a BMP character takes at most 3 UTF-8 bytes, a supplementary one 4
        return chars["min"] == chars["max"] == 1 and pc.max(pc.binary_length(array)).as_py() <= 3


class UuidLeaf(StringLeaf):
    """uuid on string: accepts str (RFC 4122 text form) or uuid.UUID; reads back str."""

    def check(self, v: object) -> str:
        if isinstance(v, _uuid.UUID):
            return str(v)
        s = check_str(v, self.label)
        if not _UUID_MATCH(s):
            raise Mismatch(f"{describe(s)} is not a UUID in 8-4-4-4-12 hex form")
        return s

    def _convert(self, values: Column) -> pa.Array:
        try:
            return super()._convert(values)
        except (
            Mismatch,
            *ARROW_ERRORS,
        ):  # uuid.UUID objects (pyarrow infers its uuid extension type)
            return super()._convert([str(v) if isinstance(v, _uuid.UUID) else v for v in values])

    def _post_check(self, array: pa.Array) -> bool:
        valid = len(array) - array.null_count
        return valid == 0 or pc.sum(pc.match_substring_regex(array, _UUID_RE)).as_py() == valid


class TypedLeaf(Leaf):
    """Leaves guarded by the set of Python types present (C-level pass)."""

    intermediate: pa.DataType | None = None  # convert to this first, then safe-cast

    def _type_ok(self, t: type) -> bool:
        raise NotImplementedError

    def _types_ok(self, values: Column) -> bool:
        """Check the Python types present; return whether None is among them."""
        types = set(map(type, values))
        has_none = NONE_TYPE in types
        types.discard(NONE_TYPE)
        known: set[type] = self.__dict__.setdefault("_ok_types", set())
        for t in types - known:
            if not self._type_ok(t):
                raise Mismatch(f"type {t.__name__}")
            known.add(t)
        return has_none

    def _extra_checks(self, values: Column, has_none: bool) -> None:
        pass

    def _convert(self, values: Column) -> pa.Array:
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

    def _type_ok(self, t: type) -> bool:
        return issubclass(t, _FLOAT_TYPES) and not issubclass(t, (bool, np.bool_))

    def _convert(self, values: Column) -> pa.Array:
        if isinstance(values, np.ndarray) and values.dtype.kind in "fiu":
            return pa.array(values, type=self.arrow_type)
        return super()._convert(values)

    def check(self, v: object) -> object:
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

    def _type_ok(self, t: type) -> bool:
        return issubclass(t, (bytes, bytearray))

    def check(self, v: object) -> bytes | bytearray:
        if isinstance(v, (bytes, bytearray)):
            return v
        raise Mismatch(f"expected bytes for {self.label}, got {describe(v)}")


class FixedLeaf(BytesLeaf):
    def __init__(self, label: str, size: int) -> None:
        self.label, self.size = label, size
        self.arrow_type = pa.binary(size)

    def check(self, v: object) -> bytes | bytearray:
        data = super().check(v)
        if len(data) != self.size:
            raise Mismatch(
                f"{describe(data)} has {len(data)} bytes, {self.label} needs exactly {self.size}"
            )
        return data


class DecimalLeaf(TypedLeaf):
    def __init__(self, label: str, precision: int, scale: int) -> None:
        self.label, self.precision, self.scale = label, precision, scale
        self.arrow_type = pa.decimal128(precision, scale)
        self._limit = 10**precision

    def _type_ok(self, t: type) -> bool:
        return issubclass(t, Decimal)

    def check(self, v: object) -> Decimal:
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

    def _type_ok(self, t: type) -> bool:
        return issubclass(t, _dt.date) and not issubclass(t, _dt.datetime)

    def check(self, v: object) -> object:
        if self._type_ok(type(v)):
            return v
        raise Mismatch(f"expected datetime.date (not datetime) for {self.label}, got {describe(v)}")

    def to_python(self, array: pa.Array | pa.ChunkedArray) -> list:
        return array.to_numpy(zero_copy_only=False).tolist()


class TimeLeaf(TypedLeaf):
    intermediate = pa.time64("us")

    def __init__(self, label: str, arrow_type: pa.DataType, millis: bool) -> None:
        self.label, self.arrow_type, self.millis = label, arrow_type, millis
        if not millis:
            self.intermediate = None

    def _type_ok(self, t: type) -> bool:
        return issubclass(t, _dt.time)

    def _extra_checks(self, values: Column, has_none: bool) -> None:
        if set(map(_tzinfo, _non_null(values, has_none))) - {None}:
            raise Mismatch("aware time")

    def check(self, v: object) -> _dt.time:
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


def _non_null(values: Column, has_none: bool) -> Column:
    return [v for v in values if v is not None] if has_none else values


class TimestampLeaf(TypedLeaf):
    def __init__(self, label: str, millis: bool, utc: bool) -> None:
        self.label, self.millis, self.utc = label, millis, utc
        tz = "UTC" if utc else None
        self.arrow_type = pa.timestamp("ms" if millis else "us", tz=tz)
        self.intermediate = pa.timestamp("us", tz=tz) if millis else None
        if utc:
            self.fix = _to_utc

    def _type_ok(self, t: type) -> bool:
        return issubclass(t, _dt.datetime)

    def _extra_checks(self, values: Column, has_none: bool) -> None:
        tzinfos = set(map(_tzinfo, _non_null(values, has_none)))
        if (None in tzinfos) if self.utc else bool(tzinfos - {None}):
            raise Mismatch("tz")

    def check(self, v: object) -> _dt.datetime:
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

    def to_python(self, array: pa.Array | pa.ChunkedArray) -> list:
        out = array.to_numpy(zero_copy_only=False).tolist()  # naive, UTC wall clock for aware
        if self.utc:
            out = [None if v is None else v.replace(tzinfo=_UTC) for v in out]
        return out


def _to_utc(v: _dt.datetime) -> _dt.datetime:
    return v.replace(tzinfo=_UTC)  # pyarrow gives ZoneInfo('UTC'); same instant, stdlib tzinfo

"""Encoding values of flink-avro's ``AvroSerializer``: the write side of :mod:`avro`.

Flink drives Avro's datum writer through its own ``DataOutputEncoder``, so the
bytes are not Avro's binary encoding (see :mod:`avro`): ``int``, ``long``,
``float`` and ``double`` are fixed-width big-endian (every NaN Java's canonical
one), ``boolean`` one byte, enum ordinals and union branch indexes 4-byte ints,
``bytes`` and ``string`` a 4-byte length then the bytes (UTF-8 for strings),
``fixed`` its bytes; an array or map is one block of all its items, headed by
their count as an unsigned 7-bit varint and ended by a count of 0 (an empty
one is that 0 alone).

A value is first checked against the schema as statesource maps it
(:meth:`ValueSchema.validate`: the same Python shapes a statesource value of
that schema takes, records as dicts, enums as their symbol, logical types as
dates, times, datetimes and decimals), so a value that does not fit is refused
with :class:`~statesource.errors.TypeMismatchError` naming the value, the
field and the schema before anything is written. The writer itself is
compiled once from the schema's canonical form, where every named type is
defined before it is used and named by its full name. A decimal is written as
Avro's conversion writes it: on ``bytes`` the unscaled value's shortest
two's-complement bytes, on ``fixed`` sign-extended to the fixed size.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

from statesource.errors import InvalidArgumentError, TypeMismatchError
from statesource.flink.binary.writer import BinaryWriter
from statesource.schema import ValueSchema

_Write = Callable[[BinaryWriter, Any], None]
_EPOCH_DAY = date(1970, 1, 1)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_LOCAL_EPOCH = datetime(1970, 1, 1)
_MILLI = timedelta(milliseconds=1)
_MICRO = timedelta(microseconds=1)
_CHARACTER = "java.lang.Character"


def _int(w: BinaryWriter, value: Any) -> None:
    w.i32(int(value))


def _long(w: BinaryWriter, value: Any) -> None:
    w.i64(int(value))


def _float(w: BinaryWriter, value: Any) -> None:
    try:
        w.f32(float(value))
    except InvalidArgumentError as error:
        raise TypeMismatchError(f"an Avro float is a Java float: {error}") from None


def _double(w: BinaryWriter, value: Any) -> None:
    w.f64(float(value))


def _boolean(w: BinaryWriter, value: Any) -> None:
    w.boolean(bool(value))


def _string(w: BinaryWriter, value: Any) -> None:
    text = str(value)  # a uuid.UUID is its text form
    try:
        w.length_prefixed(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise TypeMismatchError(
            f"{text[:60]!r} holds a lone surrogate, which an Avro string (UTF-8) cannot"
            " hold") from None


def _bytes(w: BinaryWriter, value: Any) -> None:
    w.length_prefixed(bytes(value))


def _fixed(w: BinaryWriter, value: Any) -> None:
    w.raw(bytes(value))


def _character(w: BinaryWriter, value: Any) -> None:
    """Avro reflect's ``char`` on an int: a one-character str, its UTF-16 unit."""
    w.i32(ord(value) if isinstance(value, str) else int(value))


def unscaled(value: Decimal, scale: int) -> int:
    """The unscaled integer of a decimal of ``scale`` (checked before: it has no more digits)."""
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)  # a finite Decimal
    coefficient = int("".join(map(str, digits)) or "0")
    shift = exponent + scale
    number = coefficient * 10 ** shift if shift >= 0 else coefficient // 10 ** -shift
    return -number if sign else number


def _decimal(scale: int, size: int | None) -> _Write:
    def write(w: BinaryWriter, value: Any) -> None:
        number = unscaled(value, scale)
        if size is not None:
            w.raw(number.to_bytes(size, "big", signed=True))
            return
        length = (number + (number < 0)).bit_length() // 8 + 1
        w.length_prefixed(number.to_bytes(length, "big", signed=True))
    return write


def _time_of_day(unit: timedelta) -> _Write:
    def write(w: BinaryWriter, value: Any) -> None:
        since_midnight = timedelta(hours=value.hour, minutes=value.minute, seconds=value.second,
                                   microseconds=value.microsecond)
        number = since_midnight // unit
        if unit is _MILLI:
            w.i32(number)
        else:
            w.i64(number)
    return write


def _instant(epoch: datetime, unit: timedelta) -> _Write:
    def write(w: BinaryWriter, value: Any) -> None:
        w.i64((value - epoch) // unit)
    return write


def _date(w: BinaryWriter, value: Any) -> None:
    w.i32((value - _EPOCH_DAY).days)


_PRIMITIVES: dict[str, _Write] = {
    "boolean": _boolean, "int": _int, "long": _long, "float": _float, "double": _double,
    "bytes": _bytes, "string": _string,
}
_LOGICAL: dict[tuple[str, str], _Write] = {
    ("int", "date"): _date,
    ("int", "time-millis"): _time_of_day(_MILLI),
    ("long", "time-micros"): _time_of_day(_MICRO),
    ("long", "timestamp-millis"): _instant(_EPOCH, _MILLI),
    ("long", "timestamp-micros"): _instant(_EPOCH, _MICRO),
    ("long", "local-timestamp-millis"): _instant(_LOCAL_EPOCH, _MILLI),
    ("long", "local-timestamp-micros"): _instant(_LOCAL_EPOCH, _MICRO),
}


class _Compiler:
    """Turns a canonical schema into a function writing one (already checked) value of it."""

    def __init__(self) -> None:
        self.named: dict[str, _Write] = {}

    def compile(self, schema: Any) -> _Write:
        if isinstance(schema, str):
            return _PRIMITIVES.get(schema) or self.named[schema]
        if isinstance(schema, list):
            return self._union(schema)
        kind = schema["type"]
        if kind in _PRIMITIVES:
            return self._primitive(schema, kind)
        if kind == "record":
            return self._record(schema)
        if kind == "enum":
            return self._define(schema, self._enum(schema["symbols"]))
        if kind == "fixed":
            size = schema["size"]
            write = (_decimal(schema.get("scale", 0), size)
                     if schema.get("logicalType") == "decimal" else _fixed)
            return self._define(schema, write)
        if kind == "array":
            return self._blocks(None, self.compile(schema["items"]))
        if kind == "map":
            return self._blocks(_string, self.compile(schema["values"]))
        return self.compile(kind)

    def _define(self, schema: dict[str, Any], write: _Write) -> _Write:
        self.named[schema["name"]] = write
        return write

    @staticmethod
    def _primitive(schema: dict[str, Any], kind: str) -> _Write:
        logical = schema.get("logicalType", "")
        if kind == "bytes" and logical == "decimal":
            return _decimal(schema.get("scale", 0), None)
        if kind == "int" and schema.get("java-class") == _CHARACTER:
            return _character
        return _LOGICAL.get((kind, logical)) or _PRIMITIVES[kind]

    @staticmethod
    def _enum(symbols: list[str]) -> _Write:
        ordinals = {symbol: index for index, symbol in enumerate(symbols)}

        def write(w: BinaryWriter, value: Any) -> None:
            w.i32(ordinals[value])
        return write

    @staticmethod
    def _blocks(write_key: _Write | None, write_item: _Write) -> _Write:
        def write(w: BinaryWriter, value: Any) -> None:
            items = list(value.items() if write_key is not None else value)
            if items:
                w.varint(len(items))
                for item in items:
                    if write_key is None:
                        write_item(w, item)
                    else:
                        write_key(w, item[0])
                        write_item(w, item[1])
            w.varint(0)  # the end of the blocks
        return write

    def _union(self, branches: list[Any]) -> _Write:
        null = branches.index("null")
        other = 1 - null
        write_other = self.compile(branches[other])

        def write(w: BinaryWriter, value: Any) -> None:
            if value is None:
                w.i32(null)
            else:
                w.i32(other)
                write_other(w, value)
        return write

    def _record(self, schema: dict[str, Any]) -> _Write:
        fields: list[tuple[str, _Write]] = []

        def write(w: BinaryWriter, value: Any) -> None:
            for name, write_field in fields:
                write_field(w, value.get(name))  # a missing field is a nullable one's None

        self._define(schema, write)
        fields += [(f["name"], self.compile(f["type"])) for f in schema["fields"]]
        return write


def avro_writer(schema: Any, type_name: str) -> _Write:
    """The writer of values of ``schema`` (one statesource maps; ``type_name`` for errors)."""
    value_schema = ValueSchema.parse(schema)
    encode = _Compiler().compile(value_schema.avro)
    validate = value_schema.validate

    def write(w: BinaryWriter, value: Any) -> None:
        try:
            validate(value)
            encode(w, value)
        except TypeMismatchError as error:
            raise TypeMismatchError(f"{type_name}: {error}") from None
    return write


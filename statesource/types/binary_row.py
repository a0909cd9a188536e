"""Flink's ``BinaryRowData``: the bytes of a SQL row, and its ``hashCode``.

A SQL operator's key is a ``BinaryRowData``, and Flink assigns it to a key group by its
``hashCode``: a word-wise murmur hash (seed 42) of the row's bytes. So the key group of a
SQL key is only known from its exact bytes, which :func:`encode_row` writes as Flink's key
projections write them and :func:`binary_row_hash` hashes. The layout facts here (the null
bits' width, what a slot holds) are shared with the reader of SQL state.

The layout (little-endian, the byte order of every machine Flink runs on):

- a header of null bits, rounded to 8-byte words: bit 0..7 (the first byte) the row kind,
  then one bit per field, set when it is null (bit ``i`` is bit ``i % 8`` of byte ``i // 8``);
- one 8-byte slot per field: a fixed-width value (a boolean or a byte in its first byte, a
  short in its first two, ...; a compact DECIMAL its unscaled long, a compact TIMESTAMP its
  epoch milliseconds), or for a variable-width value its offset from the row's start (high
  32 bits) and length (low 32); a string or byte string of at most 7 bytes lies in the slot
  itself instead: its bytes, and the length with the high bit set in the slot's last byte;
- the variable part: each value at its offset, padded with zeros to 8 bytes; a DECIMAL past
  18 digits takes 16 bytes (its unscaled value as minimal big-endian two's complement), a
  TIMESTAMP past milliseconds 8 (its epoch milliseconds; the slot's low 32 bits hold the
  nanoseconds of the millisecond); a nested ROW is its own binary row.

A null fixed-width field has a zero slot; a null DECIMAL past 18 digits or TIMESTAMP past
milliseconds keeps its 16 or 8 zero bytes in the variable part and their offset in its slot,
as Flink's generated projections write nulls (so keys hash as Flink's own).
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable, Mapping, Sequence
from decimal import Context, Decimal, Inexact
from typing import Any

import mmh3

from statesource.errors import TypeMismatchError
from statesource.types.sql import (
    BINARY,
    INTEGRAL_BYTES,
    MAX_COMPACT_DECIMAL,
    MAX_COMPACT_TIMESTAMP,
    MAX_DECIMAL,
    TEXT,
    TIMESTAMPS,
    SqlType,
)

HASH_SEED = 42
"""The seed of ``BinaryRowData.hashCode`` (``MurmurHashUtils.DEFAULT_SEED``)."""
MAX_INLINE = 7
"""The longest string or byte string that lies in its slot (``MAX_FIX_PART_DATA_SIZE``)."""
INLINE_MARK = 1 << 63
NANOS_PER_MILLI = 1_000_000
MILLIS_PER_DAY = 86_400_000
EPOCH = dt.datetime(1970, 1, 1)
EPOCH_DATE = dt.date(1970, 1, 1)
UTC = dt.timezone.utc
_SLOT = struct.Struct("<Q")
_EXACT = Context(prec=MAX_DECIMAL + 1, traps=[Inexact])
"""Decimal arithmetic that never rounds (Python's default context rounds to 28 digits, fewer
than SQL's 38), raising where it would have to."""


def null_bits_width(arity: int) -> int:
    """Bytes of the header and null bits of a row of ``arity`` fields (8-byte words)."""
    return (arity + 63 + 8) // 64 * 8


def fixed_part(arity: int) -> int:
    """Bytes of a row's fixed part: header, null bits and one slot per field."""
    return null_bits_width(arity) + 8 * arity


def binary_row_hash(row: bytes) -> int:
    """``BinaryRowData.hashCode``: murmur3 (x86, 32 bits, seed 42) of the row's bytes, read
    as little-endian words (a row's size is a multiple of 8, so no byte is left over)."""
    if len(row) % 4:
        raise TypeMismatchError(f"a binary row is whole words; {len(row)} bytes is not")
    return mmh3.hash(row, HASH_SEED, signed=True)


# -- values and the numbers Flink keeps of them -------------------------------------------

def timestamp_parts(value: Any, sql_type: SqlType) -> tuple[int, int]:
    """(epoch milliseconds, nanoseconds of the millisecond) of a timestamp value."""
    if sql_type.nanos:
        if not isinstance(value, Mapping) or set(value) != {"millisecond", "nano_of_millisecond"}:
            raise _misfit(value, sql_type, "a dict of millisecond and nano_of_millisecond")
        millis, nanos = value["millisecond"], value["nano_of_millisecond"]
        if type(millis) is not int or type(nanos) is not int or not 0 <= nanos < NANOS_PER_MILLI:
            raise _misfit(value, sql_type, "an int millisecond and 0 <= nano_of_millisecond < 10^6")
        return millis, nanos
    if not isinstance(value, dt.datetime):
        raise _misfit(value, sql_type, "a datetime.datetime")
    aware = value.tzinfo is not None and value.utcoffset() is not None
    if aware != (sql_type.root == "TIMESTAMP_WITH_LOCAL_TIME_ZONE"):
        raise _misfit(value, sql_type, "an aware datetime" if not aware else "a naive datetime")
    delta = (value.astimezone(UTC).replace(tzinfo=None) if aware else value) - EPOCH
    micros = delta // dt.timedelta(microseconds=1)
    if sql_type.precision <= MAX_COMPACT_TIMESTAMP and micros % 1000:
        raise _misfit(value, sql_type, "whole milliseconds")
    return micros // 1000, micros % 1000 * 1000


def timestamp_value(millis: int, nanos: int, sql_type: SqlType) -> Any:
    """The Python value of a timestamp Flink keeps as (epoch ms, ns of the ms); ValueError
    where Python's datetime cannot hold it (before year 1 or after 9999)."""
    if sql_type.nanos:
        return {"millisecond": millis, "nano_of_millisecond": nanos}
    try:
        value = EPOCH + dt.timedelta(milliseconds=millis, microseconds=nanos // 1000)
    except OverflowError:
        raise ValueError(f"epoch milliseconds {millis}") from None
    return value.replace(tzinfo=UTC) if sql_type.root == "TIMESTAMP_WITH_LOCAL_TIME_ZONE" else value


def time_millis(value: Any, sql_type: SqlType) -> int:
    """A TIME value's milliseconds of the day (Flink keeps no finer part)."""
    if not isinstance(value, dt.time) or value.tzinfo is not None or value.microsecond % 1000:
        raise _misfit(value, sql_type, "a naive datetime.time of whole milliseconds")
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000


def decimal_value(number: int, scale: int) -> Decimal:
    """The decimal of unscaled ``number`` and ``scale``, exactly (at most 38 digits, checked
    by the caller)."""
    return Decimal(number).scaleb(-scale, context=_EXACT)


def unscaled(value: Any, sql_type: SqlType) -> int:
    """A DECIMAL value's unscaled integer, exactly (no rounding), within its precision."""
    if isinstance(value, bool) or not isinstance(value, (Decimal, int)):
        raise _misfit(value, sql_type, "a decimal.Decimal")
    try:
        scaled = Decimal(value).scaleb(sql_type.scale, context=_EXACT)
    except Inexact:
        scaled = Decimal("NaN")
    if not scaled.is_finite() or scaled != scaled.to_integral_value():
        raise _misfit(value, sql_type, f"a finite decimal of at most {sql_type.scale} places")
    number = int(scaled)
    if len(str(abs(number))) > sql_type.precision:
        raise _misfit(value, sql_type, f"at most {sql_type.precision} digits")
    return number


def java_bytes(number: int) -> bytes:
    """``BigInteger.toByteArray``: the shortest big-endian two's complement of ``number``."""
    return number.to_bytes((number if number >= 0 else ~number).bit_length() // 8 + 1, "big",
                           signed=True)


# -- writing a row -----------------------------------------------------------------------

def encode_row(types: Sequence[SqlType], values: Sequence[Any], kind: int = 0) -> bytes:
    """The ``BinaryRowData`` bytes of ``values`` (one per type, None for null), row kind
    ``kind`` (its byte value), as Flink's generated projections write them."""
    if len(values) != len(types):
        raise TypeMismatchError(f"a row of {len(types)} fields, got {len(values)} values")
    width = null_bits_width(len(types))
    head = bytearray(fixed_part(len(types)))
    head[0] = kind
    tail = bytearray()
    for index, (sql_type, value) in enumerate(zip(types, values)):
        slot = width + 8 * index
        if value is None:
            head[(index + 8) >> 3] |= 1 << ((index + 8) & 7)
            reserved = _reserved(sql_type)
            if reserved:  # space kept for a later value, as Flink's writers keep it
                head[slot:slot + 8] = _SLOT.pack((len(head) + len(tail)) << 32)
                tail += bytes(reserved)
            continue
        fixed, variable = _WRITERS.get(sql_type.root, _unsupported)(value, sql_type)
        if variable is None:
            head[slot:slot + 8] = fixed
            continue
        head[slot:slot + 8] = _SLOT.pack((len(head) + len(tail)) << 32 | fixed)
        tail += variable + bytes(-len(variable) % 8)
    return bytes(head + tail)


_Written = tuple[Any, "bytes | None"]
"""What a field writer gives: the slot's 8 bytes and None, or the slot's low 32 bits (a
length, or a timestamp's nanoseconds) and the bytes for the variable part."""


def _reserved(sql_type: SqlType) -> int:
    """Variable-part bytes Flink keeps for a null value of ``sql_type``."""
    if sql_type.root == "DECIMAL" and sql_type.precision > MAX_COMPACT_DECIMAL:
        return 16
    if sql_type.root in TIMESTAMPS and sql_type.precision > MAX_COMPACT_TIMESTAMP:
        return 8
    return 0


def _slot(number: int, width: int, signed: bool = True) -> bytes:
    return number.to_bytes(width, "little", signed=signed).ljust(8, b"\0")


def _integral(value: Any, sql_type: SqlType) -> _Written:
    width = INTEGRAL_BYTES[sql_type.root]
    if sql_type.root == "DATE":
        if type(value) is not dt.date:
            raise _misfit(value, sql_type, "a datetime.date")
        value = (value - EPOCH_DATE).days
    elif sql_type.root == "TIME_WITHOUT_TIME_ZONE":
        value = time_millis(value, sql_type)
    elif type(value) is not int or value.bit_length() >= 8 * width and \
            value != -(1 << (8 * width - 1)):
        raise _misfit(value, sql_type, f"an int of {8 * width} bits")
    return _slot(value, width), None


def _boolean(value: Any, sql_type: SqlType) -> _Written:
    if type(value) is not bool:
        raise _misfit(value, sql_type, "a bool")
    return _slot(int(value), 1), None


def _floating(value: Any, sql_type: SqlType) -> _Written:
    if type(value) is not float:
        raise _misfit(value, sql_type, "a float")
    try:
        packed = struct.pack("<f" if sql_type.root == "FLOAT" else "<d", value)
    except OverflowError:
        raise _misfit(value, sql_type, "a float a Java float holds") from None
    return packed.ljust(8, b"\0"), None


def _text(value: Any, sql_type: SqlType) -> _Written:
    if sql_type.root in TEXT:
        if type(value) is not str:
            raise _misfit(value, sql_type, "a str")
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError:
            raise _misfit(value, sql_type, "text without lone surrogates") from None
    elif isinstance(value, (bytes, bytearray)):
        data = bytes(value)
    else:
        raise _misfit(value, sql_type, "bytes")
    if len(data) <= MAX_INLINE:
        return _SLOT.pack(INLINE_MARK | len(data) << 56 | int.from_bytes(data, "little")), None
    return len(data), data


def _decimal(value: Any, sql_type: SqlType) -> _Written:
    number = unscaled(value, sql_type)
    if sql_type.precision <= MAX_COMPACT_DECIMAL:
        return _slot(number, 8), None
    data = java_bytes(number)
    return len(data), data.ljust(16, b"\0")


def _timestamp(value: Any, sql_type: SqlType) -> _Written:
    millis, nanos = timestamp_parts(value, sql_type)
    if not -(1 << 63) <= millis < 1 << 63:
        raise _misfit(value, sql_type, "epoch milliseconds within a long")
    if sql_type.precision <= MAX_COMPACT_TIMESTAMP:
        return _slot(millis, 8), None
    return nanos, _slot(millis, 8)


def _row(value: Any, sql_type: SqlType) -> _Written:
    return _variable(encode_row([t for _, t in sql_type.fields],
                                row_values(value, sql_type.field_names(), sql_type)))


def _raw(value: Any, sql_type: SqlType) -> _Written:
    if not isinstance(value, (bytes, bytearray)):
        raise _misfit(value, sql_type, "the bytes of its serializer")
    return _variable(bytes(value))


def _variable(data: bytes) -> _Written:
    return len(data), data


def _unsupported(value: Any, sql_type: SqlType) -> _Written:
    sql_type.check_supported()
    raise _misfit(value, sql_type, "a type statesource writes")  # every supported root has one


def row_values(value: Any, names: list[str], sql_type: SqlType | None = None) -> list[Any]:
    """A row's field values in order, from a mapping by field name or a sequence (a
    :class:`~statesource.types.Row`'s fields, a tuple or a list)."""
    fields = getattr(value, "fields", value)
    if isinstance(fields, Mapping):
        if set(fields) - {"row_kind"} != set(names):
            raise TypeMismatchError(f"{value!r} is not a row of fields {', '.join(names)}")
        return [fields[name] for name in names]
    if not isinstance(fields, (tuple, list)) or len(fields) != len(names):
        raise TypeMismatchError(
            f"{value!r} is not a row of {len(names)} fields"
            + (f" ({sql_type.describe()})" if sql_type else ""))
    return list(fields)


def _misfit(value: Any, sql_type: SqlType, expected: str) -> TypeMismatchError:
    return TypeMismatchError(f"{value!r} ({type(value).__name__}) is not a valid"
                             f" {sql_type.describe()} value: expected {expected}")


_WRITERS: dict[str, Callable[[Any, SqlType], _Written]] = {
    **{root: _integral for root in INTEGRAL_BYTES}, "BOOLEAN": _boolean,
    "FLOAT": _floating, "DOUBLE": _floating, **{root: _text for root in TEXT | BINARY},
    "DECIMAL": _decimal, **{root: _timestamp for root in TIMESTAMPS}, "ROW": _row,
    "RAW": _raw}

"""Reading Flink's ``BinaryRowData``: a SQL row's bytes into Python values, field by field.

The layout is described in :mod:`statesource.types.binary_row` (which writes it); here each
field is read from its slot, or from the variable part its slot points into, by its SQL
type (:class:`~statesource.types.sql.SqlType`). Rows come from files, so every offset and
length is checked against the row's own bounds before anything is read or allocated, and
every number against what its type allows; a fault raises
:class:`~statesource.errors.CorruptCheckpointError` naming the file and the byte offset of
the field. A value Flink holds but Python cannot (a date before year 1) is refused with
:class:`~statesource.errors.IncompatibleCheckpointError`.

One :class:`RowReader` is built per list of field types, with one reading function per
field, so a row costs one call per field. A nested row (a dict by field name) and a
timestamp past microseconds (a dict of its two parts) are hashable records
(:class:`~statesource.schema.RecordKey`): rows are the user keys of map states too (a
join's records).
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from statesource.errors import IncompatibleCheckpointError
from statesource.flink.binary.reader import BinaryReader
from statesource.schema import hashable_record
from statesource.types import RowKind
from statesource.types.binary_row import (
    EPOCH_DATE,
    INLINE_MARK,
    MAX_INLINE,
    MILLIS_PER_DAY,
    NANOS_PER_MILLI,
    decimal_value,
    fixed_part,
    null_bits_width,
    timestamp_value,
)
from statesource.types.sql import (
    BINARY,
    MAX_COMPACT_DECIMAL,
    MAX_COMPACT_TIMESTAMP,
    TEXT,
    TIMESTAMPS,
    SqlType,
)

_SLOT = struct.Struct("<Q")
_LONG = struct.Struct("<q")
_FIXED = {"TINYINT": struct.Struct("<b"), "SMALLINT": struct.Struct("<h"),
          "INTEGER": struct.Struct("<i"), "BIGINT": _LONG, "FLOAT": struct.Struct("<f"),
          "DOUBLE": struct.Struct("<d"), "INTERVAL_YEAR_MONTH": struct.Struct("<i"),
          "INTERVAL_DAY_TIME": _LONG}
_KINDS = {kind.byte_value: kind for kind in RowKind}
_MAX_DECIMAL_BYTES = 16


class BadRow(Exception):
    """A fault of a row's bytes: what is wrong, and where (a position in the reader's data)."""

    def __init__(self, what: str, at: int) -> None:
        super().__init__(what)
        self.what = what
        self.at = at


class _Row:
    """Where the row being read lies: its data, first byte and size."""

    __slots__ = ("data", "start", "size")

    def __init__(self, data: Any, start: int, size: int) -> None:
        self.data = data
        self.start = start
        self.size = size

    def span(self, slot: int, at: int, fixed: int) -> tuple[int, int]:
        """The (start in data, length) a variable-part slot points to, checked."""
        offset, length = slot >> 32, slot & 0xFFFFFFFF
        if slot & INLINE_MARK or offset < fixed or offset + length > self.size:
            raise BadRow(f"a field points to bytes {offset} .. {offset + length} outside the"
                         f" variable part of its {self.size}-byte row", at)
        return self.start + offset, length


FieldRead = Callable[[_Row, int, int, int], Any]
"""Reads one field: (row, the slot's position in data, the slot's 8 bytes as an unsigned
long, the row's fixed part size) -> the value."""


class RowReader:
    """Reads rows of ``types`` (``BinaryRowData``): the row kind and one value per field."""

    def __init__(self, types: Sequence[SqlType]) -> None:
        for sql_type in types:
            sql_type.check_supported()
        self.types = list(types)
        self.width = null_bits_width(len(types))
        self.fixed = fixed_part(len(types))
        self._reads = [_field_reader(t) for t in types]

    def read(self, r: BinaryReader) -> tuple[RowKind, list[Any]]:
        """A serialized row at ``r``: its int length, then its bytes."""
        size = r.count("binary row length")
        at = r.pos
        r.skip(size)
        try:
            return self.decode(_Row(r.data, at, size))
        except BadRow as fault:
            raise r.error(fault.what, fault.at) from None

    def decode(self, row: _Row) -> tuple[RowKind, list[Any]]:
        """The row kind and the field values of ``row`` (raises :class:`BadRow`)."""
        data, start = row.data, row.start
        if row.size < self.fixed or row.size % 8:
            raise BadRow(f"a binary row of {len(self.types)} fields cannot be {row.size}"
                         f" bytes long (its fixed part is {self.fixed}, and rows are whole"
                         " 8-byte words)", start)
        kind = _KINDS.get(data[start])
        if kind is None:
            raise BadRow(f"unknown row kind {data[start]}", start)
        values: list[Any] = []
        slot_at = start + self.width
        for index, read in enumerate(self._reads):
            bit = index + 8
            if data[start + (bit >> 3)] >> (bit & 7) & 1:
                values.append(None)
            else:
                values.append(read(row, slot_at, _SLOT.unpack_from(data, slot_at)[0],
                                   self.fixed))
            slot_at += 8
        return kind, values


def _field_reader(sql_type: SqlType) -> FieldRead:
    """The function reading one field of ``sql_type``."""
    root = sql_type.root
    if root in _FIXED:
        unpack = _FIXED[root].unpack_from
        return lambda row, at, slot, fixed: unpack(row.data, at)[0]
    if root == "BOOLEAN":
        return lambda row, at, slot, fixed: row.data[at] != 0
    if root == "DATE":
        return _date
    if root == "TIME_WITHOUT_TIME_ZONE":
        return _time
    if root in TEXT:
        return lambda row, at, slot, fixed: bytes(_bytes(row, at, slot, fixed)).decode(
            "utf-8", "replace")
    if root in BINARY:
        return lambda row, at, slot, fixed: bytes(_bytes(row, at, slot, fixed))
    if root == "DECIMAL":
        return _decimal_reader(sql_type)
    if root in TIMESTAMPS:
        return _timestamp_reader(sql_type)
    if root == "RAW":
        return lambda row, at, slot, fixed: bytes(_span_bytes(row, at, slot, fixed))
    return _row_reader(sql_type)


def _bytes(row: _Row, at: int, slot: int, fixed: int) -> Any:
    """A string's or byte string's bytes: in the slot itself, or in the variable part."""
    if slot & INLINE_MARK:
        length = slot >> 56 & 0x7F
        if length > MAX_INLINE:
            raise BadRow(f"an inline value of {length} bytes (at most {MAX_INLINE} fit)", at)
        return row.data[at:at + length]
    return _span_bytes(row, at, slot, fixed)


def _span_bytes(row: _Row, at: int, slot: int, fixed: int) -> Any:
    begin, length = row.span(slot, at, fixed)
    return row.data[begin:begin + length]


def _date(row: _Row, at: int, slot: int, fixed: int) -> dt.date:
    days = _FIXED["INTEGER"].unpack_from(row.data, at)[0]
    try:
        return EPOCH_DATE + dt.timedelta(days=days)
    except OverflowError:
        raise IncompatibleCheckpointError(
            f"DATE {days} days from 1970-01-01 is outside Python's dates (years 1 to 9999)"
        ) from None


def _time(row: _Row, at: int, slot: int, fixed: int) -> dt.time:
    millis = _FIXED["INTEGER"].unpack_from(row.data, at)[0]
    if not 0 <= millis < MILLIS_PER_DAY:
        raise BadRow(f"TIME of {millis} milliseconds is not a time of day", at)
    seconds, milli = divmod(millis, 1000)
    minutes, second = divmod(seconds, 60)
    return dt.time(minutes // 60, minutes % 60, second, milli * 1000)


def _decimal_reader(sql_type: SqlType) -> FieldRead:
    precision, scale = sql_type.precision, sql_type.scale

    def value(number: int, at: int) -> Decimal:
        if len(str(abs(number))) > precision:
            raise BadRow(f"{number} has more digits than {sql_type.describe()}", at)
        return decimal_value(number, scale)

    if precision <= MAX_COMPACT_DECIMAL:
        return lambda row, at, slot, fixed: value(_LONG.unpack_from(row.data, at)[0], at)

    def read(row: _Row, at: int, slot: int, fixed: int) -> Decimal:
        begin, length = row.span(slot, at, fixed)
        if not 0 < length <= _MAX_DECIMAL_BYTES:
            raise BadRow(f"a decimal of {length} bytes (1 to {_MAX_DECIMAL_BYTES})", at)
        return value(int.from_bytes(row.data[begin:begin + length], "big", signed=True), at)
    return read


def _timestamp_reader(sql_type: SqlType) -> FieldRead:
    def value(millis: int, nanos: int, at: int) -> Any:
        try:
            return hashable_record(timestamp_value(millis, nanos, sql_type))
        except ValueError:
            raise IncompatibleCheckpointError(
                f"{sql_type.describe()} of {millis} epoch milliseconds is outside Python's"
                " datetimes (years 1 to 9999)") from None

    if sql_type.precision <= MAX_COMPACT_TIMESTAMP:
        return lambda row, at, slot, fixed: value(_LONG.unpack_from(row.data, at)[0], 0, at)
    step = 1 if sql_type.nanos else 1000

    def read(row: _Row, at: int, slot: int, fixed: int) -> Any:
        nanos = slot & 0xFFFFFFFF
        begin, _ = row.span(slot & ~0xFFFFFFFF | 8, at, fixed)
        if nanos >= NANOS_PER_MILLI or nanos % step:
            raise BadRow(f"{nanos} nanoseconds of a millisecond in {sql_type.describe()}", at)
        return value(_LONG.unpack_from(row.data, begin)[0], nanos, at)
    return read


def _row_reader(sql_type: SqlType) -> FieldRead:
    nested = RowReader([t for _, t in sql_type.fields])
    names = sql_type.field_names()

    def read(row: _Row, at: int, slot: int, fixed: int) -> Any:
        begin, length = row.span(slot, at, fixed)
        _, values = nested.decode(_Row(row.data, begin, length))
        return hashable_record(dict(zip(names, values)))
    return read

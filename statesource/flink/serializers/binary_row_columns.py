"""Flink's ``BinaryRowData`` decoded column-wise: the keys and values of SQL operators' state.

A serialized row is an int length and the row's bytes (:mod:`.binary_rows` reads one). Every
row of a state has the same fixed part (header, null bits, one 8-byte little-endian slot per
field), so each field is a gather at the same offset of every row: numbers straight from the
slots, text and bytes from the slot (seven bytes at most, inline) or the span of the
variable part the slot points to, and the row kind from the header byte.

Only what takes the same shape here and in :mod:`.binary_rows` is decoded: the fixed-width
types, compact decimals (precision up to 18) and timestamps up to microseconds, ASCII text and
bytes. A row type with a wide decimal, a nested row, a ``RAW`` or a timestamp past
microseconds has no column decoder; text beyond ASCII, a value Python cannot hold (a date
before year 1) and anything out of bounds raise :class:`~.columns.NotColumnar`, so the
per-value decoder reads that key group again: the same rows, or the same error naming the
fault.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa

from statesource.errors import IncompatibleCheckpointError
from statesource.flink.serializers.columns import (
    Decoder,
    Positions,
    be_ints,
    check,
    ranges_array,
)
from statesource.types import RowKind
from statesource.types.binary_row import (
    MAX_INLINE,
    MILLIS_PER_DAY,
    NANOS_PER_MILLI,
    fixed_part,
    null_bits_width,
)
from statesource.types.sql import (
    BINARY,
    MAX_COMPACT_DECIMAL,
    MAX_COMPACT_TIMESTAMP,
    TEXT,
    TIMESTAMPS,
    SqlType,
)

_KIND_NAMES = pa.array([kind.short_string for kind in sorted(RowKind, key=lambda k: k.byte_value)])
_LITTLE = {"TINYINT": "<i1", "SMALLINT": "<i2", "INTEGER": "<i4", "BIGINT": "<i8",
           "FLOAT": "<f4", "DOUBLE": "<f8", "INTERVAL_YEAR_MONTH": "<i4",
           "INTERVAL_DAY_TIME": "<i8"}
_MIN_DAYS, _MAX_DAYS = -719_162, 2_932_896
"""Days from 1970-01-01 to 0001-01-01 and to 9999-12-31: Python's dates."""
_MIN_MILLIS, _MAX_MILLIS = _MIN_DAYS * MILLIS_PER_DAY, (_MAX_DAYS + 1) * MILLIS_PER_DAY - 1
"""Epoch milliseconds of Python's datetimes (years 1 to 9999)."""


class _Rows:
    """Where the rows being decoded lie: their first bytes and sizes, and their null bits."""

    def __init__(self, buf: np.ndarray, start: Positions, size: np.ndarray, arity: int) -> None:
        self.buf = buf
        self.start = start
        self.size = size
        self.width = null_bits_width(arity)
        self.fixed = fixed_part(arity)

    def present(self, index: int) -> np.ndarray:
        """Which rows hold field ``index`` (its null bit clear; bits 0-7 are the header's)."""
        bit = index + 8
        return (self.buf[self.start + (bit >> 3)] >> (bit & 7) & 1) == 0

    def slot_at(self, index: int) -> Positions:
        """Where field ``index``'s 8-byte slot starts in every row."""
        return self.start + self.width + 8 * index

    def little(self, index: int, dtype: str) -> np.ndarray:
        """The slot's first ``dtype``-wide little-endian number in every row."""
        width = np.dtype(dtype).itemsize
        at = self.slot_at(index)
        raw = self.buf[at[:, None] + np.arange(width)] if len(at) else \
            np.empty((0, width), np.uint8)
        return np.ascontiguousarray(raw).view(dtype).reshape(-1)

    def span(self, slots: np.ndarray, present: np.ndarray) -> tuple[Positions, np.ndarray]:
        """Where the variable-part bytes the slots point to start, and their lengths."""
        offset = (slots >> np.uint64(32)).astype(np.int64)
        length = (slots & np.uint64(0xFFFFFFFF)).astype(np.int64)
        check(~present | ((slots >> np.uint64(63)) == 0) & (offset >= self.fixed)
              & (offset + length <= self.size))
        return np.where(present, self.start + offset, 0), np.where(present, length, 0)


FieldColumn = Callable[[_Rows, int, np.ndarray], pa.Array]
"""Decodes field ``index`` of every row (nulls where not present) as an Arrow array."""


class BinaryRowColumns(Decoder):
    """Rows of ``types``: a struct of the fields, after ``row_kind`` where ``with_kind``."""

    def __init__(self, arrow_type: pa.StructType, types: Sequence[SqlType], with_kind: bool,
                 fields: list[FieldColumn]) -> None:
        self.arrow_type = arrow_type
        self.types = list(types)
        self.with_kind = with_kind
        self.fields = fields

    def decode(self, buf: np.ndarray, pos: Positions, limit: Positions
               ) -> tuple[pa.Array, Positions]:
        check(pos + 4 <= limit)
        size = be_ints(buf, pos, np.dtype(np.int32)).astype(np.int64)
        start = pos + 4
        rows = _Rows(buf, start, size, len(self.types))
        check((size >= rows.fixed) & (size % 8 == 0) & (start + size <= limit))
        children = []
        kinds = buf[start]
        check(kinds < len(_KIND_NAMES))  # a key's too: the per-value decoder refuses others
        if self.with_kind:
            children.append(_KIND_NAMES.take(pa.array(kinds)))
        for index, field in enumerate(self.fields):
            children.append(field(rows, index, rows.present(index)))
        return pa.StructArray.from_arrays(children, fields=list(self.arrow_type)), start + size


def row_columns(arrow_type: pa.DataType, types: Sequence[SqlType]) -> Decoder | None:
    """The column decoder of rows of ``types`` giving ``arrow_type`` (the fields ``f0`` ..,
    after ``row_kind`` for values), or None where a field needs the per-value decoder."""
    if not isinstance(arrow_type, pa.StructType):
        return None
    with_kind = arrow_type.num_fields == len(types) + 1 and arrow_type.field(0).name == "row_kind"
    try:
        expected = [(f"f{i}", t.arrow_type) for i, t in enumerate(types)]
    except IncompatibleCheckpointError:  # a type only the per-value decoder names
        return None
    if with_kind:
        expected.insert(0, ("row_kind", pa.string()))
    if [(field.name, field.type) for field in arrow_type] != expected:
        return None
    fields = [_field_column(t) for t in types]
    if any(f is None for f in fields):
        return None
    return BinaryRowColumns(arrow_type, types, with_kind, [f for f in fields if f is not None])


def _validity(present: np.ndarray) -> pa.Buffer | None:
    return None if present.all() else pa.py_buffer(np.packbits(present, bitorder="little"))


def _numbers(arrow_type: pa.DataType, values: np.ndarray, present: np.ndarray) -> pa.Array:
    """``values`` (native numbers laid out as ``arrow_type`` keeps them) as an Arrow array,
    without a copy; null where not ``present``."""
    return pa.Array.from_buffers(arrow_type, len(values),
                                 [_validity(present), pa.py_buffer(values)])


def _field_column(sql_type: SqlType) -> FieldColumn | None:
    """How field values of ``sql_type`` decode column-wise, or None."""
    root = sql_type.root
    arrow_type = sql_type.arrow_type
    if root in _LITTLE:
        dtype = _LITTLE[root]
        return lambda rows, i, present: _numbers(arrow_type, rows.little(i, dtype), present)
    if root == "BOOLEAN":
        return lambda rows, i, present: pa.array(rows.buf[rows.slot_at(i)] != 0,
                                                 mask=~present)
    if root == "DATE":
        return lambda rows, i, present: _numbers(
            arrow_type, _bounded(rows.little(i, "<i4"), present, _MIN_DAYS, _MAX_DAYS), present)
    if root == "TIME_WITHOUT_TIME_ZONE":
        return lambda rows, i, present: _numbers(
            arrow_type, _bounded(rows.little(i, "<i4"), present, 0, MILLIS_PER_DAY - 1), present)
    if root in TEXT or root in BINARY:
        return lambda rows, i, present: _bytes_column(rows, i, present, arrow_type,
                                                      root in TEXT)
    if root == "DECIMAL" and sql_type.precision <= MAX_COMPACT_DECIMAL:
        return lambda rows, i, present: _compact_decimal(rows, i, present, sql_type)
    if root in TIMESTAMPS and sql_type.precision <= MAX_COMPACT_TIMESTAMP:
        return lambda rows, i, present: _numbers(
            arrow_type, _bounded(rows.little(i, "<i8"), present, _MIN_MILLIS, _MAX_MILLIS),
            present)
    if root in TIMESTAMPS and not sql_type.nanos:
        return lambda rows, i, present: _micro_timestamp(rows, i, present, arrow_type)
    return None


def _bounded(values: np.ndarray, present: np.ndarray, low: int, high: int) -> np.ndarray:
    """``values``, checked to lie in [low, high] where present (else zero)."""
    check(~present | (values >= low) & (values <= high))
    return np.where(present, values, 0).astype(values.dtype)


def _bytes_column(rows: _Rows, index: int, present: np.ndarray, arrow_type: pa.DataType,
                  text: bool) -> pa.Array:
    """Strings or byte strings: seven bytes at most in the slot itself (its top bit set, the
    length in the next seven), else the span of the variable part the slot points to; text
    beyond ASCII is the per-value decoder's."""
    slots = rows.little(index, "<u8")
    inline = (slots >> np.uint64(63)) == 1
    inline_length = (slots >> np.uint64(56) & np.uint64(0x7F)).astype(np.int64)
    check(~(present & inline) | (inline_length <= MAX_INLINE))
    starts, lengths = rows.span(slots, present & ~inline)
    starts = np.where(present & inline, rows.slot_at(index), starts)
    lengths = np.where(present & inline, inline_length, lengths)
    return ranges_array(arrow_type, rows.buf, starts, lengths, present, ascii_only=text)


def _compact_decimal(rows: _Rows, index: int, present: np.ndarray,
                     sql_type: SqlType) -> pa.Array:
    """Unscaled longs of at most the type's digits, as Arrow's 128-bit two's complement."""
    unscaled = np.where(present, rows.little(index, "<i8"), 0)
    limit = 10 ** sql_type.precision
    check((unscaled > -limit) & (unscaled < limit))
    words = np.empty((len(unscaled), 2), dtype="<i8")
    words[:, 0] = unscaled
    words[:, 1] = unscaled >> 63
    return _numbers(pa.decimal128(sql_type.precision, sql_type.scale), words, present)


def _micro_timestamp(rows: _Rows, index: int, present: np.ndarray,
                     arrow_type: pa.DataType) -> pa.Array:
    """A timestamp of precision 4 to 6: epoch ms in the variable part, the slot's low word
    the nanoseconds of the millisecond (whole microseconds)."""
    slots = rows.little(index, "<u8")
    nanos = (slots & np.uint64(0xFFFFFFFF)).astype(np.int64)
    check(~present | (nanos < NANOS_PER_MILLI) & (nanos % 1000 == 0))
    starts, _ = rows.span(slots & np.uint64(0xFFFFFFFF00000000) | np.uint64(8), present)
    raw = rows.buf[starts[:, None] + np.arange(8)] if len(starts) else np.empty((0, 8), np.uint8)
    millis = np.ascontiguousarray(raw).view("<i8").reshape(-1)
    millis = _bounded(millis, present, _MIN_MILLIS, _MAX_MILLIS)
    micros = np.where(present, millis * 1000 + nanos // 1000, 0)
    return _numbers(arrow_type, micros, present)


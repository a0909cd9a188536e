"""Flink SQL's serializers of single values (flink-table-runtime), outside a binary row.

A SQL operator's state mostly holds ``RowData`` (:mod:`.sql_rows`), but some values stand
alone: the keys and counts of a ``COUNT(DISTINCT)``'s ``MapView``, a ``RAW`` field's bytes,
the serializers nested in a row's snapshot. Their snapshots and values:

- ``StringDataSerializer`` (no payload): an int byte length, then UTF-8;
- ``DecimalDataSerializer`` (precision, scale): a compact decimal (at most 18 digits) is its
  unscaled long, a larger one an int length and its unscaled value's big-endian two's
  complement;
- ``TimestampDataSerializer`` (precision): epoch milliseconds (a long), and past millisecond
  precision the nanoseconds of the millisecond (an int);
- ``RawValueDataSerializer`` (composite of the value's own serializer): an int length and the
  bytes that serializer wrote, read as bytes (as Kryo values are), with the value's class;
- ``NullSerializer``: one zero byte for every value, read as None (the placeholder a
  state-backed ``MapView`` or ``ListView`` leaves in its accumulator row, where its
  ``RAW`` field then holds that byte: the view's entries are a state of their own);
- ``ExternalSerializer`` (composite: a Java-serialized ``DataType``, a flag, and the
  internal serializer): values as the internal serializer writes them, so it reads as that
  one, typed by the ``DataType`` (an accumulator's ``MapView`` keys and values).

None of them is derived from a declared type: they belong to SQL operators, whose state
statesource reads but does not declare.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa

from statesource.errors import IncompatibleCheckpointError, TypeMismatchError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.serializers.base import FlinkType, composite, register
from statesource.flink.serializers.columns import (
    Decoder,
    Positions,
    be_ints,
    check,
    ranges_array,
)
from statesource.flink.serializers.encoding import BYTES_LIKE, Encoder, encoder_of, misfit
from statesource.flink.serializers.logical_types import read_data_type
from statesource.schema import hashable_record
from statesource.types import DataType
from statesource.types.binary_row import (
    NANOS_PER_MILLI,
    decimal_value,
    java_bytes,
    timestamp_parts,
    timestamp_value,
    unscaled,
)
from statesource.types.sql import (
    MAX_COMPACT_DECIMAL,
    MAX_COMPACT_TIMESTAMP,
    MAX_DECIMAL,
    MAX_LENGTH,
    SqlType,
)

_RUNTIME = "org.apache.flink.table.runtime.typeutils."
STRING_DATA = _RUNTIME + "StringDataSerializer$StringDataSerializerSnapshot"
DECIMAL_DATA = _RUNTIME + "DecimalDataSerializer$DecimalSerializerSnapshot"
TIMESTAMP_DATA = _RUNTIME + "TimestampDataSerializer$TimestampDataSerializerSnapshot"
RAW_VALUE_DATA = _RUNTIME + "RawValueDataSerializer$RawValueDataSerializerSnapshot"
EXTERNAL = _RUNTIME + "ExternalSerializer$ExternalSerializerSnapshot"
NULL = "org.apache.flink.table.dataview.NullSerializer$NullSerializerSnapshot"
_VERSIONS = {STRING_DATA: 3, DECIMAL_DATA: 3, TIMESTAMP_DATA: 1, NULL: 3}
"""The snapshot versions Flink 1.11 to 2.3 write (and whose payload statesource knows)."""
SQL_REFUSAL = ("it belongs to a Flink SQL operator, whose state statesource reads but does not"
               " declare")


class SqlValueType(FlinkType):
    """A single SQL value, of :attr:`sql_type` (what it reads as, in Avro and Arrow)."""

    sql_type: SqlType

    def avro(self) -> Any:
        return self.sql_type.avro("SqlValue")


class StringDataType(SqlValueType):
    """``StringDataSerializer``: an int byte length, then UTF-8."""

    def __init__(self, serializer: str) -> None:
        self.serializer = serializer
        self.sql_type = SqlType("VARCHAR", length=MAX_LENGTH)

    def read(self, r: BinaryReader) -> str:
        return r.take(r.count("string length")).decode("utf-8", "replace")

    def encoder(self) -> Encoder:
        def write(w: BinaryWriter, value: Any) -> None:
            if type(value) is not str:
                raise misfit(value, "StringData", "expected a str")
            try:
                data = value.encode("utf-8")
            except UnicodeEncodeError:
                raise misfit(value, "StringData", "text without lone surrogates") from None
            w.length_prefixed(data)
        return Encoder("StringData", write)

    def column_decoder(self, arrow_type: pa.DataType) -> Decoder | None:
        return StringDataColumn() if arrow_type == pa.string() else None


class StringDataColumn(Decoder):
    """``StringDataSerializer`` column-wise: an int length, then the bytes; ASCII text is
    decoded here, other text by the per-value decoder."""

    arrow_type = pa.string()

    def decode(self, buf: np.ndarray, pos: Positions, limit: Positions
               ) -> tuple[pa.Array, Positions]:
        check(pos + 4 <= limit)
        lengths = be_ints(buf, pos, np.dtype(np.int32)).astype(np.int64)
        end = pos + 4 + lengths
        check((lengths >= 0) & (end <= limit))
        return ranges_array(pa.string(), buf, pos + 4, lengths, ascii_only=True), end


class DecimalDataType(SqlValueType):
    """``DecimalDataSerializer``: an unscaled long, or an int length and unscaled bytes."""

    def __init__(self, serializer: str, precision: int, scale: int) -> None:
        self.serializer = serializer
        self.sql_type = SqlType("DECIMAL", precision=precision, scale=scale)
        self.compact = precision <= MAX_COMPACT_DECIMAL
        self.length = 8 if self.compact else -1

    def read(self, r: BinaryReader) -> Decimal:
        at = r.pos
        if self.compact:
            number = r.i64()
        else:
            data = r.take(r.count("decimal length", 16))
            number = int.from_bytes(data, "big", signed=True)
            if not data or java_bytes(number) != data:
                raise r.error(f"{data.hex()} is not the unscaled value of a decimal", at)
        if len(str(abs(number))) > self.sql_type.precision:
            raise r.error(f"{number} has more digits than {self.sql_type.describe()}", at)
        return decimal_value(number, self.sql_type.scale)

    def encoder(self) -> Encoder:
        name = self.sql_type.describe()

        def write(w: BinaryWriter, value: Any) -> None:
            number = _checked(unscaled, value, self.sql_type)
            if self.compact:
                w.i64(number)
            else:
                w.length_prefixed(java_bytes(number))
        return Encoder(name, write)


class TimestampDataType(SqlValueType):
    """``TimestampDataSerializer``: epoch ms, and past ms precision the ns of the ms. The
    serializer does not say whether its values are local (TIMESTAMP) or instants
    (TIMESTAMP_LTZ): they read as local ones unless an ``ExternalSerializer`` says so."""

    def __init__(self, serializer: str, sql_type: SqlType) -> None:
        self.serializer = serializer
        self.sql_type = sql_type
        self.compact = sql_type.precision <= MAX_COMPACT_TIMESTAMP
        self.length = 8 if self.compact else 12

    def read(self, r: BinaryReader) -> Any:
        at = r.pos
        millis = r.i64()
        nanos = 0 if self.compact else r.i32()
        if not 0 <= nanos < NANOS_PER_MILLI or (not self.sql_type.nanos and nanos % 1000):
            raise r.error(f"{nanos} nanoseconds of a millisecond in"
                          f" {self.sql_type.describe()}", at)
        try:
            return hashable_record(timestamp_value(millis, nanos, self.sql_type))
        except ValueError:
            raise IncompatibleCheckpointError(
                f"{r.source}: {self.sql_type.describe()} of {millis} epoch milliseconds is"
                " outside Python's datetimes (years 1 to 9999)") from None

    def encoder(self) -> Encoder:
        def write(w: BinaryWriter, value: Any) -> None:
            millis, nanos = _checked(timestamp_parts, value, self.sql_type)
            w.i64(millis)
            if not self.compact:
                w.i32(nanos)
        return Encoder(self.sql_type.describe(), write)


class RawValueType(SqlValueType):
    """``RawValueDataSerializer``: an int length, then what the value's serializer wrote."""

    def __init__(self, serializer: str, inner: FlinkType) -> None:
        self.serializer = serializer
        self.inner = inner
        self.sql_type = SqlType("RAW", java_class=getattr(inner, "java_class", inner.serializer))

    def read(self, r: BinaryReader) -> bytes:
        return r.take(r.count("raw value length"))

    def encoder(self) -> Encoder:
        name = self.sql_type.describe()

        def write(w: BinaryWriter, value: Any) -> None:
            if not isinstance(value, BYTES_LIKE):
                raise misfit(value, name, "the bytes of its serializer")
            w.length_prefixed(bytes(value))
        return Encoder(name, write)


class NullType(FlinkType):
    """``NullSerializer``: a zero byte, read as None (a state-backed data view's placeholder)."""

    length = 1

    def __init__(self, serializer: str) -> None:
        self.serializer = serializer

    def read(self, r: BinaryReader) -> None:
        r.u8()  # Flink reads the byte whatever it is

    def encoder(self) -> Encoder:
        def write(w: BinaryWriter, value: Any) -> None:
            if value is not None:
                raise misfit(value, "NullSerializer", "it holds None only")
            w.u8(0)
        return Encoder("NullSerializer", write)


class ExternalType(FlinkType):
    """``ExternalSerializer``: values as its internal serializer writes them."""

    def __init__(self, serializer: str, sql_type: SqlType, internal: FlinkType) -> None:
        self.serializer = serializer
        self.sql_type = sql_type
        if isinstance(internal, TimestampDataType):  # the DataType knows its time zone
            internal = TimestampDataType(internal.serializer, sql_type)
        self.internal = internal
        self.length = internal.length

    def read(self, r: BinaryReader) -> Any:
        return self.internal.read(r)

    def read_whole(self, r: BinaryReader) -> Any:
        return self.internal.read_whole(r)

    def data_type(self) -> DataType:
        return self.internal.data_type()

    def avro(self) -> Any:
        return self.internal.avro()

    def to_value(self, value: Any) -> Any:
        return self.internal.to_value(value)

    def encoder(self) -> Encoder:
        inner = encoder_of(self.internal)
        return Encoder(inner.name, inner.write)

    def column_decoder(self, arrow_type: pa.DataType) -> Decoder | None:
        return self.internal.column_decoder(arrow_type)


def _checked(part: Any, value: Any, sql_type: SqlType) -> Any:
    """``part(value, sql_type)`` (a value's numbers as Flink keeps them), its error naming
    the value and the type."""
    try:
        return part(value, sql_type)
    except TypeMismatchError as error:
        raise misfit(value, sql_type.describe(), str(error)) from None


def _versioned(name: str, version: int, r: BinaryReader) -> None:
    if version != _VERSIONS[name]:
        raise IncompatibleCheckpointError(
            f"{r.source}: serializer snapshot {name} of version {version} is not supported"
            f" (statesource reads version {_VERSIONS[name]})")


def _read_string(name: str, r: BinaryReader, version: int) -> FlinkType:
    _versioned(name, version, r)
    return StringDataType(name)


def _read_decimal(name: str, r: BinaryReader, version: int) -> FlinkType:
    _versioned(name, version, r)
    at = r.pos
    precision, scale = r.i32(), r.i32()
    if not 1 <= precision <= MAX_DECIMAL or not 0 <= scale <= precision:
        raise r.error(f"DECIMAL({precision}, {scale}) is not a decimal type Flink has", at)
    return DecimalDataType(name, precision, scale)


def _read_timestamp(name: str, r: BinaryReader, version: int) -> FlinkType:
    _versioned(name, version, r)
    at = r.pos
    precision = r.i32()
    if not 0 <= precision <= 9:
        raise r.error(f"TIMESTAMP({precision}) is not a timestamp type Flink has", at)
    return TimestampDataType(name, SqlType("TIMESTAMP_WITHOUT_TIME_ZONE", precision=precision))


def _read_null(name: str, r: BinaryReader, version: int) -> FlinkType:
    _versioned(name, version, r)
    return NullType(name)


def _external_outer(r: BinaryReader, version: int) -> SqlType:
    """``ExternalSerializerSnapshot``'s outer payload: the DataType, then ``isInternalInput``."""
    if version != 1:
        raise IncompatibleCheckpointError(
            f"{r.source}: {EXTERNAL} of outer version {version} is not supported (statesource"
            " reads version 1)")
    sql_type = read_data_type(r)
    r.boolean()
    return sql_type


register(STRING_DATA, _read_string, SQL_REFUSAL)
register(DECIMAL_DATA, _read_decimal, SQL_REFUSAL)
register(TIMESTAMP_DATA, _read_timestamp, SQL_REFUSAL)
register(NULL, _read_null, SQL_REFUSAL)
register(RAW_VALUE_DATA, composite(lambda n, x, s: RawValueType(n, s[0]), arity=1), SQL_REFUSAL)
register(EXTERNAL, composite(lambda n, x, s: ExternalType(n, x, s[0]), _external_outer, arity=1),
         SQL_REFUSAL)

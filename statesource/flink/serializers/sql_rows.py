"""Flink SQL's ``RowDataSerializer``: the keys and most values of every SQL operator's state.

Its snapshot (version 3) is the number of fields, each field's ``LogicalType`` as a
Java-serialized object (:mod:`.logical_types`), then the fields' nested serializer snapshots
(the internal serializers: ``StringDataSerializer``, ``DecimalDataSerializer``, ...). A value
is an int length and a ``BinaryRowData`` (:mod:`.binary_rows`), whose fields are typed by the
logical types alone; the nested serializers only matter for what a ``RAW`` field holds.

The snapshot names no fields, so a row's columns are ``f0``, ``f1``, ... (a nested ROW keeps
its own field names). As a key (the grouping, join or partition columns) a row is a
:class:`~statesource.types.sql_row.SqlRowType`, hashed as Flink hashes it; as a value, an Avro
record of its ``row_kind`` (``+I``, ``-U``, ``+U``, ``-D``) and its fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from statesource.errors import (
    CorruptCheckpointError,
    IncompatibleCheckpointError,
    InvalidArgumentError,
    TypeMismatchError,
)
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.serializers.base import FlinkType, nested_serializers, register
from statesource.flink.serializers.binary_row_columns import row_columns
from statesource.flink.serializers.binary_rows import RowReader
from statesource.flink.serializers.columns import Decoder
from statesource.flink.serializers.encoding import Encoder, misfit
from statesource.flink.serializers.logical_types import read_logical_type
from statesource.flink.serializers.sql_values import SQL_REFUSAL
from statesource.types import Row, RowKind
from statesource.types.binary_row import encode_row, row_values
from statesource.types.sql import SqlType, record_avro
from statesource.types.sql_row import SqlRowType

ROW_DATA = ("org.apache.flink.table.runtime.typeutils.RowDataSerializer"
            "$RowDataSerializerSnapshot")
_VERSION = 3
MAX_FIELDS = 1 << 16
"""More fields than any SQL row has (Flink's rows are bounded by a memory page, 32 KB, of
slots): a count beyond it is a corrupt snapshot, refused before anything is parsed."""


class SqlRowFlinkType(FlinkType):
    """``RowDataSerializer``: binary rows of fields typed by ``types``."""

    def __init__(self, serializer: str, types: list[SqlType], fields: list[FlinkType]) -> None:
        self.serializer = serializer
        self.types = types
        self.fields = fields
        self.names = [f"f{i}" for i in range(len(types))]

    def read(self, r: BinaryReader) -> Row:
        reader = self.__dict__.get("_reader")
        if reader is None:  # built at the first row: a type statesource cannot read fails
            # the states holding it, not the header of their file
            reader = self.__dict__["_reader"] = RowReader(self.types)
        kind, values = reader.read(r)
        return Row(*values, kind=kind)

    def __getstate__(self) -> dict[str, Any]:
        """Without the reader (closures), which a Spark task builds again."""
        return {k: v for k, v in self.__dict__.items() if k != "_reader"}

    def column_decoder(self, arrow_type: pa.DataType) -> Decoder | None:
        """Rows decoded a field at a time over every row (:mod:`.binary_row_columns`), where
        their types allow."""
        return row_columns(arrow_type, self.types)

    def data_type(self) -> SqlRowType:
        return SqlRowType(tuple(self.types))

    def encoder(self) -> Encoder:
        """Writes a row as ``RowDataSerializer`` does: its length, then its ``BinaryRowData``
        bytes (written as Flink's projections write them). A row is a
        :class:`~statesource.types.Row` (its kind kept), a dict of ``row_kind`` (default
        ``+I``) and the fields by name (a value row as read), or a tuple of the fields."""
        name, types, names = self.describe(), self.types, self.names

        def write(w: BinaryWriter, value: Any) -> None:
            kind = value.kind if isinstance(value, Row) else RowKind.INSERT
            fields = value
            if isinstance(value, Mapping):
                kind = _kind_named(value.get("row_kind", "+I"), value, name)
                fields = {k: v for k, v in value.items() if k != "row_kind"}
            try:
                data = encode_row(types, row_values(fields, names), kind.byte_value)
            except TypeMismatchError as error:
                raise misfit(value, name, str(error)) from None
            w.length_prefixed(data)
        return Encoder(name, write)

    def avro(self) -> Any:
        return record_avro("SqlRow", self.names, self.types, row_kind=True)

    def to_value(self, value: Row) -> dict[str, Any]:
        return {"row_kind": value.kind.short_string, **dict(zip(self.names, value.fields))}

    def describe(self) -> str:
        return "RowData<" + ", ".join(t.describe() for t in self.types) + ">"


def _kind_named(kind: Any, value: Any, name: str) -> RowKind:
    try:
        return kind if isinstance(kind, RowKind) else RowKind.from_short_string(kind)
    except InvalidArgumentError:
        raise misfit(value, name, f"unknown row kind {kind!r}; expected one of"
                     f" {', '.join(k.short_string for k in RowKind)}") from None


def _read_row_data(name: str, r: BinaryReader, version: int) -> FlinkType:
    if version != _VERSION:
        raise IncompatibleCheckpointError(
            f"{r.source}: serializer snapshot {name} of version {version} is not supported"
            f" (statesource reads version {_VERSION})")
    at = r.pos
    count = r.count("number of row fields", MAX_FIELDS)
    types = [read_logical_type(r) for _ in range(count)]
    fields = nested_serializers(r)
    if len(fields) != count:
        raise CorruptCheckpointError(
            f"{r.source}: serializer snapshot {name} at byte offset {at} types {count} fields"
            f" and nests {len(fields)} serializers")
    return SqlRowFlinkType(name, types, fields)


register(ROW_DATA, _read_row_data, SQL_REFUSAL)

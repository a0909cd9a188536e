"""Typed values from JSON: how keys are spelled on a command line or in test vectors.

JSON has one number type and no bytes, so the declared type decides what a
JSON value becomes: ``5`` is an ``int`` or a ``long`` as declared. Floats and
doubles may also be given by their IEEE bits (``{"bits": "7ff80000..."}``)
to reach values such as negative zero or a NaN payload exactly; bytes are
``{"bytes": "<hex>"}``; a Row is a JSON array (an INSERT row) or
``{"kind": "-U", "fields": [...]}``. A Flink SQL key (``sqlrow<...>``) is a JSON array of
its fields: decimals, dates, times and timestamps as strings (ISO 8601; a ``TIMESTAMP_LTZ``
with its offset; a timestamp past microseconds as ``{"millisecond", "nano_of_millisecond"}``),
bytes as ``{"bytes": "<hex>"}``, a nested ROW as an array (or an object by field name).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import struct
from decimal import Decimal, InvalidOperation
from typing import Any

from statesource.errors import InvalidArgumentError
from statesource.types import (
    BYTES,
    CHAR,
    DOUBLE,
    FLOAT,
    STRING,
    DataType,
    Row,
    RowKind,
    RowType,
    SqlRowType,
    SqlType,
    TupleType,
)
from statesource.types.sql import BINARY, TIMESTAMPS


def from_json(value_type: DataType, value: Any) -> Any:
    """Convert a parsed JSON value into a Python value of ``value_type`` (validated)."""
    converted = _convert(value_type, value)
    if converted is not None:
        value_type.validate(converted)
    return converted


def parse_key_text(value_type: DataType, text: str) -> Any:
    """A key written on a command line: strings and chars verbatim, anything else as JSON."""
    if value_type in (STRING, CHAR):
        return from_json(value_type, text)
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as error:
        raise InvalidArgumentError(
            f"key {text!r} is not valid JSON for type {value_type.name}: {error.msg}"
        ) from None
    return from_json(value_type, parsed)


def _convert(value_type: DataType, value: Any) -> Any:
    if value is None:
        return None
    if value_type in (FLOAT, DOUBLE):
        if isinstance(value, dict) and "bits" in value:
            fmt, width = ("<f", "<I") if value_type is FLOAT else ("<d", "<Q")
            return struct.unpack(fmt, struct.pack(width, int(value["bits"], 16)))[0]
        if type(value) is int:
            return float(value)
        return value
    if value_type is BYTES and isinstance(value, dict) and "bytes" in value:
        return bytes.fromhex(value["bytes"])
    if isinstance(value_type, TupleType):
        return tuple(_fields(value_type, value))
    if isinstance(value_type, SqlRowType):
        if not isinstance(value, list) or len(value) != len(value_type.fields):
            raise InvalidArgumentError(f"{value_type.name} value {value!r} must be a JSON array"
                                       f" of {len(value_type.fields)} fields")
        return Row(*(_sql_field(t, v) for t, v in zip(value_type.fields, value)))
    if isinstance(value_type, RowType):
        if isinstance(value, dict):
            kind = RowKind.from_short_string(value.get("kind", "+I"))
            return Row(*_fields(value_type, value.get("fields")), kind=kind)
        return Row(*_fields(value_type, value))
    return value


def _sql_field(sql_type: SqlType, value: Any) -> Any:
    """A JSON value as the Python value of a SQL field of ``sql_type`` (checked when the key
    is encoded); a string that spells no value of the type is refused, naming it."""
    root = sql_type.root
    try:
        if value is None:
            return None
        if root in ("FLOAT", "DOUBLE") and type(value) is int:
            return float(value)
        if root == "DECIMAL" and type(value) in (str, int, float):
            return Decimal(str(value))
        if root == "DATE" and isinstance(value, str):
            return dt.date.fromisoformat(value)
        if root == "TIME_WITHOUT_TIME_ZONE" and isinstance(value, str):
            return dt.time.fromisoformat(value)
        if root in TIMESTAMPS and isinstance(value, str):
            return dt.datetime.fromisoformat(value)
        if (root in BINARY or root == "RAW") and isinstance(value, dict) and "bytes" in value:
            return bytes.fromhex(value["bytes"])
    except (ValueError, InvalidOperation) as error:
        raise InvalidArgumentError(
            f"{value!r} is not a {sql_type.describe()} value: {error}") from None
    if root == "ROW" and isinstance(value, list) and len(value) == len(sql_type.fields):
        return [_sql_field(t, v) for (_, t), v in zip(sql_type.fields, value)]
    if root == "ROW" and isinstance(value, dict):
        types = dict(zip(sql_type.field_names(), (t for _, t in sql_type.fields)))
        return {name: _sql_field(types[name], v) if name in types else v
                for name, v in value.items()}
    return value


def _fields(composite: TupleType | RowType, value: Any) -> list[Any]:
    if not isinstance(value, list) or len(value) != len(composite.fields):
        raise InvalidArgumentError(
            f"{composite.name} value {value!r} must be a JSON array of"
            f" {len(composite.fields)} fields"
        )
    return [_convert(t, v) for t, v in zip(composite.fields, value)]


def to_json(value_type: DataType, value: Any) -> Any:
    """``value`` of ``value_type`` as the JSON value :func:`from_json` turns back into it:
    what a command's ``--json`` document says of a key. Tuples and INSERT rows are arrays,
    other rows ``{"kind", "fields"}``, bytes ``{"bytes": "<hex>"}``, and a float JSON cannot
    spell (NaN, an infinity) ``{"bits": "<hex>"}``."""
    if value is None:
        return None
    if isinstance(value_type, SqlRowType):
        return [_sql_json(v) for v in getattr(value, "fields", value)]
    if isinstance(value_type, (TupleType, RowType)):
        fields = value.fields if isinstance(value, Row) else value
        converted = [to_json(t, v) for t, v in zip(value_type.fields, fields)]
        if isinstance(value, Row) and value.kind is not RowKind.INSERT:
            return {"kind": value.kind.short_string, "fields": converted}
        return converted
    if value_type is BYTES:
        return {"bytes": bytes(value).hex()}
    if value_type in (FLOAT, DOUBLE) and not math.isfinite(value):
        fmt, width = ("<f", "<I") if value_type is FLOAT else ("<d", "<Q")
        return {"bits": f"{struct.unpack(width, struct.pack(fmt, value))[0]:x}"}
    return value


def _sql_json(value: Any) -> Any:
    """A SQL field's value as :func:`_sql_field` reads it back."""
    if isinstance(value, Decimal):
        return f"{value:f}"
    if isinstance(value, (dt.date, dt.time)):  # datetimes too
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": bytes(value).hex()}
    if isinstance(value, dict):
        return {k: _sql_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_sql_json(v) for v in value]
    return value

"""Flink SQL's logical types, as the state of a SQL operator declares them.

A Flink SQL operator keeps its keys and values as ``RowData`` whose fields are typed by Flink's
``LogicalType``s (``VARCHAR``, ``DECIMAL(10, 2)``, ``TIMESTAMP(3)``, ...), recorded in its
serializer snapshots. :class:`SqlType` is one such type in statesource's vocabulary: what
its values are in Python, their Avro schema and their Arrow type. Both the reader of SQL
state (:mod:`statesource.flink.serializers`) and the SQL key type
(:mod:`~statesource.types.sql_row`, which hashes keys as Flink does) speak it, so it sits
in the foundation.

Python values, Avro and Arrow (the Avro and Arrow columns agree, as
:class:`~statesource.schema.ValueSchema` maps the Avro):

| SQL type | Python | Avro | Arrow |
|---|---|---|---|
| BOOLEAN | bool | boolean | bool |
| TINYINT, SMALLINT, INTEGER, BIGINT | int | int (java-class Byte, Short), long | int8 .. int64 |
| FLOAT, DOUBLE | float | float, double | float32, float64 |
| CHAR, VARCHAR (STRING) | str | string | string |
| BINARY, VARBINARY (BYTES) | bytes | bytes | binary |
| DECIMAL(p, s) | Decimal | decimal(p, s) on bytes | decimal128(p, s) |
| DATE | date | date | date32 |
| TIME(p) | time (whole ms: Flink keeps ms) | time-millis | time32[ms] |
| TIMESTAMP(p), p <= 6 | naive datetime | local-timestamp-millis / -micros | timestamp[ms / us] |
| TIMESTAMP_LTZ(p), p <= 6 | UTC datetime | timestamp-millis / -micros | timestamp[ms / us, UTC] |
| TIMESTAMP(p), TIMESTAMP_LTZ(p), p > 6 | dict of two parts (1) | record | struct |
| INTERVAL YEAR TO MONTH, DAY TO SECOND | int (months), int (ms) | int, long | int32, int64 |
| ROW<...> | dict by field name | record | struct |
| RAW('class') | bytes (its serializer's) | bytes (java-class) | binary |

(1) Timestamps past microseconds are kept whole as Flink's own two parts, ``millisecond``
(epoch) and ``nano_of_millisecond`` (Python's datetime and Spark's timestamp hold
microseconds): nothing is rounded away. Field names of nested rows are
Flink's, with characters Avro forbids in a name (``EXPR$0``) replaced by ``_``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from statesource.errors import IncompatibleCheckpointError

INTEGRAL_BYTES = {"TINYINT": 1, "SMALLINT": 2, "INTEGER": 4, "BIGINT": 8, "DATE": 4,
                  "TIME_WITHOUT_TIME_ZONE": 4, "INTERVAL_YEAR_MONTH": 4, "INTERVAL_DAY_TIME": 8}
"""Integral types in a row's fixed slot: their width (DATE: days, TIME: ms of the day,
intervals: months and ms)."""
TEXT = frozenset({"CHAR", "VARCHAR"})
BINARY = frozenset({"BINARY", "VARBINARY"})
TIMESTAMPS = frozenset({"TIMESTAMP_WITHOUT_TIME_ZONE", "TIMESTAMP_WITH_LOCAL_TIME_ZONE"})
MAX_COMPACT_DECIMAL = 18
"""Decimals of at most this precision are an unscaled long in the fixed slot (``isCompact``)."""
MAX_COMPACT_TIMESTAMP = 3
"""Timestamps of at most this precision are epoch milliseconds in the fixed slot."""
MAX_DECIMAL = 38
NANOS = (("millisecond", "long", pa.int64()), ("nano_of_millisecond", "int", pa.int32()))
"""The two parts of a timestamp past microseconds, as Flink's ``TimestampData`` holds it."""

_SIMPLE_AVRO: dict[str, Any] = {
    "BOOLEAN": "boolean", "TINYINT": {"type": "int", "java-class": "java.lang.Byte"},
    "SMALLINT": {"type": "int", "java-class": "java.lang.Short"}, "INTEGER": "int",
    "BIGINT": "long", "FLOAT": "float", "DOUBLE": "double", "CHAR": "string",
    "VARCHAR": "string", "BINARY": "bytes", "VARBINARY": "bytes",
    "DATE": {"type": "int", "logicalType": "date"},
    "TIME_WITHOUT_TIME_ZONE": {"type": "int", "logicalType": "time-millis"},
    "INTERVAL_YEAR_MONTH": "int", "INTERVAL_DAY_TIME": "long"}
_SIMPLE_ARROW: dict[str, pa.DataType] = {
    "BOOLEAN": pa.bool_(), "TINYINT": pa.int8(), "SMALLINT": pa.int16(),
    "INTEGER": pa.int32(), "BIGINT": pa.int64(), "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(), "CHAR": pa.string(), "VARCHAR": pa.string(),
    "BINARY": pa.binary(), "VARBINARY": pa.binary(), "DATE": pa.date32(),
    "TIME_WITHOUT_TIME_ZONE": pa.time32("ms"), "INTERVAL_YEAR_MONTH": pa.int32(),
    "INTERVAL_DAY_TIME": pa.int64()}
_SQL_NAMES = {"INTEGER": "INT", "TIME_WITHOUT_TIME_ZONE": "TIME",
              "TIMESTAMP_WITHOUT_TIME_ZONE": "TIMESTAMP",
              "TIMESTAMP_WITH_LOCAL_TIME_ZONE": "TIMESTAMP_LTZ",
              "INTERVAL_YEAR_MONTH": "INTERVAL YEAR TO MONTH",
              "INTERVAL_DAY_TIME": "INTERVAL DAY TO SECOND"}
ROOTS = frozenset(_SIMPLE_AVRO) | TIMESTAMPS | {"DECIMAL", "ROW", "RAW"}
"""The type roots statesource reads (Flink's ``LogicalTypeRoot`` names)."""
MAX_LENGTH = 2147483647
"""The length of ``VARCHAR`` and ``VARBINARY`` that SQL spells ``STRING`` and ``BYTES``."""
_NOT_A_NAME = re.compile(r"[^A-Za-z0-9_]")


@dataclass(frozen=True)
class SqlType:
    """One Flink SQL logical type: its root (``LogicalTypeRoot``) and parameters.

    ``precision`` is a DECIMAL's digits or a TIME's / TIMESTAMP's fractional digits,
    ``scale`` a DECIMAL's, ``length`` a CHAR's, VARCHAR's, BINARY's or VARBINARY's,
    ``fields`` a ROW's (name, type) pairs, ``java_class`` a RAW's class. A root statesource
    does not read (ARRAY, MAP, STRUCTURED_TYPE, ...) is kept, so that a snapshot holding it
    still parses; its values are refused (:meth:`check_supported`), naming it.
    """

    root: str
    nullable: bool = True
    precision: int = 0
    scale: int = 0
    length: int = 0
    fields: tuple[tuple[str, SqlType], ...] = ()
    java_class: str = ""

    def describe(self) -> str:
        """The type as Flink SQL spells it (``DECIMAL(10, 2)``, ``ROW<n INT, tag STRING>``)."""
        name = _SQL_NAMES.get(self.root, self.root)
        if self.root in ("VARCHAR", "VARBINARY") and self.length == MAX_LENGTH:
            text = "STRING" if self.root == "VARCHAR" else "BYTES"
        elif self.root in TEXT | BINARY:
            text = f"{name}({self.length})"
        elif self.root == "DECIMAL":
            text = f"DECIMAL({self.precision}, {self.scale})"
        elif self.root in TIMESTAMPS or self.root == "TIME_WITHOUT_TIME_ZONE":
            text = f"{name}({self.precision})"
        elif self.root == "ROW":
            text = "ROW<" + ", ".join(f"{n} {t.describe()}" for n, t in self.fields) + ">"
        elif self.root == "RAW":
            text = f"RAW('{self.java_class}')"
        else:
            text = name
        return text if self.nullable else f"{text} NOT NULL"

    def check_supported(self) -> None:
        """Refuses (:class:`IncompatibleCheckpointError`) a type statesource does not read."""
        if self.root not in ROOTS:
            raise IncompatibleCheckpointError(
                f"Flink SQL type {self.describe()} is not read by statesource (it reads"
                f" {', '.join(sorted(_SQL_NAMES.get(r, r) for r in ROOTS))})")
        for _, field in self.fields:
            field.check_supported()

    @property
    def in_fixed_part(self) -> bool:
        """Whether a value lies whole in its 8-byte slot (Flink's ``isInFixedLengthPart``)."""
        if self.root == "DECIMAL":
            return self.precision <= MAX_COMPACT_DECIMAL
        if self.root in TIMESTAMPS:
            return self.precision <= MAX_COMPACT_TIMESTAMP
        return self.root in INTEGRAL_BYTES or self.root in ("BOOLEAN", "FLOAT", "DOUBLE")

    @property
    def nanos(self) -> bool:
        """Whether values are timestamps past microseconds (kept as Flink's two parts)."""
        return self.root in TIMESTAMPS and self.precision > 6

    def field_names(self) -> list[str]:
        """A ROW's field names as Avro and Arrow take them (see :func:`avro_names`)."""
        return avro_names([name for name, _ in self.fields])

    def avro(self, record_name: str) -> Any:
        """The Avro schema of values; records are named ``record_name`` and below it by path
        (Avro forbids defining a name twice)."""
        self.check_supported()
        if self.root in _SIMPLE_AVRO:
            return _SIMPLE_AVRO[self.root]
        if self.root == "DECIMAL":
            return {"type": "bytes", "logicalType": "decimal", "precision": self.precision,
                    "scale": self.scale}
        if self.root == "RAW":
            return {"type": "bytes", "java-class": self.java_class}
        if self.nanos:
            return {"type": "record", "name": record_name,
                    "fields": [{"name": name, "type": avro} for name, avro, _ in NANOS]}
        if self.root in TIMESTAMPS:
            unit = "millis" if self.precision <= MAX_COMPACT_TIMESTAMP else "micros"
            local = "local-" if self.root == "TIMESTAMP_WITHOUT_TIME_ZONE" else ""
            return {"type": "long", "logicalType": f"{local}timestamp-{unit}"}
        return record_avro(record_name, self.field_names(), [t for _, t in self.fields])

    @property
    def arrow_type(self) -> pa.DataType:
        """The Arrow type of values (what :meth:`avro`'s schema maps to)."""
        self.check_supported()
        if self.root in _SIMPLE_ARROW:
            return _SIMPLE_ARROW[self.root]
        if self.root == "DECIMAL":
            return pa.decimal128(self.precision, self.scale)
        if self.root == "RAW":
            return pa.binary()
        if self.nanos:
            return pa.struct([pa.field(name, arrow) for name, _, arrow in NANOS])
        if self.root in TIMESTAMPS:
            unit = "ms" if self.precision <= MAX_COMPACT_TIMESTAMP else "us"
            zone = "UTC" if self.root == "TIMESTAMP_WITH_LOCAL_TIME_ZONE" else None
            return pa.timestamp(unit, tz=zone)
        return pa.struct([pa.field(name, t.arrow_type)
                          for name, (_, t) in zip(self.field_names(), self.fields)])


def record_avro(record_name: str, names: list[str], types: list[SqlType],
                row_kind: bool = False) -> dict[str, Any]:
    """The Avro record of rows of ``types`` (each field nullable, as SQL lets any be)."""
    fields: list[dict[str, Any]] = [
        {"name": name, "type": ["null", field.avro(f"{record_name}_{name}")]}
        for name, field in zip(names, types)]
    if row_kind:
        fields.insert(0, {"name": "row_kind", "type": "string"})
    return {"type": "record", "name": record_name, "fields": fields}


def avro_names(names: list[str]) -> list[str]:
    """Field names as Avro allows them: characters other than letters, digits and ``_``
    become ``_``, a leading digit gets a ``_`` before it, and a name that would repeat an
    earlier one gets its position appended."""
    found: list[str] = []
    for index, name in enumerate(names):
        clean = _NOT_A_NAME.sub("_", name) or "_"
        if clean[0].isdigit():
            clean = "_" + clean
        if clean in found:
            clean = f"{clean}_{index}"
        found.append(clean)
    return found

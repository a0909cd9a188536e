"""Values of flink-avro's ``AvroSerializer``: typed by the Avro schema in the snapshot.

``AvroSerializerSnapshot`` carries, after its version, the runtime class
(version 2 on; ``GenericRecord``, a generated ``SpecificRecord`` or any class
Avro serializes by reflection) and the writer's Avro schema: as Java
``writeUTF`` text up to version 2, as Flink's ``StringValue`` strings (no
64 KB limit) from version 3. Version 1 carries the schema only.

The values are not Avro's binary encoding: the serializer drives Avro's datum
writer through Flink's own ``DataOutputEncoder``, which writes to a Java
``DataOutput``. So ``int``, ``long``, ``float`` and ``double`` are fixed-width
big-endian, ``boolean`` one byte, enum ordinals and union branch indexes
4-byte ints, ``bytes`` and ``string`` a 4-byte length then the bytes (UTF-8
for strings), ``fixed`` its bytes, and arrays and maps blocks of items, each
block headed by its item count as an unsigned 7-bit varint (low group first),
ended by a count of 0. The decoder below is compiled from the schema once and
consumes exactly one value, which native snapshots need: they do not frame
values.

Decoded values take the shapes of :mod:`statesource.schema` (records as
dicts, enums as their symbol, logical types as dates, times, datetimes and
decimals), so the schema maps to Arrow as any statesource value schema does.
A schema that mapping refuses (a union of several types, say) still reads:
its values are kept as the bytes Flink wrote, a ``binary`` column whose Avro
type names the class and carries the schema, and the rest of the snapshot is
unaffected.

Values are written back by the same schema (:mod:`avro_encoder`), or as the bytes read
where the schema has no mapping. The snapshot itself is never derived from a declared type
(it holds the schema as Java's Avro prints it), and Avro values are not decoded column-wise.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any

from statesource.errors import CorruptCheckpointError, IncompatibleCheckpointError, StateSourceError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.serializers.avro_encoder import avro_writer
from statesource.flink.serializers.base import FlinkType, register
from statesource.flink.serializers.encoding import Encoder, raw_bytes
from statesource.schema import ValueSchema

AVRO_SNAPSHOT = "org.apache.flink.formats.avro.typeutils.AvroSerializerSnapshot"
GENERIC_RECORD = "org.apache.avro.generic.GenericRecord"
_SUPPORTED_VERSIONS = (1, 2, 3)
_ZERO_WIDTH_ITEMS = 1 << 20
"""Most items of an array or map whose items take no bytes (nulls): a bound on allocation."""

_Read = Callable[[BinaryReader], Any]
_EPOCH_DAY = date(1970, 1, 1)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_LOCAL_EPOCH = datetime(1970, 1, 1)
_MIDNIGHT = datetime(1970, 1, 1)


class _BadSchema(Exception):
    """The schema in a snapshot is not valid Avro (reported with the snapshot's offset)."""


def _read_string(r: BinaryReader) -> str:
    at = r.pos
    raw = r.take(r.count("Avro string length"))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise r.error("invalid UTF-8 in an Avro string", at) from None


def _read_bytes(r: BinaryReader) -> bytes:
    return r.take(r.count("Avro bytes length"))


def _read_index(r: BinaryReader, size: int, what: str) -> int:
    at = r.pos
    index = r.i32()
    if not 0 <= index < size:
        raise r.error(f"invalid {what} {index} (of {size})", at)
    return index


def _block_counts(r: BinaryReader, zero_width: bool) -> Any:
    """The item counts of an array's or map's blocks, until the closing count 0."""
    while True:
        at = r.pos
        count = r.varint()
        if count == 0:
            return
        if count > (_ZERO_WIDTH_ITEMS if zero_width else r.remaining()):
            raise r.error(f"invalid Avro block count {count}", at)
        yield count


def _time_of_day(micros: int) -> time:
    if not 0 <= micros < 86_400_000_000:
        raise ValueError(f"{micros} microseconds is not a time of day")
    return (_MIDNIGHT + timedelta(microseconds=micros)).time()


_LOGICAL: dict[tuple[str, str], Callable[[Any], Any]] = {
    ("int", "date"): lambda days: _EPOCH_DAY + timedelta(days=days),
    ("int", "time-millis"): lambda ms: _time_of_day(ms * 1000),
    ("long", "time-micros"): _time_of_day,
    ("long", "timestamp-millis"): lambda ms: _EPOCH + timedelta(milliseconds=ms),
    ("long", "timestamp-micros"): lambda us: _EPOCH + timedelta(microseconds=us),
    ("long", "local-timestamp-millis"): lambda ms: _LOCAL_EPOCH + timedelta(milliseconds=ms),
    ("long", "local-timestamp-micros"): lambda us: _LOCAL_EPOCH + timedelta(microseconds=us),
}
_PRIMITIVES: dict[str, _Read] = {
    "null": lambda r: None,
    "boolean": BinaryReader.boolean,
    "int": BinaryReader.i32,
    "long": BinaryReader.i64,
    "float": BinaryReader.f32,
    "double": BinaryReader.f64,
    "bytes": _read_bytes,
    "string": _read_string,
}


class _Compiler:
    """Turns an Avro schema into a function reading one value of it."""

    def __init__(self) -> None:
        self.named: dict[str, list[_Read]] = {}
        self.zero_width: dict[str, bool] = {}

    def compile(self, schema: Any, namespace: str | None) -> tuple[_Read, bool]:
        """``(reader, whether values take no bytes)``."""
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                return _PRIMITIVES[schema], schema == "null"
            return self._reference(schema, namespace)
        if isinstance(schema, list):
            return self._union(schema, namespace)
        if not isinstance(schema, Mapping):
            raise _BadSchema(f"{schema!r} is not an Avro schema")
        kind = schema.get("type")
        if kind in _PRIMITIVES:
            read = _PRIMITIVES[kind]
            convert = _LOGICAL.get((kind, schema.get("logicalType", "")))
            if kind == "bytes" and schema.get("logicalType") == "decimal":
                convert = _decimal(schema.get("scale", 0))
            if convert is not None:
                return _converted(read, convert, str(schema.get("logicalType"))), False
            return read, kind == "null"
        if kind == "record" or kind == "error":
            return self._record(schema, namespace)
        if kind == "enum":
            return self._enum(schema, namespace)
        if kind == "fixed":
            return self._fixed(schema, namespace)
        if kind == "array":
            items, zero = self.compile(schema.get("items"), namespace)
            return (lambda r: [items(r) for count in _block_counts(r, zero)
                               for _ in range(count)]), False
        if kind == "map":
            values, zero = self.compile(schema.get("values"), namespace)
            return (lambda r: {_read_string(r): values(r) for count in _block_counts(r, False)
                               for _ in range(count)}), False
        if isinstance(kind, (Mapping, list)) or kind in self.named:
            return self.compile(kind, namespace)
        if isinstance(kind, str):
            return self._reference(kind, namespace)
        raise _BadSchema(f"unknown Avro type {kind!r}")

    def _full_name(self, schema: Mapping, namespace: str | None) -> str:
        name = schema.get("name")
        if not isinstance(name, str) or not name:
            raise _BadSchema(f"a named Avro type without a name: {schema.get('type')!r}")
        if "." in name:
            return name
        space = schema.get("namespace", namespace)
        return f"{space}.{name}" if space else name

    def _define(self, schema: Mapping, namespace: str | None, read: _Read,
                zero_width: bool) -> list[_Read]:
        full = self._full_name(schema, namespace)
        if full in self.named:
            raise _BadSchema(f"Avro type {full!r} is defined twice")
        self.named[full] = cell = [read]
        self.zero_width[full] = zero_width
        return cell

    def _reference(self, name: str, namespace: str | None) -> tuple[_Read, bool]:
        full = name if "." in name or not namespace else f"{namespace}.{name}"
        cell = self.named.get(full) or self.named.get(name)
        if cell is None:
            raise _BadSchema(f"unknown Avro type {name!r}")
        full = full if full in self.named else name
        return (lambda r: cell[0](r)), self.zero_width[full]

    def _enum(self, schema: Mapping, namespace: str | None) -> tuple[_Read, bool]:
        symbols = schema.get("symbols")
        if not isinstance(symbols, list) or not symbols:
            raise _BadSchema(f"enum {schema.get('name')!r} has no symbols")
        count = len(symbols)

        def read(r: BinaryReader) -> Any:
            return symbols[_read_index(r, count, "enum ordinal")]

        self._define(schema, namespace, read, False)
        return read, False

    def _fixed(self, schema: Mapping, namespace: str | None) -> tuple[_Read, bool]:
        size = schema.get("size")
        if type(size) is not int or size < 0:
            raise _BadSchema(f"fixed {schema.get('name')!r} has no valid size")

        def raw(r: BinaryReader) -> bytes:
            return r.take(size)

        read = (_converted(raw, _decimal(schema.get("scale", 0)), "decimal")
                if schema.get("logicalType") == "decimal" else raw)
        self._define(schema, namespace, read, size == 0)
        return read, size == 0

    def _union(self, branches: list, namespace: str | None) -> tuple[_Read, bool]:
        if not branches:
            raise _BadSchema("an empty Avro union")
        readers = [self.compile(branch, namespace)[0] for branch in branches]
        size = len(readers)
        return (lambda r: readers[_read_index(r, size, "union branch")](r)), False

    def _record(self, schema: Mapping, namespace: str | None) -> tuple[_Read, bool]:
        fields = schema.get("fields")
        if not isinstance(fields, list):
            raise _BadSchema(f"record {schema.get('name')!r} has no list of fields")
        full = self._full_name(schema, namespace)
        space = full.rsplit(".", 1)[0] if "." in full else None
        cell = self._define(schema, namespace, lambda r: None, False)
        readers = []
        for field in fields:
            if not isinstance(field, Mapping) or not isinstance(field.get("name"), str):
                raise _BadSchema(f"record {full!r} has an invalid field {field!r}")
            readers.append((field["name"], self.compile(field.get("type"), space)[0]))

        def read(r: BinaryReader) -> dict[str, Any]:
            return {name: read_field(r) for name, read_field in readers}

        cell[0] = read
        self.zero_width[full] = not readers
        return read, not readers


def _converted(read: _Read, convert: Callable[[Any], Any], logical: str) -> _Read:
    """A logical type's reader: the underlying value, converted (dates end at year 9999)."""
    def converted(r: BinaryReader) -> Any:
        at = r.pos
        value = read(r)
        try:
            return convert(value)
        except (OverflowError, ValueError):
            raise IncompatibleCheckpointError(
                f"{r.source}: the {logical} value {value!r} at byte offset {r.base + at} is"
                " outside the range of Python's date and time types") from None
    return converted


def _decimal(scale: Any) -> Callable[[bytes], Decimal]:
    if type(scale) is not int or scale < 0:
        raise _BadSchema(f"invalid decimal scale {scale!r}")
    return lambda raw: Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-scale)


def _bounded(read: _Read) -> _Read:
    """A reader that refuses values nested deeper than Python's recursion allows."""
    def bounded(r: BinaryReader) -> Any:
        at = r.pos
        try:
            return read(r)
        except RecursionError:
            raise r.error("an Avro value nested too deeply", at) from None
    return bounded


class AvroFlinkType(FlinkType):
    """Values of one ``AvroSerializer``: decoded by its schema, or kept as bytes if unmappable."""

    def __init__(self, serializer: str, runtime_class: str, schema: Any, read: _Read) -> None:
        self.serializer = serializer
        self.runtime_class = runtime_class
        self.schema = schema
        self.unmapped: str | None = None
        try:
            ValueSchema.parse(schema)
        except (StateSourceError, RecursionError) as error:
            self.unmapped = str(error) or "nested too deeply"
            read = self._raw(read)
        self.__dict__["read"] = _bounded(read)

    @staticmethod
    def _raw(read: _Read) -> _Read:
        def raw(r: BinaryReader) -> bytes:
            start = r.pos
            read(r)
            return bytes(r.data[start:r.pos])
        return raw

    def read(self, r: BinaryReader) -> Any:  # replaced per instance in __init__
        raise NotImplementedError

    def data_type(self) -> Any:
        raise IncompatibleCheckpointError(
            f"keys of {self.describe()} are not supported: Flink assigns them to key groups by"
            " the Java hashCode of the Avro object, which statesource does not reproduce")

    def avro(self) -> Any:
        if self.unmapped is None:
            return self.schema
        return {"type": "bytes", "java-class": self.runtime_class, "avro-schema": self.schema}

    def describe(self) -> str:
        return f"Avro {self.runtime_class}"

    def encoder(self) -> Encoder:
        """By the schema (:mod:`avro_encoder`), or the bytes as read where the schema has no
        statesource mapping."""
        name = f"Avro {self.runtime_class}"
        if self.unmapped is not None:
            return Encoder(name, raw_bytes(name, (
                "its schema has no statesource mapping, so its values are the bytes Flink wrote"
                f" ({self.unmapped})")))
        return Encoder(name, avro_writer(self.schema, name))


def _string_value(r: BinaryReader) -> str:
    """Flink's ``StringUtils.writeString`` text (a ``StringValue``), never null here."""
    at = r.pos
    text = r.flink_string()
    if text is None:
        raise r.error("a null string where the Avro snapshot needs text", at)
    return text


def read_avro_snapshot(name: str, r: BinaryReader, version: int) -> AvroFlinkType:
    """The payload of an ``AvroSerializerSnapshot`` of ``version`` at the reader's position."""
    at = r.pos
    if version not in _SUPPORTED_VERSIONS:
        raise IncompatibleCheckpointError(
            f"{r.source}: {name} version {version} at byte offset {r.base + at} is not"
            " supported;"
            f" statesource reads versions {', '.join(map(str, _SUPPORTED_VERSIONS))}")
    read_text = r.utf if version <= 2 else (lambda: _string_value(r))
    runtime_class = read_text() if version >= 2 else GENERIC_RECORD
    schema_at = r.pos
    text = read_text()
    try:
        schema = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise CorruptCheckpointError(
            f"{r.source}: the Avro schema of {runtime_class} at byte offset {r.base + schema_at}"
            f" is not valid JSON: {error}") from None
    try:
        read, _ = _Compiler().compile(schema, None)
    except (_BadSchema, TypeError, AttributeError, RecursionError) as error:
        raise CorruptCheckpointError(
            f"{r.source}: the Avro schema of {runtime_class} at byte offset {r.base + schema_at}"
            f" is not valid Avro: {error}") from None
    return AvroFlinkType(name, runtime_class, schema, read)


register(AVRO_SNAPSHOT, read_avro_snapshot, refused=(
    "Avro's snapshot holds the schema as Java's Avro prints it and the class Flink was given"
    " (generic, specific or reflect)"))

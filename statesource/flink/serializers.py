"""Flink serializer snapshots: parsed into decoders that know their type.

A keyed or operator state file's header holds, for every state, the
*snapshot* of each serializer it was written with: the snapshot's class name,
its version and a payload (for composite serializers, the snapshots of the
nested ones). That is all a reader needs to decode the values and to type them:
each known snapshot becomes a :class:`FlinkType` that reads one value from a
:class:`BinaryReader`, declares its statesource key type (for keys and
namespaces) and its Avro schema (for values).

Kryo's snapshot is understood but its values are not: they read as raw bytes
(:class:`OpaqueType`) where the file frames each value. Avro values are
decoded by the schema in their snapshot (:mod:`statesource.flink.avro`).
A snapshot of an unknown serializer (a custom one) has a payload of unknown length, so
nothing after it in the header can be found: reading that file fails with an
error naming the serializer's class. States of other operators, and operator
states, stay readable.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from statesource.errors import CorruptCheckpointError, IncompatibleCheckpointError
from statesource.flink.avro import AVRO_SNAPSHOT, read_avro_snapshot
from statesource.flink.binary import BinaryReader
from statesource.flink.flink_type import FlinkType
from statesource.schema import RecordKey, hashable_record
from statesource.types import (
    BOOLEAN,
    BYTE,
    BYTES,
    CHAR,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    SHORT,
    STRING,
    TIMEWINDOW,
    VOID,
    DataType,
    Row,
    RowKind,
    RowType,
    TupleType,
)

COMPOSITE_MAGIC = 911108
NESTED_MAGIC = 1333245
_ROW_KINDS = {kind.byte_value: kind for kind in RowKind}


class _Primitive(FlinkType):
    def __init__(self, serializer: str, dtype: DataType, length: int,
                 read: Callable[[BinaryReader], Any]) -> None:
        self.serializer = serializer
        self._type = dtype
        self.length = length
        # The reader itself as an instance attribute, shadowing the method below: one call
        # less per value, which is most of the cost of decoding primitives.
        self.__dict__["read"] = read

    def read(self, r: BinaryReader) -> Any:  # replaced per instance in __init__
        raise NotImplementedError

    def data_type(self) -> DataType:
        return self._type


def _read_char(r: BinaryReader) -> str:
    return chr(r.u16())


def _read_void(r: BinaryReader) -> None:
    r.u8()


def _read_window(r: BinaryReader) -> tuple[int, int]:
    return (r.i64(), r.i64())


def _read_bytes(r: BinaryReader) -> bytes:
    return r.take(r.count("byte array length"))


_BASE = "org.apache.flink.api.common.typeutils.base."
_RUNTIME = "org.apache.flink.api.java.typeutils.runtime."
_SIMPLE: dict[str, tuple[DataType, int, Callable[[BinaryReader], Any]]] = {
    _BASE + "StringSerializer$StringSerializerSnapshot": (STRING, -1, BinaryReader.flink_string),
    _BASE + "LongSerializer$LongSerializerSnapshot": (LONG, 8, BinaryReader.i64),
    _BASE + "IntSerializer$IntSerializerSnapshot": (INT, 4, BinaryReader.i32),
    _BASE + "ShortSerializer$ShortSerializerSnapshot": (SHORT, 2, BinaryReader.i16),
    _BASE + "ByteSerializer$ByteSerializerSnapshot": (BYTE, 1, BinaryReader.i8),
    _BASE + "BooleanSerializer$BooleanSerializerSnapshot": (BOOLEAN, 1, BinaryReader.boolean),
    _BASE + "CharSerializer$CharSerializerSnapshot": (CHAR, 2, _read_char),
    _BASE + "DoubleSerializer$DoubleSerializerSnapshot": (DOUBLE, 8, BinaryReader.f64),
    _BASE + "FloatSerializer$FloatSerializerSnapshot": (FLOAT, 4, BinaryReader.f32),
    _BASE + "array.BytePrimitiveArraySerializer$BytePrimitiveArraySerializerSnapshot":
        (BYTES, -1, _read_bytes),
    "org.apache.flink.streaming.api.utils.ByteArrayWrapperSerializer"
    "$ByteArrayWrapperSerializerSnapshot": (BYTES, -1, _read_bytes),
    "org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot":
        (VOID, 1, _read_void),
    "org.apache.flink.streaming.api.windowing.windows.GlobalWindow$Serializer"
    "$GlobalWindowSerializerSnapshot": (VOID, 1, _read_void),
    "org.apache.flink.streaming.api.windowing.windows.TimeWindow$Serializer"
    "$TimeWindowSerializerSnapshot": (TIMEWINDOW, 16, _read_window),
}


class ListType(FlinkType):
    """``ListSerializer``: an int count, then the elements."""

    def __init__(self, serializer: str, element: FlinkType) -> None:
        self.serializer = serializer
        self.element = element

    def read(self, r: BinaryReader) -> list[Any]:
        read = self.element.read
        return [read(r) for _ in range(r.count("list length"))]

    def avro(self) -> Any:
        return {"type": "array", "items": _nullable(self.element.avro())}

    def to_value(self, value: Any) -> Any:
        convert = self.element.to_value
        return [None if v is None else convert(v) for v in value]


class MapType(FlinkType):
    """``MapSerializer``: an int count, then (key, null flag, value) per entry."""

    def __init__(self, serializer: str, key: FlinkType, value: FlinkType) -> None:
        self.serializer = serializer
        self.key = key
        self.value = value

    def read(self, r: BinaryReader) -> dict[Any, Any]:
        read_key, read_value = self.key.read, self.value.read
        hashable = not isinstance(self.key, _Primitive)
        ttl = isinstance(self.value, TtlType)
        entries: dict[Any, Any] = {}
        for _ in range(r.count("map size")):
            at = r.pos
            key = hashable_record(read_key(r)) if hashable else read_key(r)
            if key in entries:
                raise duplicate_user_key(f"{r.source}, byte offset {r.base + at}", key)
            if r.boolean():
                if ttl:
                    raise _null_in_ttl_map(r)
                entries[key] = None
            else:
                entries[key] = read_value(r)
        return entries

    def null_flag(self, r: BinaryReader) -> bool:
        """A value's null flag (see :func:`_null_in_ttl_map`)."""
        null = r.boolean()
        if null and isinstance(self.value, TtlType):
            raise _null_in_ttl_map(r)
        return null

    def avro(self) -> Any:
        if self.key.avro() == "string":
            return {"type": "map", "values": _nullable(self.value.avro())}
        return {"type": "array", "items": {
            "type": "record", "name": "MapEntry",
            "fields": [{"name": "key", "type": self.key.avro()},
                       {"name": "value", "type": _nullable(self.value.avro())}]}}

    def to_value(self, value: Any) -> Any:
        convert_value = self.value.to_value

        def converted(v: Any) -> Any:
            return None if v is None else convert_value(v)

        if self.key.avro() == "string":
            return {k: converted(v) for k, v in value.items()}
        convert_key = self.key.to_value
        return [{"key": convert_key(k), "value": converted(v)} for k, v in value.items()]


def duplicate_user_key(where: str, key: Any) -> IncompatibleCheckpointError:
    """A map holding one user key twice: Java's ``equals`` told them apart, Python's cannot.

    It happens with keys of a class without ``equals`` (each object its own
    key) or with 0.0 and -0.0; merging them would silently drop entries.
    """
    return IncompatibleCheckpointError(
        f"{where}: a map holds the user key {key!r} twice: Java"
        " told them apart (a key class without equals and hashCode, or 0.0 and -0.0), and"
        " statesource would have to merge them")


class SetType(FlinkType):
    """``SetSerializer``: an int count, then per element a null flag and the element."""

    def __init__(self, serializer: str, element: FlinkType) -> None:
        self.serializer = serializer
        self.element = element

    def read(self, r: BinaryReader) -> list[Any]:
        read = self.element.read
        return [None if r.boolean() else read(r) for _ in range(r.count("set size"))]

    def avro(self) -> Any:
        return {"type": "array", "items": _nullable(self.element.avro())}

    def to_value(self, value: Any) -> Any:
        convert = self.element.to_value
        return [None if v is None else convert(v) for v in value]


class NullableType(FlinkType):
    """``NullableSerializer``: a null flag, then the value (or, for a null, the padding).

    Flink 2.x wraps the lists and maps its type extraction finds (POJO fields,
    ``TypeHint``s), and their elements, map keys and the like, in it. Its Avro type is the
    wrapped one: where a value may be null, the enclosing record, list or map says so.
    """

    def __init__(self, serializer: str, inner: FlinkType, padding: int) -> None:
        self.serializer = serializer
        self.inner = inner
        self.padding = padding

    def read(self, r: BinaryReader) -> Any:
        if r.boolean():
            r.take(self.padding)
            return None
        return self.inner.read(r)

    def read_whole(self, r: BinaryReader) -> Any:
        if r.boolean():
            r.take(self.padding)
            return None
        return self.inner.read_whole(r)

    def avro(self) -> Any:
        return self.inner.avro()

    def to_value(self, value: Any) -> Any:
        return None if value is None else self.inner.to_value(value)

    def describe(self) -> str:
        return f"nullable {self.inner.describe()}"


def _null_in_ttl_map(r: BinaryReader) -> CorruptCheckpointError:
    """A map with TTL whose value's null flag (just read) is set: corrupt, as Flink wraps
    every value of one, a null too, with its timestamp."""
    return r.error("a null value in a map with TTL, where Flink wraps every value",
                   r.pos - 1)


class TtlType(FlinkType):
    """TTL's ``TtlSerializer``: the last-access timestamp (long), then the user value."""

    def __init__(self, serializer: str, timestamp: FlinkType, user: FlinkType) -> None:
        self.serializer = serializer
        self.timestamp = timestamp
        self.user = user

    def read(self, r: BinaryReader) -> tuple[Any, int]:
        timestamp = self.timestamp.read(r)
        return (self.user.read(r), timestamp)

    def read_whole(self, r: BinaryReader) -> tuple[Any, int]:
        timestamp = self.timestamp.read(r)
        return (self.user.read_whole(r), timestamp)


class TimerType(FlinkType):
    """``TimerSerializer``: sign-flipped timestamp, key, namespace."""

    def __init__(self, serializer: str, key: FlinkType, namespace: FlinkType) -> None:
        self.serializer = serializer
        self.key = key
        self.namespace = namespace

    def read(self, r: BinaryReader) -> tuple[int, Any, Any]:
        flipped = r.i64()
        timestamp = flipped ^ -(1 << 63) if flipped >= 0 else flipped + (1 << 63)
        return (timestamp, self.key.read(r), self.namespace.read(r))


class TupleFlinkType(FlinkType):
    """``TupleSerializer``: the fields in order (Flink tuples hold no nulls)."""

    def __init__(self, serializer: str, tuple_class: str, fields: list[FlinkType]) -> None:
        self.serializer = serializer
        self.tuple_class = tuple_class
        self.fields = fields
        lengths = [f.length for f in fields]
        self.length = -1 if -1 in lengths else sum(lengths)

    def read(self, r: BinaryReader) -> tuple[Any, ...]:
        return tuple(f.read(r) for f in self.fields)

    def data_type(self) -> DataType:
        return TupleType(tuple(f.data_type() for f in self.fields))

    def avro(self) -> Any:
        return _record(f"Tuple{len(self.fields)}", [(f"f{i}", f) for i, f in
                                                    enumerate(self.fields)])

    def to_value(self, value: Any) -> Any:
        return {f"f{i}": None if v is None else f.to_value(v)
                for i, (f, v) in enumerate(zip(self.fields, value))}


class RowFlinkType(FlinkType):
    """``RowSerializer``: a null mask (with the row kind in its first two bits), then fields."""

    def __init__(self, serializer: str, fields: list[FlinkType], kind_in_mask: bool) -> None:
        self.serializer = serializer
        self.fields = fields
        self.kind_in_mask = kind_in_mask
        self._bits = len(fields) + (2 if kind_in_mask else 0)

    def read(self, r: BinaryReader) -> Row:
        mask = r.take((self._bits + 7) // 8)
        bits = [(mask[i // 8] >> (7 - i % 8)) & 1 for i in range(self._bits)]
        kind = RowKind.INSERT
        if self.kind_in_mask:
            kind = _ROW_KINDS[bits[0] | (bits[1] << 1)]
            bits = bits[2:]
        values = [None if null else f.read(r) for f, null in zip(self.fields, bits)]
        return Row(*values, kind=kind)

    def data_type(self) -> DataType:
        return RowType(tuple(f.data_type() for f in self.fields))

    def avro(self) -> Any:
        return self.data_type().to_avro() if self._keyable() else _record(
            "Row", [(f"f{i}", f) for i, f in enumerate(self.fields)], row_kind=True)

    def _keyable(self) -> bool:
        try:
            self.data_type()
        except IncompatibleCheckpointError:
            return False
        return True

    def to_value(self, value: Any) -> Any:
        fields = {f"f{i}": None if v is None else f.to_value(v)
                  for i, (f, v) in enumerate(zip(self.fields, value.fields))}
        return {"row_kind": value.kind.short_string, **fields}


class PojoFlinkType(FlinkType):
    """``PojoSerializer``: a flags byte, then per field (sorted by name) a null flag and value."""

    _NULL, _NO_SUBCLASS = 1, 2

    def __init__(self, serializer: str, pojo_class: str,
                 fields: list[tuple[str, FlinkType]],
                 declaring_classes: dict[str, str] | None = None) -> None:
        self.serializer = serializer
        self.pojo_class = pojo_class
        self.fields = fields
        self.declaring_classes = declaring_classes or {}
        """The class that declares each field, by field name (a superclass, or the POJO's)."""

    def read(self, r: BinaryReader) -> RecordKey | None:
        """The fields by name (hashable: a POJO may be a map state's user key)."""
        at = r.pos
        flags = r.u8()
        if flags & self._NULL:
            return None
        if not flags & self._NO_SUBCLASS:
            raise r.error(f"a subclass of POJO {self.pojo_class} (flags {flags:#x}) is not"
                          " supported", at)
        return RecordKey({name: None if r.boolean() else field.read(r)
                          for name, field in self.fields})

    def avro(self) -> Any:
        name = self.pojo_class.rsplit(".", 1)[-1].replace("$", "_")
        return _record(name, self.fields)

    def to_value(self, value: Any) -> Any:
        return {name: None if value[name] is None else field.to_value(value[name])
                for name, field in self.fields}

    def describe(self) -> str:
        return f"POJO {self.pojo_class}"


class OpaqueType(FlinkType):
    """A serializer statesource cannot decode (Kryo): values as their raw bytes.

    Its values are self-delimiting only to that serializer, so they can be read
    only where the file frames each value (a canonical savepoint's values).
    """

    def __init__(self, serializer: str, java_class: str) -> None:
        self.serializer = serializer
        self.java_class = java_class

    def read(self, r: BinaryReader) -> Any:
        raise IncompatibleCheckpointError(
            f"{r.source}: values of {self.java_class} are written by {self.describe()}, which"
            " statesource cannot decode; a canonical savepoint frames each value, so there they"
            " read as bytes: take a canonical savepoint to read this state")

    def read_whole(self, r: BinaryReader) -> bytes:
        return r.take(r.remaining())

    def avro(self) -> Any:
        return {"type": "bytes", "java-class": self.java_class}


def _nullable(schema: Any) -> Any:
    return ["null", schema]


def _record(name: str, fields: list[tuple[str, FlinkType]], row_kind: bool = False) -> Any:
    declared = [{"name": n, "type": _nullable(f.avro())} for n, f in fields]
    if row_kind:
        declared.insert(0, {"name": "row_kind", "type": "string"})
    return {"type": "record", "name": name, "fields": declared}


# -- snapshots -----------------------------------------------------------------------------

MAX_SNAPSHOT_NESTING = 64
"""How deep serializer snapshots may nest (a list of maps of rows ... of a type): far more
than any type a program declares, and few enough that a hostile file cannot exhaust the
stack of the reader or of what it builds."""

_nesting: ContextVar[int] = ContextVar("serializer_snapshot_nesting", default=0)


def read_snapshot(r: BinaryReader) -> FlinkType:
    """One ``writeVersionedSnapshot``: class name, version, payload (kept as ``snapshot``)."""
    at = r.pos
    depth = _nesting.get()
    if depth >= MAX_SNAPSHOT_NESTING:
        raise r.error(f"serializer snapshots nested more than {MAX_SNAPSHOT_NESTING} deep")
    token = _nesting.set(depth + 1)
    try:
        found = _read_snapshot(r)
    finally:
        _nesting.reset(token)
    found.snapshot = bytes(r.data[at:r.pos])
    return found


def _read_snapshot(r: BinaryReader) -> FlinkType:
    at = r.pos
    name = r.utf()
    version = r.i32()
    simple = _SIMPLE.get(name)
    if simple is not None:
        return _Primitive(name, *simple)
    reader = _COMPOSITES.get(name)
    if reader is not None:
        return reader(name, r)
    if name == AVRO_SNAPSHOT:
        return read_avro_snapshot(name, r, version)
    raise IncompatibleCheckpointError(
        f"{r.source}: serializer snapshot {name} at byte offset {at} is not supported; its"
        " payload cannot be skipped, so the states of this file cannot be read")


def read_proxied_snapshot(r: BinaryReader) -> FlinkType:
    """A snapshot behind ``TypeSerializerSnapshotSerializationProxy`` (an int version first)."""
    r.i32()
    return read_snapshot(r)


SNAPSHOT_PROXY_VERSION = 2
"""The version ``TypeSerializerSnapshotSerializationProxy`` writes before a snapshot (Flink 2.x)."""


def _outer_version(r: BinaryReader) -> int:
    """A composite snapshot starts with a magic number and its outer version."""
    if r.i32() != COMPOSITE_MAGIC:
        raise r.error("bad composite serializer snapshot magic number", r.pos - 4)
    return r.i32()


def _nested_serializers(r: BinaryReader) -> list[FlinkType]:
    if r.i32() != NESTED_MAGIC:
        raise r.error("bad nested serializer snapshot magic number", r.pos - 4)
    r.i32()  # version
    return [read_snapshot(r) for _ in range(r.count("number of nested serializers"))]


def _composite(build: Callable[[str, BinaryReader, Any, list[FlinkType]], FlinkType],
               outer: Callable[[BinaryReader, int], Any] | None = None,
               arity: int | None = None) -> Callable[[str, BinaryReader], FlinkType]:
    """A composite snapshot's reader; ``arity``: how many nested serializers it has, where
    that is fixed (a map's two, not a tuple's any number)."""
    def read(name: str, r: BinaryReader) -> FlinkType:
        at = r.pos
        version = _outer_version(r)
        extra = outer(r, version) if outer is not None else None
        nested = _nested_serializers(r)
        try:
            if arity is not None and len(nested) != arity:
                raise ValueError(arity)
            return build(name, r, extra, nested)
        except (IndexError, ValueError):
            raise CorruptCheckpointError(
                f"{r.source}: serializer snapshot {name} at byte offset {at} has"
                f" {len(nested)} nested serializers") from None
    return read


def _row_outer(r: BinaryReader, version: int) -> bool:
    """Whether rows carry their kind in the null mask (``supportsRowKind``).

    Outer version 4 writes the flag; version 3 (Flink 1.11 to 1.13) always had the row
    kind and writes nothing; older versions never had it.
    """
    if version >= 4:
        return r.boolean()
    return version == 3


_OPTIONAL_MAP_HEADER = 0x4F2C69A3D70


def _optional_map(r: BinaryReader) -> list[tuple[str, bytes | None, bytes | None]]:
    """Flink's ``LinkedOptionalMap``: (name, key bytes, value bytes) entries, each optional."""
    if r.i64() != _OPTIONAL_MAP_HEADER:
        raise r.error("bad optional map header", r.pos - 8)
    entries = []
    for _ in range(r.count("optional map size")):
        name = r.utf()
        key = r.take(r.count("entry length")) if r.boolean() else None
        value = r.take(r.count("entry length")) if r.boolean() else None
        entries.append((name, key, value))
    return entries


def _pojo(name: str, r: BinaryReader) -> FlinkType:
    pojo_class = r.utf()
    fields = []
    declaring = {}
    for field_name, field, snapshot in _optional_map(r):
        if snapshot is None:
            raise r.error(f"POJO {pojo_class} field {field_name!r} has no serializer snapshot")
        fields.append((field_name, read_snapshot(BinaryReader(snapshot, r.source))))
        if field is not None:  # the field as Flink writes it: declaring class, then name
            declaring[field_name] = BinaryReader(field, r.source).utf()
    for _ in range(2):  # registered and non-registered subclasses
        if _optional_map(r):
            raise IncompatibleCheckpointError(
                f"{r.source}: POJO {pojo_class} has subclass serializers, not supported yet")
    return PojoFlinkType(name, pojo_class, fields, declaring)


def _kryo(name: str, r: BinaryReader) -> FlinkType:
    """Kryo's snapshot: the type's class, then registrations and default serializers."""
    java_class = r.utf()
    for _ in range(3):
        _optional_map(r)
    return OpaqueType(name, java_class)


def _tuple_outer(r: BinaryReader, version: int) -> str:
    return r.utf()


def _nullable_outer(r: BinaryReader, version: int) -> int:
    """The bytes a null takes after its flag (to keep a fixed length)."""
    padding = r.i32()
    if padding < 0:
        raise r.error(f"negative null padding {padding}", r.pos - 4)
    return padding


_COMPOSITES: dict[str, Callable[[str, BinaryReader], FlinkType]] = {
    _BASE + "ListSerializerSnapshot":
        _composite(lambda n, r, x, s: ListType(n, s[0]), arity=1),
    _BASE + "MapSerializerSnapshot":
        _composite(lambda n, r, x, s: MapType(n, s[0], s[1]), arity=2),
    _BASE + "SetSerializerSnapshot": _composite(lambda n, r, x, s: SetType(n, s[0]), arity=1),
    _RUNTIME + "NullableSerializer$NullableSerializerSnapshot":
        _composite(lambda n, r, x, s: NullableType(n, s[0], x), _nullable_outer, arity=1),
    "org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot":
        _composite(lambda n, r, x, s: TtlType(n, s[0], s[1]), arity=2),
    "org.apache.flink.streaming.api.operators.TimerSerializerSnapshot":
        _composite(lambda n, r, x, s: TimerType(n, s[0], s[1]), arity=2),
    "org.apache.flink.api.java.typeutils.runtime.TupleSerializerSnapshot":
        _composite(lambda n, r, x, s: TupleFlinkType(n, x, s), _tuple_outer),
    "org.apache.flink.api.java.typeutils.runtime.RowSerializer$RowSerializerSnapshot":
        _composite(lambda n, r, x, s: RowFlinkType(n, s, x), _row_outer),
    "org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot": _pojo,
    "org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot": _kryo,
}

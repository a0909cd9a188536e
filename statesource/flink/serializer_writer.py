"""Flink serializer snapshots derived from declared types: the write side of :mod:`serializers`.

A savepoint carries, for its key and for every state, the snapshot of each
serializer the state was written with, and a restoring Flink checks them
against the serializers of its own descriptors. A state read from a Flink
snapshot keeps the bytes Flink wrote (:attr:`FlinkType.snapshot`); a state that
is new, or comes from a statesource checkpoint, needs the snapshots Flink would
have written for its declared types. This module writes them:

- a :class:`FlinkSerializer` declares one Flink serializer (:class:`SimpleSerializer`
  for primitives, String, ``byte[]``, ``VoidNamespace``, ``TimeWindow`` and
  ``GlobalWindow``; :class:`TupleSerializer`, :class:`RowSerializer`,
  :class:`ListSerializer`, :class:`MapSerializer`, :class:`PojoSerializer`,
  :class:`TtlSerializer`, :class:`TimerSerializer`), and :func:`snapshot_bytes`
  gives its snapshot as it appears in a keyed-state header;
- :func:`serializer_for_type` (key and namespace types), :func:`serializer_for_schema`
  (value schemas) and :func:`declared_serializer` (a serializer read from a Flink
  file) map other declarations to one;
- :func:`state_info`, :func:`timer_state_info` and :func:`key_serializer` build the
  :class:`~statesource.flink.header.StateInfo` and key type that
  :func:`~statesource.flink.header_writer.write_keyed_header` writes.

The layout, as Flink 2.x writes it (every string a Java ``writeUTF``):

- a snapshot: its class name, an int version, its payload;
- ``SimpleTypeSerializerSnapshot`` subclasses: version 3, no payload;
- ``CompositeTypeSerializerSnapshot`` subclasses: version 3, then the magic number
  911108, the outer version and outer payload, then the magic number 1333245,
  version 1, the number of nested serializers and their snapshots. Outer
  versions and payloads: List and Map 1, nothing; Tuple 2, the tuple class;
  Row 4, a boolean (whether rows carry their ``RowKind``); TTL 2, nothing (nested:
  the timestamp's Long serializer, then the value's); Timer 2, nothing (nested:
  key, namespace);
- ``PojoSerializerSnapshot``: version 2, the POJO class, then three "optional
  maps" (the fields, registered subclasses, other subclasses), each a long header
  ``0x4F2C69A3D70``, an int size and per entry a name, a present flag with an
  int-length-prefixed key, and a present flag with an int-length-prefixed value.
  A field's key is its declaring class and its name; its value the field
  serializer's snapshot. Fields are in Flink's order: sorted by name.

Some serializers cannot be derived from a declared type, and are refused with
:class:`~statesource.errors.TypeMismatchError` (see :data:`REFUSED`): Kryo (the
snapshot records the job's Kryo registrations), Avro (the schema as Java's Avro
prints it) and PyFlink's wrapper of pickled map keys. States with them must carry
their snapshot over from a Flink snapshot.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from statesource.errors import InvalidArgumentError, TypeMismatchError
from statesource.flink.avro import AVRO_SNAPSHOT
from statesource.flink.binary import BinaryReader
from statesource.flink.binary_writer import BinaryWriter
from statesource.flink.flink_type import FlinkType
from statesource.flink.header import KEY_VALUE, PRIORITY_QUEUE, StateInfo
from statesource.flink.header_writer import write_state_info
from statesource.flink.serializers import (
    COMPOSITE_MAGIC,
    NESTED_MAGIC,
    ListType,
    MapType,
    NullableType,
    OpaqueType,
    PojoFlinkType,
    RowFlinkType,
    SetType,
    TimerType,
    TtlType,
    TupleFlinkType,
    read_snapshot,
)
from statesource.model import StateDeclaration, StateKind
from statesource.schema import ValueSchema
from statesource.types import DataType, RowType, TupleType, key_type, parse_type

_BASE = "org.apache.flink.api.common.typeutils.base."
_RUNTIME = "org.apache.flink.api.java.typeutils.runtime."
_WINDOWS = "org.apache.flink.streaming.api.windowing.windows."

_SIMPLE_VERSION = 3
_COMPOSITE_VERSION = 3
_NESTED_VERSION = 1
_POJO_VERSION = 2
_OPTIONAL_MAP_HEADER = 0x4F2C69A3D70
MAX_TUPLE_ARITY = 25
"""Flink's largest tuple class, ``Tuple25``."""

KEYED_STATE_TYPE = "KEYED_STATE_TYPE"
VALUE_SERIALIZER = "VALUE_SERIALIZER"
NAMESPACE_SERIALIZER = "NAMESPACE_SERIALIZER"

_KRYO = _RUNTIME + "kryo.KryoSerializerSnapshot"
_BYTE_ARRAY_WRAPPER = ("org.apache.flink.streaming.api.utils.ByteArrayWrapperSerializer"
                       "$ByteArrayWrapperSerializerSnapshot")
REFUSED: dict[str, str] = {
    _KRYO: "Kryo's snapshot records the job's Kryo configuration (registered classes, default"
           " serializers), which no declared type says",
    AVRO_SNAPSHOT: "Avro's snapshot holds the schema as Java's Avro prints it and the class"
                   " Flink was given (generic, specific or reflect)",
    _BYTE_ARRAY_WRAPPER: "PyFlink wraps pickled map keys in it, and no statesource type says"
                         " that bytes are a pickle",
}
"""Snapshot classes real Flink files hold that are never derived, and why."""


def refusal(snapshot_class: str) -> str:
    """Why a snapshot of ``snapshot_class`` (one of :data:`REFUSED`) is not derived."""
    return (f"{snapshot_class} is not derived: {REFUSED[snapshot_class]}; a state with it keeps"
            " the snapshot of the Flink snapshot it comes from")


class FlinkSerializer:
    """One Flink serializer, declared: what its snapshot records."""

    snapshot_class: str

    def write(self, w: BinaryWriter) -> None:
        """The snapshot: class name, version, payload (``writeVersionedSnapshot``)."""
        raise NotImplementedError

    def describe(self) -> str:
        return self.snapshot_class.rsplit(".", 1)[-1].split("$")[0]


@dataclass(frozen=True)
class SimpleSerializer(FlinkSerializer):
    """A serializer without parameters: its snapshot is its class name and version 3."""

    snapshot_class: str

    def __post_init__(self) -> None:
        if self.snapshot_class in REFUSED:
            raise TypeMismatchError(refusal(self.snapshot_class))
        if self.snapshot_class not in _SIMPLE_CLASSES:
            raise InvalidArgumentError(
                f"{self.snapshot_class} is not a parameterless Flink serializer snapshot"
                f" statesource writes; known: {', '.join(sorted(_SIMPLE_CLASSES))}")

    def write(self, w: BinaryWriter) -> None:
        w.utf(self.snapshot_class)
        w.i32(_SIMPLE_VERSION)


_SIMPLE_BY_TYPE = {
    "string": _BASE + "StringSerializer$StringSerializerSnapshot",
    "long": _BASE + "LongSerializer$LongSerializerSnapshot",
    "int": _BASE + "IntSerializer$IntSerializerSnapshot",
    "short": _BASE + "ShortSerializer$ShortSerializerSnapshot",
    "byte": _BASE + "ByteSerializer$ByteSerializerSnapshot",
    "boolean": _BASE + "BooleanSerializer$BooleanSerializerSnapshot",
    "char": _BASE + "CharSerializer$CharSerializerSnapshot",
    "double": _BASE + "DoubleSerializer$DoubleSerializerSnapshot",
    "float": _BASE + "FloatSerializer$FloatSerializerSnapshot",
    "bytes": _BASE + "array.BytePrimitiveArraySerializer$BytePrimitiveArraySerializerSnapshot",
    "void": "org.apache.flink.runtime.state.VoidNamespaceSerializer"
            "$VoidNamespaceSerializerSnapshot",
    "timewindow": _WINDOWS + "TimeWindow$Serializer$TimeWindowSerializerSnapshot",
}
_GLOBAL_WINDOW_CLASS = _WINDOWS + "GlobalWindow$Serializer$GlobalWindowSerializerSnapshot"
_SIMPLE_CLASSES = frozenset([*_SIMPLE_BY_TYPE.values(), _GLOBAL_WINDOW_CLASS])

SIMPLE: dict[str, SimpleSerializer] = {name: SimpleSerializer(snapshot_class)
                                       for name, snapshot_class in _SIMPLE_BY_TYPE.items()}
"""The serializer of each primitive statesource type (and ``void``, ``timewindow``), by name."""
LONG_SERIALIZER = SIMPLE["long"]
STRING_SERIALIZER = SIMPLE["string"]
VOID_NAMESPACE = SIMPLE["void"]
TIME_WINDOW = SIMPLE["timewindow"]
GLOBAL_WINDOW = SimpleSerializer(_GLOBAL_WINDOW_CLASS)
"""The namespace serializer of windows assigned by ``GlobalWindows`` (no statesource type)."""


def _write_composite(w: BinaryWriter, snapshot_class: str, outer_version: int,
                     nested: Sequence[FlinkSerializer],
                     outer: Callable[[BinaryWriter], None] | None = None) -> None:
    w.utf(snapshot_class)
    w.i32(_COMPOSITE_VERSION)
    w.i32(COMPOSITE_MAGIC)
    w.i32(outer_version)
    if outer is not None:
        outer(w)
    w.i32(NESTED_MAGIC)
    w.i32(_NESTED_VERSION)
    w.i32(len(nested))
    for serializer in nested:
        serializer.write(w)


def _check_serializer(value: Any, what: str) -> None:
    if not isinstance(value, FlinkSerializer):
        raise InvalidArgumentError(f"{what} must be a FlinkSerializer, got {value!r}")


@dataclass(frozen=True)
class TupleSerializer(FlinkSerializer):
    """Flink's ``TupleSerializer`` of ``Tuple1`` .. ``Tuple25`` (or a subclass, ``tuple_class``)."""

    fields: tuple[FlinkSerializer, ...]
    tuple_class: str | None = None
    snapshot_class = _RUNTIME + "TupleSerializerSnapshot"

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))
        if not 1 <= len(self.fields) <= MAX_TUPLE_ARITY:
            raise InvalidArgumentError(
                f"a Flink tuple has 1 to {MAX_TUPLE_ARITY} fields, not {len(self.fields)}")
        for i, serializer in enumerate(self.fields):
            _check_serializer(serializer, f"tuple field f{i}")

    @property
    def java_class(self) -> str:
        return self.tuple_class or f"org.apache.flink.api.java.tuple.Tuple{len(self.fields)}"

    def write(self, w: BinaryWriter) -> None:
        _write_composite(w, self.snapshot_class, 2, self.fields,
                         lambda out: out.utf(self.java_class))


@dataclass(frozen=True)
class RowSerializer(FlinkSerializer):
    """Flink's ``RowSerializer``: field serializers only (field names are not in the snapshot).

    ``row_kind`` is Flink's ``supportsRowKind``: rows carry their ``RowKind`` in the
    null mask, as every ``RowTypeInfo`` serializer of Flink 2.x does.
    """

    fields: tuple[FlinkSerializer, ...]
    row_kind: bool = True
    snapshot_class = _RUNTIME + "RowSerializer$RowSerializerSnapshot"

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))
        for i, serializer in enumerate(self.fields):
            _check_serializer(serializer, f"row field f{i}")

    def write(self, w: BinaryWriter) -> None:
        _write_composite(w, self.snapshot_class, 4, self.fields,
                         lambda out: out.boolean(self.row_kind))


@dataclass(frozen=True)
class ListSerializer(FlinkSerializer):
    """Flink's ``ListSerializer`` (``Types.LIST``, and every list state)."""

    element: FlinkSerializer
    snapshot_class = _BASE + "ListSerializerSnapshot"

    def __post_init__(self) -> None:
        _check_serializer(self.element, "a list's element")

    def write(self, w: BinaryWriter) -> None:
        _write_composite(w, self.snapshot_class, 1, [self.element])


@dataclass(frozen=True)
class MapSerializer(FlinkSerializer):
    """Flink's ``MapSerializer`` (``Types.MAP``, and every map state)."""

    key: FlinkSerializer
    value: FlinkSerializer
    snapshot_class = _BASE + "MapSerializerSnapshot"

    def __post_init__(self) -> None:
        _check_serializer(self.key, "a map's key")
        _check_serializer(self.value, "a map's value")

    def write(self, w: BinaryWriter) -> None:
        _write_composite(w, self.snapshot_class, 1, [self.key, self.value])


@dataclass(frozen=True)
class SetSerializer(FlinkSerializer):
    """Flink's ``SetSerializer`` (``Types.SET``; a ``Set`` field of a POJO, wrapped nullable)."""

    element: FlinkSerializer
    snapshot_class = _BASE + "SetSerializerSnapshot"

    def __post_init__(self) -> None:
        _check_serializer(self.element, "a set's element")

    def write(self, w: BinaryWriter) -> None:
        _write_composite(w, self.snapshot_class, 1, [self.element])


@dataclass(frozen=True)
class NullableSerializer(FlinkSerializer):
    """Flink's ``NullableSerializer``: a null flag before the value (``padding`` bytes after a
    null keep a fixed length; Flink's type extraction pads nothing).

    Flink 2.x's type extraction (a POJO's fields, ``TypeHint``) makes a ``List<T>``
    ``Nullable(List(Nullable(T)))``, a ``Map<K, V>`` ``Nullable(Map(Nullable(K), V))`` and a
    ``Set<T>`` ``Nullable(Set(T))``: see :func:`extracted_list` and the like.
    """

    inner: FlinkSerializer
    padding: int = 0
    snapshot_class = _RUNTIME + "NullableSerializer$NullableSerializerSnapshot"

    def __post_init__(self) -> None:
        _check_serializer(self.inner, "a nullable value")
        if isinstance(self.inner, NullableSerializer):
            raise InvalidArgumentError("a nullable serializer is not wrapped twice (Flink does"
                                       " not)")
        if type(self.padding) is not int or not 0 <= self.padding <= 0x7FFFFFFF:
            raise InvalidArgumentError(f"null padding {self.padding!r} is not a byte count")

    def write(self, w: BinaryWriter) -> None:
        _write_composite(w, self.snapshot_class, 2, [self.inner],
                         lambda out: out.i32(self.padding))


def nullable(serializer: FlinkSerializer) -> FlinkSerializer:
    """``serializer`` wrapped as Flink's ``NullableSerializer.wrap`` does (never twice)."""
    return serializer if isinstance(serializer, NullableSerializer) else NullableSerializer(
        serializer)


def extracted_list(element: FlinkSerializer) -> FlinkSerializer:
    """What Flink 2.x's type extraction makes of a ``List<T>`` (``NullableListTypeInfo``)."""
    return nullable(ListSerializer(nullable(element)))


def extracted_map(key: FlinkSerializer, value: FlinkSerializer) -> FlinkSerializer:
    """What Flink 2.x's type extraction makes of a ``Map<K, V>`` (``NullableMapTypeInfo``)."""
    return nullable(MapSerializer(nullable(key), value))


def extracted_set(element: FlinkSerializer) -> FlinkSerializer:
    """What Flink 2.x's type extraction makes of a ``Set<T>`` (``NullableSetTypeInfo``)."""
    return nullable(SetSerializer(element))


@dataclass(frozen=True)
class TtlSerializer(FlinkSerializer):
    """TTL's ``TtlSerializer``: the last-access timestamp (a Long), then the value."""

    value: FlinkSerializer
    snapshot_class = "org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot"

    def __post_init__(self) -> None:
        _check_serializer(self.value, "a TTL value")
        if isinstance(self.value, TtlSerializer):
            raise InvalidArgumentError("a TTL value cannot itself be wrapped for TTL")

    def write(self, w: BinaryWriter) -> None:
        _write_composite(w, self.snapshot_class, 2, [LONG_SERIALIZER, self.value])


@dataclass(frozen=True)
class TimerSerializer(FlinkSerializer):
    """The timers of a timer service: timestamp, key, namespace."""

    key: FlinkSerializer
    namespace: FlinkSerializer
    snapshot_class = "org.apache.flink.streaming.api.operators.TimerSerializerSnapshot"

    def __post_init__(self) -> None:
        _check_serializer(self.key, "a timer's key")
        _check_serializer(self.namespace, "a timer's namespace")

    def write(self, w: BinaryWriter) -> None:
        _write_composite(w, self.snapshot_class, 2, [self.key, self.namespace])


@dataclass(frozen=True)
class PojoField:
    """A field of a POJO: its name, its serializer and the class that declares it.

    ``declaring_class`` is the POJO class itself unless a superclass declares the
    field (Flink records the declaring class and finds the field by it).
    """

    name: str
    serializer: FlinkSerializer
    declaring_class: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InvalidArgumentError(f"a POJO field needs a name, got {self.name!r}")
        _check_serializer(self.serializer, f"POJO field {self.name!r}")


def java_string_order(text: str) -> bytes:
    """A sort key ordering strings as Java's ``String.compareTo`` (UTF-16 code units)."""
    return text.encode("utf-16-be", "surrogatepass")


@dataclass(frozen=True)
class PojoSerializer(FlinkSerializer):
    """Flink's ``PojoSerializer`` of ``class_name`` (Java's binary name: ``a.b.Outer$Inner``).

    Declare every field Flink sees: the public or getter/setter fields of the class
    and its superclasses, with the serializer Flink's type extraction gives each (a
    ``List``, ``Map`` or ``Set`` field is nullable, :func:`extracted_list` and the like;
    a collection of Tuples, Rows or collections, or a ``Row`` field, is Kryo, which is
    not derived). The snapshot lists them sorted by name, as Flink does, whatever the
    declared order.
    """

    class_name: str
    fields: tuple[PojoField, ...]
    snapshot_class = _RUNTIME + "PojoSerializerSnapshot"

    def __post_init__(self) -> None:
        if not isinstance(self.class_name, str) or not self.class_name:
            raise InvalidArgumentError(f"a POJO needs its Java class name, got {self.class_name!r}")
        fields = tuple(self.fields)
        if not fields:
            raise InvalidArgumentError(
                f"POJO {self.class_name} declares no fields: Flink serializes a class without"
                " fields with Kryo")
        for f in fields:
            if not isinstance(f, PojoField):
                raise InvalidArgumentError(f"POJO {self.class_name}: {f!r} is not a PojoField")
        names = [f.name for f in fields]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise InvalidArgumentError(f"POJO {self.class_name} declares fields {twice} twice")
        object.__setattr__(self, "fields",
                           tuple(sorted(fields, key=lambda f: java_string_order(f.name))))

    def describe(self) -> str:
        return f"POJO {self.class_name}"

    def write(self, w: BinaryWriter) -> None:
        w.utf(self.snapshot_class)
        w.i32(_POJO_VERSION)
        w.utf(self.class_name)
        w.i64(_OPTIONAL_MAP_HEADER)
        w.i32(len(self.fields))
        for f in self.fields:
            w.utf(f.name)
            key = BinaryWriter()
            key.utf(f.declaring_class or self.class_name)
            key.utf(f.name)
            w.boolean(True)
            w.length_prefixed(key.getvalue())
            w.boolean(True)
            w.length_prefixed(snapshot_bytes(f.serializer))
        for _ in range(2):  # registered and other subclasses: none
            w.i64(_OPTIONAL_MAP_HEADER)
            w.i32(0)


# -- snapshots ---------------------------------------------------------------------------

def snapshot_bytes(serializer: FlinkSerializer) -> bytes:
    """The snapshot as a keyed-state header holds it (after the proxy's version)."""
    _check_serializer(serializer, "a serializer")
    w = BinaryWriter()
    serializer.write(w)
    return w.getvalue()


def flink_type(serializer: FlinkSerializer) -> FlinkType:
    """The reader's type of ``serializer``, carrying its snapshot bytes (for the header
    writer) and decoding its values."""
    data = snapshot_bytes(serializer)
    r = BinaryReader(data, f"the derived snapshot of {serializer.describe()}")
    found = read_snapshot(r)
    assert r.pos == len(data)
    return found


# -- from statesource types --------------------------------------------------------------

def serializer_for_type(data_type: DataType | str) -> FlinkSerializer:
    """The serializer Flink uses for a key or namespace type (``Types.TUPLE``, ``Types.ROW``).

    ``void`` is ``VoidNamespace``, ``timewindow`` is ``TimeWindow``; a ``row<...>``
    carries its row kind (as every Flink 2.x ``RowTypeInfo`` serializer does).
    """
    data_type = parse_type(data_type)
    if isinstance(data_type, TupleType):
        return TupleSerializer(tuple(serializer_for_type(f) for f in data_type.fields))
    if isinstance(data_type, RowType):
        return RowSerializer(tuple(serializer_for_type(f) for f in data_type.fields))
    simple = SIMPLE.get(data_type.name)
    if simple is None:
        raise TypeMismatchError(f"no Flink serializer is derived for type {data_type.name}")
    return simple


@dataclass(frozen=True)
class PojoClass:
    """How a record of a value schema is a Java POJO: its class (Java's binary name,
    ``a.b.Outer$Inner``), the superclasses that declare some of its fields
    (``{field: class}``), and the serializers of fields their schema does not say
    (``{field: FlinkSerializer}``: a ``Set``, an array, a type with its own serializer)."""

    name: str
    declaring_classes: Mapping[str, str] = field(default_factory=dict, hash=False)
    serializers: Mapping[str, FlinkSerializer] = field(default_factory=dict, hash=False)


_AVRO_PRIMITIVES = {"string": "string", "int": "int", "long": "long", "float": "float",
                    "double": "double", "boolean": "boolean", "bytes": "bytes"}
_JAVA_CLASSES = {("int", "java.lang.Short"): "short", ("int", "java.lang.Byte"): "byte",
                 ("string", "java.lang.Character"): "char", ("int", "java.lang.Character"): "char"}


_COLLECTIONS = (ListSerializer, MapSerializer, SetSerializer, NullableSerializer,
                TupleSerializer, RowSerializer)


class _AvroMapping:
    """One walk of an Avro schema to serializers.

    ``extracted``: whether Flink's type extraction made the type (a POJO's fields and what
    they hold), which makes lists and maps nullable and anything generic inside them (a
    Tuple, a Row, a nested collection) a Kryo type; else the types are Flink's ``Types``
    (``Types.LIST``, ``Types.MAP``, ``Types.TUPLE``, ``Types.ROW``), as state descriptors
    declare them.
    """

    def __init__(self, pojos: Mapping[str, PojoClass]) -> None:
        self.pojos = pojos
        self.named: dict[str, tuple[dict[str, Any], str]] = {}
        self.pending: set[str] = set()

    def fail(self, path: str, problem: str) -> TypeMismatchError:
        return TypeMismatchError(f"no Flink serializer is derived for {path}: {problem}")

    def serializer(self, schema: Any, path: str, namespace: str,
                   extracted: bool) -> FlinkSerializer:
        if isinstance(schema, str):
            if schema in _AVRO_PRIMITIVES:
                return SIMPLE[_AVRO_PRIMITIVES[schema]]
            full = schema if schema in self.named else _full_name(schema, namespace)
            if full not in self.named:
                raise self.fail(path, f"type {schema!r} is not a supported Avro type")
            record, record_namespace = self.named[full]
            return self._record(record, path, record_namespace, extracted)
        if isinstance(schema, list):
            branches = [b for b in schema if b != "null"]
            if len(schema) != 2 or len(branches) != 1:
                raise self.fail(path, f"a union {schema!r}: only [\"null\", X] is a Flink type")
            return self.serializer(branches[0], path, namespace, extracted)
        if not isinstance(schema, dict) or "type" not in schema:
            raise self.fail(path, f"{schema!r} is not an Avro schema")
        kind = schema["type"]
        if isinstance(kind, (list, dict)):
            return self.serializer(kind, path, namespace, extracted)
        if "avro-schema" in schema:
            raise self.fail(path, refusal(AVRO_SNAPSHOT))
        if kind in _AVRO_PRIMITIVES:
            return self._primitive(schema, kind, path)
        if kind == "array":
            return self._array(schema, path, namespace, extracted)
        if kind == "map":
            return self._map(STRING_SERIALIZER, schema.get("values"), path, namespace, extracted)
        if kind == "record":
            return self._record(schema, path, namespace, extracted)
        raise self.fail(path, f"Avro {kind!r} has no Flink serializer statesource derives"
                              " (Flink writes it with Avro or Kryo)")

    def _primitive(self, schema: dict[str, Any], kind: str, path: str) -> FlinkSerializer:
        if "logicalType" in schema:
            raise self.fail(path, f"logical type {schema['logicalType']!r}: Flink writes it with"
                                  " a serializer of its Java class, which is not derived")
        java_class = schema.get("java-class")
        if java_class is None:
            return SIMPLE[_AVRO_PRIMITIVES[kind]]
        known = _JAVA_CLASSES.get((kind, java_class))
        if known is not None:
            return SIMPLE[known]
        if kind == "bytes":
            raise self.fail(path, f"{java_class} values are Kryo's bytes; {refusal(_KRYO)}")
        return SIMPLE[_AVRO_PRIMITIVES[kind]]

    def _held(self, schema: Any, path: str, namespace: str,
              extracted: bool) -> FlinkSerializer:
        """An element, map key or map value: extracted ones cannot be generic types."""
        held = self.serializer(schema, path, namespace, extracted)
        if extracted and isinstance(held, _COLLECTIONS):
            raise self.fail(path, f"Flink's type extraction makes a collection of {held.describe()}"
                                  f" values a Kryo type; {refusal(_KRYO)}")
        return held

    def _map(self, key: FlinkSerializer, values: Any, path: str, namespace: str,
             extracted: bool) -> FlinkSerializer:
        value = self._held(values, path + "{}", namespace, extracted)
        return extracted_map(key, value) if extracted else MapSerializer(key, value)

    def _array(self, schema: dict[str, Any], path: str, namespace: str,
               extracted: bool) -> FlinkSerializer:
        items = schema.get("items")
        entry = self.named.get(items, (items, ""))[0] if isinstance(items, str) else items
        if isinstance(entry, list):  # a nullable entry record
            entry = next((b for b in entry if b != "null"), None)
        if (isinstance(entry, dict) and entry.get("type") == "record"
                and entry.get("name") == "MapEntry"
                and [f.get("name") for f in entry.get("fields", ())] == ["key", "value"]):
            key_schema, value_schema = (f["type"] for f in entry["fields"])
            key = self._held(key_schema, path + "{key}", namespace, extracted)
            return self._map(key, value_schema, path, namespace, extracted)
        element = self._held(items, path + "[]", namespace, extracted)
        return extracted_list(element) if extracted else ListSerializer(element)

    def _record(self, schema: dict[str, Any], path: str, namespace: str,
                extracted: bool) -> FlinkSerializer:
        name = schema.get("name")
        if not isinstance(name, str):
            raise self.fail(path, "a record without a name")
        if "." in name:
            namespace = name.rsplit(".", 1)[0]
        elif isinstance(schema.get("namespace"), str):
            namespace = schema["namespace"]
        full = _full_name(name, namespace)
        if full in self.pending:
            raise self.fail(path, f"record {full} contains itself: Flink serializes a recursive"
                                  f" type with Kryo; {refusal(_KRYO)}")
        self.named[full] = (schema, namespace)
        self.pending.add(full)
        try:
            return self._record_of(full, schema.get("fields") or [], path, namespace, extracted)
        finally:
            self.pending.discard(full)

    def _record_of(self, full: str, fields: list[Any], path: str, namespace: str,
                   extracted: bool) -> FlinkSerializer:
        """A record as a POJO (declared in ``pojos``), a Row or a Tuple (by field names)."""
        names = [f.get("name") for f in fields]

        def field_serializer(f: Any, inside: bool) -> FlinkSerializer:
            return self.serializer(f.get("type"), f"{path}.{f.get('name')}", namespace, inside)

        pojo = self.pojos.get(full) or self.pojos.get(full.rsplit(".", 1)[-1])
        if pojo is not None:
            unknown = sorted((set(pojo.declaring_classes) | set(pojo.serializers)) - set(names))
            if unknown:
                raise self.fail(path, f"POJO {pojo.name} declares fields {unknown}, which record"
                                      f" {full} does not have")
            return PojoSerializer(pojo.name, tuple(
                PojoField(name, pojo.serializers.get(name) or field_serializer(f, True),
                          pojo.declaring_classes.get(name))
                for name, f in zip(names, fields)))
        if names[:1] == ["row_kind"] and names[1:] == [f"f{i}" for i in range(len(names) - 1)]:
            if extracted:
                raise self.fail(path, "Flink's type extraction makes a Row field a Kryo type;"
                                      f" {refusal(_KRYO)}")
            return RowSerializer(tuple(field_serializer(f, False) for f in fields[1:]))
        if names == [f"f{i}" for i in range(len(names))] and 1 <= len(names) <= MAX_TUPLE_ARITY:
            return TupleSerializer(tuple(field_serializer(f, extracted) for f in fields))
        raise self.fail(path, f"record {full} is not a Tuple (fields f0, f1, ...) or a Row"
                              " (row_kind, f0, f1, ...): declare the POJO it is"
                              f" (pojos={{{full!r}: PojoClass('<Java class>')}}); an Avro"
                              f" record is not: {refusal(AVRO_SNAPSHOT)}")


def _full_name(name: str, namespace: str) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def serializer_for_schema(schema: ValueSchema | Mapping[str, Any] | list[Any] | str,
                          pojos: Mapping[str, PojoClass] | None = None, *,
                          extracted: bool = False) -> FlinkSerializer:
    """The serializer of values of an Avro value schema, in the shapes the Flink reader gives them.

    ``string``, ``int``, ``long``, ``float``, ``double``, ``boolean``, ``bytes`` (``byte[]``),
    ``int``/``string`` with ``java-class`` ``java.lang.Short``, ``Byte`` or ``Character``;
    ``array`` (a ``List``; an array of ``MapEntry`` records ``{key, value}`` is a ``Map``),
    ``map`` (a ``Map`` with String keys); records with fields ``f0``, ``f1``, ... (a
    Tuple) or ``row_kind``, ``f0``, ... (a Row); any other record declared in ``pojos``
    by its (full or short) name: a POJO of that class, with the record's fields.
    ``["null", X]`` is X (Flink's serializers take the nulls their types allow). The rest
    (enums, fixed, logical types, other records, Kryo's ``bytes`` of a ``java-class``)
    is refused with :class:`TypeMismatchError`.

    Lists and maps are ``Types.LIST`` and ``Types.MAP`` (``ListSerializer``,
    ``MapSerializer``), as a descriptor built with ``Types`` has them; with ``extracted``,
    as Flink's type extraction makes them (``TypeInformation.of``, a ``TypeHint``):
    nullable (:func:`extracted_list`, :func:`extracted_map`). A POJO's fields are always
    extracted: a list field of strings is ``Nullable(List(Nullable(String)))``, and a
    collection of collections, Tuples or Rows, or a Row field, is Kryo and refused.
    """
    avro = schema.avro if isinstance(schema, ValueSchema) else schema
    if isinstance(avro, str) and avro.lstrip().startswith(("{", "[", '"')):
        try:
            avro = json.loads(avro)
        except ValueError as error:
            raise InvalidArgumentError(f"the value schema is not JSON: {error}") from None
    return _AvroMapping(pojos or {}).serializer(avro, "the value", "", extracted)


# -- from a serializer read from a Flink file ---------------------------------------------

def declared_serializer(read: FlinkType) -> FlinkSerializer:
    """The declaration of a serializer read from a Flink file (whose snapshot it rewrites).

    Refuses (:class:`TypeMismatchError`) the serializers listed in :data:`REFUSED`, and
    any other statesource cannot derive, naming the snapshot class.
    """
    if isinstance(read, ListType):
        return ListSerializer(declared_serializer(read.element))
    if isinstance(read, MapType):
        return MapSerializer(declared_serializer(read.key), declared_serializer(read.value))
    if isinstance(read, SetType):
        return SetSerializer(declared_serializer(read.element))
    if isinstance(read, NullableType):
        return NullableSerializer(declared_serializer(read.inner), read.padding)
    if isinstance(read, TtlType):
        if declared_serializer(read.timestamp) != LONG_SERIALIZER:
            raise TypeMismatchError(f"a TTL timestamp of {read.timestamp.serializer}, not Long")
        return TtlSerializer(declared_serializer(read.user))
    if isinstance(read, TimerType):
        return TimerSerializer(declared_serializer(read.key), declared_serializer(read.namespace))
    if isinstance(read, TupleFlinkType):
        fields = tuple(declared_serializer(f) for f in read.fields)
        default = TupleSerializer(fields)
        return default if read.tuple_class == default.java_class else TupleSerializer(
            fields, read.tuple_class)
    if isinstance(read, RowFlinkType):
        return RowSerializer(tuple(declared_serializer(f) for f in read.fields),
                             read.kind_in_mask)
    if isinstance(read, PojoFlinkType):
        return PojoSerializer(read.pojo_class, tuple(
            PojoField(name, declared_serializer(f), read.declaring_classes.get(name))
            for name, f in read.fields))
    if read.serializer in REFUSED:
        raise TypeMismatchError(refusal(read.serializer))
    if isinstance(read, OpaqueType):
        raise TypeMismatchError(refusal(_KRYO))
    if read.serializer in _SIMPLE_CLASSES:
        return SimpleSerializer(read.serializer)
    raise TypeMismatchError(f"{read.serializer} is not a serializer statesource derives")


# -- states ------------------------------------------------------------------------------

def _serializer(declared: FlinkSerializer | DataType | str) -> FlinkSerializer:
    return declared if isinstance(declared, FlinkSerializer) else serializer_for_type(declared)


def _key(key: FlinkSerializer | DataType | str) -> FlinkSerializer:
    return key if isinstance(key, FlinkSerializer) else serializer_for_type(key_type(key))


def key_serializer(key: FlinkSerializer | DataType | str) -> FlinkType:
    """The key serializer of a keyed-state header, for a key type or a declared serializer."""
    return flink_type(_key(key))


def state_serializer(kind: StateKind, values: Mapping[str, FlinkSerializer],
                     ttl: bool) -> FlinkSerializer:
    """The serializer of a keyed state's stored value, from its value serializers by role.

    As Flink's state descriptors make it: a list state's is a ``ListSerializer`` of its
    elements, a map state's a ``MapSerializer``; with TTL, each element, map value or
    value is wrapped in a ``TtlSerializer`` (the last-access timestamp first).
    """
    def wrapped(serializer: FlinkSerializer) -> FlinkSerializer:
        return TtlSerializer(serializer) if ttl else serializer

    if kind is StateKind.LIST:
        return ListSerializer(wrapped(values["element"]))
    if kind is StateKind.MAP:
        return MapSerializer(values["user_key"], wrapped(values["user_value"]))
    role = "accumulator" if kind is StateKind.AGGREGATING else "value"
    return wrapped(values[role])


def keyed_state_info(name: str, kind: StateKind, namespace: FlinkSerializer | DataType | str,
                     values: Mapping[str, FlinkSerializer], ttl: bool,
                     state_id: int = 0) -> StateInfo:
    """A keyed state's meta info (Flink's ``StateMetaInfoSnapshot``) from its serializers."""
    options = {KEYED_STATE_TYPE: kind.name}
    serializers = {VALUE_SERIALIZER: flink_type(state_serializer(kind, values, ttl)),
                   NAMESPACE_SERIALIZER: flink_type(_serializer(namespace))}
    return StateInfo(state_id, name, KEY_VALUE, options, serializers)


def state_info(declaration: StateDeclaration, state_id: int = 0, *,
               serializers: Mapping[str, FlinkSerializer] | None = None,
               pojos: Mapping[str, PojoClass] | None = None,
               extracted: bool = False) -> StateInfo:
    """The meta info Flink writes for a declared keyed state, its serializers derived.

    Each value role's serializer comes from ``serializers`` when given there, else from
    its schema (:func:`serializer_for_schema`, with ``pojos`` and ``extracted``); the
    namespace from the declaration's namespace type; a TTL wraps the values as Flink's
    TTL state does.
    """
    given = dict(serializers or {})
    unknown = sorted(set(given) - set(declaration.schemas))
    if unknown:
        raise InvalidArgumentError(
            f"state {declaration.name!r} has no value roles {unknown}; its roles:"
            f" {sorted(declaration.schemas)}")
    values = {}
    for role, schema in declaration.schemas.items():
        if role in given:
            _check_serializer(given[role], f"the {role} serializer of {declaration.name!r}")
            values[role] = given[role]
            continue
        try:
            values[role] = serializer_for_schema(schema, pojos, extracted=extracted)
        except TypeMismatchError as error:
            raise TypeMismatchError(f"state {declaration.name!r}, {role}: {error}") from None
    return keyed_state_info(declaration.name, declaration.kind, declaration.namespace_type,
                            values, declaration.ttl is not None, state_id)


def timer_state_name(service: str, event_time: bool) -> str:
    """The state name of a timer service's queue (``_timer_state/event_<service>``)."""
    return f"_timer_state/{'event' if event_time else 'processing'}_{service}"


def timer_state_info(name: str, key: FlinkSerializer | DataType | str,
                     namespace: FlinkSerializer | DataType | str = "void",
                     state_id: int = 0) -> StateInfo:
    """The meta info of a timer queue: a priority-queue state of ``TimerSerializer(key,
    namespace)``, without options (the window operator's timers have a ``timewindow``
    namespace)."""
    timers = TimerSerializer(_key(key), _serializer(namespace))
    return StateInfo(state_id, name, PRIORITY_QUEUE, {}, {VALUE_SERIALIZER: flink_type(timers)})


def state_meta_info_bytes(info: StateInfo) -> bytes:
    """The ``StateMetaInfoSnapshot`` bytes of a state, as the keyed-state header holds them."""
    w = BinaryWriter()
    write_state_info(w, info)
    return w.getvalue()

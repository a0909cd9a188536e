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
- :mod:`serializer_mapping` maps statesource's declarations (types, value schemas)
  and serializers read from Flink files to one, and :mod:`state_meta_writer` builds
  the state meta infos of a keyed-state header from them.

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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from statesource.errors import InvalidArgumentError, TypeMismatchError
from statesource.flink.avro import AVRO_SNAPSHOT
from statesource.flink.binary import BinaryReader
from statesource.flink.binary_writer import BinaryWriter
from statesource.flink.flink_type import FlinkType
from statesource.flink.serializers import (
    COMPOSITE_MAGIC,
    NESTED_MAGIC,
    read_snapshot,
)

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

KRYO_SNAPSHOT = _RUNTIME + "kryo.KryoSerializerSnapshot"
_BYTE_ARRAY_WRAPPER = ("org.apache.flink.streaming.api.utils.ByteArrayWrapperSerializer"
                       "$ByteArrayWrapperSerializerSnapshot")
REFUSED: dict[str, str] = {
    KRYO_SNAPSHOT: "Kryo's snapshot records the job's Kryo configuration (registered classes,"
                   " default serializers), which no declared type says",
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
        if self.snapshot_class not in SIMPLE_CLASSES:
            raise InvalidArgumentError(
                f"{self.snapshot_class} is not a parameterless Flink serializer snapshot"
                f" statesource writes; known: {', '.join(sorted(SIMPLE_CLASSES))}")

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
SIMPLE_CLASSES = frozenset([*_SIMPLE_BY_TYPE.values(), _GLOBAL_WINDOW_CLASS])

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


def check_serializer(value: Any, what: str) -> None:
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
            check_serializer(serializer, f"tuple field f{i}")

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
            check_serializer(serializer, f"row field f{i}")

    def write(self, w: BinaryWriter) -> None:
        _write_composite(w, self.snapshot_class, 4, self.fields,
                         lambda out: out.boolean(self.row_kind))


@dataclass(frozen=True)
class ListSerializer(FlinkSerializer):
    """Flink's ``ListSerializer`` (``Types.LIST``, and every list state)."""

    element: FlinkSerializer
    snapshot_class = _BASE + "ListSerializerSnapshot"

    def __post_init__(self) -> None:
        check_serializer(self.element, "a list's element")

    def write(self, w: BinaryWriter) -> None:
        _write_composite(w, self.snapshot_class, 1, [self.element])


@dataclass(frozen=True)
class MapSerializer(FlinkSerializer):
    """Flink's ``MapSerializer`` (``Types.MAP``, and every map state)."""

    key: FlinkSerializer
    value: FlinkSerializer
    snapshot_class = _BASE + "MapSerializerSnapshot"

    def __post_init__(self) -> None:
        check_serializer(self.key, "a map's key")
        check_serializer(self.value, "a map's value")

    def write(self, w: BinaryWriter) -> None:
        _write_composite(w, self.snapshot_class, 1, [self.key, self.value])


@dataclass(frozen=True)
class SetSerializer(FlinkSerializer):
    """Flink's ``SetSerializer`` (``Types.SET``; a ``Set`` field of a POJO, wrapped nullable)."""

    element: FlinkSerializer
    snapshot_class = _BASE + "SetSerializerSnapshot"

    def __post_init__(self) -> None:
        check_serializer(self.element, "a set's element")

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
        check_serializer(self.inner, "a nullable value")
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
        check_serializer(self.value, "a TTL value")
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
        check_serializer(self.key, "a timer's key")
        check_serializer(self.namespace, "a timer's namespace")

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
        check_serializer(self.serializer, f"POJO field {self.name!r}")


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
    check_serializer(serializer, "a serializer")
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

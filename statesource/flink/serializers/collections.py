"""Flink's collection serializers: ``List``, ``Map`` and ``Set`` (and the list and map states).

Each is a composite snapshot of outer version 1 with no outer payload, nesting the element
serializer (a map: the key's, then the value's). Their values:

- ``List``: an int count, then the elements;
- ``Map``: an int count, then per entry the key, a null flag and the value unless null;
- ``Set``: an int count, then per element a null flag and the element unless null.

A list's elements and a map's values may be null in statesource's Avro schemas; a map with
String keys is an Avro map, any other an array of ``{"key", "value"}`` records. None of
them is decoded column-wise here: a list or map state's layout decodes its elements and
entries (:mod:`~statesource.flink.layouts.columnar`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from statesource.errors import CorruptCheckpointError, IncompatibleCheckpointError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.serializers.base import (
    FlinkSerializer,
    FlinkType,
    check_serializer,
    composite,
    nullable_schema,
    register,
    write_composite,
)
from statesource.flink.serializers.encoding import (
    Encoder,
    encoder_of,
    flagged,
    misfit,
    not_null,
    shown,
    write_part,
)
from statesource.flink.serializers.primitives import PrimitiveType
from statesource.flink.serializers.ttl import TtlType
from statesource.schema import hashable_record

_BASE = "org.apache.flink.api.common.typeutils.base."


@dataclass(frozen=True)
class _ElementSerializer(FlinkSerializer):
    """A serializer of collections of one element serializer, its only nested snapshot."""

    element: FlinkSerializer
    element_role: ClassVar[str]

    def __post_init__(self) -> None:
        check_serializer(self.element, self.element_role)

    def write(self, w: BinaryWriter) -> None:
        write_composite(w, self.snapshot_class, 1, [self.element])


class ListSerializer(_ElementSerializer):
    """Flink's ``ListSerializer`` (``Types.LIST``, and every list state)."""

    snapshot_class = _BASE + "ListSerializerSnapshot"
    element_role = "a list's element"


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
        write_composite(w, self.snapshot_class, 1, [self.key, self.value])


class SetSerializer(_ElementSerializer):
    """Flink's ``SetSerializer`` (``Types.SET``; a ``Set`` field of a POJO, wrapped nullable)."""

    snapshot_class = _BASE + "SetSerializerSnapshot"
    element_role = "a set's element"


class ListType(FlinkType):
    """``ListSerializer``: an int count, then the elements."""

    def __init__(self, serializer: str, element: FlinkType) -> None:
        self.serializer = serializer
        self.element = element

    def read(self, r: BinaryReader) -> list[Any]:
        read = self.element.read
        return [read(r) for _ in range(r.count("list length"))]

    def avro(self) -> Any:
        return {"type": "array", "items": nullable_schema(self.element.avro())}

    def to_value(self, value: Any) -> Any:
        convert = self.element.to_value
        return [None if v is None else convert(v) for v in value]

    def encoder(self) -> Encoder:
        return _collection(self.element, "List", (list, tuple), "a list", write_part)

    def declared(self) -> FlinkSerializer:
        return ListSerializer(self.element.declared())


class MapType(FlinkType):
    """``MapSerializer``: an int count, then (key, null flag, value) per entry."""

    def __init__(self, serializer: str, key: FlinkType, value: FlinkType) -> None:
        self.serializer = serializer
        self.key = key
        self.value = value

    def read(self, r: BinaryReader) -> dict[Any, Any]:
        read_key, read_value = self.key.read, self.value.read
        hashable = not isinstance(self.key, PrimitiveType)
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
            return {"type": "map", "values": nullable_schema(self.value.avro())}
        return {"type": "array", "items": {
            "type": "record", "name": "MapEntry",
            "fields": [{"name": "key", "type": self.key.avro()},
                       {"name": "value", "type": nullable_schema(self.value.avro())}]}}

    def to_value(self, value: Any) -> Any:
        convert_value = self.value.to_value

        def converted(v: Any) -> Any:
            return None if v is None else convert_value(v)

        if self.key.avro() == "string":
            return {k: converted(v) for k, v in value.items()}
        convert_key = self.key.to_value
        return [{"key": convert_key(k), "value": converted(v)} for k, v in value.items()]

    def encoder(self) -> Encoder:
        key, value_encoder = encoder_of(self.key), encoder_of(self.value)
        name = f"Map<{key.name}, {value_encoder.name}>"
        write_key, write_value = key.write, value_encoder.write

        def write(w: BinaryWriter, value: Any) -> None:
            items = map_items(value, name)
            w.i32(len(items))
            for user_key, user_value in items:
                write_part(w, write_key, user_key, "a key of {}", name)
                flagged(w, write_value, user_value, "the value of key {} of {}", shown(user_key),
                        name)
        return Encoder(name, write)

    def declared(self) -> FlinkSerializer:
        return MapSerializer(self.key.declared(), self.value.declared())


def duplicate_user_key(where: str, key: Any) -> IncompatibleCheckpointError:
    """A map holding one user key twice: Java's ``equals`` told them apart, Python's cannot.

    It happens with keys of a class without ``equals`` (each object its own
    key) or with 0.0 and -0.0; merging them would silently drop entries.
    """
    return IncompatibleCheckpointError(
        f"{where}: a map holds the user key {key!r} twice: Java"
        " told them apart (a key class without equals and hashCode, or 0.0 and -0.0), and"
        " statesource would have to merge them")


def _null_in_ttl_map(r: BinaryReader) -> CorruptCheckpointError:
    """A map with TTL whose value's null flag (just read) is set: corrupt, as Flink wraps
    every value of one, a null too, with its timestamp."""
    return r.error("a null value in a map with TTL, where Flink wraps every value",
                   r.pos - 1)


FLINK_2_ONLY = frozenset({SetSerializer.snapshot_class})
"""Snapshot classes of this family that Flink 1.x does not have (``Types.SET`` came in 2.0)."""


class SetType(FlinkType):
    """``SetSerializer``: an int count, then per element a null flag and the element."""

    def __init__(self, serializer: str, element: FlinkType) -> None:
        self.serializer = serializer
        self.element = element

    def read(self, r: BinaryReader) -> list[Any]:
        read = self.element.read
        return [None if r.boolean() else read(r) for _ in range(r.count("set size"))]

    def avro(self) -> Any:
        return {"type": "array", "items": nullable_schema(self.element.avro())}

    def to_value(self, value: Any) -> Any:
        convert = self.element.to_value
        return [None if v is None else convert(v) for v in value]

    def encoder(self) -> Encoder:
        """A set's elements each carry a null flag, a list's do not."""
        return _collection(self.element, "Set", (list, tuple, set, frozenset), "a set or a list",
                           flagged)

    def declared(self) -> FlinkSerializer:
        return SetSerializer(self.element.declared())


def _collection(element_type: FlinkType, kind: str, accepted: tuple[type[Collection[Any]], ...],
                expected: str, write_element_part: Callable[..., None]) -> Encoder:
    """An int count, then each element (written by ``write_element_part``)."""
    element = encoder_of(element_type)
    name = f"{kind}<{element.name}>"
    write_element = element.write

    def write(w: BinaryWriter, value: Any) -> None:
        if not isinstance(value, accepted):
            raise not_null(value, name, expected)
        w.i32(len(value))
        for index, item in enumerate(value):
            write_element_part(w, write_element, item, "element {} of {}", index, name)
    return Encoder(name, write)


def map_items(value: Any, name: str) -> list[tuple[Any, Any]]:
    """A map's entries: a dict, or statesource's list of ``{"key", "value"}`` entries."""
    if isinstance(value, Mapping):
        return list(value.items())
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(e, Mapping) and {"key"} <= set(e) <= {"key", "value"} for e in value):
        raise not_null(value, name, "a dict, or a list of {'key', 'value'} entries")
    items = [(e["key"], e.get("value")) for e in value]
    seen = set()
    for key, _ in items:
        held = hashable_record(key)
        if held in seen:
            raise misfit(value, name, f"the key {shown(key)} is there twice")
        seen.add(held)
    return items


register(ListSerializer.snapshot_class,
         composite(lambda n, x, s: ListType(n, s[0]), arity=1))
register(MapSerializer.snapshot_class,
         composite(lambda n, x, s: MapType(n, s[0], s[1]), arity=2))
register(SetSerializer.snapshot_class,
         composite(lambda n, x, s: SetType(n, s[0]), arity=1))

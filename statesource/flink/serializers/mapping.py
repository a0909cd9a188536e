"""Which Flink serializer a declared type is: statesource's key and namespace types, and
value schemas (Avro, with the POJO classes a job declares).

The counterpart of :mod:`~statesource.flink.declarations`, which maps what Flink wrote to
statesource's declarations: a state new to a savepoint, or coming from a statesource
checkpoint, gets the serializers Flink would have written for it. A walk of a type or a
schema crosses every family, so it lives here, above them; a serializer read from a Flink
file gives its own declaration (:meth:`FlinkType.declared`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from statesource.checks import json_object_argument
from statesource.errors import InvalidArgumentError, TypeMismatchError
from statesource.flink.serializers.avro import AVRO_SNAPSHOT
from statesource.flink.serializers.base import FlinkSerializer, flink_type, refusal
from statesource.flink.serializers.collections import (
    FLINK_2_ONLY,
    ListSerializer,
    MapSerializer,
    SetSerializer,
)
from statesource.flink.serializers.java_values import logical_type_serializer
from statesource.flink.serializers.kryo import KRYO_SNAPSHOT
from statesource.flink.serializers.nullable import NullableSerializer, nullable
from statesource.flink.serializers.pojo import PojoField, PojoSerializer
from statesource.flink.serializers.primitives import SIMPLE, STRING_SERIALIZER
from statesource.flink.serializers.rows import RowSerializer
from statesource.flink.serializers.tuples import MAX_TUPLE_ARITY, TupleSerializer
from statesource.schema import ValueSchema
from statesource.types import DataType, RowType, TupleType, parse_type


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
class PojoClass:
    """How a record of a value schema is a Java POJO: its class (Java's binary name,
    ``a.b.Outer$Inner``), the superclasses that declare some of its fields
    (``{field: class}``), and the serializers of fields their schema does not say
    (``{field: FlinkSerializer}``: a ``Set``, an array, a type with its own serializer)."""

    name: str
    declaring_classes: Mapping[str, str] = field(default_factory=dict, hash=False)
    serializers: Mapping[str, FlinkSerializer] = field(default_factory=dict, hash=False)


def pojo_classes(text: str, where: str) -> dict[str, PojoClass]:
    """The POJO classes of a JSON object given where Python objects cannot be (a Spark write
    option, a command-line flag, named by ``where`` in errors): record name -> Java class,
    or -> ``{"class": ..., "declaringClasses": {field: class}}``. Field serializers a schema
    does not say (:attr:`PojoClass.serializers`) are for the Python API only."""
    spec = json_object_argument(text, where, "record name -> Java class")
    return {record: _pojo_class(record, declared, where) for record, declared in spec.items()}


def _pojo_class(record: str, declared: Any, where: str) -> PojoClass:
    if isinstance(declared, str) and declared:
        return PojoClass(declared)
    if isinstance(declared, dict) and set(declared) <= {"class", "declaringClasses"}:
        name, owners = declared.get("class"), declared.get("declaringClasses", {})
        if (isinstance(name, str) and name and isinstance(owners, dict)
                and all(isinstance(v, str) and v for v in owners.values())):
            return PojoClass(name, owners)
    raise InvalidArgumentError(
        f"{where}: record {record!r} is declared {json.dumps(declared)}; give its Java class"
        ' ("com.example.Event") or {"class": "com.example.Event", "declaringClasses":'
        ' {"<field>": "<superclass declaring it>"}}')


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

    def __init__(self, pojos: Mapping[str, PojoClass], flink_major: int,
                 timestamp_class: str | None = None) -> None:
        self.pojos = pojos
        self.flink_major = flink_major
        self.timestamp_class = timestamp_class
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
        if kind == "fixed" and schema.get("logicalType") == "decimal":
            return self._logical(schema, path)
        raise self.fail(path, f"Avro {kind!r} has no Flink serializer statesource derives"
                              " (Flink writes it with Avro or Kryo)")

    def _primitive(self, schema: dict[str, Any], kind: str, path: str) -> FlinkSerializer:
        if "logicalType" in schema:
            return self._logical(schema, path)
        java_class = schema.get("java-class")
        if java_class is None:
            return SIMPLE[_AVRO_PRIMITIVES[kind]]
        known = _JAVA_CLASSES.get((kind, java_class))
        if known is not None:
            return SIMPLE[known]
        if kind == "bytes":
            raise self.fail(path, f"{java_class} values are Kryo's bytes; {refusal(KRYO_SNAPSHOT)}")
        return SIMPLE[_AVRO_PRIMITIVES[kind]]

    def _logical(self, schema: dict[str, Any], path: str) -> FlinkSerializer:
        """A logical type is the Java class Avro maps it to, whose serializer Flink uses."""
        try:
            return logical_type_serializer(schema["logicalType"], self.timestamp_class)
        except TypeMismatchError as error:
            raise self.fail(path, str(error)) from None

    def _held(self, schema: Any, path: str, namespace: str,
              extracted: bool) -> FlinkSerializer:
        """An element, map key or map value: extracted ones cannot be generic types."""
        held = self.serializer(schema, path, namespace, extracted)
        if extracted and isinstance(held, _COLLECTIONS):
            raise self.fail(path, f"Flink's type extraction makes a collection of {held.describe()}"
                                  f" values a Kryo type; {refusal(KRYO_SNAPSHOT)}")
        return held

    def _extracted_collection(self, path: str, java_type: str) -> None:
        """Flink 1.x's type extraction has no collection types: a ``List`` or ``Map`` it
        extracts is a generic type, serialized by Kryo (the 2.x serializers came in 2.0)."""
        if self.flink_major < 2:
            raise self.fail(path, f"Flink 1.x's type extraction makes a {java_type} a Kryo"
                                  f" type; {refusal(KRYO_SNAPSHOT)}")

    def _map(self, key: FlinkSerializer, values: Any, path: str, namespace: str,
             extracted: bool) -> FlinkSerializer:
        if extracted:
            self._extracted_collection(path, "Map")
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
        if extracted:
            self._extracted_collection(path, "List")
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
                                  f" type with Kryo; {refusal(KRYO_SNAPSHOT)}")
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
                                      f" {refusal(KRYO_SNAPSHOT)}")
            return RowSerializer(tuple(field_serializer(f, False) for f in fields[1:]))
        if names == [f"f{i}" for i in range(len(names))] and 1 <= len(names) <= MAX_TUPLE_ARITY:
            return TupleSerializer(tuple(field_serializer(f, extracted) for f in fields))
        raise self.fail(path, f"record {full} is not a Tuple (fields f0, f1, ...) or a Row"
                              " (row_kind, f0, f1, ...): declare the POJO it is"
                              f" (pojos={{{full!r}: PojoClass('<Java class>')}} in Python,"
                              f" {{{json.dumps(full)}: \"<Java class>\"}} as the write option"
                              " pojoClasses or export-flink --pojo-classes); an Avro"
                              f" record is not: {refusal(AVRO_SNAPSHOT)}")


def _full_name(name: str, namespace: str) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def serializer_for_schema(schema: ValueSchema | Mapping[str, Any] | list[Any] | str,
                          pojos: Mapping[str, PojoClass] | None = None, *,
                          extracted: bool = False, flink_major: int = 2,
                          timestamp_class: str | None = None) -> FlinkSerializer:
    """The serializer of values of an Avro value schema, in the shapes the Flink reader gives them.

    ``string``, ``int``, ``long``, ``float``, ``double``, ``boolean``, ``bytes`` (``byte[]``),
    ``int``/``string`` with ``java-class`` ``java.lang.Short``, ``Byte`` or ``Character``;
    ``array`` (a ``List``; an array of ``MapEntry`` records ``{key, value}`` is a ``Map``),
    ``map`` (a ``Map`` with String keys); records with fields ``f0``, ``f1``, ... (a
    Tuple) or ``row_kind``, ``f0``, ... (a Row); any other record declared in ``pojos``
    by its (full or short) name: a POJO of that class, with the record's fields.
    ``["null", X]`` is X (Flink's serializers take the nulls their types allow). Logical
    types are their Java classes' serializers
    (:func:`~statesource.flink.serializers.java_values.logical_type_serializer`: ``date``
    ``LocalDate``, ``time-*`` ``LocalTime``, ``timestamp-*`` ``Instant`` and
    ``local-timestamp-*`` ``LocalDateTime`` unless ``timestamp_class`` names another,
    ``decimal`` ``BigDecimal``). The rest (enums, fixed, ``uuid``, other records, Kryo's
    ``bytes`` of a ``java-class``) is refused with :class:`TypeMismatchError`.

    Lists and maps are ``Types.LIST`` and ``Types.MAP`` (``ListSerializer``,
    ``MapSerializer``), as a descriptor built with ``Types`` has them; with ``extracted``,
    as Flink's type extraction makes them (``TypeInformation.of``, a ``TypeHint``):
    nullable (:func:`extracted_list`, :func:`extracted_map`). A POJO's fields are always
    extracted: a list field of strings is ``Nullable(List(Nullable(String)))``, and a
    collection of collections, Tuples or Rows, or a Row field, is Kryo and refused.

    ``flink_major`` is the Flink the serializers are for: 1.x extracts no collection type (a
    ``List`` or ``Map`` field is Kryo: refused) and has no ``SetSerializer``.
    """
    avro = schema.avro if isinstance(schema, ValueSchema) else schema
    if isinstance(avro, str) and avro.lstrip().startswith(("{", "[", '"')):
        try:
            avro = json.loads(avro)
        except ValueError as error:
            raise InvalidArgumentError(f"the value schema is not JSON: {error}") from None
    given = pojos or {}
    for pojo in given.values():
        for name, serializer in pojo.serializers.items():
            check_release(serializer, flink_major, f"field {name} of POJO {pojo.name}")
    return _AvroMapping(given, flink_major, timestamp_class).serializer(avro, "the value", "",
                                                                        extracted)


def check_release(serializer: FlinkSerializer, flink_major: int, where: str) -> None:
    """Refuse a serializer the Flink ``flink_major`` does not have, anywhere inside it."""
    if flink_major < 2:
        missing = [t.serializer for t in flink_type(serializer).nested()
                   if t.serializer in FLINK_2_ONLY]
        if missing:
            raise TypeMismatchError(
                f"{where}: {missing[0].rsplit('.', 1)[-1]} is new in Flink 2.0; Flink 1.x"
                " has no serializer of that class")

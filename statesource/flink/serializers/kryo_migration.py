"""A 1.x serializer with Kryo inside, as the one Flink 2.x has for the same declared type.

Two things change from Flink 1.x to 2.x where Kryo is involved:

* a generic value (``KryoSerializer``): its snapshot stays byte for byte what 1.x wrote (a
  real 2.3 writes the same one for the same class and registrations), its values become
  Kryo 5's (:class:`Kryo2Value`);
* a POJO's ``List``, ``Map`` or ``Set`` field: 1.x gave it to Kryo, 2.x's type extraction
  gives it ``NullableSerializer`` over ``ListSerializer``, ``MapSerializer`` or
  ``SetSerializer`` (:func:`~statesource.flink.serializers.mapping.extracted_list` and its
  siblings). A 1.x snapshot does not carry the element types, Kryo's class tags in the
  values do: every element of the field across the state must be of one class that has
  a serializer of its own (:class:`Kryo2Collection`), else the state is refused, since a
  2.x job that declares another type would not restore it.

:func:`reading_type` gives the tree that reads a state's 1.x values (Kryo parts decoded),
:func:`writing_type` the tree that writes them for 2.x, once every value has been read.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from statesource.errors import IncompatibleCheckpointError, InvalidArgumentError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.serializers.base import FlinkSerializer, FlinkType, flink_type
from statesource.flink.serializers.encoding import Encoder
from statesource.flink.serializers.kryo import KryoType
from statesource.flink.serializers.kryo2 import Kryo2Reader
from statesource.flink.serializers.kryo5 import Kryo5Writer
from statesource.flink.serializers.kryo_classes import (
    BOOLEAN,
    BYTE,
    DECLARABLE,
    DOUBLE,
    FLOAT,
    INTEGER,
    LONG,
    SHORT,
    STRING,
    JavaObject,
    KryoRegistry,
)
from statesource.flink.serializers.mapping import extracted_list, extracted_map, extracted_set
from statesource.flink.serializers.pojo import PojoFlinkType
from statesource.flink.serializers.primitives import SIMPLE

COLLECTION_FIELDS = {"java.util.List": "list", "java.util.Map": "map", "java.util.Set": "set"}
"""The POJO field types Flink 2.x's type extraction no longer gives to Kryo."""
ELEMENT_TYPES = {STRING: "string", LONG: "long", INTEGER: "int", SHORT: "short", BYTE: "byte",
                 BOOLEAN: "boolean", DOUBLE: "double", FLOAT: "float"}
"""Element classes of such a field, and the statesource type of their Flink serializer."""
FIELD_CLASSES = {"list": frozenset({"java.util.ArrayList", "java.util.LinkedList"}),
                 "set": frozenset({"java.util.HashSet", "java.util.LinkedHashSet",
                                   "java.util.TreeSet"}),
                 "map": frozenset({"java.util.HashMap", "java.util.LinkedHashMap",
                                   "java.util.TreeMap"})}
"""The classes of the values of such a field that are re-encoded."""


def kryo_refusal(root: FlinkType) -> str:
    """Why a Kryo part of ``root`` cannot be re-encoded (from its snapshot alone), or ""."""
    for nested in root.nested():
        if not isinstance(nested, KryoType):
            continue
        if nested.custom:
            return f"{nested.custom}, which Kryo 5 in Flink 2.x cannot be assumed to read back"
        if nested.java_class.startswith("scala."):
            return (f"a Scala value ({nested.java_class}): Flink 2.x removed the Scala API and"
                    " its serializers")
        scala = [name for name in nested.registered if name.startswith("scala.")]
        if scala:  # 1.x gives no new id to a class its Chill Scala registrar has; 2.x does
            return (f"the job's Kryo registration of the Scala class {scala[0]}, which moves"
                    " the class ids of the registrations after it between Flink 1.x and 2.x")
        if nested.java_class not in DECLARABLE:
            return (f"a Kryo value of {nested.java_class}, whose field layout the snapshot does"
                    " not carry (Kryo's field serializer writes the fields of the job's class)")
    return ""


def has_kryo(root: FlinkType) -> bool:
    return any(isinstance(nested, KryoType) for nested in root.nested())


class _RawSnapshot(FlinkSerializer):
    """A declared serializer whose snapshot is bytes read from a file (a Kryo one)."""

    def __init__(self, snapshot: bytes, serializer: str) -> None:
        self.snapshot = snapshot
        self.snapshot_class = serializer

    def write(self, w: BinaryWriter) -> None:
        w.raw(self.snapshot)


class Kryo2Value(FlinkType):
    """A ``KryoSerializer`` value: read as Kryo 2 (a :class:`JavaObject`), written as Kryo 5."""

    def __init__(self, kryo: KryoType) -> None:
        self.serializer = kryo.serializer
        self.java_class = kryo.java_class
        self.snapshot = kryo.snapshot
        self.registry = KryoRegistry.of(list(kryo.registered))

    def read(self, r: BinaryReader) -> JavaObject | None:
        return Kryo2Reader(self.registry, r.source).read(r)

    def describe(self) -> str:
        return f"Kryo {self.java_class}"

    def encoder(self) -> Encoder:
        writer = Kryo5Writer(self.registry)

        def write(w: BinaryWriter, value: Any) -> None:
            w.raw(writer.write(value))
        return Encoder(self.describe(), write)

    def declared(self) -> FlinkSerializer:
        return _RawSnapshot(self.snapshot, self.serializer)


class Kryo2Collection(FlinkType):
    """A POJO's ``List``, ``Map`` or ``Set`` field of 1.x: read from Kryo 2 as Python values
    for 2.x's collection serializers, the element classes recorded as they are met."""

    def __init__(self, kryo: KryoType, where: str, field: str,
                 declared: tuple[str, ...] = ()) -> None:
        self.serializer = kryo.serializer
        self.java_class = kryo.java_class
        self.field = field
        self.kind = COLLECTION_FIELDS[kryo.java_class]
        self.registry = KryoRegistry.of(list(kryo.registered))
        self.where = where
        self.classes: dict[str, set[str]] = {"element": set(), "key": set(), "value": set()}
        self.declared_classes = dict(zip(self.roles, declared))
        """The element classes the 2.x POJO declares, by role, where the user gave them
        (``--field-type``): a field whose values hold none still has its 2.x type."""

    @property
    def roles(self) -> tuple[str, ...]:
        return ("key", "value") if self.kind == "map" else ("element",)

    def read(self, r: BinaryReader) -> Any:
        where = f"{r.source}, field {self.field!r}"
        found = Kryo2Reader(self.registry, where).read(r)
        if found is None:
            return None
        if found.java_class not in FIELD_CLASSES[self.kind]:
            raise IncompatibleCheckpointError(
                f"{where}: a {found.java_class} in a {self.java_class} field")
        if self.kind == "map":
            return {self._scalar(k, "key", where): self._scalar(v, "value", where)
                    for k, v in found.content}
        return [self._scalar(item, "element", where) for item in found.content]

    def _scalar(self, item: JavaObject | None, role: str, where: str) -> Any:
        if item is None:
            return None
        if item.java_class not in ELEMENT_TYPES:
            raise IncompatibleCheckpointError(
                f"{where}: a {item.java_class} in a {self.java_class} field; statesource"
                f" gives such fields 2.x's collection serializer for elements of"
                f" {', '.join(sorted(ELEMENT_TYPES))}")
        if role == "key" and item.java_class in (DOUBLE, FLOAT):
            raise IncompatibleCheckpointError(
                f"{where}: a {item.java_class} key in a Map field (Java tells 0.0 from"
                " -0.0 and NaNs apart, a dict of them does not)")
        self.classes[role].add(item.java_class)
        content = item.content
        if item.java_class == DOUBLE:
            return BinaryReader(content.to_bytes(8, "big"), "").f64()
        if item.java_class == FLOAT:
            return BinaryReader(content.to_bytes(4, "big"), "").f32()
        return content

    def describe(self) -> str:
        return f"Kryo {self.java_class} field"

    def _element(self, role: str) -> FlinkSerializer:
        found = self.classes[role]
        declared = self.declared_classes.get(role)
        if declared is not None:
            if found - {declared}:
                raise IncompatibleCheckpointError(
                    f"{self.where}: the values of this {self.java_class} field hold"
                    f" {', '.join(sorted(found - {declared}))} as {role}s, where"
                    f" --field-type declares {declared}")
            return SIMPLE[ELEMENT_TYPES[declared]]
        if len(found) != 1:
            what = ("no value holds one" if not found
                    else f"they are of {', '.join(sorted(found))}")
            raise IncompatibleCheckpointError(
                f"{self.where}: the {role} type of this {self.java_class} field is not known:"
                f" Flink 1.x's snapshot does not record it and, in the values, {what} (give"
                " the classes the job's 2.x POJO declares: --field-type STATE.FIELD=CLASS,"
                " a Map field's KEY_CLASS,VALUE_CLASS)")
        return SIMPLE[ELEMENT_TYPES[next(iter(found))]]

    def element_names(self) -> str:
        return ", ".join("/".join(sorted(c.rsplit(".", 1)[-1] for c in (
            {self.declared_classes[role]} if role in self.declared_classes
            else self.classes[role]))) or "?" for role in self.roles)

    def declared(self) -> FlinkSerializer:
        if self.kind == "list":
            return extracted_list(self._element("element"))
        if self.kind == "set":
            return extracted_set(self._element("element"))
        return extracted_map(self._element("key"), self._element("value"))


def substituted(root: FlinkType, replace: Callable[[FlinkType, str], FlinkType | None],
                 field: str = "") -> FlinkType:
    """A copy of ``root`` with the types ``replace`` gives in place of theirs (told the name
    of the POJO field ``root`` is, if it is one)."""
    found = replace(root, field)
    if found is not None:
        return found
    clone = copy.copy(root)
    pojo = isinstance(root, PojoFlinkType)
    for name, attribute in vars(root).items():
        if isinstance(attribute, FlinkType):
            setattr(clone, name, substituted(attribute, replace))
        elif isinstance(attribute, list) and any(isinstance(a, (FlinkType, tuple))
                                                 for a in attribute):
            setattr(clone, name, [
                (a[0], substituted(a[1], replace, a[0] if pojo else "")) if isinstance(a, tuple)
                and isinstance(a[1], FlinkType) else
                substituted(a, replace) if isinstance(a, FlinkType) else a
                for a in attribute])
    return clone


def reading_type(root: FlinkType, where: str,
                 declared: Mapping[str, tuple[str, ...]] | None = None) -> FlinkType:
    """``root`` with its Kryo parts reading Kryo 2 (refused first: :func:`kryo_refusal`);
    ``declared``: the element classes of POJO collection fields, by field name, where the
    user gave them."""
    def replace(node: FlinkType, field: str) -> FlinkType | None:
        if not isinstance(node, KryoType):
            return None
        if field and node.java_class in COLLECTION_FIELDS:
            return Kryo2Collection(node, f"{where}, field {field!r}", field,
                                   (declared or {}).get(field, ()))
        return Kryo2Value(node)
    return substituted(root, replace)


def element_class(name: str) -> str:
    """The Java class of a POJO collection field's elements that ``name`` (``String``,
    ``java.lang.String``) names; refused unless 2.x gives such elements a serializer."""
    for java_class in ELEMENT_TYPES:
        if name in (java_class, java_class.rsplit(".", 1)[-1]):
            return java_class
    raise InvalidArgumentError(
        f"{name!r} is no element class statesource writes POJO collection fields of; one of"
        f" {', '.join(sorted(c.rsplit('.', 1)[-1] for c in ELEMENT_TYPES))}")


def described(reading: FlinkType) -> str:
    """What re-encoding does to the values ``reading`` read (once they all were)."""
    parts = []
    for node in reading.nested():
        if isinstance(node, Kryo2Value):
            parts.append(f"Kryo 2 values of {node.java_class} become Flink 2.x's Kryo 5 bytes")
        elif isinstance(node, Kryo2Collection):
            parts.append(f"POJO field {node.field!r} ({node.java_class}"
                         f"<{node.element_names()}>) becomes Flink 2.x's {node.kind} serializer")
    return "; ".join(parts)


def writing_type(reading: FlinkType) -> FlinkType:
    """What writes the values ``reading`` read, for Flink 2.x: the same tree where only Kryo
    values change; else the 2.x serializer derived from it (its snapshot for the header)."""
    if not any(isinstance(n, Kryo2Collection) for n in reading.nested()):
        return reading
    derived = flink_type(reading.declared())

    def replace(node: FlinkType, field: str) -> FlinkType | None:
        return Kryo2Value(node) if isinstance(node, KryoType) else None
    return substituted(derived, replace)

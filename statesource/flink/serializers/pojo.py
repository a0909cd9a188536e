"""Flink's ``PojoSerializer``: a Java class's fields, each by its own serializer.

``PojoSerializerSnapshot``, version 2: the POJO class, then three "optional maps" (Flink's
``LinkedOptionalMap``: the fields, registered subclasses, other subclasses). A field's key
is its declaring class and its name (both as Java's ``writeUTF``); its value the field
serializer's snapshot. Fields are in Flink's order: sorted by name as Java sorts strings.
statesource reads no subclasses.

A value is a flags byte (null, or "no subclass"), then per field in the snapshot's order a
null flag and the value unless null. statesource reads it as a
:class:`~statesource.schema.RecordKey` of the fields by name (hashable: a POJO may be a map
state's user key), types it for values as an Avro record named by the class, and decodes
it column-wise as a struct of the fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from statesource.errors import IncompatibleCheckpointError, InvalidArgumentError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.serializers.base import (
    OPTIONAL_MAP_HEADER,
    FlinkSerializer,
    FlinkType,
    check_serializer,
    optional_map,
    read_snapshot,
    record_schema,
    register,
    snapshot_bytes,
)
from statesource.flink.serializers.columns import Decoder, struct_decoder
from statesource.flink.serializers.encoding import Encoder, encoder_of, flagged, misfit
from statesource.schema import RecordKey

_POJO_VERSION = 2
_NULL, _NO_SUBCLASS = 1, 2
"""The bits of a value's flags byte."""


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
    ``List``, ``Map`` or ``Set`` field is nullable,
    :func:`~statesource.flink.serializers.mapping.extracted_list` and the like;
    a collection of Tuples, Rows or collections, or a ``Row`` field, is Kryo, which is
    not derived). The snapshot lists them sorted by name, as Flink does, whatever the
    declared order.
    """

    class_name: str
    fields: tuple[PojoField, ...]
    snapshot_class = "org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot"

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
        w.i64(OPTIONAL_MAP_HEADER)
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
            w.i64(OPTIONAL_MAP_HEADER)
            w.i32(0)


class PojoFlinkType(FlinkType):
    """``PojoSerializer``: a flags byte, then per field (sorted by name) a null flag and value."""

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
        if flags & _NULL:
            return None
        if not flags & _NO_SUBCLASS:
            raise r.error(f"a subclass of POJO {self.pojo_class} (flags {flags:#x}) is not"
                          " supported", at)
        return RecordKey({name: None if r.boolean() else field.read(r)
                          for name, field in self.fields})

    def avro(self) -> Any:
        name = self.pojo_class.rsplit(".", 1)[-1].replace("$", "_")
        return record_schema(name, self.fields)

    def to_value(self, value: Any) -> Any:
        return {name: None if value[name] is None else field.to_value(value[name])
                for name, field in self.fields}

    def describe(self) -> str:
        return f"POJO {self.pojo_class}"

    def encoder(self) -> Encoder:
        fields = [(field_name, encoder_of(f)) for field_name, f in self.fields]
        name = f"POJO {self.pojo_class}"
        names = {field_name for field_name, _ in fields}
        writes = [(field_name, f.write) for field_name, f in fields]

        def write(w: BinaryWriter, value: Any) -> None:
            if value is None:
                w.u8(_NULL)
                return
            if not isinstance(value, Mapping) or not set(value) <= names:
                raise misfit(value, name, "expected a dict of the fields"
                                          f" {', '.join(sorted(names))} (a missing one is null)")
            w.u8(_NO_SUBCLASS)
            for field_name, write_field in writes:
                flagged(w, write_field, value.get(field_name), "field {!r} of {}", field_name,
                        name)
        return Encoder(name, write)

    def column_decoder(self, arrow_type: pa.DataType) -> Decoder | None:
        return struct_decoder(arrow_type, [name for name, _ in self.fields],
                              [field for _, field in self.fields], pojo=True)

    def declared(self) -> FlinkSerializer:
        return PojoSerializer(self.pojo_class, tuple(
            PojoField(name, f.declared(), self.declaring_classes.get(name))
            for name, f in self.fields))


def _read_pojo(name: str, r: BinaryReader, version: int) -> FlinkType:
    pojo_class = r.utf()
    fields = []
    declaring = {}
    for field_name, field, snapshot in optional_map(r):
        if snapshot is None:
            raise r.error(f"POJO {pojo_class} field {field_name!r} has no serializer snapshot")
        fields.append((field_name, read_snapshot(BinaryReader(snapshot, r.source))))
        if field is not None:  # the field as Flink writes it: declaring class, then name
            declaring[field_name] = BinaryReader(field, r.source).utf()
    for _ in range(2):  # registered and non-registered subclasses
        if optional_map(r):
            raise IncompatibleCheckpointError(
                f"{r.source}: POJO {pojo_class} has subclass serializers, not supported yet")
    return PojoFlinkType(name, pojo_class, fields, declaring)


register(PojoSerializer.snapshot_class, _read_pojo)

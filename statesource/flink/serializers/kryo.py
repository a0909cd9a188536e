"""Kryo's serializer (``KryoSerializer``): the generic types Flink has no serializer of its own for.

Its snapshot is the type's class, then three optional maps (registered classes, default
serializers, registered serializers), which statesource reads past. Its values are
self-delimiting only to Kryo with the job's registrations, so statesource cannot decode
them: they read as their raw bytes (:class:`OpaqueType`) where the file frames each value
(a canonical savepoint's values), and are written back as those bytes. The snapshot records
the job's Kryo configuration, which no declared type says, so it is never derived.
"""

from __future__ import annotations

from typing import Any, ClassVar

from statesource.errors import IncompatibleCheckpointError, TypeMismatchError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.serializers.base import (
    FlinkSerializer,
    FlinkType,
    optional_map,
    refusal,
    register,
)
from statesource.flink.serializers.encoding import Encoder, raw_bytes

KRYO_SNAPSHOT = "org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot"


class OpaqueType(FlinkType):
    """A serializer statesource cannot decode (Kryo): values as their raw bytes.

    Its values are self-delimiting only to that serializer, so they can be read
    only where the file frames each value (a canonical savepoint's values).
    """

    self_delimiting: ClassVar[bool] = False
    """Whether :meth:`read` finds where a value ends where nothing frames it (a native
    snapshot's values): :class:`~statesource.flink.serializers.kryo2_framing.Kryo2Framed`."""

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

    def encoder(self) -> Encoder:
        name = f"Kryo {self.java_class}"
        return Encoder(name, raw_bytes(name, (
            "statesource writes back the bytes Kryo wrote (as a canonical savepoint's values"
            " read); only Kryo, with the job's registrations, can serialize other values")))

    def declared(self) -> FlinkSerializer:
        raise TypeMismatchError(refusal(KRYO_SNAPSHOT))


FLINK_KRYO_SERIALIZERS = frozenset({
    "org.apache.flink.api.java.typeutils.runtime.kryo.Serializers$DummyAvroKryoSerializerClass",
    "org.apache.flink.api.java.typeutils.runtime.kryo.Serializers"
    "$SpecificInstanceCollectionSerializerForArrayList"})
"""The serializers Flink registers itself (for Avro's arrays), on every Kryo serializer."""


class KryoType(OpaqueType):
    """Kryo's serializer, with the classes its snapshot registers (which give Kryo's class
    ids, :mod:`~statesource.flink.serializers.kryo_classes`)."""

    def __init__(self, serializer: str, java_class: str, registered: tuple[str, ...],
                 custom: str) -> None:
        super().__init__(serializer, java_class)
        self.registered = registered
        self.custom = custom
        """The job's own Kryo serializers, described; empty when it registered none."""


def _registration(r: BinaryReader, name: str, value: bytes | None) -> tuple[str, str]:
    """A registration's class (``KryoRegistration``: class, kind, serializer) and, for a
    serializer of the job's own, its description."""
    if value is None:
        return name, f"a registration of {name} without its serializer"
    entry = BinaryReader(value, r.source)
    registered = entry.utf()
    kind = entry.i32()
    if kind == 0:  # UNSPECIFIED: Kryo's default serializer
        return registered, ""
    if kind == 1 and entry.utf() in FLINK_KRYO_SERIALIZERS:  # CLASS: by its class's name
        return registered, ""
    return registered, f"a custom Kryo serializer of {registered}"  # or INSTANCE: Java-serialized


def _read_kryo(name: str, r: BinaryReader, version: int) -> FlinkType:
    """Kryo's snapshot: the type's class, then registrations and default serializers."""
    java_class = r.utf()
    registered, custom = [], []
    for entry_name, _, value in optional_map(r):
        registered_class, reason = _registration(r, entry_name, value)
        registered.append(registered_class)
        custom += [reason] if reason else []
    for kind in ("default Kryo serializers", "default Kryo serializer classes"):
        entries = optional_map(r)
        if entries:
            custom.append(f"{kind} for {', '.join(e[0] for e in entries)}")
    return KryoType(name, java_class, tuple(registered), "; ".join(custom))


register(KRYO_SNAPSHOT, _read_kryo, refused=(
    "Kryo's snapshot records the job's Kryo configuration (registered classes, default"
    " serializers), which no declared type says"))

"""Kryo's serializer (``KryoSerializer``): the generic types Flink has no serializer of its own for.

Its snapshot is the type's class, then three optional maps (registered classes, default
serializers, registered serializers), which statesource reads past. Its values are
self-delimiting only to Kryo with the job's registrations, so statesource cannot decode
them: they read as their raw bytes (:class:`OpaqueType`) where the file frames each value
(a canonical savepoint's values), and are written back as those bytes. The snapshot records
the job's Kryo configuration, which no declared type says, so it is never derived.
"""

from __future__ import annotations

from typing import Any

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


def _read_kryo(name: str, r: BinaryReader, version: int) -> FlinkType:
    """Kryo's snapshot: the type's class, then registrations and default serializers."""
    java_class = r.utf()
    for _ in range(3):
        optional_map(r)
    return OpaqueType(name, java_class)


register(KRYO_SNAPSHOT, _read_kryo, refused=(
    "Kryo's snapshot records the job's Kryo configuration (registered classes, default"
    " serializers), which no declared type says"))

"""TTL's serializer: a state's values with their last-access timestamps.

A state with time-to-live wraps its value serializer in ``TtlStateFactory``'s
``TtlSerializer``: a composite snapshot of outer version 2 with no outer payload, nesting the
timestamp's ``Long`` serializer, then the value's. A value is the last-access timestamp (a
long), then the user value; statesource reads it as ``(value, timestamp)``. The states'
layouts decode TTL columns themselves (:mod:`~statesource.flink.layouts.columnar`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from statesource.errors import InvalidArgumentError, TypeMismatchError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.serializers.base import (
    FlinkSerializer,
    FlinkType,
    check_serializer,
    composite,
    register,
    write_composite,
)
from statesource.flink.serializers.encoding import Encoder, encoder_of, sequence, write_part
from statesource.flink.serializers.primitives import LONG_SERIALIZER


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
        write_composite(w, self.snapshot_class, 2, [LONG_SERIALIZER, self.value])


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

    def encoder(self) -> Encoder:
        timestamp, user = encoder_of(self.timestamp), encoder_of(self.user)
        name = f"TTL<{user.name}>"
        write_timestamp, write_user = timestamp.write, user.write

        def write(w: BinaryWriter, value: Any) -> None:
            user_value, last_access = sequence(value, 2, name, "(value, last-access timestamp)")
            write_part(w, write_timestamp, last_access, "the last-access timestamp of {}", name)
            write_part(w, write_user, user_value, "the value of {}", name)
        return Encoder(name, write)

    def declared(self) -> FlinkSerializer:
        if self.timestamp.declared() != LONG_SERIALIZER:
            raise TypeMismatchError(f"a TTL timestamp of {self.timestamp.serializer}, not Long")
        return TtlSerializer(self.user.declared())


register(TtlSerializer.snapshot_class,
         composite(lambda n, x, s: TtlType(n, s[0], s[1]), arity=2))

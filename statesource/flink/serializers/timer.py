"""The serializer of a timer service's timers: timestamp, key, namespace.

``TimerSerializer``'s snapshot is a composite of outer version 2 with no outer payload,
nesting the key's serializer, then the namespace's. A timer is its timestamp with the sign
bit flipped (so that timers sort by their bytes), then the key, then the namespace;
statesource reads it as ``(timestamp, key, namespace)``. Timer states' layouts decode timers
column-wise themselves (:mod:`~statesource.flink.layouts.columnar`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
from statesource.flink.serializers.encoding import (
    LONG_MAX,
    LONG_MIN,
    Encoder,
    encoder_of,
    misfit,
    sequence,
    write_part,
)


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
        write_composite(w, self.snapshot_class, 2, [self.key, self.namespace])


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

    def encoder(self) -> Encoder:
        key, namespace = encoder_of(self.key), encoder_of(self.namespace)
        name = f"Timer<{key.name}, {namespace.name}>"
        write_key, write_namespace = key.write, namespace.write

        def write(w: BinaryWriter, value: Any) -> None:
            timestamp, timer_key, timer_namespace = sequence(
                value, 3, name, "(timestamp, key, namespace)")
            if type(timestamp) is not int or not LONG_MIN <= timestamp <= LONG_MAX:
                raise misfit(timestamp, name, "the timestamp is a long")
            w.i64(flip_sign_bit(timestamp))
            write_part(w, write_key, timer_key, "the key of {}", name)
            write_part(w, write_namespace, timer_namespace, "the namespace of {}", name)
        return Encoder(name, write)

    def declared(self) -> FlinkSerializer:
        return TimerSerializer(self.key.declared(), self.namespace.declared())


def flip_sign_bit(timestamp: int) -> int:
    """Flink's ``MathUtils.flipSignBit`` as a signed long (timers sort by it as bytes)."""
    return timestamp - (1 << 63) if timestamp >= 0 else timestamp + (1 << 63)


register(TimerSerializer.snapshot_class,
         composite(lambda n, x, s: TimerType(n, s[0], s[1]), arity=2))

"""What a Flink state is, in statesource's vocabulary: declarations, types and value shapes.

The serializers in a Flink file's header say everything statesource's
metadata records about a state except its TTL configuration: Flink keeps TTL
durations in the program, not in snapshots. A state whose values carry TTL
timestamps is therefore declared with :data:`UNKNOWN_TTL`, the longest TTL,
so that nothing expires until the program that restores it declares its own.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from statesource.flink.serializers.base import FlinkType
from statesource.flink.serializers.collections import ListType, MapType
from statesource.flink.statefiles.keyed_header import KeyedHeader, StateInfo
from statesource.format.keyed_state_meta import KeyedStateMeta
from statesource.format.metadata import OperatorMeta
from statesource.model import StateDeclaration, StateKind, TtlConfig
from statesource.schema import ValueSchema, hashable_record

UNKNOWN_TTL = TtlConfig(ttl=timedelta.max // timedelta(milliseconds=1) * timedelta(milliseconds=1))
"""TTL of states whose Flink snapshot holds last-access timestamps but not the duration."""

_Convert = Callable[[Any], Any]


def _plain(flink_type: FlinkType) -> bool:
    """Whether decoded values already have the shape their Avro schema takes."""
    avro = flink_type.avro()
    return isinstance(avro, str) or (isinstance(avro, dict) and avro.get("type") in (
        "bytes", "string", "long", "int", "double", "float", "boolean"))


def value_types(info: StateInfo) -> dict[str, FlinkType]:
    """The Flink type of each statesource value role of a keyed state (TTL unwrapped)."""
    value = info.value
    kind = info.kind
    if kind is StateKind.LIST:
        assert isinstance(value, ListType)
        return {"element": info.user_value()}
    if kind is StateKind.MAP:
        assert isinstance(value, MapType)
        return {"user_key": value.key, "user_value": info.user_value()}
    return {"accumulator" if kind is StateKind.AGGREGATING else "value": info.user_value()}


def value_avro(info: StateInfo) -> dict[str, Any]:
    """The Avro schema of each value role as the serializers declare it (map values nullable)."""
    return {role: ["null", flink_type.avro()] if role == "user_value" else flink_type.avro()
            for role, flink_type in value_types(info).items()}


def declaration(info: StateInfo) -> StateDeclaration:
    schemas = {role: ValueSchema.parse(avro) for role, avro in value_avro(info).items()}
    return StateDeclaration(info.name, info.kind, info.namespace.data_type(), schemas,
                            UNKNOWN_TTL if info.ttl else None)


def operator_meta(uid: str, parallelism: int, max_parallelism: int,
                  header: KeyedHeader | None) -> OperatorMeta:
    """The operator as statesource metadata: its key type and keyed (non-timer) states."""
    states = tuple(sorted((KeyedStateMeta.of(declaration(info), ())
                           for info in (header.states if header else ()) if not info.is_timer),
                          key=lambda s: s.name))
    key_type = header.key.data_type() if header else None
    return OperatorMeta(uid, parallelism, max_parallelism, key_type, states, ())


def stored_converter(info: StateInfo) -> _Convert | None:
    """Turns decoded stored values into the shapes statesource's Avro schemas take, or None."""
    kind = info.kind
    types = value_types(info)
    ttl = info.ttl
    value_type = types.get("element") or types.get("user_value") or next(iter(types.values()))
    key_type = types.get("user_key")
    convert_key = None if key_type is None or _plain(key_type) else key_type.to_value
    if _plain(value_type) and convert_key is None:
        return None
    convert_value = (lambda value: value) if _plain(value_type) else value_type.to_value

    def one(value: Any) -> Any:
        if value is None:
            return None
        if ttl:
            return (convert_value(value[0]), value[1])
        return convert_value(value)

    if kind is StateKind.LIST:
        return lambda stored: [one(v) for v in stored]
    if kind is StateKind.MAP:
        if convert_key is None:
            return lambda stored: {k: one(v) for k, v in stored.items()}
        return lambda stored: {hashable_record(convert_key(k)): one(v) for k, v in stored.items()}
    return one

"""The state meta infos of a keyed-state header (Flink's ``StateMetaInfoSnapshot``), derived
from declared states and timer services, for
:func:`~statesource.flink.statefiles.keyed_header_writer.write_keyed_header`."""

from __future__ import annotations

from collections.abc import Mapping

from statesource.errors import InvalidArgumentError, TypeMismatchError
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.serializers.base import (
    FlinkSerializer,
    FlinkType,
    check_serializer,
    flink_type,
)
from statesource.flink.serializers.collections import ListSerializer, MapSerializer
from statesource.flink.serializers.mapping import (
    PojoClass,
    check_release,
    serializer_for_schema,
    serializer_for_type,
)
from statesource.flink.serializers.timer import TimerSerializer
from statesource.flink.serializers.ttl import TtlSerializer
from statesource.flink.statefiles.keyed_header import KEY_VALUE, PRIORITY_QUEUE, StateInfo
from statesource.flink.statefiles.keyed_header_writer import write_state_info
from statesource.model import StateDeclaration, StateKind
from statesource.types import DataType, key_type

KEYED_STATE_TYPE = "KEYED_STATE_TYPE"
VALUE_SERIALIZER = "VALUE_SERIALIZER"
NAMESPACE_SERIALIZER = "NAMESPACE_SERIALIZER"

def _serializer(declared: FlinkSerializer | DataType | str) -> FlinkSerializer:
    return declared if isinstance(declared, FlinkSerializer) else serializer_for_type(declared)


def _key(key: FlinkSerializer | DataType | str) -> FlinkSerializer:
    return key if isinstance(key, FlinkSerializer) else serializer_for_type(key_type(key))


def key_serializer(key: FlinkSerializer | DataType | str) -> FlinkType:
    """The key serializer of a keyed-state header, for a key type or a declared serializer."""
    return flink_type(_key(key))


def state_serializer(kind: StateKind, values: Mapping[str, FlinkSerializer],
                     ttl: bool) -> FlinkSerializer:
    """The serializer of a keyed state's stored value, from its value serializers by role.

    As Flink's state descriptors make it: a list state's is a ``ListSerializer`` of its
    elements, a map state's a ``MapSerializer``; with TTL, each element, map value or
    value is wrapped in a ``TtlSerializer`` (the last-access timestamp first).
    """
    def wrapped(serializer: FlinkSerializer) -> FlinkSerializer:
        return TtlSerializer(serializer) if ttl else serializer

    if kind is StateKind.LIST:
        return ListSerializer(wrapped(values["element"]))
    if kind is StateKind.MAP:
        return MapSerializer(values["user_key"], wrapped(values["user_value"]))
    role = "accumulator" if kind is StateKind.AGGREGATING else "value"
    return wrapped(values[role])


def keyed_state_info(name: str, kind: StateKind, namespace: FlinkSerializer | DataType | str,
                     values: Mapping[str, FlinkSerializer], ttl: bool,
                     state_id: int = 0) -> StateInfo:
    """A keyed state's meta info (Flink's ``StateMetaInfoSnapshot``) from its serializers."""
    options = {KEYED_STATE_TYPE: kind.name}
    serializers = {VALUE_SERIALIZER: flink_type(state_serializer(kind, values, ttl)),
                   NAMESPACE_SERIALIZER: flink_type(_serializer(namespace))}
    return StateInfo(state_id, name, KEY_VALUE, options, serializers)


def state_info(declaration: StateDeclaration, state_id: int = 0, *,
               serializers: Mapping[str, FlinkSerializer] | None = None,
               pojos: Mapping[str, PojoClass] | None = None,
               extracted: bool = False, flink_major: int = 2,
               timestamp_class: str | None = None) -> StateInfo:
    """The meta info Flink writes for a declared keyed state, its serializers derived.

    Each value role's serializer comes from ``serializers`` when given there, else from
    its schema (:func:`serializer_for_schema`, with ``pojos``, ``extracted``, the
    ``timestamp_class`` of timestamps and the ``flink_major`` the savepoint is for: 1.x
    lacks some serializers 2.x derives); the
    namespace from the declaration's namespace type; a TTL wraps the values as Flink's
    TTL state does.
    """
    given = dict(serializers or {})
    unknown = sorted(set(given) - set(declaration.schemas))
    if unknown:
        raise InvalidArgumentError(
            f"state {declaration.name!r} has no value roles {unknown}; its roles:"
            f" {sorted(declaration.schemas)}")
    values = {}
    for role, schema in declaration.schemas.items():
        if role in given:
            where = f"the {role} serializer of {declaration.name!r}"
            check_serializer(given[role], where)
            check_release(given[role], flink_major, where)
            values[role] = given[role]
            continue
        try:
            values[role] = serializer_for_schema(schema, pojos, extracted=extracted,
                                                 flink_major=flink_major,
                                                 timestamp_class=timestamp_class)
        except TypeMismatchError as error:
            raise TypeMismatchError(f"state {declaration.name!r}, {role}: {error}") from None
    return keyed_state_info(declaration.name, declaration.kind, declaration.namespace_type,
                            values, declaration.ttl is not None, state_id)


def timer_state_name(service: str, event_time: bool) -> str:
    """The state name of a timer service's queue (``_timer_state/event_<service>``)."""
    return f"_timer_state/{'event' if event_time else 'processing'}_{service}"


def timer_state_info(name: str, key: FlinkSerializer | DataType | str,
                     namespace: FlinkSerializer | DataType | str = "void",
                     state_id: int = 0) -> StateInfo:
    """The meta info of a timer queue: a priority-queue state of ``TimerSerializer(key,
    namespace)``, without options (the window operator's timers have a ``timewindow``
    namespace)."""
    timers = TimerSerializer(_key(key), _serializer(namespace))
    return StateInfo(state_id, name, PRIORITY_QUEUE, {}, {VALUE_SERIALIZER: flink_type(timers)})


def state_meta_info_bytes(info: StateInfo) -> bytes:
    """The ``StateMetaInfoSnapshot`` bytes of a state, as the keyed-state header holds them."""
    w = BinaryWriter()
    write_state_info(w, info)
    return w.getvalue()

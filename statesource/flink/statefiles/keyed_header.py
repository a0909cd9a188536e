"""The header of a Flink keyed-state file (``KeyedBackendSerializationProxy``).

Version 6: an int version, the compression flag, the key serializer's
snapshot, then per state its meta info: name, backend state type, options
(the keyed state kind) and the snapshots of its serializers by role. A
state's id in the data that follows is its position in this header, which is
not the order the program declared its states in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from statesource.errors import IncompatibleCheckpointError, UnsupportedFormatVersionError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.serializers.base import FlinkType, read_proxied_snapshot
from statesource.flink.serializers.collections import ListType, MapType
from statesource.flink.serializers.timer import TimerType
from statesource.flink.serializers.ttl import TtlType
from statesource.model import StateKind

KEY_VALUE, OPERATOR, BROADCAST, PRIORITY_QUEUE = 0, 1, 2, 3
_ROLES = {KEY_VALUE: ("NAMESPACE_SERIALIZER", "VALUE_SERIALIZER"),
          OPERATOR: ("VALUE_SERIALIZER",),
          BROADCAST: ("KEY_SERIALIZER", "VALUE_SERIALIZER"),
          PRIORITY_QUEUE: ("VALUE_SERIALIZER",)}
"""The serializer snapshots each backend state type has (Flink restores none without them)."""
SUPPORTED_VERSIONS = (6,)
_KINDS = {"VALUE": StateKind.VALUE, "LIST": StateKind.LIST, "MAP": StateKind.MAP,
          "REDUCING": StateKind.REDUCING, "AGGREGATING": StateKind.AGGREGATING}


@dataclass(frozen=True)
class StateInfo:
    """One state of a file: its id (header position), name, type and serializers."""

    state_id: int
    name: str
    backend_type: int
    options: Mapping[str, str]
    serializers: Mapping[str, FlinkType]

    @property
    def is_timer(self) -> bool:
        return self.backend_type == PRIORITY_QUEUE

    @property
    def kind(self) -> StateKind:
        text = self.options.get("KEYED_STATE_TYPE", "")
        if text not in _KINDS:
            raise IncompatibleCheckpointError(
                f"state {self.name!r} has keyed state type {text or 'none'!r}; statesource reads"
                f" {', '.join(_KINDS)}")
        return _KINDS[text]

    @property
    def value(self) -> FlinkType:
        return self.serializers["VALUE_SERIALIZER"]

    @property
    def namespace(self) -> FlinkType:
        return self.serializers["NAMESPACE_SERIALIZER"]

    @property
    def timer(self) -> TimerType:
        element = self.value
        if not isinstance(element, TimerType):
            raise IncompatibleCheckpointError(
                f"priority-queue state {self.name!r} holds {element.describe()}, not timers")
        return element

    @property
    def ttl(self) -> bool:
        """Whether values carry a TTL timestamp (wrapped by ``TtlSerializer``)."""
        value = self.value
        if isinstance(value, ListType):
            return isinstance(value.element, TtlType)
        if isinstance(value, MapType):
            return isinstance(value.value, TtlType)
        return isinstance(value, TtlType)

    def user_value(self) -> FlinkType:
        """The serializer of the stored value (element of a list, value of a map), TTL removed."""
        value = self.value
        if isinstance(value, ListType):
            value = value.element
        elif isinstance(value, MapType):
            value = value.value
        return value.user if isinstance(value, TtlType) else value


@dataclass(frozen=True)
class KeyedHeader:
    version: int
    compressed: bool
    key: FlinkType
    states: tuple[StateInfo, ...]
    data_start: int

    def retyped(self, change: Callable[[FlinkType], FlinkType]) -> KeyedHeader:
        """The header with ``change`` applied to each of its serializers (the key's, every
        state's): how a reader that knows more of the values than their snapshots say (the
        Flink release that wrote them) reads them."""
        return dataclasses.replace(self, key=change(self.key), states=tuple(
            dataclasses.replace(info, serializers={role: change(serializer) for role, serializer
                                                   in info.serializers.items()})
            for info in self.states))


def read_state_info(r: BinaryReader, state_id: int) -> StateInfo:
    at = r.pos
    name = r.utf()
    backend_type = r.i32()
    roles = _ROLES.get(backend_type)
    if roles is None:
        raise r.error(f"state {name!r} has unknown backend state type {backend_type}", at)
    options = {}
    for _ in range(r.count("number of state options")):
        option = r.utf()
        options[option] = r.utf()
    serializers = {}
    for _ in range(r.count("number of serializers")):
        role = r.utf()
        serializers[role] = read_proxied_snapshot(r)
    missing = [role for role in roles if role not in serializers]
    if missing:
        raise r.error(f"state {name!r} lacks the snapshot of its {' and '.join(missing)}"
                      f" (it has {', '.join(sorted(serializers)) or 'none'})", at)
    info = StateInfo(state_id, name, backend_type, options, serializers)
    kind = options.get("KEYED_STATE_TYPE") if backend_type == KEY_VALUE else None
    holder = _HOLDERS.get(kind or "")
    if holder is not None and not isinstance(info.value, holder):
        raise r.error(f"{(kind or '').lower()} state {name!r} has the value serializer"
                      f" {info.value.describe()}, not a {(kind or '').lower()} serializer", at)
    return info


_HOLDERS: dict[str, type] = {"LIST": ListType, "MAP": MapType}
"""The value serializer the states of a kind have: Flink's list and map states hold their
elements and entries with a list and a map serializer (wrapping TTL inside)."""


def unique_states(states: tuple[StateInfo, ...], r: BinaryReader) -> tuple[StateInfo, ...]:
    """A header names each state once: the state ids of its data, and a read by name, need
    it."""
    names = [info.name for info in states]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise r.error(f"the header lists state{'s' if len(twice) > 1 else ''}"
                      f" {', '.join(map(repr, twice))} more than once")
    return states


def read_keyed_header(r: BinaryReader) -> KeyedHeader:
    """Parse the header at the reader's position (the start of the file)."""
    version = r.i32()
    if version not in SUPPORTED_VERSIONS:
        raise UnsupportedFormatVersionError(
            f"{r.source}: keyed state file version {version}; statesource reads version"
            f" {', '.join(map(str, SUPPORTED_VERSIONS))} (Flink 2.x)")
    compressed = r.boolean()
    key = read_proxied_snapshot(r)
    count = r.i16()
    if count < 0:
        raise r.error(f"invalid number of states {count}")
    states = unique_states(tuple(read_state_info(r, state_id) for state_id in range(count)), r)
    return KeyedHeader(version, compressed, key, states, r.pos)


def same_state(a: StateInfo, b: StateInfo) -> bool:
    """Whether two files declare a state alike: its kind, options and serializers."""
    return (a.backend_type == b.backend_type and dict(a.options) == dict(b.options)
            and {r: s.snapshot for r, s in a.serializers.items()}
            == {r: s.snapshot for r, s in b.serializers.items()})

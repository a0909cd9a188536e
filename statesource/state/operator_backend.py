"""Operator state: non-keyed state owned by one parallel subtask.

This follows Flink's ``DefaultOperatorStateBackend``. A subtask holds list
states (redistributed on rescale either by splitting or by union, see
:mod:`statesource.redistribution`) and broadcast states (maps that every
subtask holds identically). Operator state is small, so, as in Flink, a
snapshot copies it synchronously and needs no copy-on-write machinery.

A state is registered by the first request for its name; later requests must
declare the same mode and types. Values are validated against the declared
schema when they are written, so a wrong type fails at the line that wrote it,
not later when a checkpoint is serialised.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType, TracebackType
from typing import Any

from statesource.checks import check_checkpoint_id
from statesource.errors import InvalidArgumentError, StateSourceError, TypeMismatchError
from statesource.model import DistributionMode, operator_state_roles
from statesource.schema import ValueSchema
from statesource.state.descriptors import resolve_value_type

_MODE_LABELS = {
    DistributionMode.SPLIT_DISTRIBUTE: "split-distribute list",
    DistributionMode.UNION: "union list",
    DistributionMode.BROADCAST: "broadcast",
}


def _describe(name: str, mode: DistributionMode, schemas: Mapping[str, ValueSchema]) -> str:
    roles = operator_state_roles(mode)
    types = ", ".join(f"{role}={json.dumps(schemas[role].avro)}" for role in roles)
    return f"{_MODE_LABELS[mode]} state {name!r} ({types})"


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"a state name must be a non-empty string, got {name!r}")


def _validate(name: str, role: str, schema: ValueSchema, value: Any) -> None:
    """Check one written value, re-raising the schema's complaint with the state's name."""
    try:
        schema.validate(value)
    except StateSourceError as error:
        raise type(error)(f"state {name!r}, {role}: {error}") from None


def _check_hashable(name: str, key: Any) -> None:
    try:
        hash(key)
    except TypeError:
        raise TypeMismatchError(
            f"state {name!r}: user key {key!r} is not hashable and cannot key a broadcast state"
        ) from None


def _materialise(name: str, values: Iterable[Any]) -> list[Any]:
    """Turn an argument of add_all/update into a list, refusing what is surely a mistake.

    Flink rejects a null list; a string or a mapping is iterable in Python but
    would add its characters or keys, which no caller means.
    """
    if values is None or isinstance(values, (str, bytes, Mapping)):
        raise InvalidArgumentError(
            f"state {name!r}: expected an iterable of elements, got {values!r}"
        )
    try:
        return list(values)
    except TypeError:
        raise InvalidArgumentError(
            f"state {name!r}: expected an iterable of elements, got {values!r}"
        ) from None


class OperatorListState:
    """A list of elements held by one subtask (split-distribute or union mode).

    Flink forbids null elements in list state, because a null cannot be told
    apart from "no element" once serialised; ``None`` is rejected here for the
    same reason.
    """

    def __init__(self, name: str, mode: DistributionMode, element: ValueSchema,
                 elements: list[Any] | None = None) -> None:
        self._name = name
        self._mode = mode
        self._element = element
        self._elements: list[Any] = [] if elements is None else elements

    @property
    def name(self) -> str:
        return self._name

    @property
    def mode(self) -> DistributionMode:
        return self._mode

    @property
    def schemas(self) -> Mapping[str, ValueSchema]:
        return MappingProxyType({"element": self._element})

    def _checked(self, values: list[Any]) -> list[Any]:
        for value in values:
            if value is None:
                raise InvalidArgumentError(
                    f"state {self._name!r}: list state elements cannot be None"
                )
            _validate(self._name, "element", self._element, value)
        return values

    def get(self) -> list[Any]:
        """The elements, as a new list (changing it does not change the state)."""
        return list(self._elements)

    def add(self, value: Any) -> None:
        self._elements.extend(self._checked([value]))

    def add_all(self, values: Iterable[Any]) -> None:
        """Append several elements; nothing is added if any of them is invalid."""
        self._elements.extend(self._checked(_materialise(self._name, values)))

    def update(self, values: Iterable[Any]) -> None:
        """Replace the content; an invalid element leaves the old content in place."""
        self._elements = self._checked(_materialise(self._name, values))

    def clear(self) -> None:
        self._elements = []

    def _copy_values(self) -> list[Any]:
        return copy.deepcopy(self._elements)


class BroadcastState:
    """A map from user key to user value that every subtask holds identically.

    Reads return ``None`` for an absent key, as Flink's ``get`` returns null, and
    removing an absent key does nothing. ``keys``, ``values`` and ``items`` return
    lists, so a caller may change the state while walking them.
    """

    def __init__(self, name: str, user_key: ValueSchema, user_value: ValueSchema,
                 entries: dict[Any, Any] | None = None) -> None:
        self._name = name
        self._user_key = user_key
        self._user_value = user_value
        self._entries: dict[Any, Any] = {} if entries is None else entries

    @property
    def name(self) -> str:
        return self._name

    @property
    def mode(self) -> DistributionMode:
        return DistributionMode.BROADCAST

    @property
    def schemas(self) -> Mapping[str, ValueSchema]:
        return MappingProxyType({"user_key": self._user_key, "user_value": self._user_value})

    def _check_entry(self, key: Any, value: Any) -> None:
        _validate(self._name, "user_key", self._user_key, key)
        _check_hashable(self._name, key)
        _validate(self._name, "user_value", self._user_value, value)

    def get(self, key: Any) -> Any:
        _check_hashable(self._name, key)
        return self._entries.get(key)

    def put(self, key: Any, value: Any) -> None:
        self._check_entry(key, value)
        self._entries[key] = value

    def put_all(self, mapping: Mapping[Any, Any]) -> None:
        """Put every entry of ``mapping``; nothing is put if any entry is invalid."""
        if not isinstance(mapping, Mapping):
            raise InvalidArgumentError(
                f"state {self._name!r}: put_all expects a mapping, got {mapping!r}"
            )
        for key, value in mapping.items():
            self._check_entry(key, value)
        self._entries.update(mapping)

    def remove(self, key: Any) -> None:
        _check_hashable(self._name, key)
        self._entries.pop(key, None)

    def contains(self, key: Any) -> bool:
        _check_hashable(self._name, key)
        return key in self._entries

    def keys(self) -> list[Any]:
        return list(self._entries.keys())

    def values(self) -> list[Any]:
        return list(self._entries.values())

    def items(self) -> list[tuple[Any, Any]]:
        return list(self._entries.items())

    def is_empty(self) -> bool:
        return not self._entries

    def clear(self) -> None:
        self._entries = {}

    def _copy_values(self) -> dict[Any, Any]:
        return copy.deepcopy(self._entries)


@dataclass(frozen=True)
class OperatorStateSnapshotEntry:
    """One state as it was when the snapshot was taken.

    ``values`` is a deep copy owned by the snapshot: a list of elements for
    split-distribute and union list state, a dict for broadcast state.
    """

    name: str
    mode: DistributionMode
    schemas: Mapping[str, ValueSchema]
    values: list[Any] | dict[Any, Any]


class OperatorStateSnapshot:
    """The operator state of one subtask at one checkpoint, independent of later writes.

    The copy is complete when the snapshot is created, so ``close`` only marks it
    closed; it exists so that callers treat this and the keyed backend's snapshot,
    which does hold resources, the same way.
    """

    def __init__(self, checkpoint_id: int, states: Iterable[OperatorStateSnapshotEntry]) -> None:
        self._checkpoint_id = checkpoint_id
        self._states = tuple(states)
        self._closed = False

    @property
    def checkpoint_id(self) -> int:
        return self._checkpoint_id

    @property
    def states(self) -> list[OperatorStateSnapshotEntry]:
        """The states in name order (a new list each time)."""
        return list(self._states)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        self._closed = True

    def __enter__(self) -> OperatorStateSnapshot:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        names = [entry.name for entry in self._states]
        return f"OperatorStateSnapshot(checkpoint_id={self._checkpoint_id}, states={names})"


_Handle = OperatorListState | BroadcastState


class OperatorStateBackend:
    """The operator states of one subtask, registered by name.

    List, union list and broadcast states share one namespace of names (Flink
    keeps broadcast states in a map of their own; one namespace lets a snapshot
    and a restore identify a state by its name alone). A state restored from a
    checkpoint is held until the program asks for it, and is snapshotted again
    even if the program never does, as Flink does, so that a restore does not
    silently drop it.
    """

    def __init__(self) -> None:
        self._states: dict[str, _Handle] = {}
        self._requested: set[str] = set()

    def get_list_state(self, name: str, element_type: Any) -> OperatorListState:
        """Split-distribute list state: on rescale, its elements are spread over the subtasks."""
        return self._list_state(name, DistributionMode.SPLIT_DISTRIBUTE, element_type)

    def get_union_list_state(self, name: str, element_type: Any) -> OperatorListState:
        """Union list state: on restore, every subtask receives the elements of all subtasks."""
        return self._list_state(name, DistributionMode.UNION, element_type)

    def get_broadcast_state(self, name: str, user_key_type: Any,
                            user_value_type: Any) -> BroadcastState:
        """Broadcast state: a map every subtask holds identically."""
        _check_name(name)
        schemas = self._resolve(name, {"user_key": user_key_type, "user_value": user_value_type})
        handle = self._request(name, DistributionMode.BROADCAST, schemas)
        if handle is None:
            handle = BroadcastState(name, schemas["user_key"], schemas["user_value"])
            self._states[name] = handle
        assert isinstance(handle, BroadcastState)
        return handle

    def state_names(self) -> list[str]:
        """The registered and restored states, in name order."""
        return sorted(self._states)

    def snapshot(self, checkpoint_id: int) -> OperatorStateSnapshot:
        """Copy every state now; later writes do not reach the returned snapshot."""
        check_checkpoint_id(checkpoint_id)
        entries = [
            OperatorStateSnapshotEntry(
                name=name,
                mode=handle.mode,
                schemas=handle.schemas,
                values=handle._copy_values(),
            )
            for name, handle in sorted(self._states.items())
        ]
        return OperatorStateSnapshot(checkpoint_id, entries)

    def restore_state(self, name: str, mode: DistributionMode,
                      schemas: Mapping[str, ValueSchema],
                      values: list[Any] | dict[Any, Any]) -> None:
        """Load one state's (already redistributed) content before the program asks for it.

        The checkpoint reader calls this once per state; the program's later
        request must then declare the same mode and types. Restoring a state the
        program already holds would replace content it may have written, so that
        is refused, as is restoring one name twice. The values are validated and
        deep-copied, so several subtasks restored from the same redistributed
        content never share mutable elements.
        """
        _check_name(name)
        if not isinstance(mode, DistributionMode):
            raise InvalidArgumentError(
                f"state {name!r}: mode must be a DistributionMode, got {mode!r}"
            )
        if name in self._requested:
            raise InvalidArgumentError(
                f"state {name!r} cannot be restored: the program already requested it"
            )
        if name in self._states:
            raise InvalidArgumentError(f"state {name!r} was already restored")
        if not isinstance(schemas, Mapping) or set(schemas) != set(operator_state_roles(mode)):
            raise InvalidArgumentError(
                f"state {name!r}: {_MODE_LABELS[mode]} state needs schemas for roles"
                f" {list(operator_state_roles(mode))}, got {schemas!r}"
            )
        resolved = self._resolve(name, schemas)
        handle: _Handle
        if mode is DistributionMode.BROADCAST:
            if not isinstance(values, Mapping):
                raise InvalidArgumentError(
                    f"state {name!r}: broadcast state is restored from a mapping, got {values!r}"
                )
            handle = BroadcastState(name, resolved["user_key"], resolved["user_value"])
            handle.put_all(copy.deepcopy(dict(values)))
        else:
            if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, list):
                raise InvalidArgumentError(
                    f"state {name!r}: {_MODE_LABELS[mode]} state is restored from a list,"
                    f" got {values!r}"
                )
            handle = OperatorListState(name, mode, resolved["element"])
            handle.update(copy.deepcopy(values))
        self._states[name] = handle

    def _list_state(self, name: str, mode: DistributionMode,
                    element_type: Any) -> OperatorListState:
        _check_name(name)
        schemas = self._resolve(name, {"element": element_type})
        handle = self._request(name, mode, schemas)
        if handle is None:
            handle = OperatorListState(name, mode, schemas["element"])
            self._states[name] = handle
        assert isinstance(handle, OperatorListState)
        return handle

    @staticmethod
    def _resolve(name: str, declared: Mapping[str, Any]) -> dict[str, ValueSchema]:
        try:
            return {role: resolve_value_type(t) for role, t in declared.items()}
        except StateSourceError as error:
            raise type(error)(f"state {name!r}: {error}") from None

    def _request(self, name: str, mode: DistributionMode,
                 schemas: Mapping[str, ValueSchema]) -> _Handle | None:
        """The existing handle for a matching declaration, None for a new name.

        Flink refuses to hand out a registered state under another mode or with
        other serializers, since the stored bytes would be read with the wrong
        layout; the same holds here for schemas.
        """
        existing = self._states.get(name)
        if existing is not None and (
            existing.mode is not mode or dict(existing.schemas) != dict(schemas)
        ):
            raise TypeMismatchError(
                f"state {name!r} is already declared as"
                f" {_describe(name, existing.mode, existing.schemas)};"
                f" cannot redeclare it as {_describe(name, mode, schemas)}"
            )
        self._requested.add(name)
        return existing

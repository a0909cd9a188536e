"""The vocabulary the write side and the checkpoint format share.

What a state *is*, independently of who keeps it (a live backend, a data
file, a Spark job): its kind, the roles of its typed values, how operator
state spreads on rescale, its time-to-live and the rule that decides expiry.
Both ``statesource.state`` and ``statesource.format`` build on this module and
on nothing of each other, so every rule here exists exactly once.

Stored shapes with TTL (what a state map holds and what the format encodes):
a Value, Reducing or Aggregating state holds ``(value, last_access_ms)``; a
List state ``[(element, last_access_ms), ...]``; a Map state
``{user_key: (user_value, last_access_ms)}``. Without TTL the bare value, list
or dict.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from statesource.checks import check_int
from statesource.errors import InvalidArgumentError
from statesource.schema import ValueSchema
from statesource.types import DataType

Progress = Callable[[str], None]
"""Where a long job reports what it is doing, one line at a time (``print`` will do)."""


class StateKind(enum.Enum):
    VALUE = "value"
    LIST = "list"
    MAP = "map"
    REDUCING = "reducing"
    AGGREGATING = "aggregating"


VALUE_ROLES: dict[StateKind, tuple[str, ...]] = {
    StateKind.VALUE: ("value",),
    StateKind.REDUCING: ("value",),
    StateKind.AGGREGATING: ("accumulator",),
    StateKind.LIST: ("element",),
    StateKind.MAP: ("user_key", "user_value"),
}
"""The typed roles of each keyed-state kind, in column order."""


class DistributionMode(enum.Enum):
    """How an operator state's content is spread over the subtasks after a rescale."""

    SPLIT_DISTRIBUTE = "split"  # list state: elements spread evenly over the new subtasks
    UNION = "union"  # union list state: every new subtask gets every element
    BROADCAST = "broadcast"  # broadcast map state: identical on all subtasks


def operator_state_roles(mode: DistributionMode) -> tuple[str, ...]:
    """The typed roles of an operator state: list elements, or broadcast map entries."""
    return ("user_key", "user_value") if mode is DistributionMode.BROADCAST else ("element",)


class UpdateType(enum.Enum):
    """Which accesses refresh a value's last-access timestamp."""

    ON_CREATE_AND_WRITE = "OnCreateAndWrite"
    ON_READ_AND_WRITE = "OnReadAndWrite"


class StateVisibility(enum.Enum):
    """Whether a read may return a value that expired but was not yet cleaned up."""

    NEVER_RETURN_EXPIRED = "NeverReturnExpired"
    RETURN_EXPIRED_IF_NOT_CLEANED_UP = "ReturnExpiredIfNotCleanedUp"


@dataclass(frozen=True)
class TtlConfig:
    """Time-to-live of one state, following Flink's ``StateTtlConfig``.

    Every TTL'd value carries the timestamp of its last access; List state
    keeps one per element and Map state one per entry, so that appending to a
    list or putting into a map does not refresh the rest.
    ``incremental_cleanup_size`` is the number of entries checked on every
    state access (0 turns incremental cleanup off). Expired values are always
    dropped when read; ``cleanup_full_snapshot`` also keeps them out of checkpoints.
    """

    ttl: timedelta
    update_type: UpdateType = UpdateType.ON_CREATE_AND_WRITE
    visibility: StateVisibility = StateVisibility.NEVER_RETURN_EXPIRED
    cleanup_full_snapshot: bool = False
    incremental_cleanup_size: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.ttl, timedelta) or self.ttl <= timedelta(0):
            raise InvalidArgumentError(f"TTL {self.ttl!r} must be a positive timedelta")
        check_int(self.incremental_cleanup_size, "incremental cleanup size", 0)

    @property
    def ttl_ms(self) -> int:
        return self.ttl // timedelta(milliseconds=1)

    @property
    def update_on_read(self) -> bool:
        return self.update_type is UpdateType.ON_READ_AND_WRITE

    @property
    def return_expired(self) -> bool:
        return self.visibility is StateVisibility.RETURN_EXPIRED_IF_NOT_CLEANED_UP

    def expiry_cutoff(self, now_ms: int) -> int:
        """Flink's rule, ``last_access + ttl <= now``, as one bound: a value last
        accessed at or before the cutoff has expired."""
        return now_ms - self.ttl_ms

    def is_expired(self, last_access_ms: int, now_ms: int) -> bool:
        return last_access_ms <= self.expiry_cutoff(now_ms)


Expirer = Callable[[Any, int], Any]
"""``(stored, now_ms) -> stored`` without expired parts, or None when nothing is left."""


def expirer_for(kind: StateKind, ttl: TtlConfig) -> Expirer:
    """How a stored object of ``kind`` loses its expired parts on access.

    This is Flink's incremental cleanup (``getUnexpiredOrNull``): a list keeps every
    unexpired element, a map every unexpired entry. Never mutates its input: the
    checkpoint writer applies it to objects shared with the live map, which
    copy-on-write only protects from writes made through the map. Returns the input
    itself when nothing expired.
    """

    def scalar(stored: tuple[Any, int], now_ms: int) -> Any:
        return None if stored[1] <= ttl.expiry_cutoff(now_ms) else stored

    def elements(stored: list[tuple[Any, int]], now_ms: int) -> Any:
        cutoff = ttl.expiry_cutoff(now_ms)
        kept = [item for item in stored if item[1] > cutoff]
        if len(kept) == len(stored):
            return stored
        return kept or None

    def entries(stored: dict[Any, tuple[Any, int]], now_ms: int) -> Any:
        cutoff = ttl.expiry_cutoff(now_ms)
        kept = {k: item for k, item in stored.items() if item[1] > cutoff}
        if len(kept) == len(stored):
            return stored
        return kept or None

    if kind is StateKind.LIST:
        return elements
    if kind is StateKind.MAP:
        return entries
    return scalar


def snapshot_expirer_for(kind: StateKind, ttl: TtlConfig) -> Expirer:
    """What full-snapshot cleanup keeps of a stored object of ``kind``.

    As :func:`expirer_for`, except for lists: Flink's list transformer stops at the
    first unexpired element and keeps it and everything after it, expired or not
    (``STOP_ON_FIRST_INCLUDED``), since elements are usually appended in time order.
    """
    if kind is not StateKind.LIST:
        return expirer_for(kind, ttl)

    def leading_expired_dropped(stored: list[tuple[Any, int]], now_ms: int) -> Any:
        cutoff = ttl.expiry_cutoff(now_ms)
        for index, item in enumerate(stored):
            if item[1] > cutoff:
                return stored[index:] if index else stored
        return None

    return leading_expired_dropped


@dataclass(frozen=True)
class StateDeclaration:
    """What a keyed state stores, without the functions a program folds it with.

    The checkpoint metadata records exactly this; a program's descriptor must
    declare the same to restore the state.
    """

    name: str
    kind: StateKind
    namespace_type: DataType
    schemas: Mapping[str, ValueSchema] = field(hash=False)
    ttl: TtlConfig | None = None

    def __post_init__(self) -> None:
        expected = set(VALUE_ROLES[self.kind])
        if set(self.schemas) != expected:
            raise InvalidArgumentError(
                f"{self.kind.value} state {self.name!r} needs value types for roles"
                f" {sorted(expected)}, got {sorted(self.schemas)}"
            )

    def same_types(self, other: StateDeclaration) -> bool:
        """Whether two declarations store the same thing (their names aside)."""
        return (self.kind, self.namespace_type, dict(self.schemas), self.ttl) == (
            other.kind, other.namespace_type, dict(other.schemas), other.ttl)

    def describe(self) -> str:
        types = ", ".join(f"{role}={json.dumps(s.avro)}" for role, s in self.schemas.items())
        return f"{self.kind.value} state {self.name!r} ({types}, namespace {self.namespace_type})"

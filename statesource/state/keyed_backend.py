"""``KeyedStateBackend``: Flink's heap keyed-state backend for one subtask.

The backend owns a key-group range, one :class:`StateTable` per registered
state and the :class:`KeyContext` its state handles read: the current key
(whose key group it computes once per key change) and the current namespace.
``snapshot`` does only the synchronous part of a checkpoint, a version bump and
bucket-array copy per map, so the program resumes at once while the checkpoint
writer iterates the returned snapshot in the background. Each snapshot also
carries which key groups of each state changed since the backend's *base*, the
last checkpoint its writer confirmed complete (:mod:`statesource.state.changes`),
for incremental checkpoints.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from statesource.checks import check_checkpoint_id
from statesource.errors import InvalidArgumentError, TypeMismatchError
from statesource.keyequality import key_canonicalizer
from statesource.keygroups import (
    KeyGroupRange,
    check_max_parallelism,
    compute_key_group_for_key_hash,
)
from statesource.state.changes import ChangeTracker
from statesource.state.clock import Clock, SystemClock
from statesource.state.descriptors import StateDescriptor
from statesource.state.key_context import KeyContext
from statesource.state.keyed_states import HANDLES, KeyedState
from statesource.state.statetable import StateTable, StateTableSnapshot
from statesource.types import BOOLEAN, BYTE, CHAR, INT, LONG, SHORT, STRING, DataType, key_type

_KEY_GROUP_CACHE_LIMIT = 1 << 18
_CACHEABLE: dict[DataType, type] = {
    STRING: str, CHAR: str, INT: int, LONG: int, SHORT: int, BYTE: int, BOOLEAN: bool,
}
"""Key types whose Python equality, for values of exactly this Python type, is Java's.

Floats are missing because ``0.0 == -0.0`` in Python while Java hashes them
apart, and composites because ``("a", True) == ("a", 1)``. For these types a valid
key is its own Java-equality form (``statesource.keyequality``), so a cached key
needs no canonicalising either.
"""


class KeyedStateBackend:
    """Keyed state of one subtask: the states of every key in ``key_group_range``."""

    def __init__(
        self,
        key_type_: str | DataType,
        max_parallelism: int,
        key_group_range: KeyGroupRange | None = None,
        *,
        clock: Clock | None = None,
    ) -> None:
        self.key_type = key_type(key_type_)
        self.max_parallelism = check_max_parallelism(max_parallelism)
        full_range = KeyGroupRange(0, max_parallelism - 1)
        self.key_group_range = full_range if key_group_range is None else key_group_range
        if self.key_group_range.intersection(full_range) != self.key_group_range or not len(
            self.key_group_range
        ):
            raise InvalidArgumentError(
                f"key-group range {self.key_group_range} is not a non-empty part of"
                f" {full_range} (max parallelism {max_parallelism})"
            )
        self.clock: Clock = clock or SystemClock()
        self._tables: dict[str, StateTable] = {}
        self._handles: dict[str, KeyedState] = {}
        self._key_context = KeyContext()
        self._key_group_of: Callable[[Any], int] = functools.partial(
            _key_group, self.key_type.java_hash, max_parallelism
        )
        self._canonical = key_canonicalizer(self.key_type, validate=False)
        self._cacheable = _CACHEABLE.get(self.key_type)
        self._key_group_cache: dict[Any, int] = {}
        self._changes = ChangeTracker()

    # -- current key and namespace -------------------------------------------------------

    def set_current_key(self, key: Any) -> None:
        """Make ``key`` current for every state handle; its key group is computed here, once.

        The key is kept in its Java-equality form (``statesource.keyequality``): keys
        Java calls equal find the same state, keys it tells apart (``0.0``/``-0.0``) do
        not. Streams revisit keys, so key groups are remembered (up to a bound) for key
        types where that is exact; a key of any other Python type is validated afresh.
        """
        if type(key) is self._cacheable:
            key_group = self._key_group_cache.get(key)
            if key_group is None:
                key_group = self._key_group_of(key)
                self._canonical(key)  # refuses a string the format cannot store
                if len(self._key_group_cache) >= _KEY_GROUP_CACHE_LIMIT:
                    self._key_group_cache.clear()
                self._key_group_cache[key] = key_group
        else:
            key_group = self._key_group_of(key)
            key = self._canonical(key)
        index = key_group - self.key_group_range.start
        if not 0 <= index < len(self.key_group_range):
            raise InvalidArgumentError(
                f"key {key!r} belongs to key group {index + self.key_group_range.start}, outside"
                f" this backend's key-group range {self.key_group_range}"
            )
        context = self._key_context
        context.key = key
        context.key_group_index = index

    @property
    def current_key(self) -> Any:
        return self._key_context.key

    @property
    def current_key_group(self) -> int | None:
        index = self._key_context.key_group_index
        return None if index is None else index + self.key_group_range.start

    def set_current_namespace(self, namespace: Any) -> None:
        """The namespace (e.g. a window) that namespaced states act on from now on."""
        context = self._key_context
        context.namespace = namespace
        context.namespace_version += 1

    # -- states ----------------------------------------------------------------------------

    def get_state(self, descriptor: StateDescriptor) -> Any:
        """The handle for ``descriptor``; a name is bound to one declaration for good."""
        name = descriptor.name
        table = self._tables.get(name)
        if table is None:
            table = self._tables[name] = StateTable(descriptor, self.key_group_range)
        elif not table.descriptor.same_declaration(descriptor):
            raise TypeMismatchError(
                f"state {name!r} is already registered as {table.descriptor.describe()};"
                f" cannot register it again as {descriptor.describe()}"
            )
        elif type(table.descriptor) is StateDescriptor:
            table.descriptor = descriptor  # a restored state gets its functions now
        handle = self._handles.get(name)
        if handle is None or handle.descriptor is not table.descriptor:
            handle = self._handles[name] = HANDLES[descriptor.kind](
                self._key_context, table, self.clock)
        return handle

    def state_names(self) -> list[str]:
        return sorted(self._tables)

    def descriptor(self, name: str) -> StateDescriptor:
        return self._tables[name].descriptor

    def restore_state(
        self,
        declaration: StateDescriptor,
        key_groups: Iterable[tuple[int, Iterable[tuple[Any, Any, Any]]]],
    ) -> None:
        """Load a restored state: per key group, its stored ``(key, namespace, state)`` entries.

        Used by the checkpoint reader before the program asks for its states;
        the stored shapes are those of ``statesource.model``. The
        program's later ``get_state`` must declare the same types. Keys and
        namespaces are taken in their Java-equality form, whatever form they come in.
        """
        canonical_key = self._canonical
        canonical_namespace = key_canonicalizer(declaration.namespace_type, validate=False)
        table = self._tables.get(declaration.name)
        if table is None:
            table = self._tables[declaration.name] = StateTable(declaration, self.key_group_range)
        elif not table.descriptor.same_declaration(declaration):
            raise TypeMismatchError(
                f"state {declaration.name!r}: restored declaration {declaration.describe()}"
                f" differs from {table.descriptor.describe()}"
            )
        for key_group, entries in key_groups:
            if key_group not in self.key_group_range:
                raise InvalidArgumentError(
                    f"key group {key_group} is outside this backend's range"
                    f" {self.key_group_range}"
                )
            state_map = table.map_for(key_group)
            for key, namespace, stored in entries:
                state_map.put(canonical_key(key), canonical_namespace(namespace), stored)
        table.changes.mark_all()

    # -- snapshots -------------------------------------------------------------------------

    def snapshot(self, checkpoint_id: int) -> KeyedBackendSnapshot:
        """The synchronous part of a checkpoint: every map's snapshot, taken now.

        The returned object stays valid while the program keeps changing the
        backend; close it when written, which releases the map versions. Once
        its checkpoint is committed, call its :meth:`KeyedBackendSnapshot.completed`
        so that later snapshots count changes from it.
        """
        check_checkpoint_id(checkpoint_id)
        tracker = self._changes
        with tracker.lock:
            sequence = tracker.next_sequence()
            states = tuple(self._tables[name].snapshot(sequence) for name in sorted(self._tables))
            base = tracker.base
        return KeyedBackendSnapshot(
            checkpoint_id=checkpoint_id,
            timestamp_ms=self.clock.now_ms(),
            key_type=self.key_type,
            max_parallelism=self.max_parallelism,
            key_group_range=self.key_group_range,
            states=states,
            base=base,
            on_complete=functools.partial(self._checkpoint_completed, sequence),
        )

    def restored_from(self, token: Any) -> None:
        """Declare every state exactly as checkpoint ``token`` holds it (after a restore).

        The next incremental checkpoint then builds on that checkpoint rather
        than writing everything; ``token`` is the checkpoint writer's.
        """
        self._changes.rebase(token, [table.changes for table in self._tables.values()])

    def _checkpoint_completed(self, sequence: int, token: Any) -> bool:
        return self._changes.complete(sequence, token,
                                      [table.changes for table in self._tables.values()])


def _key_group(java_hash: Callable[[Any], int], max_parallelism: int, key: Any) -> int:
    if key is None:
        raise InvalidArgumentError("the current key cannot be None")
    return compute_key_group_for_key_hash(java_hash(key), max_parallelism)


@dataclass
class KeyedBackendSnapshot:
    """A backend's keyed state at one instant, iterable per state and per key group."""

    checkpoint_id: int
    timestamp_ms: int
    key_type: DataType
    max_parallelism: int
    key_group_range: KeyGroupRange
    states: tuple[StateTableSnapshot, ...]
    base: Any = None
    """The token of the backend's base checkpoint when this snapshot was taken (None: none);
    each state's ``changed`` flags count from it."""
    on_complete: Callable[[Any], bool] | None = None
    closed: bool = field(default=False, init=False)

    def __iter__(self) -> Iterator[StateTableSnapshot]:
        return iter(self.states)

    def completed(self, token: Any) -> bool:
        """Report this snapshot's checkpoint committed, as ``token`` (the next base).

        Only a committed checkpoint may become a base: a failed one must not
        make the backend forget what changed. Returns whether the base moved
        (not when a later snapshot's checkpoint completed first).
        """
        return self.on_complete is not None and self.on_complete(token)

    def close(self) -> None:
        """Release every map version this snapshot holds; safe to call twice."""
        if not self.closed:
            self.closed = True
            for state in self.states:
                state.release()

    def __enter__(self) -> KeyedBackendSnapshot:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

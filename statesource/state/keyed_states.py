"""The state handles a program uses: Value, List, Map, Reducing, Aggregating.

A handle acts on its backend's current key and (for namespaced states) its
current namespace, read from the backend's :class:`KeyContext`. It reaches the
key group's map directly through the index the backend computed once per key
change, so the hot path is one list index and one map call. Writes are
type-checked against the declared schema, so a bad value fails at the line that
wrote it rather than in a background snapshot.

Reads and writes go through the copy-on-write map, whose ``get`` and
``transform`` hand out a private copy of any object still shared with a
running snapshot: mutating what they return in place is therefore safe.

Every write first notes the entry as changed in the table's changes
(:mod:`statesource.state.changes`), with its state before the first change since
the last snapshot, so that an incremental checkpoint knows which entries (or, past
a bound, which whole key groups) to write. Anything that may change a stored
object goes through :meth:`KeyedState._locate_for_write` or ``_mark_changed``.

TTL: whether a stored object (or which parts of it) expired is decided only by
the expirer of :mod:`statesource.model`, which the checkpoint writer uses too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from statesource.errors import InvalidArgumentError, StateSourceError
from statesource.keyequality import key_canonicalizer
from statesource.model import Expirer, StateKind, expirer_for
from statesource.state.clock import Clock
from statesource.state.descriptors import AggregatingStateDescriptor, ReducingStateDescriptor
from statesource.state.key_context import KeyContext
from statesource.state.statemap_visitor import IncrementalVisitor
from statesource.state.statetable import StateTable
from statesource.types import VOID


class KeyedState:
    """What every handle shares: where its entry lives, TTL, and clear()."""

    def __init__(self, context: KeyContext, table: StateTable, clock: Clock) -> None:
        self._context = context
        self._maps = table.maps
        self._note_change = table.changes.note
        self.descriptor = table.descriptor
        self._namespace_type = self.descriptor.namespace_type
        self._namespaced = self._namespace_type is not VOID
        self._validators = {role: schema.validate
                            for role, schema in self.descriptor.schemas.items()}
        self._canonical_namespace = key_canonicalizer(self._namespace_type)
        self._checked_namespace_version = -1
        self._namespace: Any = None
        ttl = self.descriptor.ttl
        self._ttl = ttl
        if ttl is not None:
            self._clock = clock
            self._expire = expirer_for(self.descriptor.kind, ttl)
            self._cleanup = (
                _IncrementalCleanup(table, self._expire, ttl.incremental_cleanup_size, clock)
                if ttl.incremental_cleanup_size else None
            )

    @property
    def name(self) -> str:
        return self.descriptor.name

    def _locate(self) -> tuple[Any, Any, Any]:
        """The current key's map, the key, and this state's namespace."""
        context = self._context
        index = context.key_group_index
        if index is None:
            raise InvalidArgumentError(
                f"state {self.name!r} used before set_current_key() was called"
            )
        if not self._namespaced:
            return self._maps[index], context.key, None
        if context.namespace_version != self._checked_namespace_version:
            self._namespace = self._check_namespace(context.namespace)
            self._checked_namespace_version = context.namespace_version
        return self._maps[index], context.key, self._namespace

    def _locate_for_write(self) -> tuple[Any, Any, Any]:
        """:meth:`_locate`, flagging the key group as changed since the last checkpoint."""
        located = self._locate()
        self._mark_changed()
        return located

    def _mark_changed(self) -> None:
        """The current entry is about to change (incremental checkpoints track it)."""
        index = self._context.key_group_index
        assert index is not None
        self._note_change(index, self._context.key,
                          self._namespace if self._namespaced else None, self._maps[index])

    def _check_namespace(self, namespace: Any) -> Any:
        """The namespace in its Java-equality form, as keys are (``statesource.keyequality``)."""
        if namespace is None:
            raise InvalidArgumentError(
                f"state {self.name!r} has {self._namespace_type} namespaces:"
                " call set_current_namespace() first"
            )
        try:
            return self._canonical_namespace(namespace)
        except StateSourceError as error:
            raise type(error)(f"namespace of state {self.name!r}: {error}") from None

    def _check(self, role: str, value: Any) -> None:
        try:
            self._validators[role](value)
        except StateSourceError as error:
            raise type(error)(f"state {self.name!r} {role}: {error}") from None

    def _now(self) -> int:
        if self._cleanup is not None:
            self._cleanup.run()
        return self._clock.now_ms()

    def _read_with_ttl(self) -> Any:
        """Flink's TTL read of a scalar state's ``(value, last_access)``, or None.

        An expired value leaves the map and is returned only if the visibility
        allows; an unexpired one is refreshed first when reads count as accesses.
        """
        ttl = self._ttl
        assert ttl is not None
        state_map, key, namespace = self._locate()
        now = self._now()
        stored = state_map.get(key, namespace)
        if stored is None:
            return None
        if stored[1] <= ttl.expiry_cutoff(now):
            self._mark_changed()
            state_map.remove(key, namespace)
            return stored if ttl.return_expired else None
        if ttl.update_on_read:
            self._mark_changed()
            state_map.put(key, namespace, (stored[0], now))
        return stored

    def _read_scalar(self) -> Any:
        """The value of a Value, Reducing or Aggregating state (None when there is none)."""
        if self._ttl is None:
            state_map, key, namespace = self._locate()
            return state_map.get(key, namespace)
        stored = self._read_with_ttl()
        return None if stored is None else stored[0]

    def clear(self) -> None:
        state_map, key, namespace = self._locate_for_write()
        state_map.remove(key, namespace)


class ValueState(KeyedState):
    value = KeyedState._read_scalar  # an alias, not a method calling it: reads are hot

    def update(self, value: Any) -> None:
        """Set the value; ``None`` clears it, as in Flink."""
        if value is None:
            self.clear()
            return
        self._check("value", value)
        state_map, key, namespace = self._locate_for_write()
        state_map.put(key, namespace, value if self._ttl is None else (value, self._now()))


def _append(stored: list | None, elements: list) -> list:
    if stored is None:
        return elements
    stored.extend(elements)
    return stored


class ListState(KeyedState):
    def get(self) -> list:
        """The elements, in insertion order (a new list; empty when there is no state)."""
        if self._ttl is None:
            state_map, key, namespace = self._locate()
            stored = state_map.get(key, namespace)
            return [] if stored is None else list(stored)
        return self._read_elements_with_ttl()

    def _read_elements_with_ttl(self) -> list:
        """Flink's ``TtlListState.get``: storage changes only on refresh or when all expired.

        Reading returns the unexpired elements (all of them if the visibility allows)
        but leaves expired ones in place, unless every element has expired: then the
        state is cleared. When reads count as accesses, the unexpired elements are
        stored back with the read's timestamp, and only then do the expired ones go.
        """
        ttl = self._ttl
        assert ttl is not None
        state_map, key, namespace = self._locate()
        now = self._now()
        stored = state_map.get(key, namespace)
        if stored is None:
            return []
        cutoff = ttl.expiry_cutoff(now)
        unexpired = [element for element, last_access in stored if last_access > cutoff]
        if not unexpired:
            self._mark_changed()
            state_map.remove(key, namespace)
        elif ttl.update_on_read:
            self._mark_changed()
            state_map.put(key, namespace, [(element, now) for element in unexpired])
        return [element for element, _ in stored] if ttl.return_expired else unexpired

    def add(self, element: Any) -> None:
        self.add_all((element,))

    def add_all(self, elements: Iterable[Any]) -> None:
        fresh = self._checked_elements(elements)
        if fresh:
            state_map, key, namespace = self._locate_for_write()
            state_map.transform(key, namespace, fresh, _append)

    def update(self, elements: Iterable[Any]) -> None:
        """Replace the elements; an empty list clears the state."""
        fresh = self._checked_elements(elements)
        state_map, key, namespace = self._locate_for_write()
        if fresh:
            state_map.put(key, namespace, fresh)
        else:
            state_map.remove(key, namespace)

    def _checked_elements(self, elements: Iterable[Any]) -> list:
        if isinstance(elements, (str, bytes)) or not isinstance(elements, Iterable):
            raise InvalidArgumentError(
                f"state {self.name!r}: expected an iterable of elements, got {elements!r}"
            )
        fresh = list(elements)
        for element in fresh:
            if element is None:
                raise InvalidArgumentError(f"state {self.name!r}: a list element cannot be None")
            self._check("element", element)
        if self._ttl is not None:
            now = self._now()
            fresh = [(element, now) for element in fresh]
        return fresh


def _put_entries(stored: dict | None, entries: dict) -> dict:
    if stored is None:
        return entries
    stored.update(entries)
    return stored


_MISSING = object()


class MapState(KeyedState):
    """Map state; with TTL each entry expires and is refreshed on its own, as in Flink's
    ``TtlMapState``: reading one user key touches only that entry, iterating touches
    the entries it passes."""

    def _entries(self) -> dict:
        """The entries an iteration sees, after TTL cleanup (and refresh on read)."""
        state_map, key, namespace = self._locate()
        if self._ttl is None:
            return state_map.get(key, namespace) or {}
        ttl = self._ttl
        now = self._now()
        stored = state_map.get(key, namespace)
        if stored is None:
            return {}
        cutoff = ttl.expiry_cutoff(now)
        seen = {}
        for user_key, (user_value, last_access) in list(stored.items()):
            if last_access <= cutoff:
                self._mark_changed()
                del stored[user_key]
                if not ttl.return_expired:
                    continue
            elif ttl.update_on_read:
                self._mark_changed()
                stored[user_key] = (user_value, now)
            seen[user_key] = user_value
        if not stored:
            state_map.remove(key, namespace)
        return seen

    def _entry(self, user_key: Any) -> Any:
        """One entry's value (``_MISSING`` if absent), checking and refreshing only it."""
        state_map, key, namespace = self._locate()
        if self._ttl is None:
            return (state_map.get(key, namespace) or {}).get(user_key, _MISSING)
        ttl = self._ttl
        now = self._now()
        stored = state_map.get(key, namespace)
        if stored is None or user_key not in stored:
            return _MISSING
        user_value, last_access = stored[user_key]
        if last_access <= ttl.expiry_cutoff(now):
            self._mark_changed()
            del stored[user_key]
            if not stored:
                state_map.remove(key, namespace)
            return user_value if ttl.return_expired else _MISSING
        if ttl.update_on_read:
            self._mark_changed()
            stored[user_key] = (user_value, now)
        return user_value

    def get(self, user_key: Any) -> Any:
        value = self._entry(user_key)
        return None if value is _MISSING else value

    def contains(self, user_key: Any) -> bool:
        return self._entry(user_key) is not _MISSING

    def keys(self) -> list:
        return list(self._entries())

    def values(self) -> list:
        return list(self._entries().values())

    def items(self) -> list[tuple[Any, Any]]:
        return list(self._entries().items())

    def is_empty(self) -> bool:
        """Whether the map holds no entries, expired or not.

        Flink's ``TtlMapState.isEmpty`` asks the underlying map without a TTL check
        (after the access's incremental cleanup), so expired entries not yet cleaned
        up still count; iterate to see only live ones.
        """
        state_map, key, namespace = self._locate()
        if self._ttl is not None:
            self._now()
        return not state_map.get(key, namespace)

    def put(self, user_key: Any, user_value: Any) -> None:
        self.put_all({user_key: user_value})

    def put_all(self, entries: Mapping[Any, Any]) -> None:
        fresh = dict(entries)
        for user_key, user_value in fresh.items():
            self._check("user_key", user_key)
            self._check("user_value", user_value)
        if self._ttl is not None:
            now = self._now()
            fresh = {k: (v, now) for k, v in fresh.items()}
        if fresh:
            state_map, key, namespace = self._locate_for_write()
            state_map.transform(key, namespace, fresh, _put_entries)

    def remove(self, user_key: Any) -> None:
        """Remove one entry; the state itself disappears with its last entry, as in Flink."""
        state_map, key, namespace = self._locate_for_write()
        stored = state_map.get(key, namespace)
        if stored is None or user_key not in stored:
            return
        del stored[user_key]
        if not stored:
            state_map.remove(key, namespace)


class _FoldingState(KeyedState):
    """Reducing and Aggregating state: ``add`` folds a value into what is stored."""

    def _fold(self, stored: Any, value: Any) -> Any:
        raise NotImplementedError

    def add(self, value: Any) -> None:
        if value is None:
            raise InvalidArgumentError(f"state {self.name!r}: cannot add None")
        state_map, key, namespace = self._locate_for_write()
        if self._ttl is None:
            state_map.transform(key, namespace, value, self._fold)
            return
        now = self._now()
        expire, fold = self._expire, self._fold

        def fold_with_ttl(stored: Any, new: Any) -> Any:
            live = None if stored is None else expire(stored, now)
            return fold(None if live is None else live[0], new), now

        state_map.transform(key, namespace, value, fold_with_ttl)


class ReducingState(_FoldingState):
    def __init__(self, context: KeyContext, table: StateTable, clock: Clock) -> None:
        super().__init__(context, table, clock)
        descriptor = table.descriptor
        assert isinstance(descriptor, ReducingStateDescriptor)
        self._reduce = descriptor.reduce_function

    def _fold(self, stored: Any, value: Any) -> Any:
        self._check("value", value)
        result = value if stored is None else self._reduce(stored, value)
        if stored is not None:
            self._check("value", result)
        return result

    def get(self) -> Any:
        return self._read_scalar()


class AggregatingState(_FoldingState):
    def __init__(self, context: KeyContext, table: StateTable, clock: Clock) -> None:
        super().__init__(context, table, clock)
        descriptor = table.descriptor
        assert isinstance(descriptor, AggregatingStateDescriptor)
        self._function = descriptor.aggregate_function

    def _fold(self, stored: Any, value: Any) -> Any:
        accumulator = self._function.create_accumulator() if stored is None else stored
        accumulator = self._function.add(value, accumulator)
        self._check("accumulator", accumulator)
        return accumulator

    def get(self) -> Any:
        accumulator = self._read_scalar()
        return None if accumulator is None else self._function.get_result(accumulator)


HANDLES: dict[StateKind, Callable[[KeyContext, StateTable, Clock], KeyedState]] = {
    StateKind.VALUE: ValueState,
    StateKind.LIST: ListState,
    StateKind.MAP: MapState,
    StateKind.REDUCING: ReducingState,
    StateKind.AGGREGATING: AggregatingState,
}


class _IncrementalCleanup:
    """Flink's incremental TTL cleanup: each access checks a few entries, key group by key group."""

    def __init__(self, table: StateTable, expire: Expirer, size: int, clock: Clock) -> None:
        self._maps = table.maps
        self._note_change = table.changes.note
        self._expire = expire
        self._size = size
        self._clock = clock
        self._map_index = 0
        self._visitor: IncrementalVisitor | None = None

    def run(self) -> None:
        now = self._clock.now_ms()
        budget = self._size
        switches = 0
        while budget > 0 and switches <= len(self._maps):
            if self._visitor is None or not self._visitor.has_next():
                self._map_index = (self._map_index + 1) % len(self._maps)
                self._visitor = self._maps[self._map_index].incremental_visitor(self._size)
                switches += 1
                continue
            for entry in self._visitor.next_entries():
                budget -= 1
                kept = self._expire(entry.state, now)
                if kept is not entry.state:
                    self._note_change(self._map_index, entry.key, entry.namespace,
                                      self._maps[self._map_index])
                if kept is None:
                    self._visitor.remove(entry)
                elif kept is not entry.state:
                    self._visitor.update(entry, kept)

"""The incremental visitor of a ``CopyOnWriteStateMap``, for incremental TTL cleanup.

Unlike a snapshot, it walks the live map, a few buckets per call, while the program
keeps changing it in between calls.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

from statesource.errors import InvalidArgumentError

__all__ = ["IncrementalVisitor", "StateEntry", "VisitedMap"]


class VisitedMap(Protocol):
    """What a visitor needs of its map: the map's tables and chains, and two operations.

    A protocol rather than the map's class, because the map's module imports this one.
    """

    @property
    def _table(self) -> memoryview: ...

    @property
    def _new_table(self) -> memoryview | None: ...

    def _chain(self, slot: int) -> list[tuple[Any, Any, Any]]: ...

    def __len__(self) -> int: ...

    def remove(self, key: Any, namespace: Any) -> None: ...

    def put(self, key: Any, namespace: Any, state: Any) -> None: ...


class StateEntry(NamedTuple):
    """One entry handed out by an :class:`IncrementalVisitor` (a copy of its fields)."""

    key: Any
    namespace: Any
    state: Any


class IncrementalVisitor:
    """Walks a map a few buckets per call, tolerating changes made in between.

    Flink's ``StateIncrementalVisitor``: each :meth:`next_entries` returns the entries of
    the next non-empty chain, after scanning at most ``recommended_max_per_call`` empty
    buckets (so it may return an empty list while :meth:`has_next` is still true). It
    walks the primary table, then the rehash table if a rehash is in progress. Entries
    added, removed or moved by a rehash meanwhile may be missed or seen twice; it never
    fails, since it reads each chain whole at call time and tables the map dropped read as
    all empty. :meth:`remove` and :meth:`update` are the map's own operations, so
    copy-on-write applies.
    """

    __slots__ = ("_map", "_limit", "_table", "_position")

    def __init__(self, state_map: VisitedMap, recommended_max_per_call: int) -> None:
        if type(recommended_max_per_call) is not int or recommended_max_per_call < 1:
            raise InvalidArgumentError(
                f"recommended entries per call {recommended_max_per_call!r} must be an int >= 1"
            )
        self._map = state_map
        self._limit = recommended_max_per_call
        self._table: memoryview | None = state_map._table
        self._position = 0

    def has_next(self) -> bool:
        return self._table is not None and len(self._map) > 0

    def next_entries(self) -> list[StateEntry]:
        table = self._table
        if table is None:
            return []
        state_map = self._map
        entries: list[StateEntry] = []
        position = self._position
        end = len(table)
        scanned = 0
        while position < end and scanned < self._limit:
            head = table[position]
            position += 1
            if head:
                entries = [StateEntry(*fields) for fields in state_map._chain(head)]
                break
            scanned += 1
        self._position = position
        if position == end:
            rehashing = table is state_map._table and state_map._new_table is not None
            self._table = state_map._new_table if rehashing else None
            self._position = 0
        return entries

    def remove(self, entry: StateEntry) -> None:
        self._map.remove(entry.key, entry.namespace)

    def update(self, entry: StateEntry, new_state: Any) -> None:
        self._map.put(entry.key, entry.namespace, new_state)

"""Snapshots of a ``CopyOnWriteStateMap``: its entries at one instant, read while it changes.

A snapshot reads the map's entry pool, never the map itself: the map hands it the pool,
a copy of its bucket heads and the function to call on release, so this module needs
nothing of the map's module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import compress
from types import TracebackType
from typing import Generic, TypeVar

import numpy as np

from statesource.errors import StateSourceError
from statesource.state.entry_pool import NAMESPACE, STATE, STRIDE, EntryPool

__all__ = ["StateMapSnapshot"]

K = TypeVar("K")
N = TypeVar("N")
S = TypeVar("S")

_MIN_VECTOR_FRONTIER = 64  # below this many chains, finishing them in Python is cheaper


class StateMapSnapshot(Generic[K, N, S]):
    """The entries of one map at the instant ``snapshot()`` was called.

    Taking it copied only the bucket heads; the entries are the map's pool slots, which
    copy-on-write keeps unchanged (and unrecycled) until the snapshot is released. Reading
    never copies states: it hands out the objects the map held, which must therefore be
    treated as read-only.

    Iterating and :meth:`columns` may run on another thread while the owning thread keeps
    changing the map: they read the pool through one array copy, list slices and
    subscripts, each atomic under the GIL, and use only slots the map no longer writes
    (never exporting a buffer of an array the map may grow). Release the snapshot when
    done (or use it as a context manager): until then, every change to a shared entry
    costs the map a copy.
    """

    __slots__ = ("_version", "_heads", "_size", "_pool", "_release", "_released")

    def __init__(
        self,
        version: int,
        heads: memoryview,
        size: int,
        pool: EntryPool,
        release: Callable[[int], None],
    ) -> None:
        self._version = version
        self._heads: memoryview | None = heads
        self._size = size
        self._pool = pool
        self._release = release
        self._released = False

    @property
    def version(self) -> int:
        """The map version this snapshot holds (the map's ``state_map_version`` when taken)."""
        return self._version

    @property
    def released(self) -> bool:
        return self._released

    def __len__(self) -> int:
        """Number of entries at snapshot time."""
        return self._size

    def __iter__(self) -> Iterator[tuple[K, N, S]]:
        """Yield ``(key, namespace, state)`` of every entry at snapshot time, in the order
        of :meth:`columns`."""
        return zip(*self.columns())

    def columns(self) -> tuple[list[K], list[N], list[S]]:
        """Keys, namespaces and states as three lists, in pool slot order (bulk export).

        The chains are walked a level at a time with numpy, to mark the slots this
        snapshot holds; the fields are then picked from the records in slot order, which
        reads memory sequentially.
        """
        held = self._held_slots()
        end = STRIDE * len(held)
        records = self._pool._records
        return (
            list(compress(records[0:end:STRIDE], held)),
            list(compress(records[NAMESPACE:end:STRIDE], held)),
            list(compress(records[STATE:end:STRIDE], held)),
        )

    def _held_slots(self) -> bytes:
        """One byte per pool slot (from slot 0): 1 if this snapshot holds it, else 0."""
        heads = self._live_heads()
        live_next = self._pool._next
        # Links of held slots never change, so any copy has them right; a copy, because the
        # live array must not export its buffer (the map could no longer grow it).
        next_links = np.frombuffer(live_next[:], dtype=np.intc)
        held = np.zeros(len(next_links), dtype=np.bool_)
        frontier = np.frombuffer(heads, dtype=np.intc)
        frontier = frontier[frontier != 0]
        while len(frontier) > _MIN_VECTOR_FRONTIER:
            held[frontier] = True
            frontier = next_links[frontier]
            frontier = frontier[frontier != 0]
        rest = []  # the ends of the few longest chains, walked one by one
        for slot in frontier.tolist():
            while slot:
                rest.append(slot)
                slot = live_next[slot]
        held[rest] = True
        return held.tobytes()

    def release(self) -> None:
        """Tell the map this snapshot is no longer read; calling it again does nothing."""
        if not self._released:
            self._released = True
            self._heads = None  # free the copied heads now, on the releasing thread
            self._release(self._version)

    def __enter__(self) -> StateMapSnapshot[K, N, S]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()

    def _live_heads(self) -> memoryview:
        heads = self._heads
        if heads is None:
            raise StateSourceError(
                f"state map snapshot version {self._version} was released and cannot be read"
            )
        return heads

    def __repr__(self) -> str:
        state = "released" if self._released else "live"
        return f"StateMapSnapshot(version={self._version}, entries={self._size}, {state})"

"""Storage shared by ``CopyOnWriteStateMap`` and its snapshots: bucket tables, the entry
record layout, and :class:`StateMapSnapshot` itself.

Bucket tables are zero-filled ``memoryview`` objects of C ints (format ``"i"``) holding
slot numbers, 0 meaning "empty". Zero as the empty marker is what makes a new table free:
tables of 1 MiB and more are anonymous ``mmap`` regions, which the kernel hands out
already zeroed and only backs with memory page by page as buckets are first written, so
doubling a map of millions of entries allocates in microseconds instead of stalling for
milliseconds on a multi-megabyte fill. (Growing a table in chunks ahead of need was the
alternative; it pays for ``realloc`` copies instead, and keeps Flink's indexing no
simpler.) Memory from ``mmap`` is also returned to the system the moment a table is
dropped, without raising glibc's dynamic mmap threshold, which would otherwise turn later
large ``list``/``array`` growth into multi-millisecond copies. Small tables are
``bytearray``-backed, so thousands of small per-key-group maps do not each cost a kernel
mapping. Both kinds copy with ``memcpy`` through slice assignment, which is all a snapshot
needs.
"""

from __future__ import annotations

import mmap
from array import array
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any, Generic, TypeVar

from statesource.errors import StateSourceError

__all__ = ["StateMapSnapshot"]

K = TypeVar("K")
N = TypeVar("N")
S = TypeVar("S")

# Entry pool layout, shared with statemap.py. Entry (slot) i keeps its fields in
# records[STRIDE * i : STRIDE * i + STRIDE]: key, namespace, state, entry version, state
# version. One list, not five, so that a lookup finds key, namespace and state on the same
# cache line. Slot 0 is the null entry, so 0 can mean "no entry" in tables and links.
STRIDE = 5
NAMESPACE = 1
STATE = 2
ENTRY_VERSION = 3
STATE_VERSION = 4

_MMAP_MIN_BYTES = 1 << 20


def new_table(buckets: int) -> memoryview:
    """A table of ``buckets`` empty (zero) buckets."""
    size = 4 * buckets
    storage = mmap.mmap(-1, size) if size >= _MMAP_MIN_BYTES else bytearray(size)
    return memoryview(storage).cast("i")


def concat_tables(*parts: memoryview) -> memoryview:
    """A new table holding ``parts`` one after the other (one ``memcpy`` each)."""
    table = new_table(sum(len(part) for part in parts))
    start = 0
    for part in parts:
        end = start + len(part)
        table[start:end] = part
        start = end
    return table


class StateMapSnapshot(Generic[K, N, S]):
    """The entries of one ``CopyOnWriteStateMap`` at the instant ``snapshot()`` was called.

    Taking it copied only the bucket heads; the entries themselves are the live map's pool
    slots, which copy-on-write keeps unchanged (and unrecycled) until this snapshot is
    released. Reading never copies states: it hands out the very objects the map held,
    which must therefore be treated as read-only.

    Iterating and :meth:`columns` may run on another thread while the owning thread keeps
    changing the map: every read is a single list or array subscript, atomic under the GIL,
    of a slot the map no longer writes. Release the snapshot when done (or use it as a
    context manager); until then every change to a shared entry costs the map a copy.
    """

    __slots__ = ("_version", "_heads", "_size", "_records", "_next", "_release", "_released")

    def __init__(
        self,
        version: int,
        heads: memoryview,
        size: int,
        records: list[Any],
        next_links: array,
        release: Callable[[int], None],
    ) -> None:
        self._version = version
        self._heads = heads
        self._size = size
        self._records = records
        self._next = next_links
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
        """Yield ``(key, namespace, state)`` for every entry at snapshot time, bucket by bucket."""
        self._check_live()
        return self._entries()

    def _entries(self) -> Iterator[tuple[K, N, S]]:
        records = self._records
        next_links = self._next
        for slot in filter(None, self._heads):
            while slot:
                offset = STRIDE * slot
                yield records[offset], records[offset + NAMESPACE], records[offset + STATE]
                slot = next_links[slot]

    def columns(self) -> tuple[list[K], list[N], list[S]]:
        """Keys, namespaces and states as three lists, in iteration order (for bulk export)."""
        self._check_live()
        records = self._records
        next_links = self._next
        offsets = []
        add = offsets.append
        for slot in filter(None, self._heads):
            while slot:
                add(STRIDE * slot)
                slot = next_links[slot]
        get = records.__getitem__
        keys = list(map(get, offsets))
        namespaces = list(map(get, [offset + NAMESPACE for offset in offsets]))
        states = list(map(get, [offset + STATE for offset in offsets]))
        return keys, namespaces, states

    def release(self) -> None:
        """Tell the map this snapshot is no longer read; calling it again does nothing."""
        if not self._released:
            self._released = True
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

    def _check_live(self) -> None:
        if self._released:
            raise StateSourceError(
                f"state map snapshot version {self._version} was released and can no longer be read"
            )

    def __repr__(self) -> str:
        state = "released" if self._released else "live"
        return f"StateMapSnapshot(version={self._version}, entries={self._size}, {state})"

"""The bucket tables of a ``CopyOnWriteStateMap`` and Flink's incremental rehash.

Buckets hold the slot of their chain's first entry (see ``entry_pool``); capacities are
powers of two and a hash's bucket is its low bits (``hash & (capacity - 1)``). Growth
is checked before a new entry is added (``size > threshold``, threshold 3/4 capacity)
and only allocates a table of twice the size. Every operation then first moves whole
chains from the old table, bucket by bucket, until at least four entries moved; a
lookup uses the old table when ``hash & (old capacity - 1) >= rehash_index``. Old bucket
i only maps to new buckets i and i + old capacity.

Tables are zero-filled ``memoryview`` objects of C ints. Tables of 1 MiB and more are
private anonymous ``mmap`` regions, which the kernel hands out already zeroed and backs
with memory page by page as buckets are first written: a map of millions of entries
doubles without a multi-millisecond fill, and memory goes back to the system
(``discard``, then unmap) without touching glibc's dynamic mmap threshold, whose rise
would otherwise turn later large ``list`` and ``array`` growth into copies. Small tables
are ``bytearray``-backed, so thousands of small maps do not each cost a kernel mapping.
Both kinds copy with ``memcpy`` through slice assignment.
"""

from __future__ import annotations

import mmap
import sys
from array import array
from typing import Any

from statesource.errors import InvalidArgumentError
from statesource.state.entry_pool import ENTRY_VERSION, STRIDE, EntryPool

DEFAULT_CAPACITY = 128
MINIMUM_CAPACITY = 4
MAXIMUM_CAPACITY = 1 << 30
_MIN_TRANSFERRED_PER_REHASH_STEP = 4
# A rehash gives the old table's emptied pages back 2**16 buckets (256 KiB) at a time, so
# a big table is never freed all at once (unmapping 16 MiB takes about 2 ms).
_DISCARD_SHIFT = 16
_BUCKET_BYTES = array("i").itemsize  # a C int
_MMAP_MIN_BYTES = 1 << 20
_HAVE_MMAP_TABLES = hasattr(mmap, "MAP_PRIVATE") and hasattr(mmap, "MADV_DONTNEED")  # POSIX


def new_table(buckets: int) -> memoryview:
    """A table of ``buckets`` empty (zero) buckets."""
    size = _BUCKET_BYTES * buckets
    if size < _MMAP_MIN_BYTES or not _HAVE_MMAP_TABLES:
        return memoryview(bytearray(size)).cast("i")
    # Private, so that a forked process (e.g. a Spark worker) gets its own copy on write.
    storage = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    return memoryview(storage).cast("i")


def discard(table: memoryview, start: int, end: int) -> None:
    """Give the memory of the all-zero buckets ``start:end`` of an mmap table back.

    ``start`` must fall on a page boundary. The pages read as zeros afterwards, so the
    table stays valid.
    """
    storage = table.obj
    if isinstance(storage, mmap.mmap):
        length = _BUCKET_BYTES * (end - start) // mmap.PAGESIZE * mmap.PAGESIZE
        if length:
            storage.madvise(mmap.MADV_DONTNEED, _BUCKET_BYTES * start, length)


def concat_tables(*parts: memoryview) -> memoryview:
    """A new table holding ``parts`` one after the other (one ``memcpy`` each)."""
    table = new_table(sum(len(part) for part in parts))
    start = 0
    for part in parts:
        end = start + len(part)
        table[start:end] = part
        start = end
    return table


def table_capacity(requested: int) -> int:
    """``requested`` rounded up to a power of two within the capacity limits."""
    return max(MINIMUM_CAPACITY, min(MAXIMUM_CAPACITY, 1 << max(requested - 1, 0).bit_length()))


def _growth_threshold(capacity: int) -> int:
    # At the maximum capacity the map stops growing; chains just get longer.
    return sys.maxsize if capacity == MAXIMUM_CAPACITY else (capacity >> 1) + (capacity >> 2)


class BucketTables(EntryPool):
    """Where a map's chains hang: one table, or two while a rehash moves them.

    During a rehash ``_table`` is the old table and ``_new_table`` the one being filled;
    ``_mask`` is always ``len(_table) - 1``. The map starts a rehash once its size
    passes ``_threshold``.
    """

    __slots__ = ("_table", "_mask", "_new_table", "_rehash_index", "_threshold")

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self._table = new_table(capacity)
        self._mask = capacity - 1
        self._new_table: memoryview | None = None
        self._rehash_index = 0
        self._threshold = _growth_threshold(capacity)

    def _select(self, h: int) -> tuple[memoryview, int]:
        """The table and bucket responsible for hash ``h`` (no rehash step)."""
        new = self._new_table
        if new is not None and (h & self._mask) < self._rehash_index:
            return new, h & (len(new) - 1)
        return self._table, h & self._mask

    def _start_rehash(self) -> None:
        capacity = 2 * len(self._table)
        self._new_table = new_table(capacity)
        self._rehash_index = 0
        self._threshold = _growth_threshold(capacity)

    def _rehash_step_and_select(self, h: int) -> tuple[memoryview, int]:
        self._rehash_step()
        return self._select(h)

    def _finish_rehash(self) -> None:
        while self._new_table is not None:
            self._rehash_step()

    def _rehash_step(self) -> None:
        """Move whole old chains, in bucket order, until at least four entries moved.

        Old bucket i goes to new buckets i and i + old capacity. Moved entries are
        prepended; entries a snapshot may read are copied first, since their link changes.
        """
        old = self._table
        new = self._new_table
        assert new is not None
        new_mask = len(new) - 1
        end = len(old)
        records = self._records
        next_links = self._next
        hashes = self._hashes
        required = self._required
        start = index = self._rehash_index
        moved = 0
        while moved < _MIN_TRANSFERRED_PER_REHASH_STEP and index < end:
            slot = old[index]
            if slot:
                old[index] = 0
                while slot:
                    if required and records[STRIDE * slot + ENTRY_VERSION] < required:
                        slot = self._copy_entry(slot)
                    following = next_links[slot]
                    target = hashes[slot] & new_mask
                    next_links[slot] = new[target]
                    new[target] = slot
                    slot = following
                    moved += 1
            index += 1
        if index >> _DISCARD_SHIFT != start >> _DISCARD_SHIFT:
            discard(old, start >> _DISCARD_SHIFT << _DISCARD_SHIFT, index)
        if index == end:
            self._table = new
            self._mask = new_mask
            self._new_table = None
            self._rehash_index = 0
        else:
            self._rehash_index = index

    @property
    def capacity(self) -> int:
        """Bucket count; during a rehash, that of the table being filled."""
        return len(self._table if self._new_table is None else self._new_table)

    @property
    def is_rehashing(self) -> bool:
        return self._new_table is not None

    @property
    def rehash_index(self) -> int:
        """The first old bucket not moved yet (0 when not rehashing)."""
        return self._rehash_index

    def bucket_chain(self, bucket: int, *, rehash_table: bool = False) -> list[tuple[Any, Any]]:
        """(key, namespace) pairs chained at ``bucket``, head first, without side effects.

        ``rehash_table`` reads the table being filled by a rehash in progress.
        """
        table = self._new_table if rehash_table else self._table
        if table is None:
            raise InvalidArgumentError("the map is not rehashing, so it has no rehash table")
        return [(key, namespace) for key, namespace, _ in self._chain(table[bucket])]

"""``CopyOnWriteStateMap``: Apache Flink's heap-state map, one per key group.

It maps (key, namespace) to a state object and can take a snapshot at any moment in
time proportional to its bucket count, not its entry count, while the program keeps
changing it. The rules are Flink's:

* Chained buckets, power-of-two capacities, low-bit indexing (``hash & (capacity - 1)``).
  Growth is checked before a new entry is added (``size > threshold``, threshold 3/4
  capacity) and only allocates a table of twice the size. Every operation then first moves
  whole chains from the old table, bucket by bucket, until at least four entries moved; a
  lookup uses the old table when ``hash & (old capacity - 1) >= rehash_index``.
* Versions: each snapshot increments ``state_map_version`` and becomes live; the newest
  live version is ``highest_required_snapshot_version``. An entry created (or copied) at
  a version below it may be reachable from a snapshot, so before its ``next`` link or
  state pointer changes, it and every shared entry before it in its chain are copied
  (copy-on-write). A state object stored below that version is shared too: ``get`` and
  ``transform`` hand out a copy made by the state copier and keep it.

Entries are not objects but slots of a struct-of-arrays pool (see ``statemap_snapshot``
for the record layout): millions of small objects would each be tracked by the cyclic
garbage collector, which then stalls for hundreds of milliseconds walking them. Copying
an entry means taking a new slot with the same fields. A slot dropped from the map is
reused at once when no live snapshot can reach it (its entry version is at least the
highest required one); otherwise it is *retired* with the map version of the moment and
recycled only once every snapshot that may reach it is released. Reclaiming is done by
the owning thread, a couple of slots per allocation or removal, never by ``release``.

Threading: one thread owns the map and calls its operations. Snapshots may be read and
released from any thread: ``release`` only updates the version bookkeeping, under a lock
shared with ``snapshot``, and a stale read of it by the owner only costs a needless copy.
"""

from __future__ import annotations

import sys
import threading
from array import array
from collections.abc import Callable, Iterator
from typing import Any, Generic, NamedTuple, TypeVar

from statesource.errors import ConcurrentModificationError, InvalidArgumentError
from statesource.state.statemap_snapshot import (
    ENTRY_VERSION,
    NAMESPACE,
    STATE,
    STATE_VERSION,
    STRIDE,
    StateMapSnapshot,
    concat_tables,
    new_table,
)

__all__ = [
    "DEFAULT_CAPACITY",
    "MAXIMUM_CAPACITY",
    "MINIMUM_CAPACITY",
    "CopyOnWriteStateMap",
    "IncrementalVisitor",
    "StateEntry",
    "StateMapSnapshot",
    "bucket_hash",
]

K = TypeVar("K")
N = TypeVar("N")
S = TypeVar("S")
T = TypeVar("T")

DEFAULT_CAPACITY = 128
MINIMUM_CAPACITY = 4
MAXIMUM_CAPACITY = 1 << 30
_MIN_TRANSFERRED_PER_REHASH_STEP = 4
_RECLAIMED_PER_CALL = 2
_NO_LIVE_SNAPSHOT = sys.maxsize

# snapshot() and release() may run on different threads; they update a map's live
# versions, highest required and lowest live version together under this lock.
_VERSION_LOCK = threading.Lock()


def bucket_hash(key: Any, namespace: Any) -> int:
    """The hash that places (key, namespace) in a bucket: ``hash((key, namespace))``.

    The map's operations inline this expression. Unlike ``hash(key) ^ hash(namespace)``
    it mixes, so keys that are multiples of a power of two do not share buckets.
    """
    return hash((key, namespace))


def _table_capacity(requested: int) -> int:
    """``requested`` rounded up to a power of two within the capacity limits."""
    return max(MINIMUM_CAPACITY, min(MAXIMUM_CAPACITY, 1 << max(requested - 1, 0).bit_length()))


def _threshold(capacity: int) -> int:
    # At the maximum capacity the map stops growing; chains just get longer.
    return sys.maxsize if capacity == MAXIMUM_CAPACITY else (capacity >> 1) + (capacity >> 2)


class StateEntry(NamedTuple):
    """One entry as handed out by an :class:`IncrementalVisitor` (a copy of its fields)."""

    key: Any
    namespace: Any
    state: Any


class CopyOnWriteStateMap(Generic[K, N, S]):
    """(key, namespace) -> state with cheap snapshots; see the module docstring.

    Args:
        capacity: initial bucket count, rounded up to a power of two and clamped to
            ``[MINIMUM_CAPACITY, MAXIMUM_CAPACITY]``.
        copier: makes an independent copy of a state object shared with a snapshot before
            it is handed out for in-place changes; ``None`` declares states immutable, so
            they are never copied.

    Keys and namespaces are any hashable values, compared with ``==``.
    """

    __slots__ = (
        "_copier",
        "_table",
        "_mask",
        "_new_table",
        "_rehash_index",
        "_threshold",
        "_size",
        "_records",
        "_next",
        "_hashes",
        "_free",
        "_retired",
        "_version",
        "_required",
        "_lowest_live",
        "_live",
        "_mod_count",
        "_entry_copies",
        "_state_copies",
    )

    def __init__(
        self, capacity: int = DEFAULT_CAPACITY, copier: Callable[[S], S] | None = None
    ) -> None:
        if type(capacity) is not int or capacity < 0:
            raise InvalidArgumentError(f"state map capacity {capacity!r} must be an int >= 0")
        if copier is not None and not callable(copier):
            raise InvalidArgumentError(f"state copier {copier!r} must be callable or None")
        capacity = _table_capacity(capacity)
        self._copier = copier
        self._table = new_table(capacity)  # the primary table; the old one during a rehash
        self._mask = capacity - 1
        self._new_table: memoryview | None = None  # twice the size, during a rehash
        self._rehash_index = 0
        self._threshold = _threshold(capacity)
        self._size = 0
        self._records: list[Any] = [None] * STRIDE  # slot 0: the null entry
        self._next = array("i", [0])
        self._hashes = array("q", [0])
        self._free: list[int] = []
        self._retired: list[tuple[int, int]] = []  # (map version when dropped, slot)
        self._version = 0
        self._required = 0
        self._lowest_live = _NO_LIVE_SNAPSHOT
        self._live: set[int] = set()
        self._mod_count = 0
        self._entry_copies = 0
        self._state_copies = 0

    # -- operations ---------------------------------------------------------------------

    def get(self, key: K, namespace: N) -> S | None:
        """The state of (key, namespace), or ``None``; a state shared with a snapshot is
        copied first, so the caller may change the returned object in place."""
        h = hash((key, namespace))
        if self._new_table is None:
            table = self._table
            bucket = h & self._mask
        else:
            table, bucket = self._rehash_step_and_select(h)
        records = self._records
        slot = table[bucket]
        while slot:
            offset = STRIDE * slot
            if records[offset] == key and records[offset + NAMESPACE] == namespace:
                if records[offset + STATE_VERSION] < self._required:
                    return self._unshare_state(table, bucket, slot)
                return records[offset + STATE]
            slot = self._next[slot]
        return None

    def contains(self, key: K, namespace: N) -> bool:
        return self._find(key, namespace)[3] != 0

    def put(self, key: K, namespace: N, state: S) -> None:
        """Map (key, namespace) to ``state``, replacing any previous state object."""
        h = hash((key, namespace))
        if self._new_table is None:
            table = self._table
            bucket = h & self._mask
        else:
            table, bucket = self._rehash_step_and_select(h)
        records = self._records
        slot = table[bucket]
        while slot:
            offset = STRIDE * slot
            if records[offset] == key and records[offset + NAMESPACE] == namespace:
                if records[offset + ENTRY_VERSION] < self._required:
                    offset = STRIDE * self._copy_chain(table, bucket, slot)
                records[offset + STATE] = state
                records[offset + STATE_VERSION] = self._version
                return
            slot = self._next[slot]
        self._insert(table, bucket, h, key, namespace, state)

    def put_and_get_old(self, key: K, namespace: N, state: S) -> S | None:
        """Like :meth:`put`, returning the previous state (copied if a snapshot shares it)."""
        h, table, bucket, slot = self._find(key, namespace)
        if not slot:
            self._insert(table, bucket, h, key, namespace, state)
            return None
        records = self._records
        offset = STRIDE * self._writable(table, bucket, slot)
        old = records[offset + STATE]
        if records[offset + STATE_VERSION] < self._required:
            old = self._copy_state(old)
        records[offset + STATE] = state
        records[offset + STATE_VERSION] = self._version
        return old

    def transform(self, key: K, namespace: N, value: T, fn: Callable[[S | None, T], S]) -> None:
        """Store ``fn(old_state_or_None, value)``. ``fn`` may change the old state in place
        (a state shared with a snapshot is copied before it is passed) but must not use
        this map; if it raises, the map is unchanged."""
        h, table, bucket, slot = self._find(key, namespace)
        if not slot:
            new_state = fn(None, value)
            self._insert(table, bucket, h, key, namespace, new_state)
            return
        records = self._records
        offset = STRIDE * self._writable(table, bucket, slot)
        old = records[offset + STATE]
        if records[offset + STATE_VERSION] < self._required:
            old = self._copy_state(old)
        records[offset + STATE] = fn(old, value)
        records[offset + STATE_VERSION] = self._version

    def remove(self, key: K, namespace: N) -> None:
        slot = self._unlink(key, namespace)
        if slot:
            self._drop(slot)

    def remove_and_get_old(self, key: K, namespace: N) -> S | None:
        """Remove (key, namespace), returning its state (copied if a snapshot shares it)."""
        slot = self._unlink(key, namespace)
        if not slot:
            return None
        offset = STRIDE * slot
        old = self._records[offset + STATE]
        if self._records[offset + STATE_VERSION] < self._required:
            old = self._copy_state(old)
        self._drop(slot)
        return old

    def size(self) -> int:
        return self._size

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[tuple[K, N, S]]:
        """Yield ``(key, namespace, state)`` for every entry, failing fast.

        Any insertion or removal before the iteration ends makes the next step raise
        :class:`ConcurrentModificationError`; reads and updates of existing entries do
        not. A rehash in progress is finished first, so no later read moves entries
        under the iterator. States are yielded as stored, not copied: do not change them
        in place while a snapshot is live (use :meth:`get` for that).
        """
        while self._new_table is not None:
            self._rehash_step()
        return self._iterate(self._mod_count)

    def _iterate(self, expected_mod_count: int) -> Iterator[tuple[K, N, S]]:
        def check() -> None:
            if self._mod_count != expected_mod_count:
                raise ConcurrentModificationError("map was modified during iteration")

        records = self._records
        next_links = self._next
        for head in filter(None, self._table):
            # Read each chain whole while the map is known unchanged, and hold no slot
            # across a yield: the caller may make the map recycle it.
            check()
            chain = []
            slot = head
            while slot:
                offset = STRIDE * slot
                chain.append(
                    (records[offset], records[offset + NAMESPACE], records[offset + STATE])
                )
                slot = next_links[slot]
            for entry in chain:
                check()
                yield entry
        check()

    def incremental_visitor(self, recommended_max_per_call: int) -> IncrementalVisitor:
        """A visitor walking the map a few buckets per call, for incremental TTL cleanup."""
        return IncrementalVisitor(self, recommended_max_per_call)

    # -- snapshots ----------------------------------------------------------------------

    def snapshot(self) -> StateMapSnapshot[K, N, S]:
        """The synchronous part of a checkpoint: bump the version and copy the bucket heads.

        Mid-rehash, the heads are old[rehash_index:] + new[:rehash_index] +
        new[old_capacity:old_capacity + rehash_index], which hold every entry once.
        """
        with _VERSION_LOCK:
            self._version += 1
            version = self._version
            self._live.add(version)
            self._required = version
            if self._lowest_live == _NO_LIVE_SNAPSHOT:
                self._lowest_live = version
        new = self._new_table
        if new is None:
            heads = concat_tables(self._table)
        else:
            old = self._table
            index = self._rehash_index
            old_capacity = len(old)
            heads = concat_tables(
                old[index:], new[:index], new[old_capacity : old_capacity + index]
            )
        return StateMapSnapshot(
            version, heads, self._size, self._records, self._next, self._release_snapshot
        )

    def _release_snapshot(self, version: int) -> None:
        with _VERSION_LOCK:
            live = self._live
            if version in live:
                live.remove(version)
                self._required = max(live, default=0)
                self._lowest_live = min(live, default=_NO_LIVE_SNAPSHOT)

    # -- introspection (read-only, for tests and diagnostics) ----------------------------

    @property
    def capacity(self) -> int:
        """Bucket count; during a rehash, that of the table being filled."""
        return len(self._table if self._new_table is None else self._new_table)

    @property
    def is_rehashing(self) -> bool:
        return self._new_table is not None

    @property
    def rehash_index(self) -> int:
        """The first old-table bucket not yet moved (0 when not rehashing)."""
        return self._rehash_index

    @property
    def state_map_version(self) -> int:
        return self._version

    @property
    def highest_required_snapshot_version(self) -> int:
        return self._required

    @property
    def snapshot_versions(self) -> frozenset[int]:
        with _VERSION_LOCK:
            return frozenset(self._live)

    @property
    def entry_copies(self) -> int:
        """Entries copied so far (copy-on-write of a chain, or moved by a rehash while shared)."""
        return self._entry_copies

    @property
    def state_copies(self) -> int:
        """State objects copied so far by the copier."""
        return self._state_copies

    @property
    def pool_slots(self) -> int:
        """Pool slots ever allocated: in use, free, or retired until snapshots release them."""
        return len(self._next) - 1

    @property
    def retired_slots(self) -> int:
        return len(self._retired)

    def entry_versions(self, key: K, namespace: N) -> tuple[int, int] | None:
        """(entry version, state version) of (key, namespace), without side effects."""
        h = bucket_hash(key, namespace)
        if self._new_table is not None and (h & self._mask) < self._rehash_index:
            table = self._new_table
        else:
            table = self._table
        slot = self._chain_lookup(table[h & (len(table) - 1)], key, namespace)
        if not slot:
            return None
        offset = STRIDE * slot
        return self._records[offset + ENTRY_VERSION], self._records[offset + STATE_VERSION]

    def bucket_chain(self, bucket: int, *, rehash_table: bool = False) -> list[tuple[K, N]]:
        """The (key, namespace) pairs chained at ``bucket``, head first, without side effects.

        ``rehash_table`` selects the table being filled by a rehash in progress.
        """
        table = self._new_table if rehash_table else self._table
        if table is None:
            raise InvalidArgumentError("the map is not rehashing, so it has no rehash table")
        chain = []
        slot = table[bucket]
        while slot:
            offset = STRIDE * slot
            chain.append((self._records[offset], self._records[offset + NAMESPACE]))
            slot = self._next[slot]
        return chain

    # -- lookup helpers -----------------------------------------------------------------

    def _find(self, key: K, namespace: N) -> tuple[int, memoryview, int, int]:
        """Do the operation's rehash step; return hash, table, bucket and slot (0: absent)."""
        h = hash((key, namespace))
        if self._new_table is None:
            table = self._table
            bucket = h & self._mask
        else:
            table, bucket = self._rehash_step_and_select(h)
        return h, table, bucket, self._chain_lookup(table[bucket], key, namespace)

    def _chain_lookup(self, slot: int, key: K, namespace: N) -> int:
        records = self._records
        while slot:
            offset = STRIDE * slot
            if records[offset] == key and records[offset + NAMESPACE] == namespace:
                return slot
            slot = self._next[slot]
        return 0

    def _unlink(self, key: K, namespace: N) -> int:
        """Take (key, namespace)'s slot out of its chain and return it (0: absent)."""
        h = hash((key, namespace))
        if self._new_table is None:
            table = self._table
            bucket = h & self._mask
        else:
            table, bucket = self._rehash_step_and_select(h)
        records = self._records
        next_links = self._next
        previous = 0
        slot = table[bucket]
        while slot:
            offset = STRIDE * slot
            if records[offset] == key and records[offset + NAMESPACE] == namespace:
                following = next_links[slot]
                if not previous:
                    table[bucket] = following
                else:
                    next_links[self._writable(table, bucket, previous)] = following
                self._mod_count += 1
                self._size -= 1
                return slot
            previous = slot
            slot = next_links[slot]
        return 0

    # -- copy-on-write ------------------------------------------------------------------

    def _writable(self, table: memoryview, bucket: int, slot: int) -> int:
        """``slot``, or the copy to write to if a snapshot may reach it."""
        if self._records[STRIDE * slot + ENTRY_VERSION] < self._required:
            return self._copy_chain(table, bucket, slot)
        return slot

    def _copy_chain(self, table: memoryview, bucket: int, until: int) -> int:
        """Copy every shared entry from the chain head to ``until``; return ``until``'s copy.

        Each copy replaces its original in the chain: the bucket head or the previous
        entry's link is re-pointed, so snapshots keep the untouched originals.
        """
        records = self._records
        next_links = self._next
        required = self._required
        current = table[bucket]
        if records[STRIDE * current + ENTRY_VERSION] < required:
            writable = self._copy_entry(current)
            table[bucket] = writable
        else:
            writable = current
        while current != until:
            # Follow the writable entry's link: a retired original must not be read again.
            current = next_links[writable]
            if records[STRIDE * current + ENTRY_VERSION] < required:
                copy = self._copy_entry(current)
                next_links[writable] = copy
                writable = copy
            else:
                writable = current
        return writable

    def _copy_entry(self, slot: int) -> int:
        """A new slot with ``slot``'s fields at the current version; retire ``slot``."""
        records = self._records
        offset = STRIDE * slot
        copy = self._new_slot(
            records[offset],
            records[offset + NAMESPACE],
            records[offset + STATE],
            records[offset + STATE_VERSION],
            self._next[slot],
            self._hashes[slot],
        )
        self._retired.append((self._version, slot))
        self._entry_copies += 1
        return copy

    def _unshare_state(self, table: memoryview, bucket: int, slot: int) -> S:
        """``get`` of a shared state: store a copy (copying the entry if needed) and return it."""
        records = self._records
        if self._copier is None:
            return records[STRIDE * slot + STATE]
        offset = STRIDE * self._writable(table, bucket, slot)
        state = self._copy_state(records[offset + STATE])
        records[offset + STATE] = state
        records[offset + STATE_VERSION] = self._version
        return state

    def _copy_state(self, state: S) -> S:
        if self._copier is None:
            return state
        self._state_copies += 1
        return self._copier(state)

    # -- pool ---------------------------------------------------------------------------

    def _insert(
        self, table: memoryview, bucket: int, h: int, key: K, namespace: N, state: S
    ) -> None:
        """Prepend a new entry to ``table[bucket]``, first starting a rehash if due.

        ``table`` stays right when a rehash starts: every bucket is then still old.
        """
        self._mod_count += 1
        if self._size > self._threshold:
            self._start_rehash()
        table[bucket] = self._new_slot(key, namespace, state, self._version, table[bucket], h)
        self._size += 1

    def _new_slot(
        self, key: K, namespace: N, state: S, state_version: int, next_slot: int, h: int
    ) -> int:
        if self._retired:
            self._reclaim()
        version = self._version
        if self._free:
            slot = self._free.pop()
            offset = STRIDE * slot
            self._records[offset : offset + STRIDE] = (
                key,
                namespace,
                state,
                version,
                state_version,
            )
            self._next[slot] = next_slot
            self._hashes[slot] = h
        else:
            slot = len(self._next)
            self._records.extend((key, namespace, state, version, state_version))
            self._next.append(next_slot)
            self._hashes.append(h)
        return slot

    def _drop(self, slot: int) -> None:
        """``slot`` left the map: free it, or retire it while a snapshot may reach it."""
        if self._records[STRIDE * slot + ENTRY_VERSION] < self._required:
            self._retired.append((self._version, slot))
        else:
            self._free_slot(slot)
        if self._retired:
            self._reclaim()

    def _reclaim(self) -> None:
        """Free a few retired slots no live snapshot can reach any more.

        A slot retired at version D is reachable only from snapshots of version <= D.
        Retirement versions never decrease along the list, so popping from its end, while
        the newest one is below the lowest live version, is safe (if sometimes late).
        """
        retired = self._retired
        for _ in range(_RECLAIMED_PER_CALL):
            if not retired or retired[-1][0] >= self._lowest_live:
                return
            self._free_slot(retired.pop()[1])

    def _free_slot(self, slot: int) -> None:
        offset = STRIDE * slot
        self._records[offset : offset + STATE + 1] = (None, None, None)
        self._free.append(slot)

    # -- incremental rehash -------------------------------------------------------------

    def _start_rehash(self) -> None:
        capacity = 2 * len(self._table)
        self._new_table = new_table(capacity)
        self._rehash_index = 0
        self._threshold = _threshold(capacity)

    def _rehash_step_and_select(self, h: int) -> tuple[memoryview, int]:
        """Do one rehash step, then return the table and bucket responsible for ``h``."""
        self._rehash_step()
        new = self._new_table
        if new is not None and (h & self._mask) < self._rehash_index:
            return new, h & (len(new) - 1)
        return self._table, h & self._mask

    def _rehash_step(self) -> None:
        """Move whole old chains, in bucket order, until at least four entries moved.

        Old bucket i goes to new buckets i and i + old capacity; moved entries are
        prepended, and shared ones copied first since their link changes.
        """
        old = self._table
        new = self._new_table
        new_mask = len(new) - 1
        records = self._records
        next_links = self._next
        hashes = self._hashes
        index = self._rehash_index
        moved = 0
        while moved < _MIN_TRANSFERRED_PER_REHASH_STEP:
            slot = old[index]
            while slot:
                if records[STRIDE * slot + ENTRY_VERSION] < self._required:
                    slot = self._copy_entry(slot)
                following = next_links[slot]
                target = hashes[slot] & new_mask
                next_links[slot] = new[target]
                new[target] = slot
                slot = following
                moved += 1
            old[index] = 0
            index += 1
            if index == len(old):
                self._table = new
                self._mask = new_mask
                self._new_table = None
                self._rehash_index = 0
                return
        self._rehash_index = index

    def __repr__(self) -> str:
        return (
            f"CopyOnWriteStateMap(size={self._size}, capacity={self.capacity}, "
            f"version={self._version}, live_snapshots={sorted(self.snapshot_versions)})"
        )


class IncrementalVisitor:
    """Walks a map a few buckets per call, tolerating changes made in between.

    Flink's ``StateIncrementalVisitor``: each :meth:`next_entries` returns the entries of
    the next non-empty chain, scanning at most ``recommended_max_per_call`` empty buckets
    first (so it may return an empty list while :meth:`has_next` is still true). It walks
    the primary table, then the rehash table if a rehash is in progress. Entries added,
    removed or moved by a rehash meanwhile may be missed or seen twice; it never fails.
    :meth:`remove` and :meth:`update` go through the map's own operations, so
    copy-on-write applies.
    """

    __slots__ = ("_map", "_limit", "_table", "_position")

    def __init__(
        self, state_map: CopyOnWriteStateMap[Any, Any, Any], recommended_max_per_call: int
    ) -> None:
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
        records = state_map._records
        next_links = state_map._next
        entries: list[StateEntry] = []
        position = self._position
        end = len(table)
        scanned = 0
        # Tables the map dropped are all zeros by then, so a stale table reads as empty.
        while position < end and scanned < self._limit:
            slot = table[position]
            position += 1
            if slot:
                while slot:
                    offset = STRIDE * slot
                    entries.append(
                        StateEntry(
                            records[offset], records[offset + NAMESPACE], records[offset + STATE]
                        )
                    )
                    slot = next_links[slot]
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

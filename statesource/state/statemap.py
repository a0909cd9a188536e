"""``CopyOnWriteStateMap``: Apache Flink's heap-state map, one per key group.

It maps (key, namespace) to a state object and takes snapshots in time proportional to
its bucket count, not its entry count, while the program keeps changing it. The rules
are Flink's. This module applies them to the storage it builds on: the entry pool
(``entry_pool``) and the bucket tables with their incremental rehash (``bucket_tables``).
Snapshots (``statemap_snapshot``) and the incremental visitor (``statemap_visitor``) are
the readers that run while the map changes.

* Chained buckets, power-of-two capacities, low-bit indexing, grown by an incremental
  rehash: see ``bucket_tables``.
* Versions: each snapshot increments ``state_map_version`` and becomes live; the newest
  live version is ``highest_required_snapshot_version``. An entry created (or copied) at a
  version below it may be reachable from a snapshot, so before its link or state pointer
  changes, it and every shared entry before it in its chain are copied (copy-on-write).
  A state object stored below that version is shared too: ``get`` and ``transform``
  hand out a copy made by the state copier and keep it; ``put`` just replaces it.
* A dropped entry a snapshot may still read is retired, not recycled, until the
  snapshots that may read it are released.

Threading: one thread owns the map and calls its operations. Snapshots may be read and
released from any thread: ``release`` only updates the version bookkeeping, under a lock
shared with ``snapshot``, and a stale read of it by the owner only costs a needless copy.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from statesource.errors import ConcurrentModificationError, InvalidArgumentError
from statesource.state.bucket_tables import (
    DEFAULT_CAPACITY,
    MAXIMUM_CAPACITY,
    MINIMUM_CAPACITY,
    BucketTables,
    concat_tables,
    table_capacity,
)
from statesource.state.entry_pool import (
    ENTRY_VERSION,
    NAMESPACE,
    NO_LIVE_SNAPSHOT,
    STATE,
    STATE_VERSION,
    STRIDE,
)
from statesource.state.statemap_snapshot import StateMapSnapshot
from statesource.state.statemap_visitor import IncrementalVisitor, StateEntry

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

# snapshot() and release() may run on different threads; they update a map's live
# versions, highest required and lowest live version together under this lock.
_VERSION_LOCK = threading.Lock()


def bucket_hash(key: Any, namespace: Any) -> int:
    """The hash that places (key, namespace) in a bucket: ``hash((key, namespace))``.

    The map's operations inline this expression. Unlike ``hash(key) ^ hash(namespace)``
    it mixes, so keys that are multiples of a power of two do not share buckets.
    """
    return hash((key, namespace))


@dataclass(frozen=True)
class ChangedEntries:
    """A key group's changed entries as three columns: their ``(key, namespace)``, their
    stored ``states`` now and their ``priors`` (the stored states at the base), None for a
    state that does not exist. Columns, not one tuple per entry: a checkpoint takes them
    while the program waits, and C-level copies of the tracking dicts are what costs least.
    """

    entries: Collection[tuple[Any, Any]]
    states: Collection[Any]
    priors: Collection[Any]

    def __len__(self) -> int:
        return len(self.entries)


class CopyOnWriteStateMap(BucketTables, Generic[K, N, S]):
    """(key, namespace) -> state with cheap snapshots; see the module docstring.

    Args:
        capacity: initial bucket count, rounded up to a power of two and clamped to
            ``[MINIMUM_CAPACITY, MAXIMUM_CAPACITY]``.
        copier: makes an independent copy of a state object shared with a snapshot before
            it is handed out for in-place changes; ``None`` declares states immutable, so
            they are never copied.

    Keys and namespaces are any hashable values, compared with ``==``.
    """

    __slots__ = ("_copier", "_size", "_mod_count", "_live", "_state_copies", "_written")

    def __init__(
        self, capacity: int = DEFAULT_CAPACITY, copier: Callable[[S], S] | None = None
    ) -> None:
        if type(capacity) is not int or capacity < 0:
            raise InvalidArgumentError(f"state map capacity {capacity!r} must be an int >= 0")
        if copier is not None and not callable(copier):
            raise InvalidArgumentError(f"state copier {copier!r} must be callable or None")
        super().__init__(table_capacity(capacity))
        self._copier = copier
        self._size = 0
        self._mod_count = 0  # insertions and removals, for fail-fast iteration
        self._live: set[int] = set()
        self._state_copies = 0
        self._written: dict[tuple[K, N], S | None] | None = None

    # -- operations ---------------------------------------------------------------------

    def get(self, key: K, namespace: N) -> S | None:
        """The state of (key, namespace), or ``None``. A state shared with a snapshot is
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
                # No live snapshot (required 0) is the common case: skip the version read.
                if self._required and records[offset + STATE_VERSION] < self._required:
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
                if self._required and records[offset + ENTRY_VERSION] < self._required:
                    offset = STRIDE * self._copy_chain(table, bucket, slot)
                records[offset + STATE] = state
                records[offset + STATE_VERSION] = self._version
                break
            slot = self._next[slot]
        else:
            self._insert(table, bucket, h, key, namespace, state)
        if self._written is not None:  # recorded once written: a failed write changes nothing
            self._written[key, namespace] = state

    def put_and_get_old(self, key: K, namespace: N, state: S) -> S | None:
        """Like :meth:`put`, returning the previous state (copied if a snapshot shares it)."""
        h, table, bucket, slot = self._find(key, namespace)
        if not slot:
            self._insert(table, bucket, h, key, namespace, state)
            old = None
        else:
            offset, old = self._open_for_update(table, bucket, slot)
            self._records[offset + STATE] = state
            self._records[offset + STATE_VERSION] = self._version
        if self._written is not None:
            self._written[key, namespace] = state
        return old

    def transform(self, key: K, namespace: N, value: T, fn: Callable[[S | None, T], S]) -> None:
        """Store ``fn(old_state_or_None, value)``. ``fn`` may change the old state in place
        (a state shared with a snapshot is copied before it is passed) but must not use
        this map; if it raises, the map holds the same states as before."""
        h, table, bucket, slot = self._find(key, namespace)
        if not slot:
            state = fn(None, value)
            self._insert(table, bucket, h, key, namespace, state)
        else:
            offset, old = self._open_for_update(table, bucket, slot)
            state = self._records[offset + STATE] = fn(old, value)
            self._records[offset + STATE_VERSION] = self._version
        if self._written is not None:
            self._written[key, namespace] = state

    def remove(self, key: K, namespace: N) -> None:
        slot = self._unlink(key, namespace)
        if slot:
            self._drop(slot)
            if self._written is not None:
                self._written[key, namespace] = None

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
        if self._written is not None:
            self._written[key, namespace] = None
        return old

    def size(self) -> int:
        return self._size

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[tuple[K, N, S]]:
        """Yield ``(key, namespace, state)`` of every entry, failing fast.

        An insertion or removal before the iteration ends makes the next step raise
        :class:`ConcurrentModificationError`; reads and updates of existing entries do
        not, because a rehash in progress is finished first, so no later read moves
        entries under the iterator. States are yielded as stored, not copied: do not
        change them in place while a snapshot is live (use :meth:`get` for that).
        """
        self._finish_rehash()
        return self._iterate(self._mod_count)

    def _iterate(self, expected_mod_count: int) -> Iterator[tuple[K, N, S]]:
        def check() -> None:
            if self._mod_count != expected_mod_count:
                raise ConcurrentModificationError("map was modified during iteration")

        for head in filter(None, self._table):
            # Read each chain whole while the map is known unchanged, and hold no slot
            # across a yield: the caller may make the map recycle it.
            check()
            for entry in self._chain(head):
                check()
                yield entry
        check()

    def incremental_visitor(self, recommended_max_per_call: int) -> IncrementalVisitor:
        """A visitor walking the map a few buckets per call, for incremental TTL cleanup."""
        return IncrementalVisitor(self, recommended_max_per_call)

    # -- snapshots ----------------------------------------------------------------------

    def snapshot(self) -> StateMapSnapshot[K, N, S]:
        """The synchronous part of a checkpoint: bump the version, copy the bucket heads.

        Mid-rehash the heads are old[rehash_index:] + new[:rehash_index] +
        new[old_capacity:old_capacity + rehash_index], which hold every entry once.
        """
        with _VERSION_LOCK:
            self._version += 1
            version = self._version
            self._live.add(version)
            self._required = version
            if self._lowest_live == NO_LIVE_SNAPSHOT:
                self._lowest_live = version
        new = self._new_table
        if new is None:
            heads = concat_tables(self._table)
        else:
            index = self._rehash_index
            old_capacity = len(self._table)
            heads = concat_tables(
                self._table[index:], new[:index], new[old_capacity : old_capacity + index]
            )
        return StateMapSnapshot(version, heads, self._size, self, self._release_snapshot)

    def _release_snapshot(self, version: int) -> None:
        with _VERSION_LOCK:
            live = self._live
            if version in live:
                live.remove(version)
                self._required = max(live, default=0)
                self._lowest_live = min(live, default=NO_LIVE_SNAPSHOT)

    # -- introspection (read-only, for tests and diagnostics) ----------------------------

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
    def state_copies(self) -> int:
        """State objects copied so far by the copier."""
        return self._state_copies

    def entry_versions(self, key: K, namespace: N) -> tuple[int, int] | None:
        """(entry version, state version) of (key, namespace), without side effects."""
        slot = self._peek_slot(key, namespace)
        if not slot:
            return None
        offset = STRIDE * slot
        return self._records[offset + ENTRY_VERSION], self._records[offset + STATE_VERSION]

    def peek(self, key: K, namespace: N) -> S | None:
        """The stored state of (key, namespace), without side effects: no rehash step and
        no copy, so the object may be shared with a snapshot and must not be changed."""
        return self._records[STRIDE * self._peek_slot(key, namespace) + STATE]

    def record_writes(self) -> dict[tuple[K, N], S | None]:
        """From now on, note the state every write leaves at each (key, namespace) (None:
        removed) in the returned dict, until :meth:`stop_recording`.

        Change tracking asks for this while it tracks a key group's entries: a checkpoint
        then finds the changed entries' states in the dict, where each was written (and
        was still in cache), instead of looking every one up again in the map.
        """
        self._written = {}
        return self._written

    def stop_recording(self) -> None:
        self._written = None

    def changed_entries(self, tracked: Mapping[tuple[K, N], Any],
                        written: Mapping[tuple[K, N], S | None]) -> ChangedEntries:
        """Each ``(key, namespace) -> prior`` of ``tracked``, in order, with its stored state
        as :meth:`peek` finds it: from ``written`` (what :meth:`record_writes` noted), else
        looked up in the map. Both dicts must be the caller's alone from now on: their
        views are kept, not copied."""
        entries, priors = tracked.keys(), tracked.values()
        if len(written) == len(tracked) and list(written) == list(entries):
            # The usual case: every tracked entry was written after it was noted, so both
            # dicts list the same entries in the same order.
            return ChangedEntries(entries, written.values(), priors)
        return ChangedEntries(entries, tuple(written[entry] if entry in written
                                            else self.peek(*entry) for entry in entries),
                              priors)

    def _peek_slot(self, key: K, namespace: N) -> int:
        table, bucket = self._select(bucket_hash(key, namespace))
        return self._chain_lookup(table[bucket], key, namespace)

    # -- lookup -------------------------------------------------------------------------

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
        h, table, bucket, slot = self._find(key, namespace)
        if not slot:
            return 0
        following = self._next[slot]
        head = table[bucket]
        if head == slot:
            table[bucket] = following
        else:
            previous = head
            while self._next[previous] != slot:
                previous = self._next[previous]
            self._next[self._writable(table, bucket, previous)] = following
        self._mod_count += 1
        self._size -= 1
        return slot

    # -- copy-on-write ------------------------------------------------------------------

    def _writable(self, table: memoryview, bucket: int, slot: int) -> int:
        """``slot``, or the copy to write to if a snapshot may read it."""
        if self._records[STRIDE * slot + ENTRY_VERSION] < self._required:
            return self._copy_chain(table, bucket, slot)
        return slot

    def _copy_chain(self, table: memoryview, bucket: int, until: int) -> int:
        """Copy every shared entry from the chain head to ``until``; return ``until``'s copy.

        Each copy takes its original's place: the bucket head or the previous entry's link
        is re-pointed, and snapshots keep the untouched originals.
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

    def _unshare_state(self, table: memoryview, bucket: int, slot: int) -> S:
        """``get`` of a shared state: store a copy (copying the entry if needed), return it."""
        if self._copier is None:
            return self._records[STRIDE * slot + STATE]
        offset = STRIDE * self._writable(table, bucket, slot)
        state = self._copy_state(self._records[offset + STATE])
        self._records[offset + STATE] = state
        self._records[offset + STATE_VERSION] = self._version
        if self._written is not None:
            self._written[self._records[offset], self._records[offset + NAMESPACE]] = state
        return state

    def _open_for_update(self, table: memoryview, bucket: int, slot: int) -> tuple[int, S]:
        """Make ``slot`` writable; return its record offset and state, copied if shared."""
        offset = STRIDE * self._writable(table, bucket, slot)
        state = self._records[offset + STATE]
        if self._records[offset + STATE_VERSION] < self._required:
            state = self._copy_state(state)
        return offset, state

    def _copy_state(self, state: S) -> S:
        if self._copier is None:
            return state
        self._state_copies += 1
        return self._copier(state)

    # -- adding entries ------------------------------------------------------------------

    def _insert(
        self, table: memoryview, bucket: int, h: int, key: K, namespace: N, state: S
    ) -> None:
        """Prepend a new entry to ``table[bucket]``, first starting a rehash if due.

        ``table`` stays right when a rehash starts: every bucket is then still old.
        """
        self._mod_count += 1
        if self._size > self._threshold:
            self._start_rehash()
        version = self._version
        if self._free or self._retired:
            slot = self._new_slot(key, namespace, state, version, version, table[bucket], h)
        else:  # _new_slot's append path, inlined: it is most of every insert
            slot = len(self._next)
            self._records.extend((key, namespace, state, version, version))
            self._next.append(table[bucket])
            self._hashes.append(h)
        table[bucket] = slot
        self._size += 1

    def __repr__(self) -> str:
        return (
            f"CopyOnWriteStateMap(size={self._size}, capacity={self.capacity}, "
            f"version={self._version}, live_snapshots={sorted(self.snapshot_versions)})"
        )

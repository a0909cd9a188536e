"""Worked examples and unit tests for CopyOnWriteStateMap.

The worked examples place entries in chosen buckets. The map's bucket for (key, ns) is
``bucket_hash(key, ns) & (capacity - 1)``; the helpers below search small ints for keys
(or a namespace) with the wanted buckets, so the examples hold whatever the hash function
is. Namespaces are ints: int hashes are not randomised, so every run sees the same layout.
"""

from __future__ import annotations

import gc
import sys
import threading
import weakref
from collections import Counter

import pytest

from statesource.errors import ConcurrentModificationError, InvalidArgumentError, StateSourceError
from statesource.state.bucket_tables import table_capacity
from statesource.state.statemap import (
    DEFAULT_CAPACITY,
    MAXIMUM_CAPACITY,
    CopyOnWriteStateMap,
    StateEntry,
    bucket_hash,
)

NS = 0


def bucket(key, capacity: int, namespace=NS) -> int:
    return bucket_hash(key, namespace) & (capacity - 1)


def keys_in_bucket(wanted: int, capacity: int, count: int, start: int = 0, namespace=NS):
    """The first ``count`` int keys >= start that fall into bucket ``wanted``."""
    found = []
    key = start
    while len(found) < count:
        if bucket(key, capacity, namespace) == wanted:
            found.append(key)
        key += 1
    return found


class CountingCopier:
    """A list copier that records what it copied."""

    def __init__(self) -> None:
        self.copied: list[list] = []

    def __call__(self, state: list) -> list:
        self.copied.append(state)
        return list(state)


def content(entries) -> Counter:
    """(key, namespace, state) triples as a multiset, lists made hashable."""
    return Counter((k, n, tuple(s) if isinstance(s, list) else s) for k, n, s in entries)


# -- construction ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requested", "capacity"),
    [(0, 4), (1, 4), (4, 4), (5, 8), (100, 128), (128, 128), (129, 256), (1000, 1024)],
)
def test_capacity_is_rounded_up_to_a_power_of_two(requested, capacity):
    assert CopyOnWriteStateMap(requested).capacity == capacity


def test_capacity_limits():
    assert CopyOnWriteStateMap().capacity == DEFAULT_CAPACITY == 128
    assert table_capacity(2**30 - 1) == MAXIMUM_CAPACITY == 2**30
    assert table_capacity(2**40) == MAXIMUM_CAPACITY


@pytest.mark.parametrize("capacity", [-1, 2.0, "128", None, True])
def test_invalid_capacity(capacity):
    with pytest.raises(InvalidArgumentError, match="capacity"):
        CopyOnWriteStateMap(capacity)


def test_invalid_copier():
    with pytest.raises(InvalidArgumentError, match="copier"):
        CopyOnWriteStateMap(copier="deepcopy")


# -- basic operations ----------------------------------------------------------------------


def test_operations_against_a_dict():
    m = CopyOnWriteStateMap(4)
    expected = {}
    for key in range(200):
        for namespace in ("a", ("w", 1), None):
            m.put(key, namespace, key)
            expected[(key, namespace)] = key
    assert len(m) == m.size() == 600
    assert all(m.get(k, n) == v for (k, n), v in expected.items())
    assert m.get(200, "a") is None and not m.contains(200, "a") and m.contains(5, None)
    assert m.put_and_get_old(5, "a", "five") == 5 and m.get(5, "a") == "five"
    assert m.put_and_get_old(999, "a", 1) is None and len(m) == 601
    assert m.remove_and_get_old(999, "a") == 1 and m.remove_and_get_old(999, "a") is None
    m.remove(5, "a")
    m.remove(5, "a")  # absent: nothing happens
    del expected[(5, "a")]
    assert len(m) == 599 and content(m) == content((k, n, v) for (k, n), v in expected.items())


def test_keys_with_equal_hashes_are_told_apart_by_equality():
    class Collider:
        def __init__(self, name):
            self.name = name

        def __hash__(self):
            return 7

        def __eq__(self, other):
            return isinstance(other, Collider) and other.name == self.name

    m = CopyOnWriteStateMap(4)
    for name in "abcdefgh":
        m.put(Collider(name), NS, name)
    assert [m.get(Collider(name), NS) for name in "abcdefgh"] == list("abcdefgh")
    m.remove(Collider("d"), NS)
    assert m.get(Collider("d"), NS) is None and len(m) == 7
    assert m.get(Collider("e"), NS) == "e"


def test_transform():
    m = CopyOnWriteStateMap(copier=list.copy)
    m.transform("k", NS, 1, lambda old, value: [value] if old is None else old + [value])
    m.transform("k", NS, 2, lambda old, value: [value] if old is None else old + [value])
    assert m.get("k", NS) == [1, 2]


def test_transform_that_raises_leaves_the_map_unchanged():
    m = CopyOnWriteStateMap()

    def fail(old, value):
        raise ValueError("no")

    with pytest.raises(ValueError):
        m.transform("k", NS, 1, fail)
    assert len(m) == 0 and not m.contains("k", NS)


# -- worked example: copy-on-write --------------------------------------------------------


def test_worked_example_copy_on_write():
    """Flink's example: three keys sharing one chain of a 4-bucket map.

    Flink's documentation uses keys 13, 23 and 42; Python's tuple hash never puts those
    three in one bucket, so k13 < k23 < k42 are the first three int keys that share a
    bucket. Inserted in that order and prepended, the chain reads k42 -> k23 -> k13.
    """
    k13, k23, k42 = keys_in_bucket(1, 4, 3)
    namespace = NS
    copier = CountingCopier()
    m = CopyOnWriteStateMap(4, copier=copier)
    states = {key: [key] for key in (k13, k23, k42)}
    for key in (k13, k23, k42):
        m.put(key, namespace, states[key])
    chain = m.bucket_chain(1)
    assert chain == [(k42, namespace), (k23, namespace), (k13, namespace)]

    def versions(key):
        return m.entry_versions(key, namespace)

    assert [versions(k) for k in (k13, k23, k42)] == [(0, 0)] * 3
    assert (m.entry_copies, m.state_copies, m.state_map_version) == (0, 0, 0)

    first = m.snapshot()
    assert first.version == 1 and m.state_map_version == 1
    assert m.highest_required_snapshot_version == 1 and m.snapshot_versions == {1}
    assert m.entry_copies == 0  # a snapshot copies bucket heads only

    # k13 is last in the chain: it and both shared entries before it are copied; put
    # replaces the state object, so no state is copied.
    m.put(k13, namespace, [2])
    assert (m.entry_copies, m.state_copies) == (3, 0)
    assert versions(k13) == (1, 1) and versions(k23) == (1, 0) and versions(k42) == (1, 0)
    assert m.bucket_chain(1) == chain  # same order, copied entries

    # k23's entry is already a copy, but its state object is still the snapshot's.
    got = m.get(k23, namespace)
    assert (m.entry_copies, m.state_copies) == (3, 1)
    assert got == [k23] and got is not states[k23] and copier.copied == [states[k23]]
    assert versions(k23) == (1, 1)
    got.append("changed")  # the caller owns the copy

    assert m.get(k42, namespace) == [k42]
    assert (m.entry_copies, m.state_copies) == (3, 2) and versions(k42) == (1, 1)
    assert m.get(k42, namespace) == [k42] and (m.entry_copies, m.state_copies) == (3, 2)

    assert content(first) == Counter(
        {(k13, namespace, (k13,)): 1, (k23, namespace, (k23,)): 1, (k42, namespace, (k42,)): 1}
    )
    first.release()
    assert m.highest_required_snapshot_version == 0 and m.snapshot_versions == frozenset()

    second = m.snapshot()
    assert second.version == 2 and m.highest_required_snapshot_version == 2
    # Removing k23 re-points its predecessor k42, which is shared with the second
    # snapshot: k42 is copied, k13 after it is not touched, no state is copied.
    m.remove(k23, namespace)
    assert (m.entry_copies, m.state_copies) == (4, 2)
    assert versions(k42) == (2, 1) and versions(k13) == (1, 1) and versions(k23) is None
    assert m.bucket_chain(1) == [(k42, namespace), (k13, namespace)]
    assert content(second) == Counter(
        {
            (k13, namespace, (2,)): 1,
            (k23, namespace, (k23, "changed")): 1,
            (k42, namespace, (k42,)): 1,
        }
    )
    second.release()
    assert m.snapshot_versions == frozenset() and m.highest_required_snapshot_version == 0
    assert states == {k13: [k13], k23: [k23], k42: [k42]}  # no state was ever changed in place


def test_worked_example_with_two_live_snapshots():
    """Hand-computed: one chain k42 -> k23 -> k13 under two live snapshots.

    Each write copies exactly the entries older than the newest live snapshot, each
    snapshot keeps what the map held when it was taken, and releasing the older one
    while the newer is live changes nothing the newer one reads.
    """
    k13, k23, k42 = keys_in_bucket(1, 4, 3)
    copier = CountingCopier()
    m = CopyOnWriteStateMap(4, copier=copier)
    for key in (k13, k23, k42):
        m.put(key, NS, [key])
    first = m.snapshot()  # version 1
    m.put(k13, NS, [2])  # all three entries are version 0 < 1: copied
    assert (m.entry_copies, m.state_copies) == (3, 0)
    second = m.snapshot()  # version 2; the copies are version 1 < 2, shared again
    got = m.get(k23, NS)  # copies k42 and k23 (not k13, after it) and k23's state
    assert (m.entry_copies, m.state_copies) == (5, 1)
    assert m.entry_versions(k23, NS) == (2, 2) and m.entry_versions(k42, NS) == (2, 0)
    assert m.entry_versions(k13, NS) == (1, 1)
    got.append("x")
    m.remove(k42, NS)  # the chain head: the bucket is re-pointed, nothing copied
    assert (m.entry_copies, m.state_copies) == (5, 1)
    assert m.highest_required_snapshot_version == 2 and m.snapshot_versions == {1, 2}
    assert content(first) == Counter({(k13, NS, (k13,)): 1, (k23, NS, (k23,)): 1,
                                      (k42, NS, (k42,)): 1})
    assert content(second) == Counter({(k13, NS, (2,)): 1, (k23, NS, (k23,)): 1,
                                       (k42, NS, (k42,)): 1})
    first.release()  # the newer snapshot is still live: version 2 stays required
    assert m.highest_required_snapshot_version == 2
    m.put(k13, NS, [3])  # k13's copy is version 1 < 2: copied again; k23 (version 2) not
    assert (m.entry_copies, m.state_copies) == (6, 1)
    assert content(second) == Counter({(k13, NS, (2,)): 1, (k23, NS, (k23,)): 1,
                                       (k42, NS, (k42,)): 1})
    second.release()
    m.put(k13, NS, [4])  # nothing live: changed in place
    assert m.entry_copies == 6
    assert content(m) == Counter({(k23, NS, (k23, "x")): 1, (k13, NS, (4,)): 1})


def test_unshared_entries_are_changed_in_place():
    m = CopyOnWriteStateMap(copier=list.copy)
    m.put("a", NS, [1])
    with m.snapshot():
        m.put("b", NS, [2])  # created after the snapshot: version 1, not shared
        m.get("b", NS).append(3)
        m.put("b", NS, [4])
        m.transform("b", NS, 5, lambda old, v: old + [v])
        assert (m.entry_copies, m.state_copies) == (0, 0)
    assert m.get("b", NS) == [4, 5]


def test_get_after_put_under_a_snapshot_does_not_copy_again():
    m = CopyOnWriteStateMap(copier=list.copy)
    m.put("a", NS, [1])
    snapshot = m.snapshot()
    m.put("a", NS, [2])  # copies the entry, stores a new (unshared) state
    assert (m.entry_copies, m.state_copies) == (1, 0)
    m.get("a", NS).append(3)
    assert (m.entry_copies, m.state_copies) == (1, 0)
    assert list(snapshot) == [("a", NS, [1])] and m.get("a", NS) == [2, 3]
    snapshot.release()


def test_transform_copies_a_shared_state_before_passing_it():
    original = [1]
    m = CopyOnWriteStateMap(copier=list.copy)
    m.put("a", NS, original)
    with m.snapshot() as snapshot:
        seen = []

        def append(old, value):
            seen.append(old)
            old.append(value)
            return old

        m.transform("a", NS, 2, append)
        assert (m.entry_copies, m.state_copies) == (1, 1)
        assert seen[0] is not original and original == [1]
        assert list(snapshot) == [("a", NS, [1])]
        m.transform("a", NS, 3, append)  # now unshared: changed in place
        assert (m.entry_copies, m.state_copies) == (1, 1) and seen[1] is seen[0]
    assert m.get("a", NS) == [1, 2, 3]


def test_get_and_remove_variants_copy_shared_old_states():
    m = CopyOnWriteStateMap(copier=list.copy)
    m.put("a", NS, [1])
    m.put("b", NS, [2])
    with m.snapshot() as snapshot:
        old_a = m.put_and_get_old("a", NS, [10])
        old_b = m.remove_and_get_old("b", NS)
        assert m.state_copies == 2
        old_a.append("x")
        old_b.append("y")
        assert content(snapshot) == content([("a", NS, [1]), ("b", NS, [2])])
    # with no snapshot the stored object itself is returned
    stored = m.get("a", NS)
    assert m.put_and_get_old("a", NS, [11]) is stored
    assert m.remove_and_get_old("a", NS) == [11] and m.state_copies == 2


def test_no_copier_means_states_are_never_copied():
    state = ("immutable",)
    m = CopyOnWriteStateMap()
    m.put("a", NS, state)
    with m.snapshot():
        assert m.get("a", NS) is state
        assert m.put_and_get_old("a", NS, state) is state
        m.transform("a", NS, 1, lambda old, value: old)
        assert m.remove_and_get_old("a", NS) is state
        assert m.state_copies == 0


def test_introspection_has_no_side_effects():
    m = CopyOnWriteStateMap(4, copier=list.copy)
    for key in range(5):
        m.put(key, NS, [key])
    assert m.is_rehashing and m.rehash_index == 0
    with m.snapshot():
        assert [m.peek(k, NS) for k in range(5)] == [[k] for k in range(5)]
        assert m.peek(99, NS) is None and m.entry_versions(99, NS) is None
        assert [m.entry_versions(k, NS) for k in range(5)] == [(0, 0)] * 5
        assert (m.rehash_index, m.entry_copies, m.state_copies) == (0, 0, 0)


def test_snapshot_versions_with_several_live_snapshots():
    m = CopyOnWriteStateMap()
    m.put("a", NS, 1)
    s1, s2, s3 = m.snapshot(), m.snapshot(), m.snapshot()
    assert m.snapshot_versions == {1, 2, 3} and m.highest_required_snapshot_version == 3
    s3.release()
    assert m.snapshot_versions == {1, 2} and m.highest_required_snapshot_version == 2
    s1.release()
    s1.release()  # twice: harmless
    assert m.snapshot_versions == {2} and m.highest_required_snapshot_version == 2
    s2.release()
    assert m.snapshot_versions == frozenset() and m.highest_required_snapshot_version == 0
    assert m.state_map_version == 3 and s2.released


def test_released_snapshot_cannot_be_read():
    m = CopyOnWriteStateMap()
    m.put("a", NS, 1)
    with m.snapshot() as snapshot:
        assert len(snapshot) == 1 and list(snapshot) == [("a", NS, 1)]
    with pytest.raises(StateSourceError, match="released"):
        list(snapshot)
    with pytest.raises(StateSourceError, match="released"):
        snapshot.columns()
    assert len(snapshot) == 1


# -- worked examples: incremental rehash --------------------------------------------------


def test_the_98th_insert_into_128_buckets_starts_a_rehash():
    m = CopyOnWriteStateMap()
    for key in range(97):
        m.put(key, NS, key)
    assert (m.capacity, m.is_rehashing, len(m)) == (128, False, 97)
    m.put(97, NS, 97)  # size 97 > threshold 96, checked before inserting
    assert (m.capacity, m.is_rehashing, m.rehash_index, len(m)) == (256, True, 0, 98)
    m.put(96, NS, "update")  # an update is not an insert, but does a rehash step
    assert m.rehash_index > 0
    while m.is_rehashing:
        m.get(0, NS)
    assert m.capacity == 256 and all(m.get(k, NS) == k for k in range(96))


def test_incremental_rehash_walk_through_from_4_to_8_buckets():
    """Old bucket 0 holds a, b (new bucket 0) and f (new bucket 4); c is in old bucket 1
    and d in old bucket 2; old bucket 3 is empty."""
    a, b = keys_in_bucket(0, 8, 2)
    (f,) = keys_in_bucket(4, 8, 1)
    (c,) = keys_in_bucket(1, 4, 1)
    (d,) = keys_in_bucket(2, 4, 1)
    m = CopyOnWriteStateMap(4)
    for key in (a, b, f, c):
        m.put(key, NS, key)
    assert m.bucket_chain(0) == [(f, NS), (b, NS), (a, NS)]  # prepended
    assert not m.is_rehashing

    m.put(d, NS, d)  # size 4 > threshold 3: allocate 8 buckets, insert into the old table
    assert (m.is_rehashing, m.capacity, m.rehash_index) == (True, 8, 0)
    assert m.bucket_chain(2) == [(d, NS)]
    assert all(m.bucket_chain(i, rehash_table=True) == [] for i in range(8))

    # The next operation first moves whole chains until at least 4 entries moved:
    # bucket 0 (3 entries) and bucket 1 (1 entry). Each chain is walked head first and
    # every entry prepended to its new bucket, so a and b end up in reverse order. Then
    # it looks d up: d's old bucket 2 is not moved yet (2 >= rehash index 2), so the
    # lookup reads the old table.
    assert m.get(d, NS) == d
    assert m.rehash_index == 2
    assert m.bucket_chain(0) == [] and m.bucket_chain(1) == []
    assert m.bucket_chain(0, rehash_table=True) == [(a, NS), (b, NS)]
    assert m.bucket_chain(4, rehash_table=True) == [(f, NS)]
    c_new = bucket(c, 8)
    assert c_new in (1, 5) and m.bucket_chain(c_new, rehash_table=True) == [(c, NS)]
    assert m.bucket_chain(2) == [(d, NS)]  # not moved yet; lookups still find it there
    assert m.entry_versions(d, NS) == (0, 0) and m.entry_versions(c, NS) == (0, 0)

    # The last old buckets: d (1 entry) and the empty bucket 3, which costs nothing;
    # then the new table becomes the primary one.
    assert m.contains(a, NS)
    assert (m.is_rehashing, m.capacity, m.rehash_index) == (False, 8, 0)
    assert m.bucket_chain(0) == [(a, NS), (b, NS)] and m.bucket_chain(4) == [(f, NS)]
    assert m.bucket_chain(bucket(d, 8)) == [(d, NS)]
    with pytest.raises(InvalidArgumentError):
        m.bucket_chain(0, rehash_table=True)
    assert sorted(m.get(k, NS) for k in (a, b, c, d, f)) == sorted((a, b, c, d, f))


def test_old_bucket_i_moves_only_to_new_buckets_i_and_i_plus_old_capacity():
    m = CopyOnWriteStateMap(16)
    for key in range(14):  # size 13 > threshold 12 when the 14th comes: rehash
        m.put(key, NS, key)
    before = {i: {k for k, _ in m.bucket_chain(i)} for i in range(16)}
    while m.is_rehashing:
        m.get(0, NS)
    for i, moved in before.items():
        after = {k for k, _ in m.bucket_chain(i)} | {k for k, _ in m.bucket_chain(i + 16)}
        assert moved <= after


def test_a_rehash_copies_entries_shared_with_a_snapshot():
    m = CopyOnWriteStateMap(4, copier=list.copy)
    for key in range(5):
        m.put(key, NS, [key])
    assert m.is_rehashing
    with m.snapshot() as snapshot:
        while m.is_rehashing:
            m.get(0, NS)
        # Every moved entry was shared; none of their states had to be copied, except
        # the one `get` handed out.
        assert m.entry_copies == 5 and m.state_copies == 1
        assert content(snapshot) == content((k, NS, [k]) for k in range(5))


def test_a_snapshot_taken_mid_rehash_holds_every_entry_once():
    m = CopyOnWriteStateMap(copier=list.copy)
    for key in range(98):
        m.put(key, NS, [key])
    for _ in range(5):
        m.get(0, NS)
    assert m.is_rehashing and 0 < m.rehash_index < 128
    snapshot = m.snapshot()
    expected = content((k, NS, [k]) for k in range(98))
    assert len(snapshot) == 98 and content(snapshot) == expected
    keys, namespaces, states = snapshot.columns()
    assert content(zip(keys, namespaces, states)) == expected
    assert list(zip(keys, namespaces, states)) == list(snapshot)  # same order
    # finish the rehash and change everything: the snapshot does not move
    for key in range(98):
        m.get(key, NS).append("x")
    m.remove(3, NS)
    for key in range(100, 300):
        m.put(key, NS, [key])
    assert content(snapshot) == expected
    snapshot.release()


# -- iteration -----------------------------------------------------------------------------


def test_iterator_yields_every_entry_once():
    m = CopyOnWriteStateMap(4)
    for key in range(50):
        m.put(key, key % 3, key)
    assert content(m) == content((k, k % 3, k) for k in range(50))


def test_iterator_finishes_a_rehash_so_reads_do_not_invalidate_it():
    m = CopyOnWriteStateMap()
    for key in range(98):
        m.put(key, NS, key)
    assert m.is_rehashing
    seen = []
    for key, namespace, state in m:
        assert m.get(key, namespace) == state and m.contains(key, namespace)
        m.put(key, namespace, state)  # updates are not structural
        seen.append(key)
    assert sorted(seen) == list(range(98)) and not m.is_rehashing


@pytest.mark.parametrize(
    "change",
    [
        lambda m, keys: m.put("new", NS, 0),
        lambda m, keys: m.remove(keys[0], NS),
        lambda m, keys: m.transform("new", NS, 1, lambda old, v: v),
    ],
)
def test_iterator_fails_fast_on_structural_change(change):
    m = CopyOnWriteStateMap(4)
    keys = keys_in_bucket(0, 4, 3)  # one chain: the change comes mid-chain
    for key in keys:
        m.put(key, NS, key)
    iterator = iter(m)
    next(iterator)
    change(m, keys)
    with pytest.raises(ConcurrentModificationError, match="map was modified during iteration"):
        next(iterator)


def test_iterator_fails_fast_even_after_the_last_entry():
    m = CopyOnWriteStateMap()
    m.put("a", NS, 1)
    with pytest.raises(ConcurrentModificationError):
        for key, namespace, _ in m:
            m.remove(key, namespace)


# -- incremental visitor -------------------------------------------------------------------


def visit_all(visitor) -> list[StateEntry]:
    seen = []
    while visitor.has_next():
        seen.extend(visitor.next_entries())
    return seen


def test_visitor_visits_every_entry_of_a_quiet_map_once():
    m = CopyOnWriteStateMap(4)
    size = 0
    while size < 200 or not m.is_rehashing or m.rehash_index == 0:
        m.put(size, NS, size)
        size += 1
    # mid-rehash, so it walks what is left of the old table, then the new one
    entries = visit_all(m.incremental_visitor(3))
    assert Counter(entries) == Counter(StateEntry(k, NS, k) for k in range(size))


def test_visitor_returns_one_chain_per_call_and_bounds_empty_buckets():
    """Two keys share a bucket of 1024, a third has its own; a call scans <= 10 empty ones."""
    shared = keys_in_bucket(600, 1024, 2)
    (alone,) = keys_in_bucket(5, 1024, 1)
    m = CopyOnWriteStateMap(1024)
    for key in (*shared, alone):
        m.put(key, NS, key)
    visitor = m.incremental_visitor(10)
    calls = []
    while visitor.has_next():
        calls.append([entry.key for entry in visitor.next_entries()])
    assert [keys for keys in calls if keys] == [[alone], shared[::-1]]
    # buckets 0-4 and 5: 1 call; 6-595: 59 calls; 596-599 and 600: 1; 601-1023: 43
    assert len(calls) == 1 + 59 + 1 + 43


def test_visitor_update_and_remove_go_through_copy_on_write():
    m = CopyOnWriteStateMap(copier=list.copy)
    for key in range(20):
        m.put(key, NS, [key])
    with m.snapshot() as snapshot:
        visitor = m.incremental_visitor(8)
        while visitor.has_next():
            for entry in visitor.next_entries():
                if entry.key % 2:
                    visitor.remove(entry)
                else:
                    visitor.update(entry, entry.state + ["kept"])
        assert content(snapshot) == content((k, NS, [k]) for k in range(20))
    assert content(m) == content((k, NS, [k, "kept"]) for k in range(0, 20, 2))


def test_visitor_tolerates_concurrent_modification():
    """Under puts, removes, rehashes and snapshots the visitor may skip entries (as Flink's
    does), but never fails, never yields an entry twice, and every entry it yields is one
    the map held, with the state stored for it."""
    m = CopyOnWriteStateMap(4)
    for key in range(50):
        m.put(key, NS, key)
    visitor = m.incremental_visitor(2)
    visited = []
    step = 0
    while visitor.has_next():
        visited += [(entry.key, entry.namespace, entry.state) for entry in visitor.next_entries()]
        step += 1
        m.put(1000 + step, NS, step)  # grows the map through several rehashes
        m.remove(step, NS)
        if step % 7 == 0:
            m.snapshot().release()
    held = {(k, NS, k) for k in range(50)} | {(1000 + s, NS, s) for s in range(1, step + 1)}
    assert visited and set(visited) <= held
    assert len({(k, n) for k, n, _ in visited}) == len(visited)


@pytest.mark.parametrize("limit", [0, -1, 1.5])
def test_visitor_rejects_a_bad_limit(limit):
    with pytest.raises(InvalidArgumentError):
        CopyOnWriteStateMap().incremental_visitor(limit)


# -- slot recycling ------------------------------------------------------------------------


class Box:
    """A state whose lifetime a weakref can watch."""

    def __init__(self, value):
        self.value = value


def test_retired_slots_are_not_reused_until_the_snapshot_is_released():
    """Keys in distinct buckets, so that removing them copies no chain."""
    m = CopyOnWriteStateMap(64)
    boxes = {keys_in_bucket(i, 64, 1)[0]: Box(i) for i in range(20)}
    for key, box in boxes.items():
        m.put(key, NS, box)
    snapshot = m.snapshot()
    for key in boxes:
        m.remove(key, NS)  # shared with the snapshot: retired, not freed
    assert m.retired_slots == 20 and m.pool_slots == 20 and m.entry_copies == 0
    for key in range(1000, 1020):
        m.put(key, NS, Box(key))
    assert m.pool_slots == 40  # no retired slot was reused
    assert sorted(state.value for _, _, state in snapshot) == list(range(20))

    watch = weakref.ref(boxes.pop(keys_in_bucket(0, 64, 1)[0]))
    snapshot.release()
    for key in range(1000, 1010):  # each removal also reclaims two retired slots
        m.remove(key, NS)
    assert m.retired_slots == 0 and m.pool_slots == 40
    gc.collect()
    assert watch() is None  # freeing a slot dropped its state
    for key in range(2000, 2040):
        m.put(key, NS, Box(key))
    assert m.pool_slots == 50  # 30 free slots reused


def test_unshared_slots_are_reused_at_once():
    m = CopyOnWriteStateMap()
    for round_ in range(5):
        for key in range(10):
            m.put(key, round_, key)
        for key in range(10):
            m.remove(key, round_)
    assert m.pool_slots == 10 and m.retired_slots == 0 and len(m) == 0


def test_slots_copied_under_an_older_snapshot_wait_for_it():
    m = CopyOnWriteStateMap(copier=list.copy)
    for key in range(10):
        m.put(key, NS, [key])
    old = m.snapshot()
    new = m.snapshot()
    for key in range(10):
        m.put(key, NS, [key, "v2"])  # copies all 10 entries, retired at version 2
    new.release()
    for key in range(10, 30):
        m.put(key, NS, [key])
    assert m.retired_slots == 10  # the older snapshot may still reach them
    assert content(old) == content((k, NS, [k]) for k in range(10))
    old.release()
    for key in range(30, 40):
        m.put(key, NS, [key])
    assert m.retired_slots == 0


# -- threads -------------------------------------------------------------------------------


def test_columns_on_another_thread_while_the_map_changes():
    m = CopyOnWriteStateMap(4, copier=list.copy)
    for key in range(2000):
        m.put(key, NS, [key])
    snapshot = m.snapshot()
    expected = content((k, NS, [k]) for k in range(2000))
    results = []

    def export() -> None:
        for _ in range(5):
            keys, namespaces, states = snapshot.columns()
            results.append(content(zip(keys, namespaces, states)))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        reader = threading.Thread(target=export)
        reader.start()
        key = 0
        while reader.is_alive():
            m.put(2000 + key, NS, [key])
            m.remove(key % 2000, NS)
            state = m.get((key * 7) % 2000, NS)
            if state is not None:
                state.append("x")
            key += 1
        reader.join()
    finally:
        sys.setswitchinterval(interval)
    snapshot.release()
    assert len(results) == 5 and all(result == expected for result in results)


def test_release_on_another_thread():
    m = CopyOnWriteStateMap(copier=list.copy)
    m.put("a", NS, [1])
    snapshot = m.snapshot()
    thread = threading.Thread(target=snapshot.release)
    thread.start()
    thread.join()
    assert m.snapshot_versions == frozenset() and m.highest_required_snapshot_version == 0


def test_changed_entries_finds_what_peek_finds_also_mid_rehash():
    """Without recorded writes, every entry is looked up."""
    state_map = CopyOnWriteStateMap(capacity=4)
    seen_rehash = False
    for i in range(3000):
        state_map.put(i, i % 3, f"v{i}")
        if i % 7 == 0:
            state_map.remove(i // 2, (i // 2) % 3)
        if i % 50 == 0:
            seen_rehash |= state_map._new_table is not None
            wanted = [(k, k % 3) for k in range(0, i + 5, 3)] + [(k, 9) for k in range(5)]
            priors = {entry: ("prior", entry) for entry in wanted}
            found = state_map.changed_entries(priors, {})
            assert (tuple(found.entries), tuple(found.states), tuple(found.priors)) == (
                tuple(wanted), tuple(state_map.peek(k, n) for k, n in wanted),
                tuple(("prior", entry) for entry in wanted))
    assert seen_rehash


@pytest.mark.parametrize("tracked_keys", [
    [0, 1, 2, 3],  # noted and written in the same order: taken from the record as it stands
    [3, 2, 1, 0],  # another order
    [0, 1, 2, 9],  # 9 noted, never written (a removal of nothing); 3 written, not tracked
    [0, 1, 2],     # fewer tracked than written
])
def test_changed_entries_take_recorded_writes_and_look_up_the_rest(tracked_keys):
    state_map = CopyOnWriteStateMap(capacity=4, copier=list.copy)
    for key in range(6):
        state_map.put(key, None, [key])
    snapshot = state_map.snapshot()  # the tracked entries' writes below copy on write
    written = state_map.record_writes()
    state_map.put(0, None, [10])
    state_map.transform(1, None, 11, lambda old, value: [*old, value])
    state_map.remove(2, None)
    state_map.put(3, None, [13])
    state_map.stop_recording()
    state_map.put(4, None, [14])  # not recorded
    priors = {(key, None): ("prior", key) for key in tracked_keys}
    found = state_map.changed_entries(priors, written)
    assert list(found.entries) == [(key, None) for key in tracked_keys]
    assert list(found.priors) == [("prior", key) for key in tracked_keys]
    assert all(state is state_map.peek(key, None)
               for (key, _), state in zip(found.entries, found.states))
    expected = {0: [10], 1: [1, 11], 2: None, 3: [13], 9: None}
    assert list(found.states) == [expected[key] for key in tracked_keys]
    snapshot.release()


def test_a_write_whose_copy_fails_records_nothing():
    """A recorded state must be the one the map holds: a put_and_get_old whose copy of the
    shared old state raises leaves the map, and so the record, as they were."""
    def failing_copy(state):
        raise MemoryError("copy failed")

    state_map = CopyOnWriteStateMap(copier=failing_copy)
    state_map.put(1, None, [1])
    snapshot = state_map.snapshot()
    written = state_map.record_writes()
    with pytest.raises(MemoryError):
        state_map.put_and_get_old(1, None, [2])
    assert state_map.peek(1, None) == [1] and written == {}
    snapshot.release()

"""Random interleavings of map operations, snapshots and releases against a dict model.

States are lists, changed in place through what ``get`` and ``transform`` hand out; the
copier copies lists. Starting at 4 buckets with a small key space, runs cross several
rehashes, form chains, and retire and recycle pool slots. Every live snapshot must keep
showing exactly the model as it was when the snapshot was taken, and while the map records
its writes (for incremental checkpoints), what it recorded must be the very state objects
the map holds.

Reads of the live map migrate entries, so the invariants avoid them: they use only the
side-effect-free introspection; the full comparison is a rule of its own.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)

from statesource.state.statemap import CopyOnWriteStateMap

KEYS = st.integers(0, 23)
NAMESPACES = st.sampled_from(["a", "b"])
VALUES = st.integers(0, 99)


def frozen(entries) -> Counter:
    return Counter((key, namespace, tuple(state)) for key, namespace, state in entries)


def append(old: list | None, value: int) -> list:
    if old is None:
        return [value]
    old.append(value)  # in place: the map must have copied a shared state first
    return old


class StateMapMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.map = CopyOnWriteStateMap(4, copier=list.copy)
        self.model: dict[tuple[int, str], list[int]] = {}
        self.snapshots: list = []  # (snapshot, frozen model at snapshot time)
        self.written: dict | None = None  # what the map records, while it does

    # -- operations ------------------------------------------------------------------

    @rule(key=KEYS, namespace=NAMESPACES, value=VALUES)
    def put(self, key, namespace, value):
        self.map.put(key, namespace, [value])
        self.model[(key, namespace)] = [value]

    @rule(key=KEYS, namespace=NAMESPACES, value=VALUES)
    def get_and_change_in_place(self, key, namespace, value):
        state = self.map.get(key, namespace)
        assert state == self.model.get((key, namespace))
        if state is not None:
            state.append(value)
            self.model[(key, namespace)].append(value)

    @rule(key=KEYS, namespace=NAMESPACES)
    def contains(self, key, namespace):
        assert self.map.contains(key, namespace) == ((key, namespace) in self.model)

    @rule(key=KEYS, namespace=NAMESPACES, value=VALUES)
    def transform(self, key, namespace, value):
        self.map.transform(key, namespace, value, append)
        self.model.setdefault((key, namespace), []).append(value)

    @rule(key=KEYS, namespace=NAMESPACES, value=VALUES)
    def put_and_get_old(self, key, namespace, value):
        old = self.map.put_and_get_old(key, namespace, [value])
        assert old == self.model.get((key, namespace))
        self.model[(key, namespace)] = [value]
        if old is not None:
            old.append(-1)  # the old state is the caller's now

    @rule(key=KEYS, namespace=NAMESPACES)
    def remove(self, key, namespace):
        self.map.remove(key, namespace)
        self.model.pop((key, namespace), None)

    @rule(key=KEYS, namespace=NAMESPACES)
    def remove_and_get_old(self, key, namespace):
        old = self.map.remove_and_get_old(key, namespace)
        assert old == self.model.pop((key, namespace), None)
        if old is not None:
            old.append(-1)

    @rule(value=VALUES, limit=st.integers(1, 4))
    def visit_and_update(self, value, limit):
        """TTL-cleanup style: drop states holding ``value``, extend the others."""
        visitor = self.map.incremental_visitor(limit)
        while visitor.has_next():
            for entry in visitor.next_entries():
                if value in entry.state:
                    visitor.remove(entry)
                    self.model.pop((entry.key, entry.namespace), None)
                elif entry.state[-1] != -value - 1:
                    visitor.update(entry, [*entry.state, -value - 1])
                    self.model[(entry.key, entry.namespace)].append(-value - 1)

    @rule()
    def compare_everything(self):
        """Iterate the live map (this finishes any rehash in progress)."""
        assert frozen(self.map) == frozen((k, n, s) for (k, n), s in self.model.items())

    # -- snapshots -------------------------------------------------------------------

    @rule()
    def snapshot(self):
        snapshot = self.map.snapshot()
        expected = frozen((k, n, s) for (k, n), s in self.model.items())
        self.snapshots.append((snapshot, expected))
        assert len(snapshot) == len(self.model)

    @precondition(lambda self: self.snapshots)
    @rule(data=st.data())
    def release(self, data):
        index = data.draw(st.integers(0, len(self.snapshots) - 1))
        snapshot, expected = self.snapshots.pop(index)
        assert frozen(snapshot) == expected
        snapshot.release()
        snapshot.release()

    # -- recording writes ------------------------------------------------------------

    @precondition(lambda self: self.written is None)
    @rule()
    def record_writes(self):
        self.written = self.map.record_writes()

    @precondition(lambda self: self.written is not None)
    @rule()
    def stop_recording(self):
        self.map.stop_recording()
        self.written = None

    # -- invariants ------------------------------------------------------------------

    @invariant()
    def live_map_equals_model(self):
        """Through side-effect-free introspection only: no rehash step, no copy."""
        state_map = self.map
        assert len(state_map) == len(self.model)
        capacity = state_map.capacity  # of the new table, during a rehash
        if state_map.is_rehashing:
            tables = [(False, capacity // 2), (True, capacity)]
        else:
            tables = [(False, capacity)]
        chained = Counter(
            pair
            for rehash_table, buckets in tables
            for bucket in range(buckets)
            for pair in state_map.bucket_chain(bucket, rehash_table=rehash_table)
        )
        assert chained == Counter(self.model.keys())  # every entry exactly once
        for (key, namespace), state in self.model.items():
            assert state_map.peek(key, namespace) == state

    @invariant()
    def recorded_writes_are_the_stored_states(self):
        """Identity, not equality: a checkpoint encodes the recorded object in place of the
        stored one, and copy-on-write protects exactly the stored one."""
        for (key, namespace), state in (self.written or {}).items():
            assert state is self.map.peek(key, namespace)

    @invariant()
    def snapshots_are_frozen(self):
        for snapshot, expected in self.snapshots:
            assert frozen(snapshot) == expected
            keys, namespaces, states = snapshot.columns()
            assert frozen(zip(keys, namespaces, states)) == expected
            assert len(snapshot) == sum(expected.values())

    @invariant()
    def versions(self):
        live = {snapshot.version for snapshot, _ in self.snapshots}
        assert self.map.snapshot_versions == live
        assert self.map.highest_required_snapshot_version == max(live, default=0)

    def teardown(self):
        for snapshot, expected in self.snapshots:
            assert frozen(snapshot) == expected
            snapshot.release()
        assert frozen(self.map) == frozen((k, n, s) for (k, n), s in self.model.items())


StateMapMachine.TestCase.settings = settings(
    max_examples=200,
    stateful_step_count=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestStateMap = StateMapMachine.TestCase

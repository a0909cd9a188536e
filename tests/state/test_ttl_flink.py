"""TTL reads and cleanups as Flink's ``TtlListState``, ``TtlMapState`` and transformers do.

Independent truth: Flink's documented rules, computed by hand here. A value last
accessed at ``t`` with time-to-live ``ttl`` has expired at ``now`` exactly when
``t + ttl <= now``. What storage holds is read with ``peek`` (no side effects).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statesource.checkpointing import CheckpointWriter, SubtaskBackends
from statesource.errors import InvalidArgumentError
from statesource.format.reader import Checkpoint
from statesource.keygroups import KeyGroupRange, assign_to_key_group
from statesource.model import StateKind, TtlConfig, expirer_for, snapshot_expirer_for
from statesource.state import ManualClock, StateVisibility, UpdateType
from statesource.state.descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from statesource.state.keyed_backend import KeyedStateBackend
from statesource.types import LONG

TTL_MS = 10_000


def ttl(**options) -> TtlConfig:
    return TtlConfig(timedelta(milliseconds=TTL_MS), **options)


@pytest.fixture
def clock():
    return ManualClock(0)


@pytest.fixture
def backend(clock):
    backend = KeyedStateBackend("string", 128, clock=clock)
    backend.set_current_key("k")
    return backend


def stored(backend: KeyedStateBackend, name: str):
    """What the current key's entry holds, without touching it."""
    table = backend._tables[name]
    return table.map_for(backend.current_key_group).peek(backend.current_key, None)


# --- list reads ---------------------------------------------------------------------------------


def test_partly_expired_list_read_removes_nothing(backend, clock):
    events = backend.get_state(ListStateDescriptor("e", "long", ttl=ttl()))
    events.add(1)
    clock.set(6_000)
    events.add(2)
    clock.set(10_000)  # 1 expired exactly now (0 + 10s <= 10s), 2 not
    assert events.get() == [2]
    assert stored(backend, "e") == [(1, 0), (2, 6_000)]
    clock.set(16_000)  # every element expired: the read clears the state
    assert events.get() == []
    assert stored(backend, "e") is None


def test_partly_expired_list_read_with_visibility_returns_all_and_keeps_all(backend, clock):
    events = backend.get_state(ListStateDescriptor(
        "e", "long", ttl=ttl(visibility=StateVisibility.RETURN_EXPIRED_IF_NOT_CLEANED_UP)))
    events.add_all([1, 2])
    clock.set(5_000)
    events.add(3)
    clock.set(12_000)
    assert events.get() == [1, 2, 3]
    assert stored(backend, "e") == [(1, 0), (2, 0), (3, 5_000)]


def test_list_read_on_read_and_write_stores_back_the_refreshed_unexpired(backend, clock):
    events = backend.get_state(ListStateDescriptor(
        "e", "long", ttl=ttl(update_type=UpdateType.ON_READ_AND_WRITE)))
    events.add(1)
    clock.set(6_000)
    events.add(2)
    clock.set(9_999)  # nothing expired yet: both refreshed to 9_999
    assert events.get() == [1, 2]
    assert stored(backend, "e") == [(1, 9_999), (2, 9_999)]
    clock.set(19_999)  # exactly 10s later: both expired, the read clears
    assert events.get() == []
    assert stored(backend, "e") is None


def test_list_read_on_read_and_write_drops_the_expired_when_refreshing(backend, clock):
    events = backend.get_state(ListStateDescriptor(
        "e", "long", ttl=ttl(update_type=UpdateType.ON_READ_AND_WRITE,
                             visibility=StateVisibility.RETURN_EXPIRED_IF_NOT_CLEANED_UP)))
    events.add(1)
    clock.set(6_000)
    events.add(2)
    clock.set(11_000)
    assert events.get() == [1, 2]  # the visibility shows the expired element once
    assert stored(backend, "e") == [(2, 11_000)]


# --- map reads ----------------------------------------------------------------------------------


def test_map_get_checks_and_refreshes_only_its_entry(backend, clock):
    pages = backend.get_state(MapStateDescriptor(
        "m", "string", "long", ttl=ttl(update_type=UpdateType.ON_READ_AND_WRITE)))
    pages.put_all({"a": 1, "b": 2})
    clock.set(8_000)
    assert pages.get("a") == 1
    assert stored(backend, "m") == {"a": (1, 8_000), "b": (2, 0)}
    clock.set(10_000)  # "b" expired exactly now, "a" was refreshed by the read
    assert pages.contains("a")
    assert stored(backend, "m") == {"a": (1, 10_000), "b": (2, 0)}  # "b" untouched
    assert pages.get("b") is None
    assert stored(backend, "m") == {"a": (1, 10_000)}


def test_map_entry_read_exactly_at_its_ttl_has_expired(backend, clock):
    pages = backend.get_state(MapStateDescriptor("m", "string", "long", ttl=ttl()))
    pages.put("a", 1)
    clock.set(9_999)
    assert pages.get("a") == 1
    clock.set(10_000)
    assert not pages.contains("a")
    assert stored(backend, "m") is None  # its last entry went, so the state did


def test_map_get_of_an_expired_entry_with_visibility_returns_and_removes_it(backend, clock):
    pages = backend.get_state(MapStateDescriptor(
        "m", "string", "long",
        ttl=ttl(visibility=StateVisibility.RETURN_EXPIRED_IF_NOT_CLEANED_UP)))
    pages.put("a", 1)
    clock.set(3_000)
    pages.put("b", 2)
    clock.set(20_000)
    assert pages.contains("a") and pages.get("a") is None  # returned once, then gone
    assert stored(backend, "m") == {"b": (2, 3_000)}


def test_map_iteration_refreshes_and_cleans_what_it_passes(backend, clock):
    pages = backend.get_state(MapStateDescriptor(
        "m", "string", "long", ttl=ttl(update_type=UpdateType.ON_READ_AND_WRITE)))
    pages.put("a", 1)
    clock.set(6_000)
    pages.put("b", 2)
    clock.set(10_000)
    assert pages.items() == [("b", 2)]
    assert stored(backend, "m") == {"b": (2, 10_000)}


def test_map_is_empty_asks_storage_without_a_ttl_check(backend, clock):
    """Flink's ``TtlMapState.isEmpty`` delegates to the wrapped map."""
    pages = backend.get_state(MapStateDescriptor("m", "string", "long", ttl=ttl()))
    pages.put("a", 1)
    clock.set(50_000)
    assert not pages.is_empty()
    assert pages.items() == []
    assert pages.is_empty()


# --- cleanup ----------------------------------------------------------------------------------


def restored_with(clock, descriptor, entries, **backend_options) -> KeyedStateBackend:
    """A backend holding exactly ``entries`` (stored shapes), as a restore would load them."""
    backend = KeyedStateBackend("long", 1, clock=clock, **backend_options)
    backend.restore_state(StateDescriptor.of(descriptor.declaration), [(0, entries)])
    return backend


def test_full_snapshot_list_cleanup_stops_at_the_first_unexpired_element(tmp_path, clock):
    """Flink's list transformer (STOP_ON_FIRST_INCLUDED) keeps the first unexpired element
    and everything after it; timestamps need not increase along a restored list."""
    descriptor = ListStateDescriptor("e", "long", ttl=ttl(cleanup_full_snapshot=True))
    clock.set(20_000)  # cutoff: last access <= 10_000 has expired
    backend = restored_with(clock, descriptor, [
        (1, None, [(10, 0), (11, 10_000), (12, 15_000), (13, 1_000), (14, 10_001)]),
        (2, None, [(20, 0), (21, 5_000)]),
        (3, None, [(30, 10_001), (31, 0)]),
    ])
    CheckpointWriter(str(tmp_path)).write(1, {"op": [SubtaskBackends(keyed=backend)]})
    (table,) = Checkpoint.open(str(tmp_path)).read_keyed_state("e")
    rows = sorted(zip(table.column("key").to_pylist(), table.column("list_element").to_pylist()))
    assert rows == [(1, 12), (1, 13), (1, 14), (3, 30), (3, 31)]


@pytest.mark.parametrize(("now", "kept"), [(9_999, True), (10_000, False)])
def test_full_snapshot_cleanup_boundary(tmp_path, clock, now, kept):
    descriptor = ValueStateDescriptor("v", "long", ttl=ttl(cleanup_full_snapshot=True))
    backend = KeyedStateBackend("long", 1, clock=clock)
    value = backend.get_state(descriptor)
    backend.set_current_key(1)
    value.update(5)
    clock.set(now)
    CheckpointWriter(str(tmp_path)).write(1, {"op": [SubtaskBackends(keyed=backend)]})
    tables = list(Checkpoint.open(str(tmp_path)).read_keyed_state("v"))
    assert sum(table.num_rows for table in tables) == (1 if kept else 0)


@pytest.mark.parametrize(("now", "kept"), [(9_999, True), (10_000, False)])
def test_incremental_cleanup_boundary(clock, now, kept):
    descriptor = ValueStateDescriptor("v", "long", ttl=ttl(incremental_cleanup_size=10))
    backend = restored_with(clock, descriptor, [(1, None, (5, 0))])
    clock.set(now)
    value = backend.get_state(descriptor)
    backend.set_current_key(2)
    value.update(6)  # the access runs the cleanup over key 1
    assert (backend._tables["v"].maps[0].peek(1, None) is not None) == kept


def test_incremental_cleanup_writes_back_partly_expired_lists_and_maps(clock):
    clock.set(20_000)
    cleanup = ttl(incremental_cleanup_size=10)
    events = ListStateDescriptor("e", "long", ttl=cleanup)
    pages = MapStateDescriptor("m", "string", "long", ttl=cleanup)
    backend = restored_with(clock, events, [(1, None, [(10, 0), (11, 15_000), (12, 1_000)])])
    backend.restore_state(StateDescriptor.of(pages.declaration),
                          [(0, [(1, None, {"a": (1, 10_000), "b": (2, 10_001)})])])
    handles = backend.get_state(events), backend.get_state(pages)
    backend.set_current_key(2)
    handles[0].add(99)  # accesses run each state's cleanup over key 1
    handles[1].put("z", 0)
    maps = backend._tables["e"].maps[0], backend._tables["m"].maps[0]
    assert maps[0].peek(1, None) == [(11, 15_000)]  # every unexpired element, none refreshed
    assert maps[1].peek(1, None) == {"b": (2, 10_001)}


def test_snapshot_and_incremental_expirers_differ_only_for_lists():
    config = ttl()
    stored_list = [(1, 0), (2, 10_001), (3, 0)]
    assert snapshot_expirer_for(StateKind.LIST, config)(stored_list, 20_000) == [(2, 10_001),
                                                                                  (3, 0)]
    assert expirer_for(StateKind.LIST, config)(stored_list, 20_000) == [(2, 10_001)]
    assert snapshot_expirer_for(StateKind.LIST, config)([(1, 10_000)], 20_000) is None
    unchanged = [(1, 10_001)]
    assert snapshot_expirer_for(StateKind.LIST, config)(unchanged, 20_000) is unchanged


# --- key-group range -----------------------------------------------------------------------------


def test_a_key_one_past_the_key_group_range_is_refused():
    backend = KeyedStateBackend("long", 128, KeyGroupRange(0, 63))
    inside = next(k for k in range(10_000) if assign_to_key_group(k, LONG, 128) == 63)
    outside = next(k for k in range(10_000) if assign_to_key_group(k, LONG, 128) == 64)
    backend.set_current_key(inside)
    assert backend.current_key_group == 63
    with pytest.raises(InvalidArgumentError, match="key group 64"):
        backend.set_current_key(outside)


# --- against a model of Flink's TtlListState / TtlMapState -------------------------------------

OPTIONS = st.fixed_dictionaries({
    "update_type": st.sampled_from(list(UpdateType)),
    "visibility": st.sampled_from(list(StateVisibility)),
})
STEPS = st.lists(st.tuples(st.sampled_from(["put", "get", "contains", "items", "is_empty",
                                            "add", "list_get", "advance"]),
                           st.sampled_from(["a", "b", "c"]), st.integers(0, 12_000)),
                 max_size=40)


class FlinkTtlModel:
    """Flink's rules, written out as the Java reads: one stored map and one stored list."""

    def __init__(self, update_on_read: bool, return_expired: bool) -> None:
        self.update_on_read, self.return_expired = update_on_read, return_expired
        self.map: dict[str, tuple[int, int]] = {}
        self.list: list[tuple[int, int]] = []

    @staticmethod
    def expired(last_access: int, now: int) -> bool:
        return last_access + TTL_MS <= now

    def get(self, user_key: str, now: int):  # getWrappedWithTtlCheckAndUpdate
        if user_key not in self.map:
            return None
        value, last_access = self.map[user_key]
        if self.expired(last_access, now):
            del self.map[user_key]
            return value if self.return_expired else None
        if self.update_on_read:
            self.map[user_key] = (value, now)
        return value

    def items(self, now: int) -> list:  # EntriesIterator over every entry
        seen = []
        for user_key in list(self.map):
            value = self.get(user_key, now)
            if value is not None:
                seen.append((user_key, value))
        return seen

    def list_get(self, now: int) -> list:  # get() with updateTs and IteratorWithCleanup
        if self.update_on_read:
            fresh = [(e, now) for e, t in self.list if not self.expired(t, now)]
            original, self.list = self.list, (fresh or self.list)
        else:
            original = self.list
        shown = [e for e, t in original if self.return_expired or not self.expired(t, now)]
        if all(self.expired(t, now) for _, t in original):
            self.list = []
        return shown


@settings(max_examples=80, deadline=None)
@given(options=OPTIONS, steps=STEPS)
def test_list_and_map_reads_against_a_model_of_flink(options, steps):
    clock = ManualClock(0)
    backend = KeyedStateBackend("string", 128, clock=clock)
    config = ttl(**options)
    pages = backend.get_state(MapStateDescriptor("m", "string", "long", ttl=config))
    events = backend.get_state(ListStateDescriptor("e", "long", ttl=config))
    backend.set_current_key("k")
    model = FlinkTtlModel(config.update_on_read, config.return_expired)
    for step, user_key, number in steps:
        now = clock.now_ms()
        if step == "advance":
            clock.advance(number)
        elif step == "put":
            pages.put(user_key, number)
            model.map[user_key] = (number, now)
        elif step == "get":
            assert pages.get(user_key) == model.get(user_key, now)
        elif step == "contains":
            assert pages.contains(user_key) == (model.get(user_key, now) is not None)
        elif step == "items":
            assert sorted(pages.items()) == sorted(model.items(now))
        elif step == "is_empty":
            assert pages.is_empty() == (not model.map)
        elif step == "add":
            events.add(number)
            model.list.append((number, now))
        else:
            assert events.get() == model.list_get(now)
        assert (stored(backend, "m") or {}) == model.map
        assert (stored(backend, "e") or []) == model.list

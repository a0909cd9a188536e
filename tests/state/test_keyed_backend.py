"""KeyedStateBackend and its state handles: semantics, TTL, namespaces and misuse."""

from __future__ import annotations

from datetime import timedelta

import pytest

from statesource.errors import InvalidArgumentError, TypeMismatchError
from statesource.keygroups import KeyGroupRange, assign_to_key_group
from statesource.state import ManualClock, StateVisibility, TtlConfig, UpdateType
from statesource.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from statesource.state.keyed_backend import KeyedStateBackend
from statesource.types import STRING


class Average:
    """An AggregateFunction whose accumulator is a mutable [sum, count] list."""

    def create_accumulator(self):
        return [0, 0]

    def add(self, value, accumulator):
        accumulator[0] += value
        accumulator[1] += 1
        return accumulator

    def get_result(self, accumulator):
        return accumulator[0] / accumulator[1]


@pytest.fixture
def clock():
    return ManualClock(1_000)


@pytest.fixture
def backend(clock):
    return KeyedStateBackend("string", 128, clock=clock)


def test_set_current_key_computes_flinks_key_group(backend):
    backend.set_current_key("alice")
    assert backend.current_key_group == assign_to_key_group("alice", STRING, 128)


def test_value_state_is_per_key(backend):
    counts = backend.get_state(ValueStateDescriptor("counts", "long"))
    for key, count in [("a", 1), ("b", 2)]:
        backend.set_current_key(key)
        counts.update(count)
    backend.set_current_key("a")
    assert counts.value() == 1
    counts.update(None)
    assert counts.value() is None
    backend.set_current_key("b")
    assert counts.value() == 2


def test_list_state(backend):
    events = backend.get_state(ListStateDescriptor("events", "string"))
    backend.set_current_key("k")
    assert events.get() == []
    events.add("x")
    events.add_all(["y", "z"])
    assert events.get() == ["x", "y", "z"]
    events.get().append("not stored")
    assert events.get() == ["x", "y", "z"]
    events.update(["only"])
    assert events.get() == ["only"]
    events.update([])
    assert events.get() == []
    with pytest.raises(InvalidArgumentError, match="cannot be None"):
        events.add(None)


def test_map_state(backend):
    pages = backend.get_state(MapStateDescriptor("pages", "string", "long"))
    backend.set_current_key("k")
    assert pages.is_empty()
    pages.put("home", 1)
    pages.put_all({"cart": 2, "home": 3})
    assert pages.get("home") == 3 and pages.contains("cart") and not pages.contains("x")
    assert sorted(pages.items()) == [("cart", 2), ("home", 3)]
    assert sorted(pages.keys()) == ["cart", "home"] and sorted(pages.values()) == [2, 3]
    pages.remove("cart")
    pages.remove("home")
    assert pages.is_empty()


def test_reducing_and_aggregating_state(backend):
    total = backend.get_state(ReducingStateDescriptor("total", lambda a, b: a + b, "long"))
    average = backend.get_state(AggregatingStateDescriptor("avg", Average(), {
        "type": "array", "items": "long"}))
    backend.set_current_key("k")
    for value in (2, 4, 9):
        total.add(value)
        average.add(value)
    assert total.get() == 15
    assert average.get() == 5.0
    average.clear()
    assert average.get() is None


def test_aggregating_accumulator_shared_with_a_snapshot_is_copied(backend):
    average = backend.get_state(AggregatingStateDescriptor("avg", Average(), {
        "type": "array", "items": "long"}))
    backend.set_current_key("k")
    average.add(2)
    snapshot = backend.snapshot(1)
    average.add(4)
    ((_, map_snapshot),) = [(kg, s) for kg, s in snapshot.states[0] if len(s)]
    assert list(map_snapshot)[0][2] == [2, 1]
    snapshot.close()
    assert average.get() == 3.0


def test_namespaces_separate_windows_and_void_states_ignore_them(backend):
    per_window = backend.get_state(ValueStateDescriptor("w", "long", namespace_type="long"))
    plain = backend.get_state(ValueStateDescriptor("p", "long"))
    backend.set_current_key("k")
    with pytest.raises(InvalidArgumentError, match="set_current_namespace"):
        per_window.value()
    for window in (10, 20):
        backend.set_current_namespace(window)
        per_window.update(window * 2)
        plain.update(window)
    backend.set_current_namespace(10)
    assert per_window.value() == 20 and plain.value() == 20
    backend.set_current_namespace("not a long")
    with pytest.raises(TypeMismatchError, match="namespace of state 'w'"):
        per_window.value()


def test_backend_rejects_keys_outside_its_range_and_unset_keys():
    backend = KeyedStateBackend("long", 128, KeyGroupRange(0, 63))
    state = backend.get_state(ValueStateDescriptor("v", "long"))
    with pytest.raises(InvalidArgumentError, match="set_current_key"):
        state.value()
    outside = next(k for k in range(1000) if assign_to_key_group(k, backend.key_type, 128) > 63)
    with pytest.raises(InvalidArgumentError, match=r"outside this backend's key-group range"):
        backend.set_current_key(outside)
    with pytest.raises(TypeMismatchError, match="'7'"):
        backend.set_current_key("7")
    with pytest.raises(TypeMismatchError, match="True"):
        backend.set_current_key(True)


def test_descriptor_misuse_is_reported(backend):
    backend.get_state(ValueStateDescriptor("counts", "long"))
    with pytest.raises(TypeMismatchError, match="already registered as value state 'counts'"):
        backend.get_state(ListStateDescriptor("counts", "long"))
    with pytest.raises(TypeMismatchError, match="already registered"):
        backend.get_state(ValueStateDescriptor("counts", "string"))
    counts = backend.get_state(ValueStateDescriptor("counts", "long"))
    backend.set_current_key("k")
    with pytest.raises(TypeMismatchError, match="state 'counts' value"):
        counts.update("seven")
    with pytest.raises(TypeMismatchError, match="state 'bad'"):
        ValueStateDescriptor("bad", ["int", "string"])
    with pytest.raises(InvalidArgumentError, match="state name"):
        ValueStateDescriptor("", "long")


def ttl(seconds: int = 10, **options) -> TtlConfig:
    return TtlConfig(timedelta(seconds=seconds), **options)


def test_ttl_value_expires_and_is_cleared_on_read(backend, clock):
    value = backend.get_state(ValueStateDescriptor("v", "long", ttl=ttl()))
    backend.set_current_key("k")
    value.update(1)
    clock.advance(9_999)
    assert value.value() == 1
    clock.advance(1)  # last access + ttl <= now: expired
    assert value.value() is None


def test_ttl_update_on_read_refreshes(backend, clock):
    value = backend.get_state(ValueStateDescriptor(
        "v", "long", ttl=ttl(update_type=UpdateType.ON_READ_AND_WRITE)))
    backend.set_current_key("k")
    value.update(1)
    clock.advance(8_000)
    assert value.value() == 1
    clock.advance(8_000)
    assert value.value() == 1  # the read at 9s restarted the clock


def test_ttl_return_expired_if_not_cleaned_up(backend, clock):
    value = backend.get_state(ValueStateDescriptor(
        "v", "long", ttl=ttl(visibility=StateVisibility.RETURN_EXPIRED_IF_NOT_CLEANED_UP)))
    backend.set_current_key("k")
    value.update(1)
    clock.advance(20_000)
    assert value.value() == 1  # returned once, and cleaned up by that read
    assert value.value() is None


def test_ttl_list_keeps_a_timestamp_per_element(backend, clock):
    events = backend.get_state(ListStateDescriptor("e", "string", ttl=ttl()))
    backend.set_current_key("k")
    events.add("old")
    clock.advance(6_000)
    events.add("new")
    clock.advance(5_000)
    assert events.get() == ["new"]
    clock.advance(5_000)
    assert events.get() == []


def test_ttl_map_keeps_a_timestamp_per_entry(backend, clock):
    pages = backend.get_state(MapStateDescriptor("m", "string", "long", ttl=ttl()))
    backend.set_current_key("k")
    pages.put("a", 1)
    clock.advance(6_000)
    pages.put("b", 2)
    clock.advance(5_000)
    assert pages.items() == [("b", 2)]
    assert pages.get("a") is None


def test_ttl_list_and_map_reads_refresh_only_live_parts(backend, clock):
    refresh = ttl(update_type=UpdateType.ON_READ_AND_WRITE)
    events = backend.get_state(ListStateDescriptor("e", "string", ttl=refresh))
    pages = backend.get_state(MapStateDescriptor("m", "string", "long", ttl=refresh))
    backend.set_current_key("k")
    events.add("old")
    pages.put("a", 1)
    clock.advance(6_000)
    events.add("new")
    pages.put("b", 2)
    clock.advance(5_000)  # "old" and "a" expired; the read refreshes "new" and "b"
    assert events.get() == ["new"] and pages.items() == [("b", 2)]
    clock.advance(9_000)
    assert events.get() == ["new"] and pages.items() == [("b", 2)]


def test_ttl_list_and_map_return_expired_parts_once(backend, clock):
    """Flink: a list read removes nothing until every element expired; a map
    iteration removes each expired entry it passes (returning it this once)."""
    visible = ttl(visibility=StateVisibility.RETURN_EXPIRED_IF_NOT_CLEANED_UP)
    events = backend.get_state(ListStateDescriptor("e", "string", ttl=visible))
    pages = backend.get_state(MapStateDescriptor("m", "string", "long", ttl=visible))
    backend.set_current_key("k")
    events.add("old")
    pages.put("a", 1)
    clock.advance(6_000)
    events.add("new")
    pages.put("b", 2)
    clock.advance(5_000)  # "old" and "a" expired
    assert events.get() == ["old", "new"] and pages.items() == [("a", 1), ("b", 2)]
    assert events.get() == ["old", "new"] and pages.items() == [("b", 2)]
    clock.advance(5_000)  # wholly expired: shown once more, then cleared
    assert events.get() == ["old", "new"] and pages.items() == [("b", 2)]
    assert events.get() == [] and pages.is_empty()
    assert len(backend._tables["e"]) == len(backend._tables["m"]) == 0


def test_ttl_reducing_restarts_after_expiry(backend, clock):
    total = backend.get_state(ReducingStateDescriptor("t", lambda a, b: a + b, "long", ttl=ttl()))
    backend.set_current_key("k")
    total.add(5)
    clock.advance(10_000)
    total.add(1)
    assert total.get() == 1


def test_incremental_cleanup_drops_expired_entries_of_other_keys(clock):
    backend = KeyedStateBackend("long", 4, clock=clock)
    value = backend.get_state(ValueStateDescriptor(
        "v", "long", ttl=ttl(incremental_cleanup_size=1000)))
    for key in range(50):
        backend.set_current_key(key)
        value.update(key)
    clock.advance(20_000)
    backend.set_current_key(0)
    value.update(0)  # one access runs the cleanup over the other entries
    table = backend._tables["v"]
    assert len(table) == 1


def test_cached_key_groups_never_let_a_wrong_type_through():
    backend = KeyedStateBackend("int", 128)
    backend.set_current_key(1)
    backend.set_current_key(1)  # served from the cache
    with pytest.raises(TypeMismatchError, match="True"):
        backend.set_current_key(True)  # == 1 in Python, but not an int key


def test_float_keys_that_python_calls_equal_keep_their_java_key_groups():
    backend = KeyedStateBackend("double", 4096)
    backend.set_current_key(0.0)
    zero = backend.current_key_group
    backend.set_current_key(-0.0)
    assert backend.current_key_group != zero  # Java hashes -0.0 and 0.0 apart

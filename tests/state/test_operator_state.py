"""Operator state: redistribution on rescale and the per-subtask backend."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from statesource.errors import InvalidArgumentError, StateSourceError, TypeMismatchError
from statesource.model import DistributionMode
from statesource.redistribution import (
    redistribute,
    redistribute_broadcast,
    redistribute_split,
    redistribute_union,
)
from statesource.state.descriptors import resolve_value_type
from statesource.state.operator_backend import (
    BroadcastState,
    OperatorListState,
    OperatorStateBackend,
    OperatorStateSnapshot,
)

SPLIT = DistributionMode.SPLIT_DISTRIBUTE
UNION = DistributionMode.UNION
BROADCAST = DistributionMode.BROADCAST


# --- redistribution: hand-computed cases ------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new_parallelism", "expected"),
    [
        # 1 -> 2, five elements: 5 // 2 = 2, the first 5 % 2 = 1 subtask gets a third one
        ([[0, 1, 2, 3, 4]], 2, [[0, 1, 2], [3, 4]]),
        # 2 -> 3, seven elements in subtask order 0..6: sizes 3, 2, 2
        ([[0, 1, 2], [3, 4, 5, 6]], 3, [[0, 1, 2], [3, 4], [5, 6]]),
        # 3 -> 1: everything, in old-subtask order, empty subtasks contribute nothing
        ([["c"], ["a", "b"], []], 1, [["c", "a", "b"]]),
        # fewer elements than subtasks: the trailing subtasks get nothing
        ([[7], [8]], 3, [[7], [8], []]),
        # 2 -> 4, six elements: sizes 2, 2, 1, 1
        ([[1, 2, 3, 4, 5], [6]], 4, [[1, 2], [3, 4], [5], [6]]),
        ([[], []], 3, [[], [], []]),
    ],
)
def test_split_hand_computed(old, new_parallelism, expected):
    assert redistribute_split(old, new_parallelism) == expected


@pytest.mark.parametrize(
    "old",
    [
        [[0], [1, 2, 3], []],  # uneven: an even split would be [0, 1], [2], [3]
        [[1, 2, 3, 4], []],  # an even split would be [1, 2], [3, 4]
        [[5, 6, 7]],
    ],
)
def test_split_keeps_state_in_place_when_parallelism_is_unchanged(old):
    assert redistribute_split(old, len(old)) == old


@pytest.mark.parametrize(
    ("old", "new_parallelism", "expected"),
    [
        ([[0, 1, 2]], 2, [[0, 1, 2], [0, 1, 2]]),
        ([[0, 1], [2]], 3, [[0, 1, 2], [0, 1, 2], [0, 1, 2]]),
        ([["c"], ["a", "b"], []], 1, [["c", "a", "b"]]),
        # unlike split state, union state is unioned even at unchanged parallelism
        ([[0], [1]], 2, [[0, 1], [0, 1]]),
    ],
)
def test_union_hand_computed(old, new_parallelism, expected):
    assert redistribute_union(old, new_parallelism) == expected


@pytest.mark.parametrize(
    ("old", "new_parallelism", "expected"),
    [
        ([{"a": 1}], 2, [{"a": 1}, {"a": 1}]),
        # copies are meant to be identical; distinct maps show which one each subtask took
        ([{"a": 0}, {"b": 1}], 3, [{"a": 0}, {"b": 1}, {"a": 0}]),
        ([{"a": 0}, {"b": 1}, {"c": 2}], 1, [{"a": 0}]),
        ([{"a": 0}, {"b": 1}, {"c": 2}], 2, [{"a": 0}, {"b": 1}]),
    ],
)
def test_broadcast_hand_computed(old, new_parallelism, expected):
    assert redistribute_broadcast(old, new_parallelism) == expected


def test_broadcast_does_not_merge_differing_copies():
    result = redistribute_broadcast([{"a": 1}, {"b": 2}], 1)
    assert result == [{"a": 1}]


@pytest.mark.parametrize(
    ("mode", "old", "expected"),
    [
        (SPLIT, [[1, 2, 3]], [[1, 2], [3]]),
        (UNION, [[1, 2, 3]], [[1, 2, 3], [1, 2, 3]]),
        (BROADCAST, [{1: "x"}], [{1: "x"}, {1: "x"}]),
    ],
)
def test_redistribute_dispatches_on_mode(mode, old, expected):
    assert redistribute(mode, old, 2) == expected


@pytest.mark.parametrize("function", [redistribute_split, redistribute_union])
def test_list_results_are_new_containers_sharing_elements(function):
    element = {"nested": [1]}
    old = [[element, 2], [3]]
    result = function(old, 2)
    for subtask in result:
        subtask.append("extra")
    assert old == [[element, 2], [3]]
    assert result[0][0] is element


def test_split_at_unchanged_parallelism_returns_new_lists():
    old = [[1], [2]]
    result = redistribute_split(old, 2)
    result[0].append(9)
    assert old == [[1], [2]]


def test_broadcast_results_are_new_dicts():
    old = [{"a": 1}]
    result = redistribute_broadcast(old, 2)
    result[0]["b"] = 2
    assert old == [{"a": 1}]
    assert result[1] == {"a": 1}
    assert result[0] is not result[1]


@pytest.mark.parametrize("mode", list(DistributionMode))
@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2", None])
def test_invalid_parallelism_is_rejected(mode, bad):
    old = [{"k": 1}] if mode is BROADCAST else [[1]]
    with pytest.raises(InvalidArgumentError, match="parallelism") as info:
        redistribute(mode, old, bad)
    assert repr(bad) in str(info.value) or str(bad) in str(info.value)


@pytest.mark.parametrize("mode", list(DistributionMode))
def test_empty_old_state_is_rejected(mode):
    with pytest.raises(InvalidArgumentError, match="at least one subtask"):
        redistribute(mode, [], 2)


@pytest.mark.parametrize("function", [redistribute_split, redistribute_union])
@pytest.mark.parametrize("bad_subtask", ["abc", 5, {"a": 1}])
def test_list_subtask_content_must_be_a_sequence(function, bad_subtask):
    with pytest.raises(InvalidArgumentError, match="old subtask 1") as info:
        function([[1], bad_subtask], 2)
    assert repr(bad_subtask) in str(info.value)


def test_broadcast_subtask_content_must_be_a_mapping():
    with pytest.raises(InvalidArgumentError, match=r"old subtask 0 .*\[\('a', 1\)\]"):
        redistribute_broadcast([[("a", 1)]], 2)


def test_unknown_mode_is_rejected():
    with pytest.raises(InvalidArgumentError, match="'split'"):
        redistribute("split", [[1]], 2)


# --- redistribution: properties ---------------------------------------------------------------

_layouts = st.lists(st.lists(st.integers(), max_size=8), min_size=1, max_size=6)
_parallelisms = st.integers(min_value=1, max_value=9)


@given(_layouts, _parallelisms)
def test_split_preserves_order_and_balances(old, new_parallelism):
    result = redistribute_split(old, new_parallelism)
    assert len(result) == new_parallelism
    assert [e for sub in result for e in sub] == [e for sub in old for e in sub]
    if new_parallelism == len(old):
        assert result == old
    else:
        sizes = [len(sub) for sub in result]
        assert max(sizes) - min(sizes) <= 1
        assert sizes == sorted(sizes, reverse=True)


@given(_layouts, _parallelisms)
def test_union_gives_every_subtask_everything(old, new_parallelism):
    result = redistribute_union(old, new_parallelism)
    everything = [e for sub in old for e in sub]
    assert result == [everything] * new_parallelism


@given(st.lists(st.dictionaries(st.text(max_size=3), st.integers()), min_size=1, max_size=5),
       _parallelisms)
def test_broadcast_takes_copies_round_robin(old, new_parallelism):
    result = redistribute_broadcast(old, new_parallelism)
    assert result == [old[i % len(old)] for i in range(new_parallelism)]


# --- backend: list and union list state ---------------------------------------------------------


@pytest.fixture
def backend():
    return OperatorStateBackend()


def test_list_state_operations(backend):
    state = backend.get_list_state("offsets", "long")
    assert isinstance(state, OperatorListState)
    assert state.get() == []
    state.add(1)
    state.add_all([2, 3])
    state.add_all(iter([4]))
    assert state.get() == [1, 2, 3, 4]
    state.update([9, 8])
    assert state.get() == [9, 8]
    state.clear()
    assert state.get() == []
    state.add_all([])
    state.update([])
    assert state.get() == []


def test_list_get_returns_a_new_list(backend):
    state = backend.get_list_state("offsets", "long")
    state.add(1)
    got = state.get()
    got.append(2)
    assert state.get() == [1]
    assert state.get() is not state.get()


@pytest.mark.parametrize(
    "write",
    [
        lambda s: s.add(None),
        lambda s: s.add_all([4, None]),
        lambda s: s.update([4, None]),
    ],
)
def test_list_state_rejects_none(backend, write):
    state = backend.get_list_state("offsets", "long")
    state.add(1)
    with pytest.raises(InvalidArgumentError, match="'offsets'.*None"):
        write(state)
    assert state.get() == [1]


@pytest.mark.parametrize(
    "write",
    [
        lambda s: s.add("seven"),
        lambda s: s.add_all([4, "seven"]),
        lambda s: s.update([4, "seven"]),
    ],
)
def test_list_state_rejects_wrong_element_type_atomically(backend, write):
    state = backend.get_union_list_state("offsets", "long")
    state.add(1)
    with pytest.raises(TypeMismatchError) as info:
        write(state)
    assert "'offsets'" in str(info.value)
    assert "'seven'" in str(info.value)
    assert state.get() == [1]


@pytest.mark.parametrize("bad", [None, "abc", {"a": 1}, 5])
def test_list_bulk_writes_need_an_iterable_of_elements(backend, bad):
    state = backend.get_list_state("names", "string")
    with pytest.raises(InvalidArgumentError, match="'names'") as info:
        state.add_all(bad)
    assert repr(bad) in str(info.value)
    with pytest.raises(InvalidArgumentError, match="'names'"):
        state.update(bad)


def test_same_declaration_returns_the_same_handle(backend):
    split = backend.get_list_state("offsets", "long")
    assert backend.get_list_state("offsets", "long") is split
    assert backend.get_list_state("offsets", resolve_value_type("long")) is split
    union = backend.get_union_list_state("all", "string")
    assert backend.get_union_list_state("all", "string") is union
    broadcast = backend.get_broadcast_state("rules", "string", "long")
    assert backend.get_broadcast_state("rules", "string", "long") is broadcast


def test_handles_of_different_names_are_independent(backend):
    a = backend.get_list_state("a", "long")
    b = backend.get_list_state("b", "long")
    a.add(1)
    assert b.get() == []


def test_same_name_with_other_mode_is_a_type_mismatch(backend):
    backend.get_list_state("offsets", "long")
    with pytest.raises(TypeMismatchError) as info:
        backend.get_union_list_state("offsets", "long")
    message = str(info.value)
    assert "'offsets'" in message
    assert "split-distribute list state" in message
    assert "union list state" in message
    assert message.index("split-distribute") < message.index("union list")


def test_same_name_with_other_kind_is_a_type_mismatch(backend):
    backend.get_broadcast_state("rules", "string", "long")
    with pytest.raises(TypeMismatchError) as info:
        backend.get_list_state("rules", "long")
    message = str(info.value)
    assert "'rules'" in message
    assert "broadcast state" in message
    assert "split-distribute list state" in message


def test_same_name_with_other_types_is_a_type_mismatch(backend):
    backend.get_list_state("offsets", "long")
    with pytest.raises(TypeMismatchError) as info:
        backend.get_list_state("offsets", "string")
    message = str(info.value)
    assert "'offsets'" in message
    assert '"long"' in message
    assert '"string"' in message


def test_broadcast_redeclared_with_other_value_type_is_a_type_mismatch(backend):
    backend.get_broadcast_state("rules", "string", "long")
    with pytest.raises(TypeMismatchError, match="'rules'.*user_value"):
        backend.get_broadcast_state("rules", "string", "double")


def test_a_failed_redeclaration_leaves_the_state_usable(backend):
    state = backend.get_list_state("offsets", "long")
    state.add(1)
    with pytest.raises(TypeMismatchError):
        backend.get_union_list_state("offsets", "long")
    assert backend.get_list_state("offsets", "long").get() == [1]


@pytest.mark.parametrize("bad", ["", None, 3])
def test_state_names_must_be_non_empty_strings(backend, bad):
    with pytest.raises(InvalidArgumentError, match="state name"):
        backend.get_list_state(bad, "long")
    with pytest.raises(InvalidArgumentError, match="state name"):
        backend.get_broadcast_state(bad, "long", "long")


def test_undeclarable_type_names_the_state(backend):
    with pytest.raises(StateSourceError, match="'offsets'"):
        backend.get_list_state("offsets", "no-such-type<>")


def test_state_names_are_sorted(backend):
    backend.get_union_list_state("b", "long")
    backend.get_broadcast_state("c", "string", "long")
    backend.get_list_state("a", "long")
    assert backend.state_names() == ["a", "b", "c"]


# --- backend: broadcast state -----------------------------------------------------------------


def test_broadcast_state_operations(backend):
    state = backend.get_broadcast_state("rules", "string", "long")
    assert isinstance(state, BroadcastState)
    assert state.is_empty()
    assert state.get("a") is None
    assert not state.contains("a")
    state.put("a", 1)
    state.put_all({"b": 2, "c": 3})
    state.put("a", 10)
    assert state.get("a") == 10
    assert state.contains("b")
    assert state.keys() == ["a", "b", "c"]
    assert state.values() == [10, 2, 3]
    assert state.items() == [("a", 10), ("b", 2), ("c", 3)]
    assert not state.is_empty()
    state.remove("b")
    state.remove("absent")
    assert state.items() == [("a", 10), ("c", 3)]
    state.clear()
    assert state.is_empty()
    assert state.keys() == []


def test_broadcast_views_are_safe_to_walk_while_writing(backend):
    state = backend.get_broadcast_state("rules", "string", "long")
    state.put_all({"a": 1, "b": 2})
    for key in state.keys():  # noqa: SIM118 - the method under test
        state.remove(key)
    assert state.is_empty()


@pytest.mark.parametrize(
    ("write", "role", "bad"),
    [
        (lambda s: s.put(1, 1), "user_key", "1"),
        (lambda s: s.put("a", "one"), "user_value", "'one'"),
        (lambda s: s.put_all({"b": 2, "c": "three"}), "user_value", "'three'"),
    ],
)
def test_broadcast_rejects_wrong_types_atomically(backend, write, role, bad):
    state = backend.get_broadcast_state("rules", "string", "long")
    state.put("a", 1)
    with pytest.raises(TypeMismatchError) as info:
        write(state)
    message = str(info.value)
    assert "'rules'" in message
    assert role in message
    assert bad in message
    assert state.items() == [("a", 1)]


def test_broadcast_put_all_needs_a_mapping(backend):
    state = backend.get_broadcast_state("rules", "string", "long")
    with pytest.raises(InvalidArgumentError, match=r"'rules'.*\[\('a', 1\)\]"):
        state.put_all([("a", 1)])


# --- backend: snapshots -----------------------------------------------------------------------


def _filled_backend():
    backend = OperatorStateBackend()
    backend.get_list_state("offsets", "long").add_all([1, 2])
    backend.get_union_list_state("all", "string").add("x")
    backend.get_broadcast_state("rules", "string", "long").put("a", 1)
    return backend


def test_snapshot_content():
    snapshot = _filled_backend().snapshot(7)
    assert isinstance(snapshot, OperatorStateSnapshot)
    assert snapshot.checkpoint_id == 7
    entries = snapshot.states
    assert [e.name for e in entries] == ["all", "offsets", "rules"]
    assert [e.mode for e in entries] == [UNION, SPLIT, BROADCAST]
    assert [e.values for e in entries] == [["x"], [1, 2], {"a": 1}]
    assert dict(entries[0].schemas) == {"element": resolve_value_type("string")}
    assert dict(entries[1].schemas) == {"element": resolve_value_type("long")}
    assert dict(entries[2].schemas) == {
        "user_key": resolve_value_type("string"),
        "user_value": resolve_value_type("long"),
    }


def test_snapshot_includes_empty_states(backend):
    backend.get_list_state("offsets", "long")
    [entry] = backend.snapshot(1).states
    assert (entry.name, entry.values) == ("offsets", [])


def test_snapshot_is_isolated_from_later_mutations():
    backend = _filled_backend()
    snapshot = backend.snapshot(1)
    backend.get_list_state("offsets", "long").add(3)
    backend.get_union_list_state("all", "string").clear()
    rules = backend.get_broadcast_state("rules", "string", "long")
    rules.put("a", 100)
    rules.put("b", 2)
    backend.get_list_state("late", "long").add(5)
    assert [e.values for e in snapshot.states] == [["x"], [1, 2], {"a": 1}]
    assert [e.values for e in backend.snapshot(2).states] == [[], [5], [1, 2, 3],
                                                               {"a": 100, "b": 2}]


def test_snapshot_deep_copies_nested_elements(backend):
    state = backend.get_list_state("batches", {"type": "array", "items": "long"})
    batch = [1, 2]
    state.add(batch)
    snapshot = backend.snapshot(1)
    batch.append(3)  # the backend holds the caller's object, the snapshot a copy
    assert state.get() == [[1, 2, 3]]
    assert snapshot.states[0].values == [[1, 2]]


def test_snapshot_values_do_not_reach_back_into_the_backend():
    backend = _filled_backend()
    snapshot = backend.snapshot(1)
    snapshot.states[1].values.append(99)
    assert backend.get_list_state("offsets", "long").get() == [1, 2]


def test_snapshot_is_immutable():
    snapshot = _filled_backend().snapshot(1)
    entry = snapshot.states[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.values = []
    with pytest.raises(TypeError):
        entry.schemas["element"] = resolve_value_type("long")
    snapshot.states.clear()
    assert len(snapshot.states) == 3
    with pytest.raises(AttributeError):
        snapshot.checkpoint_id = 2


def test_snapshot_close_and_context_manager():
    snapshot = _filled_backend().snapshot(1)
    assert not snapshot.closed
    snapshot.close()
    assert snapshot.closed
    with _filled_backend().snapshot(2) as second:
        assert not second.closed
    assert second.closed


@pytest.mark.parametrize("bad", [-1, 1.0, "1", True, None])
def test_snapshot_checkpoint_id_is_validated(backend, bad):
    with pytest.raises(InvalidArgumentError, match="checkpoint id"):
        backend.snapshot(bad)


# --- backend: restore -------------------------------------------------------------------------


def _schemas(**declared):
    return {role: resolve_value_type(t) for role, t in declared.items()}


def test_restore_then_get_list_state(backend):
    backend.restore_state("offsets", SPLIT, _schemas(element="long"), [3, 4])
    assert backend.state_names() == ["offsets"]
    state = backend.get_list_state("offsets", "long")
    assert state.get() == [3, 4]
    state.add(5)
    assert backend.get_list_state("offsets", "long").get() == [3, 4, 5]


def test_restore_then_get_union_and_broadcast_state(backend):
    backend.restore_state("all", UNION, _schemas(element="string"), ["x", "y"])
    backend.restore_state("rules", BROADCAST, _schemas(user_key="string", user_value="long"),
                          {"a": 1})
    assert backend.get_union_list_state("all", "string").get() == ["x", "y"]
    assert backend.get_broadcast_state("rules", "string", "long").items() == [("a", 1)]


def test_restored_state_is_snapshotted_even_if_never_requested(backend):
    backend.restore_state("offsets", SPLIT, _schemas(element="long"), [3])
    [entry] = backend.snapshot(4).states
    assert (entry.name, entry.mode, entry.values) == ("offsets", SPLIT, [3])


def test_restore_copies_its_input(backend):
    values = [[1], [2]]
    backend.restore_state("batches", UNION, _schemas(element={"type": "array", "items": "long"}),
                          values)
    values[0].append(9)
    values.append([3])
    assert backend.get_union_list_state("batches", {"type": "array", "items": "long"}).get() == [
        [1], [2]]


def test_restored_state_requested_with_other_mode_is_a_type_mismatch(backend):
    backend.restore_state("offsets", UNION, _schemas(element="long"), [1])
    with pytest.raises(TypeMismatchError) as info:
        backend.get_list_state("offsets", "long")
    message = str(info.value)
    assert "'offsets'" in message
    assert "union list state" in message
    assert "split-distribute list state" in message


def test_restored_state_requested_with_other_types_is_a_type_mismatch(backend):
    backend.restore_state("rules", BROADCAST, _schemas(user_key="string", user_value="long"), {})
    with pytest.raises(TypeMismatchError, match="'rules'.*\"long\".*\"string\""):
        backend.get_broadcast_state("rules", "string", "string")


def test_restore_after_the_program_requested_the_state_is_refused(backend):
    backend.get_list_state("offsets", "long").add(1)
    with pytest.raises(InvalidArgumentError, match="'offsets'.*already requested"):
        backend.restore_state("offsets", SPLIT, _schemas(element="long"), [2])
    assert backend.get_list_state("offsets", "long").get() == [1]


def test_restore_after_a_failed_request_is_still_allowed(backend):
    with pytest.raises(StateSourceError):
        backend.get_list_state("offsets", "no-such-type<>")
    backend.restore_state("offsets", SPLIT, _schemas(element="long"), [2])
    assert backend.get_list_state("offsets", "long").get() == [2]


def test_restoring_a_name_twice_is_refused(backend):
    backend.restore_state("offsets", SPLIT, _schemas(element="long"), [1])
    with pytest.raises(InvalidArgumentError, match="'offsets'.*already restored"):
        backend.restore_state("offsets", SPLIT, _schemas(element="long"), [2])


@pytest.mark.parametrize(
    ("mode", "schemas", "values", "pattern"),
    [
        (SPLIT, {"user_key": "long"}, [1], "roles"),
        (BROADCAST, {"element": "long"}, {}, "roles"),
        (SPLIT, {"element": "long"}, {"a": 1}, "list"),
        (UNION, {"element": "long"}, "abc", "list"),
        (BROADCAST, {"user_key": "long", "user_value": "long"}, [(1, 2)], "mapping"),
        ("split", {"element": "long"}, [1], "DistributionMode"),
    ],
)
def test_restore_rejects_malformed_input(backend, mode, schemas, values, pattern):
    with pytest.raises(InvalidArgumentError, match=pattern) as info:
        backend.restore_state("offsets", mode, _schemas(**schemas), values)
    assert "'offsets'" in str(info.value)
    assert backend.state_names() == []


def test_restore_validates_values(backend):
    with pytest.raises(TypeMismatchError, match="'offsets'.*'seven'"):
        backend.restore_state("offsets", SPLIT, _schemas(element="long"), [1, "seven"])
    with pytest.raises(InvalidArgumentError, match="'offsets'.*None"):
        backend.restore_state("offsets", SPLIT, _schemas(element="long"), [None])
    with pytest.raises(TypeMismatchError, match="'rules'.*user_key"):
        backend.restore_state("rules", BROADCAST, _schemas(user_key="string", user_value="long"),
                              {1: 1})
    assert backend.state_names() == []


def test_round_trip_through_redistribution():
    """Two subtasks snapshot, the state is redistributed to three, each new subtask restores."""
    old_backends = [OperatorStateBackend(), OperatorStateBackend()]
    for index, old in enumerate(old_backends):
        old.get_list_state("offsets", "long").add_all([10 * index + i for i in range(3)])
        old.get_union_list_state("all", "long").add(index)
        old.get_broadcast_state("rules", "string", "long").put("limit", 5)
    snapshots = [old.snapshot(1) for old in old_backends]
    new_backends = [OperatorStateBackend() for _ in range(3)]
    for position, entry in enumerate(snapshots[0].states):
        per_subtask = [snapshot.states[position].values for snapshot in snapshots]
        redistributed = redistribute(entry.mode, per_subtask, 3)
        for new, values in zip(new_backends, redistributed, strict=True):
            new.restore_state(entry.name, entry.mode, dict(entry.schemas), values)
    assert [b.get_list_state("offsets", "long").get() for b in new_backends] == [
        [0, 1], [2, 10], [11, 12]]
    assert [b.get_union_list_state("all", "long").get() for b in new_backends] == [[0, 1]] * 3
    assert [b.get_broadcast_state("rules", "string", "long").items()
            for b in new_backends] == [[("limit", 5)]] * 3

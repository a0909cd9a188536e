"""Operator-state redistribution against vectors from Flink's own repartitioner.

``tests/fixtures/flink-redistribution/vectors.json`` was produced by running Flink's
``RoundRobinOperatorStateRepartitioner`` (see the README there). Each case is one
operator with several states; an element is named by (old subtask, index), a
broadcast copy by the old subtask that held it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from statesource.checkpointing import CheckpointWriter, SubtaskBackends
from statesource.checkpointing.restore import restore_operator_backend
from statesource.format.reader import Checkpoint
from statesource.model import DistributionMode
from statesource.redistribution import OldOperatorState, redistribute_operator, split_state_order
from statesource.state.operator_backend import OperatorStateBackend

VECTORS = Path(__file__).resolve().parents[1] / "fixtures" / "flink-redistribution" / "vectors.json"
CASES = json.loads(VECTORS.read_text())["cases"]
MODES = {"split": DistributionMode.SPLIT_DISTRIBUTE, "union": DistributionMode.UNION,
         "broadcast": DistributionMode.BROADCAST}


def old_states(case: dict) -> list[OldOperatorState]:
    states = []
    for state in case["states"]:
        holders = [s for s, count in enumerate(state["shares"]) if count is not None]
        if not holders:
            continue  # no subtask registered it: not part of the checkpoint
        mode = MODES[state["mode"]]
        if mode is DistributionMode.BROADCAST:
            shares = [{"holder": s} if c is not None else {} for s, c in
                      enumerate(state["shares"])]
        else:
            shares = [[f"{s}:{j}" for j in range(c or 0)] for s, c in enumerate(state["shares"])]
        states.append(OldOperatorState(state["name"], mode, shares, holders))
    return states


def expected(case: dict, state: OldOperatorState, subtask: int) -> list | dict:
    """What Flink gives new ``subtask`` of ``state``, in statesource's shapes.

    List elements come in old-subtask order (Flink orders a subtask's handles by a
    hash of the handle, which means nothing). At unchanged parallelism Flink gives a
    broadcast holder its own copy *and* the round-robin one, which a restore merges;
    copies are identical by contract, and statesource keeps the holder's own.
    """
    pieces = case["result"][subtask].get(state.name, [])
    if state.mode is not DistributionMode.BROADCAST:
        return [f"{old}:{j}" for old, indexes in pieces for j in indexes]
    copies = sorted(old for old, _ in pieces)
    if len(copies) > 1:
        assert case["oldParallelism"] == case["newParallelism"] and subtask in copies
        copies = [subtask]
    assert len(copies) == 1
    return {"holder": copies[0]}


@pytest.mark.parametrize("index", range(len(CASES)))
def test_redistribution_equals_flink(index):
    case = CASES[index]
    states = old_states(case)
    result = redistribute_operator(states, case["newParallelism"])
    for state in states:
        assert result[state.name] == [expected(case, state, i)
                                      for i in range(case["newParallelism"])], state.name


def test_vectors_exercise_what_they_pin():
    """The fixture covers continuation across states, wrap-around and partial holders."""
    many_split = [c for c in CASES
                  if sum(s["mode"] == "split" for s in c["states"]) > 12
                  and c["oldParallelism"] != c["newParallelism"]]
    assert many_split  # the name map grows past 16 buckets
    partial_broadcast = [c for c in CASES for s in c["states"]
                         if s["mode"] == "broadcast" and None in s["shares"]
                         and any(x is not None for x in s["shares"])]
    assert len(partial_broadcast) > 10
    assert any(c["oldParallelism"] == c["newParallelism"] for c in partial_broadcast)


def test_split_states_are_cut_in_java_hash_map_order():
    """Hand-checked: "Aa" and "BB" share String.hashCode 2112 (bucket 0 of 16);
    "offsets" has -1548407232, whose spread ``h ^ (h >>> 16)`` lands in bucket 5.

    Both bucket-0 names are met on old subtask 0, "Aa" first by name, and
    ``computeIfAbsent`` puts the later "BB" at the bucket's head (a JVM's HashMap
    iterates BB, Aa, offsets for exactly these insertions).
    """
    names = ["offsets", "Aa", "BB"]
    states = [OldOperatorState(n, DistributionMode.SPLIT_DISTRIBUTE, [[]], None) for n in names]
    assert [s.name for s in split_state_order(states)] == ["BB", "Aa", "offsets"]


def test_second_split_state_continues_where_the_first_ran_out():
    """Hand-computed from Flink's rule: 5 elements over 3 subtasks give subtasks 0, 1 the
    extra ones, so the next state starts at subtask 2."""
    first = OldOperatorState("Aa", DistributionMode.SPLIT_DISTRIBUTE, [[1, 2, 3, 4, 5]])
    second = OldOperatorState("offsets", DistributionMode.SPLIT_DISTRIBUTE, [["a", "b"]])
    result = redistribute_operator([first, second], 3)
    assert result["Aa"] == [[1, 2], [3, 4], [5]]
    assert result["offsets"] == [["b"], [], ["a"]]


def test_broadcast_comes_from_the_subtasks_that_hold_it():
    state = OldOperatorState("rules", DistributionMode.BROADCAST,
                             [{}, {"from": 1}, {}, {"from": 3}], holders=[1, 3])
    assert redistribute_operator([state], 5)["rules"] == [
        {"from": 1}, {"from": 3}, {"from": 1}, {"from": 3}, {"from": 1}]


RESTORE_CASES = [i for i, c in enumerate(CASES)
                 if len(c["states"]) >= 2 and c["oldParallelism"] != c["newParallelism"]][:12]


@pytest.mark.parametrize("index", RESTORE_CASES)
def test_checkpoint_restore_redistributes_like_flink(tmp_path, index):
    """The same vectors end to end: subtasks register their states, write, restore."""
    case = CASES[index]
    states = old_states(case)
    subtasks = []
    for old in range(case["oldParallelism"]):
        backend = OperatorStateBackend()
        for state in states:
            if old not in state.holders:
                continue
            if state.mode is DistributionMode.BROADCAST:
                backend.get_broadcast_state(state.name, "string", "long").put_all(
                    state.shares[old])
            elif state.mode is DistributionMode.UNION:
                backend.get_union_list_state(state.name, "string").update(state.shares[old])
            else:
                backend.get_list_state(state.name, "string").update(state.shares[old])
        subtasks.append(SubtaskBackends(operator=backend))
    CheckpointWriter(str(tmp_path)).write(1, {"op": subtasks})
    checkpoint = Checkpoint.open(str(tmp_path))
    for new in range(case["newParallelism"]):
        restored = restore_operator_backend(checkpoint, new, case["newParallelism"])
        for state in states:
            if state.mode is DistributionMode.BROADCAST:
                got = dict(restored.get_broadcast_state(state.name, "string", "long").items())
            elif state.mode is DistributionMode.UNION:
                got = restored.get_union_list_state(state.name, "string").get()
            else:
                got = restored.get_list_state(state.name, "string").get()
            assert got == expected(case, state, new), (state.name, new)

"""Operator state after a rescale: what the new subtasks restore is Flink's redistribution of
the original (worked out by hand below), and union state is stored so that it is restored once."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rescale_originals import write_original
from sample_state import KEYS
from statesource.checkpointing import CheckpointWriter, restore_operator_backend
from statesource.format import Checkpoint
from statesource.model import DistributionMode
from statesource.redistribution import OldOperatorState
from statesource.rescale import rescale_parallelism, stored_shares
from statesource.state.clock import ManualClock
from statesource.state.operator_backend import OperatorStateBackend


def c(*subtasks: int) -> list[str]:
    """The union state ``config`` of the given old subtasks: each contributed c<i>, d<i>."""
    return [name for i in subtasks for name in (f"c{i}", f"d{i}")]


def rule(subtask: int) -> dict:
    """The broadcast state ``rules`` old subtask ``subtask`` held."""
    return {"from": float(subtask)}


# (old, new): what each new subtask restores, by Flink's rules (split: contiguous slices of the
# elements in old-subtask order, the first N % P subtasks one more, kept as they are at unchanged
# parallelism; union: everything; broadcast: old subtask i % old), and what the new checkpoint
# stores for the union state (each surviving subtask's own contribution).
CASES = {
    (1, 2): dict(offsets=[[0, 1, 2], [3, 4]], config=[c(0)] * 2, rules=[rule(0), rule(0)],
                 stored_config=[c(0), []]),
    (2, 3): dict(offsets=[[0, 1, 2], [10, 11], [12, 13]], config=[c(0, 1)] * 3,
                 rules=[rule(0), rule(1), rule(0)], stored_config=[c(0), c(1), []]),
    (3, 1): dict(offsets=[[0, 10, 11, 20]], config=[c(0, 1, 2)], rules=[rule(0)],
                 stored_config=[c(0, 1, 2)]),
    (4, 4): dict(offsets=[[0], [10, 11, 12], [], [30]], config=[c(0, 1, 2, 3)] * 4,
                 rules=[rule(0), rule(1), rule(2), rule(3)],
                 stored_config=[c(0), c(1), c(2), c(3)]),
}


@pytest.mark.parametrize(("old", "new"), list(CASES))
def test_operator_state_is_redistributed_by_flinks_rules(tmp_path, old, new):
    expected = CASES[(old, new)]
    write_original(tmp_path, old, 128, KEYS[:30], ManualClock(0))
    rescale_parallelism(str(tmp_path), new)
    original, rescaled = (Checkpoint.open(str(tmp_path), checkpoint_id=i) for i in (1, 2))

    restored = [restore_operator_backend(rescaled, i, new) for i in range(new)]
    assert [b.get_list_state("offsets", "long").get() for b in restored] == expected["offsets"]
    assert [b.get_union_list_state("config", "string").get() for b in restored] \
        == expected["config"]
    assert [dict(b.get_broadcast_state("rules", "string", "double").items())
            for b in restored] == expected["rules"]

    assert rescaled.read_operator_state("offsets") == expected["offsets"]
    assert rescaled.read_operator_state("config") == expected["stored_config"]
    assert rescaled.read_operator_state("rules") == expected["rules"]
    if old == new:  # nothing moves: every state is carried over by reference
        assert rescaled.operator().operator_states == original.operator().operator_states
    else:
        assert all(s.path.startswith("chk-2/") for s in rescaled.operator().operator_states)


@given(shares=st.lists(st.lists(st.integers(), max_size=4), min_size=1, max_size=6),
       parallelism=st.integers(1, 8))
def test_stored_union_state_keeps_every_contribution_once_in_order(shares, parallelism):
    stored = stored_shares([OldOperatorState("u", DistributionMode.UNION, shares)],
                           parallelism)["u"]
    assert len(stored) == parallelism
    assert [e for share in stored for e in share] == [e for share in shares for e in share]
    for subtask in range(min(parallelism, len(shares)) - 1):
        assert stored[subtask] == shares[subtask]  # a surviving subtask keeps its own
    if parallelism == len(shares):
        assert stored == shares


def test_union_state_restores_once_after_repeated_rescales(tmp_path):
    write_original(tmp_path, 3, 128, KEYS[:30], ManualClock(0))
    for parallelism in (5, 2, 2, 4):
        rescale_parallelism(str(tmp_path), parallelism)
    last = Checkpoint.open(str(tmp_path))
    for parallelism in (1, 4, 6):
        for subtask in range(parallelism):
            restored = restore_operator_backend(last, subtask, parallelism)
            assert restored.get_union_list_state("config", "string").get() == c(0, 1, 2)


@pytest.mark.parametrize(("old", "new"), [(2, 3), (3, 2), (1, 4), (4, 3)])
def test_every_state_restores_as_the_original_would_at_the_new_parallelism(tmp_path, old, new):
    """Several split states per operator, with remainders: Flink's repartitioner hands out
    their extra elements in turn, so this holds only if the rescale and the restore agree."""
    subtasks = []
    for index in range(old):
        backend = OperatorStateBackend()
        backend.get_list_state("a", "long").update(list(range(10 * index, 10 * index + 3)))
        backend.get_list_state("b", "long").update([100 + index] * (index + 1))
        backend.get_list_state("c", "string").update([f"c{index}"])
        backend.get_union_list_state("u", "long").update([index])
        backend.get_broadcast_state("r", "string", "long").put("k", index)
        subtasks.append(backend)
    with CheckpointWriter(str(tmp_path)) as writer:
        writer.write(1, {"op": subtasks})
    rescale_parallelism(str(tmp_path), new)
    original, rescaled = (Checkpoint.open(str(tmp_path), checkpoint_id=i) for i in (1, 2))

    def restored(checkpoint: Checkpoint, subtask: int) -> dict:
        backend = restore_operator_backend(checkpoint, subtask, new)
        return {"a": backend.get_list_state("a", "long").get(),
                "b": backend.get_list_state("b", "long").get(),
                "c": backend.get_list_state("c", "string").get(),
                "u": backend.get_union_list_state("u", "long").get(),
                "r": dict(backend.get_broadcast_state("r", "string", "long").items())}

    for subtask in range(new):
        assert restored(rescaled, subtask) == restored(original, subtask)


@pytest.mark.parametrize(("parallelism", "expected"), [(3, 128), (100, 256), (200, 512)])
def test_an_operator_without_keyed_state_records_flinks_default_max_parallelism(
        tmp_path, parallelism, expected):
    """Flink's default: 1.5 x parallelism rounded up to a power of two, at least 128 (200 ->
    300 -> 512). Recording the parallelism instead would forbid scaling such an operator up."""
    subtasks = [OperatorStateBackend() for _ in range(parallelism)]
    for index, backend in enumerate(subtasks):
        backend.get_list_state("offsets", "long").update([index])
    with CheckpointWriter(str(tmp_path)) as writer:
        writer.write(1, {"source": subtasks})
    assert Checkpoint.open(str(tmp_path)).operator().max_parallelism == expected
    rescale_parallelism(str(tmp_path), expected)
    rescaled = Checkpoint.open(str(tmp_path))
    assert rescaled.read_operator_state("offsets") == \
        [[i] for i in range(parallelism)] + [[] for _ in range(expected - parallelism)]

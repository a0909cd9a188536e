"""One interface for both kinds of snapshot: the factory decides the kind once, and a
:class:`SourceRef` reopens the same snapshot without probing."""

from __future__ import annotations

import pickle
from pathlib import Path

import pyarrow as pa
import pytest

import statesource.sources as sources
from sample_state import populate
from statesource import CheckpointWriter, KeyedStateBackend, ManualClock
from statesource.errors import CheckpointNotFoundError
from statesource.flink.reader import FlinkCheckpoint
from statesource.format.reader import Checkpoint
from statesource.format.source import FLINK, STATESOURCE, StateSource
from statesource.sources import open_source, reopen

FLINK_FIXTURE = Path(__file__).resolve().parent / "fixtures" / "flink" / "mp256" / "canonical"
KEYS = [f"user-{i}" for i in range(40)]


@pytest.fixture(scope="module")
def statesource_root(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("sources")
    backend = KeyedStateBackend("string", 128, clock=ManualClock(1_700_000_000_000))
    populate(backend, KEYS)
    CheckpointWriter(str(root)).write(3, {"op": [backend]})
    return str(root)


def _both(statesource_root: str) -> list[StateSource]:
    return [open_source(statesource_root), open_source(str(FLINK_FIXTURE))]


def test_the_factory_decides_the_kind(statesource_root):
    checkpoint, flink = _both(statesource_root)
    assert isinstance(checkpoint, Checkpoint) and checkpoint.kind == STATESOURCE
    assert isinstance(flink, FlinkCheckpoint) and flink.kind == FLINK
    for source in (checkpoint, flink):
        assert isinstance(source, StateSource)


def test_a_ref_reopens_the_same_snapshot_without_probing(statesource_root, monkeypatch):
    opened = _both(statesource_root)
    refs = [pickle.loads(pickle.dumps(source.ref())) for source in opened]

    def no_probe(*args, **kwargs):
        raise AssertionError("a ref must not probe the kind again")

    monkeypatch.setattr(sources, "find_flink_snapshot", no_probe)
    for source, ref, uid in zip(opened, refs, ("op", "stateful")):
        again = reopen(ref)
        assert type(again) is type(source) and again.checkpoint_id == source.checkpoint_id
        op = source.operator(uid)
        state = op.keyed_states[0].name
        assert again.key_group_weights(op.uid, state) == source.key_group_weights(op.uid, state)
        first = pa.concat_tables(source.read_keyed_state(state, operator=op.uid))
        assert pa.concat_tables(again.read_keyed_state(state, operator=op.uid)).equals(first)


def test_what_only_one_kind_has_is_data_not_a_type(statesource_root):
    checkpoint, flink = _both(statesource_root)
    op = checkpoint.operator()
    state = op.keyed_states[0].name
    layout = checkpoint.arrow_layout(op.uid, state)
    assert layout is not None
    assert [kg for _, loc in layout.key_groups for kg in [loc.key_group]] == sorted(
        checkpoint.key_group_weights(op.uid, state))
    assert sum(loc.rows for _, loc in layout.key_groups) == op.keyed_state(state).rows
    assert checkpoint.timer_states() == []
    flink_op = flink.operator("stateful")
    assert flink.arrow_layout(flink_op.uid, flink_op.keyed_states[0].name) is None


def test_operator_state_shares_of_both_kinds(tmp_path):
    from statesource import OperatorStateBackend
    from statesource.checkpointing import SubtaskBackends

    backends = []
    for index in range(2):
        backend = OperatorStateBackend()
        backend.get_list_state("offsets", "long").update([index, index + 10])
        backends.append(SubtaskBackends(operator=backend))
    CheckpointWriter(str(tmp_path)).write(1, {"src": backends})
    share = open_source(str(tmp_path)).operator_state("offsets", operator="src")
    assert share.values == [[0, 10], [1, 11]] and share.rows == 4


def test_a_missing_path_names_it(tmp_path):
    with pytest.raises(CheckpointNotFoundError, match="nowhere"):
        open_source(str(tmp_path / "nowhere"))

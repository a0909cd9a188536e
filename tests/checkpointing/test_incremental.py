"""Incremental checkpoints against a dict model: random rounds, some full, incremental, failing.

Every committed checkpoint must restore (at its parallelism and another) to
exactly the model at its time, however long the chain of references behind
it, including after retention deleted older checkpoints.
"""

from __future__ import annotations

import json

import pytest

from checkpointing.model import DESCRIPTORS, MAX_PARALLELISM, PARALLELISM, Job
from checkpointing.rounds import check_restores, run_rounds
from statesource.checkpointing import CheckpointWriter, restore_keyed_backend
from statesource.errors import CorruptCheckpointError
from statesource.format import Checkpoint, retain
from statesource.format.keyed_state_meta import KeyedStateMeta
from statesource.format.locations import DataFile, KeyGroupLocation
from statesource.keygroups import KeyGroupRange


@pytest.mark.parametrize("seed", range(4))
def test_every_checkpoint_restores_to_the_model(tmp_path, monkeypatch, seed):
    root = str(tmp_path / "root")
    committed = run_rounds(root, seed, monkeypatch)
    for checkpoint_id, expected in committed.items():  # later ones never broke earlier ones
        check_restores(root, checkpoint_id, expected)


@pytest.mark.parametrize("keep", [1, 2, 3])
def test_retention_after_incremental_chains_keeps_every_kept_checkpoint(tmp_path, monkeypatch,
                                                                        keep):
    root = str(tmp_path / "root")
    committed = run_rounds(root, 7 + keep, monkeypatch)
    plan = retain(root, keep)
    assert list(plan.kept) == sorted(committed)[-keep:]
    for checkpoint_id in plan.kept:
        Checkpoint.open(root, checkpoint_id=checkpoint_id).verify()
        check_restores(root, checkpoint_id, committed[checkpoint_id])
    remaining = {p.relative_to(tmp_path / "root").as_posix()
                 for p in (tmp_path / "root").rglob("*.arrow")}
    referenced = {path for i in plan.kept
                  for path in Checkpoint.open(root, checkpoint_id=i).metadata.referenced_files()}
    assert remaining == referenced


def test_an_unchanged_state_is_referenced_whole_and_writes_no_file(tmp_path):
    job = Job(1)
    job.mutate(40)
    root = tmp_path / "root"
    with CheckpointWriter(str(root), incremental=True) as writer:
        first = writer.write(1, {"op": job.backends})
        second = writer.write(2, {"op": job.backends})
    assert first.metadata.format_version == 2
    assert not (root / "chk-2" / "data").exists()
    for before, after in zip(first.metadata.operator().keyed_states,
                             second.metadata.operator().keyed_states):
        assert before.location_of() == after.location_of()


def test_a_base_in_another_root_means_a_full_checkpoint(tmp_path):
    job = Job(2)
    job.mutate(40)
    with CheckpointWriter(str(tmp_path / "a")) as writer:
        writer.write(1, {"op": job.backends})
    job.mutate(1, hot_keys=1)
    with CheckpointWriter(str(tmp_path / "b"), incremental=True) as writer:
        info = writer.write(2, {"op": job.backends})
    assert info.metadata.format_version == 2
    assert all(f.path.startswith("chk-2/") for s in info.metadata.operator().keyed_states
               for f in s.files)
    check_restores(str(tmp_path / "b"), 2, job.expected())


def test_a_retired_base_means_a_full_checkpoint(tmp_path):
    job = Job(3)
    job.mutate(40)
    root = str(tmp_path / "root")
    with CheckpointWriter(root, incremental=True) as writer:
        writer.write(1, {"op": job.backends})
        writer.write(2, {"op": job.backends}, incremental=False)
        retain(root, 1)
        (tmp_path / "root" / "chk-2" / "_metadata.json").rename(tmp_path / "gone.json")
        job.mutate(1, hot_keys=1)
        # The newest metadata the writer knows is checkpoint 2's: it builds on it, the
        # commit finds no complete checkpoint listing those files, and writes in full.
        info = writer.write(3, {"op": job.backends})
    check_restores(root, 3, job.expected())
    assert all(path.startswith("chk-3/") for path in info.metadata.referenced_files())


@pytest.mark.parametrize("parallelism", [PARALLELISM, 3])
def test_a_restored_backend_builds_on_the_checkpoint_it_came_from(tmp_path, parallelism):
    job = Job(4)
    job.mutate(60)
    root = str(tmp_path / "root")
    with CheckpointWriter(root, incremental=True) as writer:
        writer.write(1, {"op": job.backends})
        checkpoint = Checkpoint.open(root)
        job.backends = [restore_keyed_backend(checkpoint, i, parallelism, clock=job.clock)
                        for i in range(parallelism)]
        job.handles = [{name: b.get_state(d) for name, d in DESCRIPTORS.items()}
                       for b in job.backends]
        unchanged = writer.write(2, {"op": job.backends})
        assert written_now(unchanged) <= {"ttl_value"}  # rewritten only if a row expired
        check_restores(root, 2, job.expected())
    with CheckpointWriter(root, incremental=True) as other_writer:  # a restarted program
        checkpoint = Checkpoint.open(root)
        backends = [restore_keyed_backend(checkpoint, i, PARALLELISM, clock=job.clock)
                    for i in range(PARALLELISM)]
        info = other_writer.write(3, {"op": backends})
    assert written_now(info) <= {"ttl_value"}  # this writer never saw its oldest access
    check_restores(root, 3, job.expected())


def written_now(info) -> set[str]:
    """The states of which the checkpoint wrote a file of its own."""
    own = f"chk-{info.checkpoint_id}/"
    return {s.name for s in info.metadata.operator().keyed_states
            if any(f.path.startswith(own) for f in s.files)}


def test_a_restore_from_another_root_writes_everything_first(tmp_path):
    job = Job(6)
    job.mutate(60)
    with CheckpointWriter(str(tmp_path / "a")) as writer:
        writer.write(1, {"op": job.backends})
    checkpoint = Checkpoint.open(str(tmp_path / "a"))
    backends = [restore_keyed_backend(checkpoint, i, PARALLELISM, clock=job.clock)
                for i in range(PARALLELISM)]
    with CheckpointWriter(str(tmp_path / "b"), incremental=True) as writer:
        info = writer.write(2, {"op": backends})
    assert all(f.path.startswith("chk-2/") for s in info.metadata.operator().keyed_states
               for f in s.files)
    check_restores(str(tmp_path / "b"), 2, job.expected())


def _incremental_metadata(tmp_path) -> tuple[str, dict]:
    job = Job(5)
    job.mutate(60)
    root = tmp_path / "root"
    with CheckpointWriter(str(root), incremental=True) as writer:
        writer.write(1, {"op": job.backends})
        job.mutate(2, hot_keys=1)
        writer.write(2, {"op": job.backends})
    path = root / "chk-2" / "_metadata.json"
    document = json.loads(path.read_text())
    assert document["formatVersion"] == 3
    return str(root), document


def _state_with_two_files(document: dict) -> dict:
    for state in document["operators"][0]["keyedStates"]:
        if len(state["files"]) >= 2:
            return state
    raise AssertionError("no state references an earlier file")


def test_version_3_refuses_a_key_group_in_two_files():
    location = KeyGroupLocation(3, 0, 1, 16, 100, 1, 1, 0)
    state = KeyedStateMeta.of(DESCRIPTORS["value"].declaration, (
        DataFile("chk-1/data/a.arrow", KeyGroupRange(0, 7), 200, (location,)),
        DataFile("chk-2/data/b.arrow", KeyGroupRange(0, 7), 200, (location,)),
    ))
    with pytest.raises(ValueError, match="key group 3 has rows in both"):
        state.check_files(3)
    with pytest.raises(ValueError, match="overlap"):
        state.check_files(2)


def test_version_3_refuses_a_file_listed_twice(tmp_path):
    root, document = _incremental_metadata(tmp_path)
    state = _state_with_two_files(document)
    state["files"].append(dict(state["files"][0], keyGroups={
        name: [] for name in state["files"][0]["keyGroups"]}))
    (tmp_path / "root" / "chk-2" / "_metadata.json").write_text(json.dumps(document))
    with pytest.raises(CorruptCheckpointError, match="more than once"):
        Checkpoint.open(root, checkpoint_id=2)


def test_version_2_still_refuses_overlapping_files(tmp_path):
    root, document = _incremental_metadata(tmp_path)
    document["formatVersion"] = 2
    (tmp_path / "root" / "chk-2" / "_metadata.json").write_text(json.dumps(document))
    with pytest.raises(CorruptCheckpointError, match="overlap"):
        Checkpoint.open(root, checkpoint_id=2)


def test_key_groups_are_read_in_order_across_interleaved_files(tmp_path):
    root, _ = _incremental_metadata(tmp_path)
    checkpoint = Checkpoint.open(root, checkpoint_id=2)
    for state in checkpoint.operator().keyed_states:
        groups = [table.column("key_group")[0].as_py()
                  for table in checkpoint.read_keyed_state(state.name)]
        assert groups == sorted(groups) and len(groups) == len(state.location_of())
    assert MAX_PARALLELISM == 16


def test_snapshots_that_never_complete_keep_their_changes_in_bounded_memory(tmp_path):
    job = Job(8)
    job.mutate(40)
    root = str(tmp_path / "root")
    with CheckpointWriter(root, incremental=True) as writer:
        writer.write(1, {"op": job.backends})
        job.touched = set()
        for _ in range(40):  # abandoned snapshots: taken, never written
            job.mutate(1, hot_keys=1)
            for backend in job.backends:
                backend.snapshot(0).close()
        tables = [table for backend in job.backends for table in backend._tables.values()]
        assert max(len(table.changes._captured) for table in tables) <= 17
        info = writer.write(2, {"op": job.backends})
    check_restores(root, 2, job.expected())
    states = {s.name: s for s in info.metadata.operator().keyed_states}
    own = {(name, loc.key_group) for name, s in states.items() if name != "ttl_value"
           for f in s.files if f.path.startswith("chk-2/") for loc in f.locations}
    assert own == {(name, kg) for name, kg in job.touched  # touched and not emptied
                   if name != "ttl_value" and kg in states[name].location_of()}

"""Format v2: checkpoints that reference earlier checkpoints' files; v1 stays readable."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import shutil
from pathlib import Path

import pytest

from sample_state import KEYS, dump, merged, populate
from statesource.checkpointing import (
    CheckpointWriter,
    SubtaskBackends,
    restore_keyed_backend,
    restore_operator_backend,
)
from statesource.errors import CheckpointExistsError, CorruptCheckpointError
from statesource.format import Checkpoint, commit_checkpoint
from statesource.format.storage import resolve
from statesource.keygroups import assign_to_key_group, key_group_range_for_operator
from statesource.state.clock import ManualClock
from statesource.state.keyed_backend import KeyedStateBackend
from statesource.types import STRING

V1_FIXTURE = Path(__file__).parent.parent / "fixtures" / "v1-checkpoints"
"""Written by the format-v1 code (commit 7490946) with the recipe of ``v1_model``."""


def v1_model(clock: ManualClock) -> dict:
    """What the v1 fixture holds: two subtasks, each ``populate``-d at time 5,000 with
    the first 40 keys that fall into its key groups."""
    subtasks = []
    for index in range(2):
        subtask = KeyedStateBackend("string", 128, key_group_range_for_operator(128, 2, index),
                                    clock=clock)
        populate(subtask, [k for k in KEYS[:40] if assign_to_key_group(k, STRING, 128)
                           in subtask.key_group_range], partly_expired=False)
        subtasks.append(dump(subtask))
    return merged(subtasks)


@pytest.fixture
def clock():
    return ManualClock(5_000)


@pytest.fixture
def v1_root(tmp_path):
    root = tmp_path / "checkpoints"
    shutil.copytree(V1_FIXTURE, root)
    return root


def test_v1_fixture_reads_and_restores_as_written(v1_root, clock):
    checkpoint = Checkpoint.open(str(v1_root))
    assert checkpoint.metadata.format_version == 1
    restored = [restore_keyed_backend(checkpoint, i, 3, clock=clock) for i in range(3)]
    assert merged([dump(b) for b in restored]) == v1_model(clock)
    assert checkpoint.read_operator_state("offsets") == [[0, 1, 2], [10, 11, 12]]
    assert restore_operator_backend(checkpoint, 0, 1).get_union_list_state(
        "config", "string").get() == ["c0", "c1"]
    checkpoint.verify()


def test_v1_paths_are_rebased_onto_the_root(v1_root):
    checkpoint = Checkpoint.open(str(v1_root))
    recorded = json.loads((v1_root / "chk-1" / "_metadata.json").read_text())
    first = recorded["operators"][0]["keyedStates"][0]["files"][0]["path"]
    assert first.startswith("data/")
    assert all(path.startswith("chk-1/data/")
               for path in checkpoint.metadata.referenced_files())


def carry_over(root: Path, base: Checkpoint, checkpoint_id: int) -> Checkpoint:
    """A new checkpoint that is ``base`` by reference: no data file is written."""
    metadata = dataclasses.replace(base.metadata, checkpoint_id=checkpoint_id)
    commit_checkpoint(resolve(str(root)), metadata)
    return Checkpoint.open(str(root), checkpoint_id=checkpoint_id)


def test_a_checkpoint_referencing_earlier_files_restores_identically(tmp_path, clock):
    model = KeyedStateBackend("string", 128, clock=clock)
    populate(model, KEYS)
    CheckpointWriter(str(tmp_path)).write(1, {"op": [model]})
    first = Checkpoint.open(str(tmp_path))
    files_before = sorted(p for p in tmp_path.rglob("*.arrow"))
    second = carry_over(tmp_path, first, 2)
    assert sorted(p for p in tmp_path.rglob("*.arrow")) == files_before  # no bytes copied
    assert set(second.metadata.referenced_files()) == set(first.metadata.referenced_files())
    assert all(p.startswith("chk-1/") for p in second.metadata.referenced_files())
    for parallelism in (1, 3):
        restored = [restore_keyed_backend(second, i, parallelism, clock=clock)
                    for i in range(parallelism)]
        assert merged([dump(b) for b in restored]) == dump(model)


def test_a_v2_checkpoint_can_reference_v1_files(v1_root, clock):
    second = carry_over(v1_root, Checkpoint.open(str(v1_root)), 2)
    assert second.metadata.format_version == 2
    assert json.loads((v1_root / "chk-2" / "_metadata.json").read_text())["formatVersion"] == 2
    restored = [restore_keyed_backend(second, i, 2, clock=clock) for i in range(2)]
    assert merged([dump(b) for b in restored]) == v1_model(clock)
    assert second.read_operator_state("rules") == [{"r": 1, "s": 2}] * 2


def test_commit_refuses_an_existing_id_and_a_missing_reference(v1_root):
    base = Checkpoint.open(str(v1_root))
    with pytest.raises(CheckpointExistsError, match="checkpoint 1 already exists"):
        commit_checkpoint(resolve(str(v1_root)), base.metadata)
    victim = next(iter(base.metadata.referenced_files()))
    os.remove(v1_root / victim)
    with pytest.raises(CorruptCheckpointError, match=f"{victim}.*missing"):
        carry_over(v1_root, base, 2)
    assert not (v1_root / "chk-2" / "_metadata.json").exists()


def _commit_racer(root: str, checkpoint_id: int, barrier, results) -> None:
    base = Checkpoint.open(root, checkpoint_id=1)
    metadata = dataclasses.replace(base.metadata, checkpoint_id=checkpoint_id)
    barrier.wait()
    try:
        commit_checkpoint(resolve(root), metadata)
        results.put("won")
    except CheckpointExistsError:
        results.put("lost")


def test_of_racing_processes_committing_one_id_exactly_one_wins(v1_root):
    context = multiprocessing.get_context("fork")
    for attempt in range(5):
        checkpoint_id = 10 + attempt
        barrier, results = context.Barrier(4), context.Queue()
        racers = [context.Process(target=_commit_racer,
                                  args=(str(v1_root), checkpoint_id, barrier, results))
                  for _ in range(4)]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join(30)
        outcomes = sorted(results.get(timeout=5) for _ in racers)
        assert outcomes == ["lost", "lost", "lost", "won"]
        leftovers = [p.name for p in (v1_root / f"chk-{checkpoint_id}").iterdir()]
        assert leftovers == ["_metadata.json"]


def _write_metadata(root: Path, checkpoint_id: int, document: dict) -> None:
    directory = root / f"chk-{checkpoint_id}"
    directory.mkdir()
    (directory / "_metadata.json").write_text(json.dumps(document))


@pytest.mark.parametrize("bad_path", [
    "/etc/passwd", "file:///etc/passwd", "s3://bucket/x.arrow", "chk-1/../../outside.arrow",
    "../outside.arrow", "chk-1//data/x.arrow", "chk-1/./data/x.arrow", "chk-1\\data\\x.arrow",
    "", "C:/data/x.arrow",
])
def test_metadata_paths_outside_the_root_are_refused_as_corruption(v1_root, bad_path):
    document = json.loads((v1_root / "chk-1" / "_metadata.json").read_text())
    document["formatVersion"] = 2
    document["checkpointId"] = 2
    document["operators"][0]["keyedStates"][0]["files"][0]["path"] = bad_path
    _write_metadata(v1_root, 2, document)
    with pytest.raises(CorruptCheckpointError, match="not a relative path inside"):
        Checkpoint.open(str(v1_root), checkpoint_id=2)


def test_a_symlink_escaping_the_root_is_refused(v1_root, tmp_path):
    checkpoint = Checkpoint.open(str(v1_root))
    state = checkpoint.operator().keyed_state("value")
    outside = tmp_path / "outside"
    outside.mkdir()
    target = v1_root / state.files[0].path
    shutil.move(target, outside / "stolen.arrow")
    target.symlink_to(outside / "stolen.arrow")
    with pytest.raises(CorruptCheckpointError, match="outside the checkpoint root") as info:
        list(checkpoint.read_keyed_state("value"))
    assert "stolen" not in str(info.value) and "outside/" not in str(info.value)


def test_a_symlink_inside_the_root_is_followed(v1_root, clock):
    checkpoint = Checkpoint.open(str(v1_root))
    path = checkpoint.operator().keyed_state("value").files[0].path
    moved = v1_root / "elsewhere.arrow"
    shutil.move(v1_root / path, moved)
    (v1_root / path).symlink_to(moved)
    tables = list(checkpoint.read_keyed_state("value"))
    assert sum(t.num_rows for t in tables) == checkpoint.operator().keyed_state("value").rows


def test_the_writer_refuses_an_id_another_writer_committed(tmp_path, clock):
    backend = KeyedStateBackend("string", 128, clock=clock)
    populate(backend, KEYS[:10])
    CheckpointWriter(str(tmp_path)).write(1, {"op": [backend]})
    with pytest.raises(CheckpointExistsError, match="checkpoint 1 already exists"):
        CheckpointWriter(str(tmp_path)).write(1, {"op": [SubtaskBackends(keyed=backend)]})

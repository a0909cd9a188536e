"""Checkpoints of format version 4 (tests/fixtures/v4-checkpoints) stay readable.

Their delta runs hold prior rows inside each run; later versions lay runs out
otherwise. Every checkpoint must restore to the model recorded when it was
written, every change feed must be the model's difference, and an incremental
checkpoint written on top of them must hold the model too, its new runs
applying over the old ones.
"""

from __future__ import annotations

import copy
import itertools
import json
import shutil
from pathlib import Path

import pytest
from format.test_change_feed import feed_changes, model_changes

from checkpointing.model import DESCRIPTORS
from rewritten_files import rewrite_data_file, with_column
from sample_state import dump, merged
from statesource.checkpointing import CheckpointWriter, restore_keyed_backend
from statesource.errors import CorruptCheckpointError
from statesource.format import Checkpoint
from statesource.format.changefeed import ChangeFeed

FIXTURE = Path(__file__).parent.parent / "fixtures" / "v4-checkpoints"


def _expected() -> dict[int, dict[str, dict]]:
    document = json.loads((FIXTURE / "expected.json").read_text())
    return {int(checkpoint_id): {name: {(key, namespace): stored
                                        for key, namespace, stored in entries}
                                 for name, entries in states.items()}
            for checkpoint_id, states in document.items()}


EXPECTED = _expected()


def _restored(root: Path, checkpoint_id: int, parallelism: int) -> dict:
    checkpoint = Checkpoint.open(str(root), checkpoint_id=checkpoint_id)
    return merged([dump(restore_keyed_backend(checkpoint, i, parallelism))
                   for i in range(parallelism)])


@pytest.fixture
def root(tmp_path) -> Path:
    copy = tmp_path / "root"
    shutil.copytree(FIXTURE / "root", copy)
    return copy


def test_the_fixture_is_of_version_4_with_runs(root):
    newest = Checkpoint.open(str(root), checkpoint_id=4)
    assert newest.metadata.format_version == 4
    assert all(state.delta_files for state in newest.operator().keyed_states)


@pytest.mark.parametrize("checkpoint_id", sorted(EXPECTED))
def test_every_checkpoint_restores_to_the_model(root, checkpoint_id):
    for parallelism in (1, 3):
        assert _restored(root, checkpoint_id, parallelism) == EXPECTED[checkpoint_id]
    assert Checkpoint.open(str(root), checkpoint_id=checkpoint_id).verify() > 0


def test_every_change_feed_is_the_model_difference(root):
    for start, end in itertools.combinations(sorted(EXPECTED), 2):
        for name in EXPECTED[end]:
            feed = ChangeFeed.open(str(root), start, end, state=name)
            assert feed_changes(feed) == model_changes(
                name, EXPECTED[start][name], EXPECTED[end][name]), (start, end, name)


def _mutate(backend, handles: dict, model: dict, keys: range) -> None:
    """Updates every fourth key of ``keys`` in each state, removes a few, inserts one."""
    for key in keys[::4]:
        backend.set_current_key(key)
        handles["value"].update(key * 7)
        model["value"][(key, None)] = key * 7
        backend.set_current_namespace(1)
        handles["windowed"].clear()
        model["windowed"].pop((key, 1), None)
        handles["list"].add(key)
        model["list"].setdefault((key, None), []).append(key)
        handles["map"].put("u9", key)
        model["map"].setdefault((key, None), {})["u9"] = key


def test_incremental_checkpoints_build_on_version_4_runs(root):
    backend = restore_keyed_backend(Checkpoint.open(str(root), checkpoint_id=4), 0, 1)
    handles = {name: backend.get_state(DESCRIPTORS[name]) for name in EXPECTED[4]}
    model = copy.deepcopy(EXPECTED[4])
    with CheckpointWriter(str(root), incremental=True) as writer:
        carried = writer.write(5, {"op": [backend]})  # nothing changed: all carried
        assert carried.metadata.format_version == 4
        assert _restored(root, 5, 1) == EXPECTED[4]
        _mutate(backend, handles, model, range(0, 40))
        writer.write(6, {"op": [backend]})
        _mutate(backend, handles, model, range(1, 600, 3))
        info = writer.write(7, {"op": [backend]})
    state = info.metadata.operator().keyed_state("value")
    old_files = {d.path for d in state.delta_files
                 if not d.path.startswith(("chk-6", "chk-7"))}
    chains = [[d.path in old_files for d, _ in runs] for runs in state.runs_of().values()]
    assert any(len(set(chain)) == 2 for chain in chains)  # new runs over version-4 runs
    assert _restored(root, 7, 2) == model
    for name in model:
        assert feed_changes(ChangeFeed.open(str(root), 4, 7, state=name)) == model_changes(
            name, EXPECTED[4][name], model[name])


@pytest.mark.parametrize("kind", [None, 3, -1])
def test_a_run_row_of_no_known_kind_is_refused_not_taken_for_a_tombstone(root, kind):
    state = next(state for state in Checkpoint.open(str(root), checkpoint_id=4)
                 .operator().keyed_states if state.delta_files)

    def first_row(index, batches):
        if index:
            return batches
        kinds = batches[0].column("delta_kind").to_pylist()
        return [with_column(batches[0], "delta_kind", [kind, *kinds[1:]]), *batches[1:]]

    rewrite_data_file(root, 4, state.delta_files[-1].path, first_row)
    with pytest.raises(CorruptCheckpointError, match="rows of no known delta_kind"):
        list(Checkpoint.open(str(root), checkpoint_id=4).read_keyed_state(state.name))

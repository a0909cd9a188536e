"""Rescaling to a new parallelism: Flink's key-group assignment at the new parallelism, the
same rows, no bytes of keyed state copied, the original untouched."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from rescale_originals import file_bytes, subtasks_of, write_original
from sample_state import KEYS, dump, merged
from statesource.checkpointing import (
    CheckpointWriter,
    restore_keyed_backend,
    restore_operator_backend,
)
from statesource.format import Checkpoint
from statesource.keygroups import assign_to_key_group
from statesource.rescale import rescale_parallelism
from statesource.state.clock import ManualClock
from statesource.types import STRING

V1_FIXTURE = Path(__file__).parents[1] / "fixtures" / "v1-checkpoints"


@pytest.fixture
def clock():
    return ManualClock(5_000)


def rows_of(checkpoint: Checkpoint, state: str) -> Counter:
    """The multiset of a keyed state's rows, as the data files hold them."""
    return Counter(repr(sorted(row.items())) for table in checkpoint.read_keyed_state(state)
                   for row in table.to_pylist())


@pytest.mark.parametrize(("old", "new", "max_parallelism", "light"), [
    (1, 1, 1, False),
    (3, 2, 7, False),
    (2, 7, 7, False),
    (7, 3, 7, False),
    (4, 7, 1000, False),
    (7, 1, 1000, False),
    (2, 3, 128, False),
    (2, 5, 32768, True),
])
def test_restoring_the_rescaled_checkpoint_puts_every_key_where_flink_does(
        tmp_path, clock, old, new, max_parallelism, light):
    keys = KEYS if not light else KEYS[:120]
    model = write_original(tmp_path, old, max_parallelism, keys, clock, light=light)
    original_files = file_bytes(tmp_path / "chk-1")
    lines: list[str] = []

    info = rescale_parallelism(str(tmp_path), new, progress=lines.append)

    assert info.checkpoint_id == 2
    original, rescaled = (Checkpoint.open(str(tmp_path), checkpoint_id=i) for i in (1, 2))
    op = rescaled.operator()
    assert (op.parallelism, op.max_parallelism) == (new, max_parallelism)
    restored = [dump(restore_keyed_backend(rescaled, i, new, clock=clock)) for i in range(new)]
    for subtask, content in enumerate(restored):
        for entries in content.values():
            for key, _ in entries:
                # Flink: operatorIndex = keyGroup * parallelism / maxParallelism
                key_group = assign_to_key_group(key, STRING, max_parallelism)
                assert key_group * new // max_parallelism == subtask, key
    assert merged(restored) == model
    for state in op.keyed_states:
        assert rows_of(rescaled, state.name) == rows_of(original, state.name)
    # the rows per subtask printed before the commit are those the data files hold in the
    # key groups Flink gives each subtask
    after = next(line for line in lines if "rows per subtask after" in line)
    counts = Counter(key_group * new // max_parallelism for state in op.keyed_states
                     for table in rescaled.read_keyed_state(state.name)
                     for key_group in table.column("key_group").to_pylist())
    assert after.split(": ", 1)[1].startswith(
        ", ".join(f"{i}: {counts[i]:,}" for i in range(min(new, 8))))
    # untouched original, keyed state shared: chk-2 holds only metadata and operator state
    assert file_bytes(tmp_path / "chk-1") == original_files
    keyed_files = {f.path for s in op.keyed_states for f in s.files}
    assert keyed_files == {f.path for s in original.operator().keyed_states for f in s.files}
    assert all(path.startswith("chk-1/") for path in keyed_files)
    new_files = {p.name for p in (tmp_path / "chk-2").rglob("*.arrow")}
    assert all(".op." in name for name in new_files)
    assert len(new_files) == (0 if new == old else 3)
    for subtask in range(new):
        assert (restore_operator_backend(rescaled, subtask, new).get_list_state(
                    "offsets", "long").get()
                == restore_operator_backend(original, subtask, new).get_list_state(
                    "offsets", "long").get())
    rescaled.verify()


def test_only_the_chosen_operator_is_rescaled(tmp_path, clock):
    with CheckpointWriter(str(tmp_path)) as writer:
        writer.write(1, {"a": subtasks_of(2, 128, KEYS[:50], clock),
                         "b": subtasks_of(3, 128, KEYS[50:100], clock)})
    lines: list[str] = []
    rescale_parallelism(str(tmp_path), 4, operator="b", progress=lines.append)
    original, rescaled = (Checkpoint.open(str(tmp_path), checkpoint_id=i) for i in (1, 2))
    assert rescaled.operator("a") == original.operator("a")
    assert rescaled.operator("b").parallelism == 4
    assert rescaled.operator("b").keyed_states == original.operator("b").keyed_states
    assert lines[0] == "operator b: parallelism 3 -> 4 (max parallelism 128)"
    assert not any("operator a" in line for line in lines)


def test_an_older_checkpoint_can_be_rescaled_into_a_chosen_id(tmp_path, clock):
    model = write_original(tmp_path, 2, 128, KEYS[:80], clock)
    write_original(tmp_path, 2, 128, KEYS[80:100], clock, checkpoint_id=2)
    info = rescale_parallelism(str(tmp_path), 3, checkpoint_id=1, new_checkpoint_id=10)
    assert info.checkpoint_id == 10
    rescaled = Checkpoint.open(str(tmp_path))
    assert rescaled.checkpoint_id == 10
    assert merged([dump(restore_keyed_backend(rescaled, i, 3, clock=clock))
                   for i in range(3)]) == model
    default = rescale_parallelism(str(tmp_path / "chk-2"), 1)
    assert default.checkpoint_id == 11  # one more than the newest under the root


def test_rescaling_a_rescaled_checkpoint_keeps_reading_the_first_files(tmp_path, clock):
    model = write_original(tmp_path, 2, 128, KEYS, clock)
    for parallelism in (3, 5, 1, 4):
        rescale_parallelism(str(tmp_path), parallelism)
    last = Checkpoint.open(str(tmp_path))
    assert last.checkpoint_id == 5
    assert all(path.startswith("chk-1/") for s in last.operator().keyed_states
               for path in {f.path for f in s.files})
    assert merged([dump(restore_keyed_backend(last, i, 4, clock=clock))
                   for i in range(4)]) == model
    union = restore_operator_backend(last, 2, 4).get_union_list_state("config", "string").get()
    assert union == ["c0", "d0", "c1", "d1"]  # once each, in the original order


def test_a_version_1_checkpoint_is_rescaled_into_version_2_sharing_its_files(tmp_path, clock):
    root = tmp_path / "root"
    shutil.copytree(V1_FIXTURE, root)
    original = Checkpoint.open(str(root))
    model = merged([dump(restore_keyed_backend(original, i, 2, clock=clock)) for i in range(2)])
    rescale_parallelism(str(root), 3)
    rescaled = Checkpoint.open(str(root))
    assert (rescaled.checkpoint_id, rescaled.metadata.format_version) == (2, 2)
    assert merged([dump(restore_keyed_backend(rescaled, i, 3, clock=clock))
                   for i in range(3)]) == model
    assert rescaled.read_operator_state("offsets") == [[0, 1], [2, 10], [11, 12]]
    assert rescaled.read_operator_state("config") == [["c0"], ["c1"], []]
    assert rescaled.read_operator_state("rules") == [{"r": 1, "s": 2}] * 3
    assert file_bytes(root / "chk-1") == file_bytes(V1_FIXTURE / "chk-1")

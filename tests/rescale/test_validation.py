"""Refused rescales: a clear error naming the culprit, and nothing written."""

from __future__ import annotations

import pytest

from rescale_originals import file_bytes, subtasks_of, write_original
from sample_state import KEYS
from statesource.checkpointing import CheckpointWriter
from statesource.cli import main
from statesource.errors import (
    CheckpointExistsError,
    CheckpointNotFoundError,
    InvalidArgumentError,
    StateNotFoundError,
)
from statesource.rescale import rescale_parallelism
from statesource.state.clock import ManualClock


@pytest.fixture
def root(tmp_path):
    with CheckpointWriter(str(tmp_path)) as writer:
        writer.write(1, {"small": subtasks_of(2, 8, KEYS[:20], ManualClock(0)),
                         "large": subtasks_of(3, 128, KEYS[:20], ManualClock(0))})
    return tmp_path


@pytest.mark.parametrize(("arguments", "error", "message"), [
    (dict(parallelism=0), InvalidArgumentError,
     r"parallelism 0 is outside \[1, 8\] for operator 'small', whose max parallelism is 8"),
    (dict(parallelism=9), InvalidArgumentError, r"parallelism 9 is outside \[1, 8\]"),
    (dict(parallelism=129, operator="large"), InvalidArgumentError,
     r"parallelism 129 is outside \[1, 128\] for operator 'large'"),
    (dict(parallelism="3"), InvalidArgumentError, "parallelism must be an int, got '3'"),
    (dict(parallelism=True), InvalidArgumentError, "parallelism must be an int, got True"),
    (dict(parallelism=2, operator="nope"), StateNotFoundError,
     "no operator named 'nope'; available: 'small', 'large'"),
    (dict(parallelism=2, checkpoint_id=7), CheckpointNotFoundError,
     r"no complete checkpoint 7 under .*; complete checkpoints: \[1\]"),
    (dict(parallelism=2, new_checkpoint_id=1), CheckpointExistsError,
     "checkpoint 1 already exists"),
    (dict(parallelism=2, new_checkpoint_id=-1), InvalidArgumentError,
     r"checkpoint id -1 is outside \[0, "),
])
def test_a_refused_rescale_writes_nothing(root, arguments, error, message):
    before = file_bytes(root)
    with pytest.raises(error, match=message):
        rescale_parallelism(str(root), **arguments)
    assert file_bytes(root) == before
    assert sorted(p.name for p in root.iterdir()) == ["chk-1"]


def test_a_missing_path_is_refused(tmp_path):
    with pytest.raises(CheckpointNotFoundError, match="does not exist"):
        rescale_parallelism(str(tmp_path / "nowhere"), 2)
    assert not (tmp_path / "nowhere").exists()


def test_the_command_line_reports_errors_without_a_traceback(root, capsys):
    assert main(["rescale", str(root), "--parallelism", "12"]) == 1
    assert "statesource rescale: error: parallelism 12 is outside [1, 8] for operator" \
        " 'small'" in capsys.readouterr().err
    assert main(["rescale", str(root), "--parallelism", "2", "--operator", "x"]) == 1
    assert "available: 'small', 'large'" in capsys.readouterr().err
    assert sorted(p.name for p in root.iterdir()) == ["chk-1"]


def test_the_command_line_rescales_and_prints_before_committing(tmp_path, capsys):
    write_original(tmp_path, 2, 128, KEYS[:40], ManualClock(0))
    assert main(["rescale", str(tmp_path), "--parallelism", "4"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "operator op: parallelism 2 -> 4 (max parallelism 128)"
    assert out[1].startswith("  rows per subtask now (all keyed states): 0: ")
    assert out[2].startswith("  rows per subtask after (all keyed states): 0: ")
    assert out[3] == "  key groups per subtask after: 32 each (128 is a multiple of 4: equal loads)"
    assert out[-1].startswith(f"committed checkpoint 2 at {tmp_path / 'chk-2'}")

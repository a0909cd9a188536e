"""``write_state`` and ``rescale --max-parallelism`` (Spark drivers) raced and killed -9."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.race import Paused, cli, files_on_disk, referenced, retain, verify_all

pytestmark = pytest.mark.spark

PUBLISH = "statesource.format.commit:_publish"


def write_state(root: Path, base: int, checkpoint_id: int) -> str:
    """CODE: a Spark driver rewriting state last_seen of ``base`` as ``checkpoint_id``."""
    return ("from statesource.spark import session, write_state\n"
            "spark = session(key_group_functions=False)\n"
            f"df = spark.read.format('flinkstate').option('state', 'last_seen')"
            f".option('checkpointId', '{base}').load({str(root)!r})\n"
            f"info = write_state(df, {str(root)!r}, 'user-activity', 'last_seen',"
            f" base_checkpoint_id={base}, checkpoint_id={checkpoint_id})\n"
            "print('published', info.checkpoint_id)\n")


def test_write_state_paused_at_publish_survives_retain(root, tmp_path):
    writer = Paused(tmp_path / "hook", PUBLISH, write_state(root, 1, 4))
    retain(root, "--keep", "1")
    done = writer.resume()
    assert done.returncode == 0 and "published 4" in done.stdout, done.stderr
    assert verify_all(root) == [3, 4]
    retain(root, "--keep", "2")
    assert files_on_disk(root) == referenced(root)


def test_two_write_states_of_one_id_one_wins(root, tmp_path):
    writers = [Paused(tmp_path / f"hook{base}", PUBLISH, write_state(root, base, 9))
               for base in (2, 3)]
    results = [writer.resume() for writer in writers]
    assert sorted(r.returncode for r in results) == [0, 1]
    loser = next(r for r in results if r.returncode)
    assert "CheckpointExistsError" in loser.stderr
    assert verify_all(root) == [1, 2, 3, 9]
    retain(root, "--keep", "4", "--older-than", "0s")
    assert files_on_disk(root) == referenced(root)


@pytest.mark.parametrize(("command", "point"), [
    ("write_state", PUBLISH),
    ("write_state", "os:link"),
    ("max-parallelism", PUBLISH),
    ("max-parallelism", "statesource.format.pins:Pin.release"),
])
def test_kill_9_of_a_spark_writer_at_a_publish_step(root, tmp_path, command, point):
    code = (write_state(root, 3, 4) if command == "write_state"
            else cli("rescale", str(root), "--max-parallelism", "256",
                     "--new-checkpoint-id", "4"))
    Paused(tmp_path / "hook", point, code).kill()
    published = (root / "chk-4" / "_metadata.json").exists()
    assert published is (point.endswith("release"))
    assert verify_all(root) == ([1, 2, 3, 4] if published else [1, 2, 3])
    retain(root, "--keep", "4", "--older-than", "0s")
    assert files_on_disk(root) == referenced(root)
    assert verify_all(root) == ([1, 2, 3, 4] if published else [1, 2, 3])

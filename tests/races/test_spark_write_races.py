"""``write_state`` and ``rescale --max-parallelism`` (Spark drivers) raced and killed -9."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.race import Paused, age, cli, files_on_disk, referenced, retain, verify_all

pytestmark = pytest.mark.spark

PUBLISH = "statesource.format.commit:_publish"


def write_state(root: Path, base: int, checkpoint_id: int, rows_of: int | None = None) -> str:
    """CODE: a Spark driver writing state last_seen of checkpoint ``rows_of`` (default
    ``base``) into ``base``, as ``checkpoint_id``."""
    return ("from statesource.spark import session, write_state\n"
            "spark = session(key_group_functions=False)\n"
            f"df = spark.read.format('flinkstate').option('state', 'last_seen')"
            f".option('checkpointId', '{rows_of or base}').load({str(root)!r})\n"
            f"info = write_state(df, {str(root)!r}, 'user-activity', 'last_seen',"
            f" base_checkpoint_id={base}, checkpoint_id={checkpoint_id})\n"
            "print('published', info.checkpoint_id)\n")


def test_two_write_states_of_one_id_paused_at_publish_survive_retain_and_one_wins(
        root, tmp_path):
    """Two Spark drivers write checkpoint 4 from bases 1 and 2 and pause at the publish, in
    the drivers' Python workers; ``retain --keep 1`` runs meanwhile and must spare the files
    they reference. Resumed, exactly one publishes, and the other is told why."""
    writers = [Paused(tmp_path / f"hook{base}", PUBLISH, write_state(root, base, 4))
               for base in (1, 2)]
    retain(root, "--keep", "1")
    results = [writer.resume() for writer in writers]
    assert sorted(r.returncode for r in results) == [0, 1], [r.stderr for r in results]
    assert "published 4" in next(r for r in results if not r.returncode).stdout
    assert "CheckpointExistsError" in next(r for r in results if r.returncode).stderr
    assert verify_all(root) == [3, 4]
    age(root)
    retain(root, "--keep", "2", "--older-than", "1h")
    assert files_on_disk(root) == referenced(root)


@pytest.mark.parametrize(("command", "point"), [  # every step between: test_retain_races.py
    ("write_state", "os:link"),  # the last step before the checkpoint is visible
    ("max-parallelism", "statesource.format.pins:Pin.release"),  # the first one after
])
def test_kill_9_of_a_spark_writer_at_a_publish_step(root, tmp_path, command, point):
    code = (write_state(root, 3, 4) if command == "write_state"
            else cli("rescale", str(root), "--max-parallelism", "256",
                     "--new-checkpoint-id", "4"))
    Paused(tmp_path / "hook", point, code).kill()
    published = (root / "chk-4" / "_metadata.json").exists()
    assert published is (point.endswith("release"))
    assert verify_all(root) == ([1, 2, 3, 4] if published else [1, 2, 3])
    age(root)
    retain(root, "--keep", "4", "--older-than", "1h")
    assert files_on_disk(root) == referenced(root)
    assert verify_all(root) == ([1, 2, 3, 4] if published else [1, 2, 3])



@pytest.mark.parametrize("command", ["write_state", "max-parallelism"])
def test_retain_while_a_spark_job_runs_spares_its_base_and_the_job_commits(
        root, tmp_path, command):
    """The base is pinned from the plan (on the driver) until the commit (another process of
    the driver), not only while the plan's own copy lives: ``retain --keep 1`` while the job
    is in flight (write_state: about to run its job; the rescale: its jobs ran, its commit
    on the driver about to start) retires base 1 but keeps its files, and the job then
    publishes checkpoint 4 carrying them over."""
    if command == "write_state":
        code = write_state(root, 1, 4, rows_of=3)  # rows of a kept checkpoint
        pause = "statesource.spark.write.rewrite:write_state_files"
    else:
        code = cli("rescale", str(root), "--checkpoint-id", "1", "--max-parallelism", "256",
                   "--new-checkpoint-id", "4")
        pause = "statesource.spark.write.rescale:check_written_visible"
    job = Paused(tmp_path / "hook", pause, code)
    assert "pinned by running writers" in retain(root, "--keep", "1")
    done = job.resume()
    assert done.returncode == 0, done.stderr
    assert verify_all(root) == [3, 4]
    assert not list((root / "_pins").glob("*"))
    retain(root, "--keep", "2")
    assert files_on_disk(root) == referenced(root)
    assert verify_all(root) == [3, 4]

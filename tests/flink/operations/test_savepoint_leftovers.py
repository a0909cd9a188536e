"""What killed and failed savepoint writes leave on a local file system, and
``statesource clean-savepoints``, which removes it (the object-store side:
tests/cluster/test_s3_savepoints.py).

The kills are real: a child process paused at the rename that publishes (tests/race.py),
then ``kill -9``; ages are made by moving files' times back two hours, as ``retain``'s
tests do, against ``--older-than 1h``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from flink_entries import entries_by_state

from flink_fixture_checks import FIXTURES
from statesource.cli import main
from statesource.errors import StorageAccessError
from statesource.flink.operations.rescale import rescale_max_parallelism
from statesource.flink.operations.savepoint_target import FlinkSavepointTarget
from statesource.flink.operations.staged import write_sections
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.flink.snapshot.publish import SavepointWriter, is_staging_name
from statesource.format.locations import DataFile
from statesource.keygroups import KeyGroupRange
from statesource.spark.write.rewrite import publish_staged
from tests.race import Paused, age, cli

MP256 = FIXTURES / "mp256" / "canonical"


def killed_write(tmp_path: Path, output: Path) -> Path:
    """A rescale to ``output`` killed after ``_metadata`` is written, before the rename: its
    temporary directory."""
    paused = Paused(tmp_path / "hook", "statesource.flink.snapshot.publish:rename_no_replace",
                    cli("rescale", str(MP256), "--max-parallelism", "1024", "--output",
                        str(output)))
    paused.kill()
    (staging,) = [p for p in output.parent.iterdir() if is_staging_name(p.name)]
    assert (staging / "_metadata").is_file()
    return staging


def clean(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["clean-savepoints", *args, "--older-than", "1h", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_killed_writes_directory_is_removed_once_old_and_nothing_else(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    savepoints = tmp_path / "savepoints"
    rescale_max_parallelism(MP256, savepoints / "good", 1024)
    staging = killed_write(tmp_path, savepoints / "bad")
    size = sum(p.stat().st_size for p in staging.iterdir())
    assert clean(capsys, str(savepoints))["staging_directories"] == []  # young: maybe running
    age(savepoints)
    listed = clean(capsys, str(savepoints), "--dry-run")
    assert listed["staging_directories"] == [{"path": str(staging), "bytes": size}]
    assert (listed["dry_run"], listed["bytes"], listed["orphaned_files"]) == (True, size, [])
    assert staging.is_dir()
    assert clean(capsys, str(savepoints))["bytes"] == size
    assert sorted(os.listdir(savepoints)) == ["good"]
    assert FlinkSnapshot.open(str(savepoints / "good")).check_files() > 0
    assert entries_by_state(savepoints / "good") == entries_by_state(MP256)
    assert clean(capsys, str(savepoints))["bytes"] == 0  # a rerun finds nothing


def test_the_report_names_what_it_deleted(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    staging = killed_write(tmp_path, tmp_path / "out")
    age(tmp_path)
    assert main(["clean-savepoints", str(staging.parent), "--older-than", "1h"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("deleted 1 temporary directories of killed savepoint writes"
                                 " and 0 state files")
    assert printed[1].startswith(f"  {staging} (")
    assert not staging.exists()


def test_an_age_under_an_hour_is_refused(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["clean-savepoints", str(tmp_path), "--older-than", "10m"]) == 1
    assert "under 1h" in capsys.readouterr().err


@pytest.mark.parametrize("existing", ["", "a", "a/b"])
def test_a_failed_write_removes_the_parents_it_created(tmp_path: Path, monkeypatch,
                                                       existing: str) -> None:
    if existing:
        (tmp_path / existing).mkdir(parents=True)

    def broken(self, chunks, name=None):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(SavepointWriter, "write_file", broken)
    with pytest.raises(OSError, match="No space left"):
        rescale_max_parallelism(MP256, tmp_path / "a" / "b" / "c" / "out", 1024)
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert left == ([] if not existing else ["a", "a/b"][:existing.count("/") + 1])


def test_a_failed_spark_write_removes_the_parents_its_tasks_created(tmp_path: Path) -> None:
    """The tasks of a Spark write create the output's missing parents for their work
    directory; the driver's cleanup of a failed publish (here: a section file a task
    reported that is not there) removes them with it."""
    (tmp_path / "a").mkdir()
    target = FlinkSavepointTarget.open(None, str(tmp_path / "a" / "b" / "c" / "out"))
    written = write_sections(target.work, KeyGroupRange(0, 127), [(0, b"body", 1)])
    assert (tmp_path / "a" / "b" / "c").is_dir()
    elsewhere = DataFile("elsewhere.sections", KeyGroupRange(0, 127), 1, ())
    with pytest.raises(StorageAccessError, match="elsewhere.sections"):
        publish_staged(target, [written, elsewhere], [])
    assert [p.name for p in tmp_path.rglob("*")] == ["a"]

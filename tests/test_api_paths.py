"""The Python API checks every path where it enters (the command line's checks are in
tests/cli/test_cli_failures.py, Spark's in tests/spark/test_spark_paths.py): a snapshot's
metadata file means its snapshot, as in Flink; another file, or an output that cannot be
made, is refused with one of statesource's errors naming it, before any work."""

from __future__ import annotations

from pathlib import Path

import pytest

from statesource import (
    Checkpoint,
    CheckpointNotFoundError,
    CheckpointWriter,
    FlinkCheckpoint,
    InvalidArgumentError,
    open_source,
)
from statesource.flink.operations.export import export_flink
from statesource.flink.operations.importer import import_flink
from statesource.flink.operations.rescale import rescale_max_parallelism
from statesource.sources import open_target

FLINK = Path(__file__).resolve().parent / "fixtures" / "flink" / "mp256" / "canonical"


@pytest.fixture
def a_file(tmp_path) -> Path:
    path = tmp_path / "a-file"
    path.write_text("")
    return path


def test_a_flink_metadata_file_opens_its_savepoint():
    for opened in (open_source(FLINK / "_metadata"),
                   FlinkCheckpoint.open(str(FLINK / "_metadata"))):
        assert isinstance(opened, FlinkCheckpoint)
        assert opened.location.path == str(FLINK)


def test_a_flink_snapshot_given_to_the_checkpoint_opener_names_open_source():
    for path in (FLINK, FLINK / "_metadata"):
        with pytest.raises(CheckpointNotFoundError, match=(
                f"{FLINK} is an Apache Flink snapshot, not a statesource checkpoint: open it"
                r" with statesource.open_source\(path\)")):
            Checkpoint.open(str(path))


def test_a_file_that_is_no_snapshot_is_named():
    state_file = next(p for p in FLINK.iterdir() if p.name != "_metadata")
    with pytest.raises(CheckpointNotFoundError, match=f"{state_file} is a file, not a directory"):
        open_source(state_file)


def test_outputs_under_a_file_are_refused_before_any_work(a_file):
    output = a_file / "new"
    refused = f"{output} cannot be created: {a_file} is a file, not a directory"
    with pytest.raises(InvalidArgumentError, match=f"checkpoint root {refused}"):
        CheckpointWriter(str(output))
    missing = a_file.parent / "no-such-snapshot"  # only a check before it is read refuses
    with pytest.raises(InvalidArgumentError, match=f"checkpoint root {refused}"):
        import_flink(str(missing), str(output))
    with pytest.raises(InvalidArgumentError, match=f"savepoint output {refused}"):
        rescale_max_parallelism(FLINK, output, 512)
    with pytest.raises(InvalidArgumentError, match=f"savepoint output {refused}"):
        export_flink(missing, output)
    with pytest.raises(InvalidArgumentError, match=f"savepoint output {refused}"):
        open_target(str(FLINK), str(output))
    with pytest.raises(InvalidArgumentError, match=f"checkpoint root {refused}"):
        open_target(str(output))


"""What a Spark task says when its storage fails: the host, the location, the cure; and
what the driver says of files the tasks wrote where it cannot see them.

(On a real cluster with an executor lacking credentials: tests/cluster/test_cluster.py.)
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Iterator

import pytest

from statesource.errors import (
    CheckpointNotFoundError,
    CorruptCheckpointError,
    StorageAccessError,
    StorageError,
)
from statesource.flink.operations.savepoint_target import FlinkSavepointTarget
from statesource.format.locations import DataFile
from statesource.format.storage import resolve
from statesource.format.target import CheckpointTarget
from statesource.keygroups import KeyGroupRange
from statesource.spark.executor import guarded, raised_by_tasks, restated
from statesource.spark.write.rewrite import publish_staged

S3 = "s3://bucket/root?region=us-east-1&endpoint_override=127.0.0.1:9&scheme=http"


def failing(error: Exception) -> Iterator[int]:
    yield 1
    raise error


def test_a_local_path_the_executor_cannot_see_must_be_shared_storage(tmp_path) -> None:
    location = resolve(str(tmp_path / "only-on-the-driver"))
    rows = guarded(location, failing(CheckpointNotFoundError(f"{location} does not exist")))
    assert next(rows) == 1
    with pytest.raises(StorageAccessError) as refused:
        next(rows)
    message = str(refused.value)
    assert socket.gethostname() in message and str(location) in message
    assert "storage every executor shares" in message


def test_a_local_path_that_exists_keeps_its_own_error(tmp_path) -> None:
    error = CorruptCheckpointError("data file x is missing")
    with pytest.raises(CorruptCheckpointError, match="data file x is missing"):
        list(guarded(resolve(str(tmp_path)), failing(error)))


def test_a_store_refusing_the_executor_names_host_location_and_credentials() -> None:
    aws = OSError("When getting information for key 'root' in bucket 'bucket': AWS Error"
                  " ACCESS_DENIED during HeadObject operation")
    with pytest.raises(StorageAccessError) as refused:
        list(guarded(resolve(S3), failing(aws)))
    message = str(refused.value)
    assert socket.gethostname() in message and S3 in message and "ACCESS_DENIED" in message
    assert "spark.executorEnv.AWS_ACCESS_KEY_ID" in message


def test_a_write_task_names_the_store_from_its_error() -> None:
    expected = "executor on host .* the storage: .*AWS Error"
    with pytest.raises(StorageAccessError, match=expected), restated(None):
        raise OSError("AWS Error NETWORK_CONNECTION during PutObject")
    with pytest.raises(OSError, match="disk full") as local, restated(None):
        raise OSError("disk full")
    assert not isinstance(local.value, StorageAccessError)


def test_a_local_refusal_in_a_task_is_one_line_naming_host_cause_and_file(tmp_path) -> None:
    path = tmp_path / "x.sections"
    with pytest.raises(StorageError) as refused, restated(None):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    assert str(refused.value) == (f"Spark task on host {socket.gethostname()}, writing: No"
                                  f" space left on device: {path}")
    assert refused.value.errno == errno.ENOSPC and not isinstance(refused.value,
                                                                  StorageAccessError)


def written_elsewhere(path: str) -> DataFile:
    """What a task on another machine reports: a file on its own disk."""
    return DataFile(path, KeyGroupRange(0, 127), 1, ())


def test_files_written_onto_executors_disks_are_named_and_nothing_is_committed(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    target = CheckpointTarget.open(str(root))
    with pytest.raises(StorageAccessError) as refused:
        publish_staged(target, [written_elsewhere("chk-1/data/state.sub0.arrow")], [])
    message = str(refused.value)
    assert "1 of the 1 files" in message and "chk-1/data/state.sub0.arrow" in message
    assert socket.gethostname() in message and "storage every executor shares" in message
    assert not (root / "chk-1" / "_metadata.json").exists()


def test_sections_written_onto_executors_disks_leave_no_savepoint(tmp_path):
    output = tmp_path / "savepoint"
    target = FlinkSavepointTarget.open(None, str(output))
    with pytest.raises(StorageAccessError, match="'state.sub0.sections'"):
        publish_staged(target, [written_elsewhere("state.sub0.sections")], [])
    assert not output.exists()


def test_a_failed_job_is_re_raised_as_the_error_its_task_raised() -> None:
    """Spark's exception holds the worker's traceback (ours last, after what caused it) and
    then the JVM's; what is not statesource's own stays Spark's."""
    spark_text = ("An exception was thrown from the Python worker.\nTraceback (most recent"
                  " call last):\nOSError: [Errno 28] No space left on device\n\nThe above"
                  " exception was the direct cause of the following exception:\n\n"
                  "statesource.errors.StorageError: cannot write /d/x.sections: No space left"
                  " on device\n\tat org.apache.spark.api.python.BasePythonRunner(x.scala:1)")
    spark_error = RuntimeError(spark_text)
    with pytest.raises(StorageError) as ours, raised_by_tasks():
        raise spark_error
    assert str(ours.value) == "cannot write /d/x.sections: No space left on device"
    assert ours.value.__cause__ is spark_error
    for foreign in (RuntimeError("statesource.errors.NotAnError: x"), ValueError("plain")):
        with pytest.raises(type(foreign)) as kept, raised_by_tasks():
            raise foreign
        assert kept.value is foreign

"""What a Spark task says when its storage fails: the host, the location, the cure; and
what the driver says of files the tasks wrote where it cannot see them.

(On a real cluster with an executor lacking credentials: tests/cluster/test_cluster.py.)
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from statesource.errors import CheckpointNotFoundError, CorruptCheckpointError, StorageAccessError
from statesource.flink.operations.savepoint_target import FlinkSavepointTarget
from statesource.format.locations import DataFile
from statesource.format.storage import resolve
from statesource.format.target import CheckpointTarget
from statesource.keygroups import KeyGroupRange
from statesource.spark.executor import guarded, restated
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

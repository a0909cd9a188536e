"""What a Spark task says when its storage fails: the host, the location, the cure.

(On a real cluster with an executor lacking credentials: tests/cluster/test_cluster.py.)
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from statesource.errors import CheckpointNotFoundError, CorruptCheckpointError, StorageAccessError
from statesource.format.storage import resolve
from statesource.spark.executor import guarded, restated

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

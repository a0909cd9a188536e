"""The exclusive commit on S3 (conditional PutObject, ``If-None-Match: *``), against moto's
S3 server: of two writers of one checkpoint id exactly one wins, also when the other
publishes between a writer's existence check and its upload."""

from __future__ import annotations

import warnings

import pyarrow.fs as pafs
import pytest

from processes import S3Server
from statesource import CheckpointWriter, KeyedStateBackend
from statesource.errors import CheckpointExistsError
from statesource.format import commit
from statesource.format.exclusive import AlreadyExists, put_if_absent
from statesource.format.reader import Checkpoint
from statesource.format.storage import Location
from statesource.state.descriptors import ValueStateDescriptor


def bucket_location(s3: S3Server, key: str) -> Location:
    """``key`` in the bucket, on a file system holding the keys itself (this process has no
    AWS environment: the Connect test checks that)."""
    filesystem = pafs.S3FileSystem(access_key=s3.access_key, secret_key=s3.secret_key,
                                   endpoint_override=s3.endpoint, scheme="http",
                                   region="us-east-1")
    return Location(filesystem, f"{s3.bucket}/{key}", "s3://", "")


def backend(value: int) -> KeyedStateBackend:
    state = KeyedStateBackend("string", max_parallelism=128)
    counts = state.get_state(ValueStateDescriptor("counts", "long"))
    state.set_current_key("k")
    counts.update(value)
    return state


def test_a_second_conditional_create_loses(s3: S3Server) -> None:
    target = bucket_location(s3, "exclusive/object")
    assert put_if_absent(target, b"first")
    with pytest.raises(AlreadyExists):
        put_if_absent(target, b"second")
    with target.filesystem.open_input_stream(target.path) as stored:
        assert stored.read() == b"first"


def test_a_writer_that_loses_the_race_after_its_check_fails_and_leaves_the_winner(
        s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    root = bucket_location(s3, "race")
    path = f"s3://{root.path}?endpoint_override={s3.endpoint}&scheme=http&region=us-east-1"
    check = commit._check_referenced_files

    def rival_commits_meanwhile(root_location: Location, metadata: object) -> None:
        check(root_location, metadata)  # the existence check has passed by now
        monkeypatch.setattr(commit, "_check_referenced_files", check)
        CheckpointWriter(path, root.filesystem).write(7, {"op": [backend(1)]})

    monkeypatch.setattr(commit, "_check_referenced_files", rival_commits_meanwhile)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # exclusive on S3: no NonExclusiveCommitWarning
        with pytest.raises(CheckpointExistsError, match="checkpoint 7 already exists"):
            CheckpointWriter(path, root.filesystem).write(7, {"op": [backend(2)]})
    winner = Checkpoint.open(path, checkpoint_id=7, filesystem=root.filesystem)
    tables = list(winner.read_keyed_state("counts", operator="op"))
    assert [v for t in tables for v in t.column("value").to_pylist()] == [1]
    winner.verify()
    referenced = set(winner.metadata.referenced_files())
    listed = root.filesystem.get_file_info(pafs.FileSelector(f"{root.path}/chk-7/data"))
    assert {info.path.split("/chk-7/")[1] for info in listed} == {
        name.split("chk-7/")[1] for name in referenced}  # the loser removed its files

"""The commit's own steps failing halfway: nothing half-written may become visible or stay.

Failures are injected inside the steps themselves (a byte stream that breaks
after some bytes, a metadata write that stops partway), not by replacing a
whole step, so an implementation that wrote metadata in place, or left a
partial data file behind, fails here.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import pathlib
import warnings

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from sample_state import KEYS, populate
from statesource.checkpointing import CheckpointWriter
from statesource.errors import CheckpointExistsError, CheckpointNotFoundError
from statesource.format import Checkpoint
from statesource.format import commit as commit_module
from statesource.format.commit import NonExclusiveCommitWarning
from statesource.state.clock import ManualClock
from statesource.state.keyed_backend import KeyedStateBackend


@pytest.fixture
def backend():
    backend = KeyedStateBackend("string", 128, clock=ManualClock(5_000))
    populate(backend, KEYS)
    return backend


def files_under(path: pathlib.Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())


class _BreakingFile(io.RawIOBase):
    """A writable file that stores ``budget`` bytes, then fails like a full disk."""

    def __init__(self, path: str, budget: int) -> None:
        self._file = open(path, "wb")  # noqa: SIM115 - closed in close()
        self._budget = budget

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        data = bytes(data)
        if len(data) > self._budget:
            self._file.write(data[:self._budget])
            self._file.flush()
            self._budget = 0
            raise OSError(28, "No space left on device (injected)")
        self._budget -= len(data)
        return self._file.write(data)

    def close(self) -> None:
        self._file.close()
        super().close()


class _BreakingHandler(pafs.FileSystemHandler):
    """The local file system, except that data files break after ``budget`` bytes."""

    def __init__(self, budget: int) -> None:
        self.local = pafs.LocalFileSystem()
        self.budget = budget

    def open_output_stream(self, path, metadata):
        if path.endswith(".arrow"):
            return pa.PythonFile(_BreakingFile(path, self.budget), mode="w")
        return self.local.open_output_stream(path)

    def get_type_name(self):
        return "breaking-local"

    def get_file_info(self, paths):
        return self.local.get_file_info(paths)

    def get_file_info_selector(self, selector):
        return self.local.get_file_info(selector)

    def create_dir(self, path, recursive):
        self.local.create_dir(path, recursive=recursive)

    def delete_dir(self, path):
        self.local.delete_dir(path)

    def delete_dir_contents(self, path, missing_dir_ok=False):
        self.local.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self):
        raise OSError("not supported")

    def delete_file(self, path):
        self.local.delete_file(path)

    def move(self, src, dest):
        self.local.move(src, dest)

    def copy_file(self, src, dest):
        self.local.copy_file(src, dest)

    def open_input_stream(self, path):
        return self.local.open_input_stream(path)

    def open_input_file(self, path):
        return self.local.open_input_file(path)

    def open_append_stream(self, path, metadata):
        return self.local.open_append_stream(path)

    def normalize_path(self, path):
        return path

    def equals(self, other):
        return self is other


@pytest.mark.parametrize("budget", [0, 7, 100, 5_000])
def test_a_data_file_stream_failing_halfway_leaves_no_file(tmp_path, backend, budget):
    CheckpointWriter(str(tmp_path)).write(1, {"op": [backend]})
    before = files_under(tmp_path)
    breaking = pafs.PyFileSystem(_BreakingHandler(budget))
    with pytest.raises(OSError, match="injected"):
        CheckpointWriter(str(tmp_path), filesystem=breaking).write(2, {"op": [backend]})
    assert files_under(tmp_path) == before  # not a byte of checkpoint 2 stays
    assert Checkpoint.open(str(tmp_path)).checkpoint_id == 1
    with pytest.raises(CheckpointNotFoundError, match="no complete checkpoint 2"):
        Checkpoint.open(str(tmp_path), checkpoint_id=2)


def test_a_metadata_write_failing_halfway_publishes_nothing(tmp_path, backend, monkeypatch):
    writer = CheckpointWriter(str(tmp_path))
    writer.write(1, {"op": [backend]})
    before = files_under(tmp_path)

    def breaking_open(path, mode="r", *args, **kwargs):
        assert "w" in mode, "the commit reads nothing"
        return _BreakingFile(path, 100)

    monkeypatch.setattr(commit_module, "open", breaking_open, raising=False)
    with pytest.raises(OSError, match="injected"):
        writer.write(2, {"op": [backend]})
    monkeypatch.undo()
    assert files_under(tmp_path) == before  # no metadata, temporary or data file of 2 stays
    assert Checkpoint.open(str(tmp_path)).checkpoint_id == 1
    writer.write(2, {"op": [backend]})  # the id is still free
    assert Checkpoint.open(str(tmp_path)).checkpoint_id == 2


def test_a_crash_between_fsync_and_link_publishes_nothing(tmp_path, backend, monkeypatch):
    writer = CheckpointWriter(str(tmp_path))
    writer.write(1, {"op": [backend]})

    def crash(*args):
        raise OSError("power lost (injected)")

    monkeypatch.setattr(commit_module.os, "link", crash)
    with pytest.raises(OSError, match="injected"):
        writer.write(2, {"op": [backend]})
    monkeypatch.undo()
    assert not (tmp_path / "chk-2" / "_metadata.json").exists()
    assert Checkpoint.open(str(tmp_path)).checkpoint_id == 1


def _write_racer(root: str, barrier, results) -> None:
    backend = KeyedStateBackend("string", 128, clock=ManualClock(os.getpid()))
    populate(backend, KEYS[: 50 + os.getpid() % 50])
    barrier.wait()
    try:
        CheckpointWriter(root).write(7, {"op": [backend]})
        results.put(("won", os.getpid()))
    except CheckpointExistsError as error:
        results.put(("lost", str(error)))


def test_of_writers_racing_for_one_id_one_wins_and_the_losers_files_are_gone(tmp_path):
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(3), context.Queue()
    racers = [context.Process(target=_write_racer, args=(str(tmp_path), barrier, results))
              for _ in range(3)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(60)
    outcomes = [results.get(timeout=5) for _ in racers]
    assert sorted(kind for kind, _ in outcomes) == ["lost", "lost", "won"]
    assert all("checkpoint 7 already exists" in detail for kind, detail in outcomes
               if kind == "lost")
    checkpoint = Checkpoint.open(str(tmp_path))
    referenced = set(checkpoint.metadata.referenced_files())
    on_disk = {str(p.relative_to(tmp_path)) for p in (tmp_path / "chk-7" / "data").iterdir()}
    assert on_disk == referenced  # the losers removed every file they wrote
    checkpoint.verify()


def test_a_commit_that_cannot_be_exclusive_warns(tmp_path, backend):
    elsewhere = pafs.PyFileSystem(_BreakingHandler(1 << 30))  # not a LocalFileSystem
    with pytest.warns(NonExclusiveCommitWarning, match="no create-if-absent"):
        CheckpointWriter(str(tmp_path), filesystem=elsewhere).write(1, {"op": [backend]})
    assert Checkpoint.open(str(tmp_path)).checkpoint_id == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the local file system commits exclusively, silently
        CheckpointWriter(str(tmp_path)).write(2, {"op": [backend]})


def test_the_metadata_and_its_directory_are_synced_before_the_commit_returns(
        tmp_path, monkeypatch, backend):
    """What a power loss would otherwise lose: the metadata's bytes (fsync of the temporary
    file before it is linked) and its new name (fsync of the checkpoint directory)."""
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(descriptor: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{descriptor}"))
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", fsync)
    with CheckpointWriter(str(tmp_path)) as writer:
        writer.write(1, {"op": [backend]})
    directory = str(tmp_path / "chk-1")
    temporary = [path for path in synced if "_metadata.json.tmp-" in path]
    assert len(temporary) == 1 and temporary[0].startswith(directory)
    assert synced.index(directory, synced.index(temporary[0])) > synced.index(temporary[0])


def test_a_failing_link_is_reported_as_itself_not_as_an_existing_checkpoint(
        tmp_path, monkeypatch, backend):
    def link(source: str, target: str) -> None:
        raise PermissionError(13, "Permission denied", target)

    monkeypatch.setattr(os, "link", link)
    with CheckpointWriter(str(tmp_path)) as writer, pytest.raises(PermissionError):
        writer.write(1, {"op": [backend]})
    assert not (tmp_path / "chk-1" / "_metadata.json").exists()

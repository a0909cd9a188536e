"""A rescale that fails or is killed at any point leaves no visible partial checkpoint, the
original as it was, and nothing that stops a rerun."""

from __future__ import annotations

import multiprocessing
import os
import shutil
from collections.abc import Callable

import pytest

from rescale_originals import file_bytes, write_original
from sample_state import KEYS, dump, merged
from statesource.checkpointing import restore_keyed_backend, restore_operator_backend
from statesource.errors import StateSourceError
from statesource.format import Checkpoint, datafile
from statesource.format import commit as commit_module
from statesource.rescale import publish as publish_module
from statesource.rescale import rescale_parallelism
from statesource.state.clock import ManualClock

OLD, NEW = 2, 3


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A checkpoint to copy for each attempt, and what its keyed state holds."""
    root = tmp_path_factory.mktemp("pristine")
    return root, write_original(root, OLD, 16, KEYS[:60], ManualClock(5_000))


def fresh_copy(pristine, tmp_path, name: str):
    root = tmp_path / name
    shutil.copytree(pristine[0], root)
    return root


def assert_nothing_visible_and_rerun_works(root, pristine) -> None:
    """No checkpoint 2, the original byte for byte, and a rerun that commits a good one."""
    assert not (root / "chk-2" / "_metadata.json").exists()
    assert Checkpoint.open(str(root)).checkpoint_id == 1
    assert file_bytes(root / "chk-1") == file_bytes(pristine[0] / "chk-1")
    rescale_parallelism(str(root), NEW)
    rescaled = Checkpoint.open(str(root))
    assert rescaled.checkpoint_id == 2
    clock = ManualClock(5_000)
    assert merged([dump(restore_keyed_backend(rescaled, i, NEW, clock=clock))
                   for i in range(NEW)]) == pristine[1]
    assert restore_operator_backend(rescaled, 2, NEW).get_union_list_state(
        "config", "string").get() == ["c0", "d0", "c1", "d1"]
    rescaled.verify()


def fail_at_write(monkeypatch, failing_call: int, fail: Callable[[], None]) -> list[int]:
    """Make the ``failing_call``-th piece written to any data file call ``fail`` instead."""
    calls = [0]
    real = datafile._ChecksummingSink.write

    def write(self, data):
        calls[0] += 1
        if calls[0] == failing_call:
            fail()
        return real(self, data)

    monkeypatch.setattr(datafile._ChecksummingSink, "write", write)
    return calls


def disk_full() -> None:
    raise OSError(28, "No space left on device")


def test_a_write_failing_at_any_point_leaves_nothing_behind(pristine, tmp_path, monkeypatch):
    with monkeypatch.context() as counting:
        calls = fail_at_write(counting, 0, disk_full)
        rescale_parallelism(str(fresh_copy(pristine, tmp_path, "count")), NEW)
    total = calls[0]
    assert total >= 6  # three operator-state files, a few dozen pieces in all
    for failing_call in [*range(1, total, 2), total]:  # every other piece, and the last
        root = fresh_copy(pristine, tmp_path, f"fail-{failing_call}")
        with monkeypatch.context() as patch:
            fail_at_write(patch, failing_call, disk_full)
            with pytest.raises(StateSourceError, match="No space left on device"):
                rescale_parallelism(str(root), NEW)
        assert not list((root / "chk-2").rglob("*.arrow")), failing_call  # cleaned up
        assert_nothing_visible_and_rerun_works(root, pristine)


def test_a_failure_before_or_during_the_commit_leaves_nothing_behind(pristine, tmp_path,
                                                                     monkeypatch):
    def refuse(*_):
        raise RuntimeError("injected")

    for module, name in ((publish_module, "commit_checkpoint"), (commit_module.os, "link")):
        root = fresh_copy(pristine, tmp_path, name)
        with monkeypatch.context() as patch:
            patch.setattr(module, name, refuse)
            with pytest.raises(RuntimeError, match="injected"):
                rescale_parallelism(str(root), NEW)
        assert not list((root / "chk-2").rglob("*.arrow"))
        assert not list((root / "chk-2").glob("_metadata*"))  # nor the temporary metadata
        assert_nothing_visible_and_rerun_works(root, pristine)


def _killed_rescale(root: str, point: str, failing_call: int) -> None:
    """In a child process: rescale, and die without any cleanup at ``point``."""
    def die(*_):
        os._exit(17)

    if point == "write":
        calls = [0]
        real = datafile._ChecksummingSink.write

        def write(self, data):
            calls[0] += 1
            if calls[0] == failing_call:
                die()
            return real(self, data)

        datafile._ChecksummingSink.write = write
    elif point == "before commit":
        publish_module.commit_checkpoint = die
    else:  # the metadata's temporary file is written and synced, not yet linked
        commit_module.os.link = die
    rescale_parallelism(root, NEW)
    os._exit(0)


@pytest.mark.parametrize(("point", "failing_call"), [
    ("write", 1), ("write", 2), ("write", 4), ("write", 7), ("before commit", 0),
    ("in commit", 0),
])
def test_a_process_killed_at_any_point_leaves_no_visible_checkpoint(pristine, tmp_path, point,
                                                                    failing_call):
    root = fresh_copy(pristine, tmp_path, "killed")
    child = multiprocessing.get_context("fork").Process(
        target=_killed_rescale, args=(str(root), point, failing_call))
    child.start()
    child.join(60)
    assert child.exitcode == 17
    assert_nothing_visible_and_rerun_works(root, pristine)

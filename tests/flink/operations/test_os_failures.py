"""An operating system's refusal in the middle of a savepoint write, from the Python API: one
:class:`StorageError` naming the output, the cause and the file, with the refusal's errno,
and no savepoint published.

The refusals are real: a tmpfs too small for the savepoint (``ENOSPC``), one remounted
read-only as the keyed operator starts (``EROFS``), a staging directory made unwritable
(``chattr +i`` for root, whom no mode bit stops; ``chmod`` otherwise). Mounting needs root
with ``CAP_SYS_ADMIN``; elsewhere those cases are skipped, and the permission case runs.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from tmpfs import tmpfs

from flink_fixture_checks import FIXTURES
from statesource.cli import main
from statesource.errors import InvalidArgumentError, StateSourceError, StorageError
from statesource.flink.operations.edit import drop_state
from statesource.flink.operations.export import export_flink
from statesource.flink.operations.migrate import migrate
from statesource.flink.operations.rescale import rescale_max_parallelism
from statesource.flink.operations.staged import write_sections
from statesource.flink.snapshot.publish import is_staging_name
from statesource.keygroups import KeyGroupRange

MP256 = str(FIXTURES / "mp256" / "canonical")
FLINK_1_20 = str(FIXTURES / "flink-1.20" / "canonical")


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> str:
    output = tmp_path_factory.mktemp("demo") / "checkpoints"
    assert main(["demo", "--events", "500", "--checkpoint-every", "500", "--no-spark",
                 "--output", str(output)]) == 0
    return str(output)


WRITERS: dict[str, Callable[[str, Path, Callable[[str], None] | None], object]] = {
    "rescale": lambda demo, out, progress: rescale_max_parallelism(
        MP256, out, 1024, progress=progress),
    "drop": lambda demo, out, progress: drop_state(MP256, out, "stateful", "events",
                                                   progress=progress),
    "migrate": lambda demo, out, progress: migrate(FLINK_1_20, out, skip_unmigratable=True,
                                                   progress=progress),
    "export": lambda demo, out, progress: export_flink(demo, out, progress=progress),
}


def _no_savepoint(root: Path) -> None:
    assert not (root / "out").exists()
    assert not [p for p in root.rglob("_metadata") if not is_staging_name(p.parent.name)]


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_full_disk_is_one_error_naming_the_output_and_leaves_nothing(writer, demo,
                                                                        tmp_path):
    with tmpfs(tmp_path / "disk", "8k") as disk:
        with pytest.raises(StorageError) as refused:
            WRITERS[writer](demo, disk / "out", None)
        assert refused.value.errno == errno.ENOSPC
        message = str(refused.value)
        assert message.startswith(f"cannot write savepoint {disk / 'out'}: No space left on"
                                  " device")
        assert "\n" not in message
        assert os.listdir(disk) == []  # the staging directory is removed


def test_a_disk_turned_read_only_midway_is_one_error(tmp_path):
    with tmpfs(tmp_path / "disk", "4m") as disk:
        def read_only(message: str) -> None:
            if "operator stateful" in message:  # operator states are copied: now keyed files
                subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)

        with pytest.raises(StorageError) as refused:
            rescale_max_parallelism(MP256, disk / "out", 1024, progress=read_only)
        assert refused.value.errno == errno.EROFS
        assert str(refused.value).startswith(
            f"cannot write savepoint {disk / 'out'}: Read-only file system: {disk}/.out.")
        _no_savepoint(disk)  # the staging directory stays: nothing can remove it


def test_an_unwritable_staging_directory_is_one_error(tmp_path):
    root = os.geteuid() == 0
    staging: list[Path] = []

    def unwritable(message: str) -> None:
        if "operator stateful" in message:
            (found,) = [p for p in tmp_path.iterdir() if is_staging_name(p.name)]
            staging.append(found)
            if root:
                subprocess.run(["chattr", "+i", str(found)], check=True)
            else:
                found.chmod(0o500)

    try:
        with pytest.raises(StorageError) as refused:
            rescale_max_parallelism(MP256, tmp_path / "out", 1024, progress=unwritable)
    finally:
        if root and staging:
            subprocess.run(["chattr", "-i", str(staging[0])], check=True)
    assert refused.value.errno == (errno.EPERM if root else errno.EACCES)
    cause = os.strerror(refused.value.errno)
    assert str(refused.value).startswith(
        f"cannot write savepoint {tmp_path / 'out'}: {cause}: {staging[0]}/")
    _no_savepoint(tmp_path)


def test_an_output_under_a_file_is_refused_before_anything_is_read(tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    with pytest.raises(StateSourceError, match=str(a_file)) as refused:
        rescale_max_parallelism(str(tmp_path / "missing-source"), a_file / "out", 1024)
    assert isinstance(refused.value, (InvalidArgumentError, StorageError))


def test_a_task_writing_sections_to_a_full_disk_names_its_file(tmp_path):
    """What a Spark task of a write into a Flink savepoint writes (pyarrow's own message of
    a full disk names no file)."""
    with tmpfs(tmp_path / "disk", "8k") as disk:
        sections = ((key_group, os.urandom(4096), 1) for key_group in range(8))
        with pytest.raises(StorageError) as refused:
            write_sections(str(disk / "work"), KeyGroupRange(0, 7), sections)
        message = str(refused.value)
        assert message.startswith(f"cannot write {disk}/work/") and ".sections: " in message
        assert "No space left on device" in message and "\n" not in message

"""What a rewrite copies byte for byte is checked first: a corrupt input never becomes a
savepoint that looks valid.

An edit of one operator (``drop``) carries the others' files over as they are. Their
operator-state files are decoded whole before they are copied, and their keyed-state files'
versions checked; a ``_metadata`` that lists an operator twice is refused when read; an
output inside what is read is refused. Each refusal names the file and leaves nothing
behind.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from flink_fixture_checks import FIXTURES
from statesource.errors import (
    CorruptCheckpointError,
    InvalidArgumentError,
    UnsupportedFormatVersionError,
)
from statesource.flink.operations.edit import drop_state
from statesource.flink.operations.rescale import rescale_max_parallelism
from statesource.flink.snapshot.directory import FlinkSnapshot


def _copy(tmp_path: Path) -> Path:
    source = tmp_path / "source"
    shutil.copytree(FIXTURES / "isolation" / "canonical", source)  # every state in a file
    return source


def _file_of(source: Path, operator: str, keyed: bool) -> Path:
    snapshot = FlinkSnapshot.open(str(source))
    op = snapshot.operator(operator)
    handles = [h for s in op.subtasks for h in (s.keyed if keyed else s.operator)]
    return Path(snapshot.file_location(handles[0].stream).path)


@pytest.mark.parametrize("damage", ["garbage", "offset"])
def test_a_corrupt_operator_state_file_is_refused_not_copied(damage, tmp_path):
    source = _copy(tmp_path)
    seen = _file_of(source, "counts", keyed=False)
    data = bytearray(seen.read_bytes())
    if damage == "garbage":  # the last element's long cut: its piece does not read whole
        data = data[:-3] + b"\x00\x00\x00"
        data[-9] = 0x80
    else:  # the header's first state name is cut short: the data starts elsewhere
        data[8:10] = b"\x00\x01"
    seen.write_bytes(bytes(data))
    with pytest.raises(CorruptCheckpointError, match=seen.name):
        drop_state(str(source), str(tmp_path / "out"), "counts", "count")
    assert not (tmp_path / "out").exists()


def test_a_keyed_file_of_an_unknown_version_is_not_copied(tmp_path):
    source = _copy(tmp_path)
    keyed = _file_of(source, "custom", keyed=True)  # carried over: its serializer is unknown
    data = bytearray(keyed.read_bytes())
    data[0:4] = (7).to_bytes(4, "big")
    keyed.write_bytes(bytes(data))
    with pytest.raises(UnsupportedFormatVersionError,
                       match=f"{keyed.name}: keyed state file version 7; statesource copies"
                             " version 6"):
        drop_state(str(source), str(tmp_path / "out"), "counts", "count")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("inside", ["savepoint", "job"])
def test_an_output_inside_what_is_read_is_refused(inside, tmp_path):
    # inside the savepoint, or beside a chk-N in its job directory (whose shared/ it reads)
    root = tmp_path / "job"
    shutil.copytree(FIXTURES / "lazy" / "rocksdb-incremental", root)
    (checkpoint,) = root.glob("chk-*")
    link = tmp_path / "link"
    link.symlink_to(checkpoint if inside == "savepoint" else root)
    output = link / "new"  # through a symlink: what counts is where it leads
    with pytest.raises(InvalidArgumentError, match="output .* is inside .*, which the new"
                                                   " savepoint is read from"):
        drop_state(str(checkpoint), str(output), "lazy", "vip")
    with pytest.raises(InvalidArgumentError, match="is inside"):
        rescale_max_parallelism(str(checkpoint), str(output), 256)
    assert not output.exists()
    drop_state(str(checkpoint), str(tmp_path / "beside"), "lazy", "vip")  # outside: written
    assert (tmp_path / "beside" / "_metadata").is_file()

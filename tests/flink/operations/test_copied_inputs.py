"""What a rewrite copies byte for byte is checked first: a corrupt input never becomes a
savepoint that looks valid.

An edit of one operator (``drop``) carries the others' files over as they are. Their
operator-state files are decoded whole before they are copied, and their keyed-state files'
versions checked; the keys of the edited operator, whose pairs are walked but stay in their
key group, are checked to hash back to it; a ``_metadata`` that lists an operator twice is
refused when read; an output inside what is read is refused. Each refusal names the file
and leaves nothing behind.
"""

from __future__ import annotations

import os
import shutil
import struct
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


def test_a_key_stored_in_another_key_group_than_its_hash_is_not_copied(tmp_path):
    """``max_id`` of key 39 in key group 1 of mp256's first file becomes key 40, whose key
    group under 256 is not 1 (``rescale`` and ``erase`` refuse it): a drop that keeps the key
    refuses it too, rather than copy a key the job would never find. A drop of the state it
    is in leaves it out: nothing corrupt is copied, and the drop succeeds."""
    source = tmp_path / "source"
    shutil.copytree(FIXTURES / "mp256" / "canonical", source)
    data = source / "160e1efc-ec06-4615-9bac-42079a4724da"
    data.chmod(0o644)
    raw = bytearray(data.read_bytes())
    offset = 3789  # key group 1: state id, key length, composite key (max_id of key 39)
    assert raw[offset + 6:offset + 17] == struct.pack(">H", 0x8001) + struct.pack(">q", 39) + b"\0"
    raw[offset + 15] = 40
    data.write_bytes(bytes(raw))
    with pytest.raises(CorruptCheckpointError,
                       match=f"{data.name} \\(key group 1\\), operator 'stateful', state"
                             " 'max_id': key 40 is stored in key group 1, but its hash"):
        drop_state(str(source), str(tmp_path / "out"), "stateful", "events")
    assert sorted(os.listdir(tmp_path)) == ["source"]  # no output, no staging
    drop_state(str(source), str(tmp_path / "out"), "stateful", "max_id")
    snapshot = FlinkSnapshot.open(str(tmp_path / "out"))
    header = snapshot.header(snapshot.operator("stateful"))
    assert header is not None and "max_id" not in [s.name for s in header.states]

"""Broken, foreign or mismatched snapshots fail with errors naming the file, offset or choices."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest

from fifos import fifo_in_place_of, opened_without_hanging
from flink_snapshots import only
from statesource.errors import (
    CheckpointNotFoundError,
    CorruptCheckpointError,
    IncompatibleCheckpointError,
    StateNotFoundError,
    UnsupportedFormatVersionError,
)
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.serializers.base import read_snapshot
from statesource.flink.serializers.primitives import SIMPLE
from statesource.flink.snapshot import metadata as metadata_module
from statesource.flink.statefiles.keyed_header import BROADCAST, StateInfo
from statesource.flink.statefiles.operator_state import decode_pieces
from statesource.model import DistributionMode

STATEFUL_FILE = "eeb8ae95-707b-428c-ae89-7aafd303254d"
HANDLE_TYPE_OFFSET = 0x94  # the first keyed-state handle's type byte in this _metadata


@pytest.fixture
def canonical(tmp_path):
    target = tmp_path / "savepoint"
    shutil.copytree(only("java/canonical/savepoint-*"), target)
    for file in target.iterdir():
        file.chmod(0o644)
    return target


def _patch(path, offset, data):
    raw = bytearray(path.read_bytes())
    raw[offset:offset + len(data)] = data
    path.write_bytes(bytes(raw))


def _read_all(path):
    checkpoint = FlinkCheckpoint.open(str(path))
    for state in checkpoint.operator("stateful").keyed_states:
        for _ in checkpoint.read_keyed_state(state.name, operator="stateful"):
            pass


NEWER = " \\(written by a Flink release newer than 2.3\\)"


@pytest.mark.parametrize("version, writer", [(2, " \\(written by Flink 1.10 or older\\)"),
                                             (5, ""), (7, NEWER), (99, NEWER)])
def test_unknown_metadata_version(canonical, version, writer):
    _patch(canonical / "_metadata", 4, version.to_bytes(4, "big"))
    with pytest.raises(UnsupportedFormatVersionError,
                       match=f"metadata version {version}{writer}; statesource reads version 3"
                             " \\(Flink 1.11 to 1.15\\), version 4 \\(Flink 1.16 to 1.20\\),"
                             " version 6 \\(Flink 2.0 to 2.3\\): take a savepoint with one of"
                             " those Flink releases"):
        FlinkCheckpoint.open(str(canonical))


def test_not_a_flink_metadata_file(canonical):
    _patch(canonical / "_metadata", 0, b"\0\0\0\0")
    with pytest.raises(CorruptCheckpointError, match="bad magic"):
        FlinkCheckpoint.open(str(canonical))


def test_a_changelog_backend_handle_advises_a_canonical_savepoint(canonical):
    assert (canonical / "_metadata").read_bytes()[HANDLE_TYPE_OFFSET] == 7
    _patch(canonical / "_metadata", HANDLE_TYPE_OFFSET, b"\x0e")  # CHANGELOG_HANDLE_V2
    with pytest.raises(IncompatibleCheckpointError,
                       match="state of the changelog backend.*take a canonical savepoint instead"):
        FlinkCheckpoint.open(str(canonical))


def test_truncated_metadata_names_the_offset(canonical):
    data = (canonical / "_metadata").read_bytes()
    (canonical / "_metadata").write_bytes(data[:700])
    with pytest.raises(CorruptCheckpointError, match=r"_metadata: truncated.* at byte offset \d+"):
        FlinkCheckpoint.open(str(canonical))


def test_truncated_data_file(canonical):
    data = (canonical / STATEFUL_FILE).read_bytes()
    (canonical / STATEFUL_FILE).write_bytes(data[:-10])
    with pytest.raises(CorruptCheckpointError, match=f"{STATEFUL_FILE} has .* records 44733"):
        _read_all(canonical)


def test_corrupt_entry_names_file_and_offset(canonical):
    # the first key group (at 2329) starts with state id 0 and a 4-byte key length
    _patch(canonical / STATEFUL_FILE, 2329 + 2, b"\x7f\xff\xff\xff")
    with pytest.raises(CorruptCheckpointError, match=rf"{STATEFUL_FILE}: invalid key length"
                                                     r" 2147483647 at byte offset 2331"):
        _read_all(canonical)


def test_wrong_key_group_in_a_key(canonical):
    _patch(canonical / STATEFUL_FILE, 2329 + 6, b"\x05")  # first key's key-group prefix (1 -> 5)
    with pytest.raises(CorruptCheckpointError, match="entry of key group 5 in key group 1"):
        _read_all(canonical)


def test_missing_data_file(canonical):
    (canonical / STATEFUL_FILE).unlink()
    with pytest.raises(CorruptCheckpointError, match="state file named by _metadata .* is missing"):
        _read_all(canonical)


def test_missing_operator_and_state_list_what_exists(canonical):
    checkpoint = FlinkCheckpoint.open(str(canonical))
    with pytest.raises(StateNotFoundError, match="'parse'.*'stateful'.*'sink'.*'src'"):
        checkpoint.operator("nope")
    with pytest.raises(StateNotFoundError, match="'sum_by_tag'.*'count'.*'tags'"):
        list(checkpoint.read_keyed_state("nope", operator="stateful"))
    with pytest.raises(StateNotFoundError, match="available: 'SourceReaderState'"):
        checkpoint.read_operator_state("nope", operator="src")


def test_not_a_snapshot(tmp_path):
    with pytest.raises(CheckpointNotFoundError, match="is not a Flink snapshot"):
        FlinkCheckpoint.open(str(tmp_path))


def test_absolute_paths_of_another_machine_resolve_inside_the_snapshot(canonical):
    """A checkpoint's _metadata may name its files by absolute paths where it was written."""
    metadata = (canonical / "_metadata").read_bytes()
    for file in canonical.iterdir():
        if file.name == "_metadata":
            continue
        name = file.name.encode()
        relative = b"\x06" + len(name).to_bytes(2, "big") + name
        at = metadata.index(relative)
        size = metadata[at + len(relative):at + len(relative) + 8]
        absolute = b"/elsewhere/flink/chk-9/" + name
        metadata = (metadata[:at] + b"\x02" + size + len(absolute).to_bytes(2, "big") + absolute
                    + metadata[at + len(relative) + 8:])
    (canonical / "_metadata").write_bytes(metadata)
    checkpoint = FlinkCheckpoint.open(str(canonical))
    (handle, *_) = checkpoint.snapshot.keyed_handles(checkpoint.snapshot.operator("stateful"))
    assert handle.stream.path.startswith("/elsewhere/") and not handle.stream.relative
    rows = [r for t in checkpoint.read_keyed_state("count", operator="stateful")
            for r in t.to_pylist()]
    assert len(rows) == 200


def test_a_recorded_path_cannot_leave_the_snapshot(canonical):
    metadata = (canonical / "_metadata").read_bytes()
    name = STATEFUL_FILE.encode()
    escaping = b"../" + name[3:]
    patched = metadata.replace(b"\x00\x24" + name, b"\x00\x24" + escaping)
    (canonical / "_metadata").write_bytes(patched)
    with pytest.raises(CorruptCheckpointError, match="not a relative path inside"):
        _read_all(canonical)


def test_key_groups_beyond_max_parallelism_are_corruption(canonical):
    # the first handle's start key group (0) becomes 100: 100..163 exceeds 128 key groups
    _patch(canonical / "_metadata", HANDLE_TYPE_OFFSET + 1, (100).to_bytes(4, "big"))
    with pytest.raises(CorruptCheckpointError, match="key groups 100..163"):
        FlinkCheckpoint.open(str(canonical))


def test_key_groups_ending_at_max_parallelism_are_corruption(canonical):
    """Key groups are 0..max parallelism - 1: the second handle (64..127 of 128) moved up by
    one ends at 128, overlapping nothing, and is refused all the same."""
    metadata = (canonical / "_metadata").read_bytes()
    second = b"\x07" + (64).to_bytes(4, "big") + (64).to_bytes(4, "big")  # type, start, count
    assert metadata.count(second) == 1
    _patch(canonical / "_metadata", metadata.index(second) + 1, (65).to_bytes(4, "big"))
    with pytest.raises(CorruptCheckpointError, match="key groups 65..128, overlapping another"
                                                     " subtask's or beyond its 128 key groups"):
        FlinkCheckpoint.open(str(canonical))


def test_a_short_read_is_an_error_not_a_hang(canonical, monkeypatch):
    """A file that shrinks after its size was checked reads short: that is corruption, and the
    header probe, which used to retry while it read less than the whole stream, stops."""
    checkpoint = FlinkCheckpoint.open(str(canonical))
    snapshot = checkpoint.snapshot
    read_file = type(snapshot)._read_file

    def shrinking(self, stream, offset, length):
        return read_file(self, stream, offset, length)[: max(length // 2, 0)]

    monkeypatch.setattr(type(snapshot), "_read_file", shrinking)
    with pytest.raises(CorruptCheckpointError, match="bytes at offset 0 were asked for"):
        _read_all(canonical)


def _java_utf(text: str) -> bytes:
    return struct.pack(">H", len(text)) + text.encode()


def test_a_state_without_its_value_serializer_is_named(canonical):
    data = (canonical / STATEFUL_FILE).read_bytes()
    role = _java_utf("VALUE_SERIALIZER")
    _patch(canonical / STATEFUL_FILE, data.index(role) + len(role) - 1, b"S")
    with pytest.raises(CorruptCheckpointError,
                       match=f"{STATEFUL_FILE}: state '.*' lacks the snapshot of its"
                             " VALUE_SERIALIZER \\(it has NAMESPACE_SERIALIZER,"
                             " VALUE_SERIALIZES\\) at byte offset"):
        _read_all(canonical)


def test_an_unknown_backend_state_type_is_named(canonical):
    data = (canonical / STATEFUL_FILE).read_bytes()
    name = _java_utf("sum_by_tag")
    _patch(canonical / STATEFUL_FILE, data.index(name) + len(name), struct.pack(">i", 9))
    with pytest.raises(CorruptCheckpointError,
                       match="state 'sum_by_tag' has unknown backend state type 9"):
        _read_all(canonical)


def test_two_subtasks_with_one_index_are_refused(canonical, monkeypatch):
    """Flink keys subtask states by index: a second one would silently replace the first's
    operator state."""
    offsets = []
    read_subtask = metadata_module._subtask

    def noting(reader, index):
        offsets.append((reader.pos - 4, index))
        return read_subtask(reader, index)

    monkeypatch.setattr(metadata_module, "_subtask", noting)
    stateful = FlinkCheckpoint.open(str(canonical)).snapshot.operator("stateful")
    assert [subtask.index for subtask in stateful.subtasks] == [0, 1]
    second = next(at for at, index in offsets if index == 1
                  and (canonical / "_metadata").read_bytes()[at:at + 4] == b"\0\0\0\1")
    _patch(canonical / "_metadata", second, struct.pack(">i", 0))
    with pytest.raises(CorruptCheckpointError,
                       match="subtask index 0 of operator .* each index at most once"):
        FlinkCheckpoint.open(str(canonical))


@pytest.mark.parametrize("name", ["_metadata", STATEFUL_FILE])
def test_a_fifo_in_place_of_a_file_is_refused_not_waited_on(canonical, name):
    fifo_in_place_of(canonical / name)
    error = opened_without_hanging(lambda: _read_all(canonical))
    assert isinstance(error, CorruptCheckpointError) and "is not a regular file" in str(error)


MP256 = Path(__file__).resolve().parents[2] / "fixtures" / "flink" / "mp256" / "canonical"


@pytest.fixture
def mp256(tmp_path):
    """Savepoint with list, union and broadcast operator state stored inline in _metadata."""
    target = tmp_path / "mp256"
    shutil.copytree(MP256, target)
    for file in target.iterdir():
        file.chmod(0o644)
    return target


def _replace_first(path, old: bytes, new: bytes) -> None:
    """The first ``old`` in the file (subtask 0's, in a _metadata) as ``new``, of its length."""
    data = path.read_bytes()
    at = data.index(old)
    assert len(old) == len(new)
    path.write_bytes(data[:at] + new + data[at + len(old):])


@pytest.mark.parametrize(("named", "mode", "operator", "state", "declared"), [
    (b"\x00\x04seen\x00", b"\x02", "stateful", "seen", "list"),
    (b"\x00\x05rules\x02", b"\x00", "broadcaster", "rules", "broadcast"),
], ids=["list state as broadcast", "broadcast state as list"])
def test_an_operator_state_whose_mode_contradicts_its_header_is_refused(
        mp256, named, mode, operator, state, declared):
    """A list state read as a broadcast one failed on a missing key serializer; a broadcast
    state read as a list decoded its map's bytes as list elements."""
    data = (mp256 / "_metadata").read_bytes()
    at = data.index(named) + len(named) - 1
    (mp256 / "_metadata").write_bytes(data[:at] + mode + data[at + 1:])
    with pytest.raises(CorruptCheckpointError,
                       match=f"operator state '{state}' the distribution mode .* but the file's"
                             f" header declares it a {declared} state"):
        FlinkCheckpoint.open(str(mp256)).read_operator_state(state, operator=operator)


@pytest.mark.parametrize(("offset", "message"), [
    (340, "operator state offset 340 lies outside the file's data .bytes 362..380"),
    (371, "truncated"),  # the previous element would end a byte early
])
def test_operator_state_offsets_misplacing_a_piece_are_refused(mp256, offset, message):
    _replace_first(mp256 / "_metadata", struct.pack(">q", 372), struct.pack(">q", offset))
    with pytest.raises(CorruptCheckpointError, match=message):
        FlinkCheckpoint.open(str(mp256)).read_operator_state("seen", operator="stateful")


def test_a_broadcast_state_holding_a_key_twice_is_refused(mp256):
    """Flink writes a broadcast state from a map: a repeated key is corruption, which a dict
    would otherwise hide by keeping one of the values."""
    _replace_first(mp256 / "_metadata", b"\x03u6\x00\x00\x00\x00\x00\x00\x03\xe1",
                  b"\x03u5\x00\x00\x00\x00\x00\x00\x03\xe1")
    with pytest.raises(CorruptCheckpointError, match="broadcast state 'rules' holds key 'u5'"
                                                     " twice"):
        FlinkCheckpoint.open(str(mp256)).read_operator_state("rules", operator="broadcaster")


def _first_keyed_file(root) -> Path:
    checkpoint = FlinkCheckpoint.open(str(root))
    stateful = checkpoint.snapshot.operator("stateful")
    return root / Path(checkpoint.snapshot.keyed_handles(stateful)[0].stream.path).name


def test_a_state_kind_its_value_serializer_cannot_be_is_refused(mp256):
    """A list state must hold a list serializer (Flink's value states never do)."""
    _replace_first(_first_keyed_file(mp256),
                  b"\x00\x05total\x00\x00\x00\x00\x00\x00\x00\x01\x00\x10KEYED_STATE_TYPE"
                  b"\x00\x05VALUE",
                  b"\x00\x06totalX\x00\x00\x00\x00\x00\x00\x00\x01\x00\x10KEYED_STATE_TYPE"
                  b"\x00\x04LIST")
    with pytest.raises(CorruptCheckpointError, match="list state 'totalX' has the value"
                                                     " serializer .*, not a list serializer"):
        FlinkCheckpoint.open(str(mp256)).operator("stateful")


def test_a_collection_snapshot_with_more_nested_serializers_than_it_takes_is_refused(mp256):
    _replace_first(_first_keyed_file(mp256), b"base.MapSerializerSnapshot",
                  b"base.SetSerializerSnapshot")
    with pytest.raises(CorruptCheckpointError, match="SetSerializerSnapshot at byte offset"
                                                     " [0-9]+ has 2 nested serializers"):
        FlinkCheckpoint.open(str(mp256)).operator("stateful")


def _names_alike(root) -> tuple[str, str]:
    """Two states of the same name length in the stateful operator's header."""
    checkpoint = FlinkCheckpoint.open(str(root))
    names = [info.name for info in checkpoint.snapshot.header(
        checkpoint.snapshot.operator("stateful")).states]
    return next((a, b) for a in names for b in names if a < b and len(a) == len(b))


def test_a_header_naming_a_state_twice_is_refused(mp256):
    a, b = _names_alike(mp256)
    _replace_first(_first_keyed_file(mp256), _java_utf(a), _java_utf(b))
    with pytest.raises(CorruptCheckpointError, match=f"the header lists state '{b}' more than"
                                                     " once"):
        FlinkCheckpoint.open(str(mp256)).operator("stateful")


def test_subtasks_whose_files_declare_a_state_differently_are_refused_naming_both(mp256):
    """Each file decodes with its own header, states matched by name: a file that gives a
    state's name to another kind of state cannot be read by either declaration."""
    checkpoint = FlinkCheckpoint.open(str(mp256))
    stateful = checkpoint.snapshot.operator("stateful")
    handles = checkpoint.snapshot.keyed_handles(stateful)
    assert len({handle.stream for handle in handles}) > 1
    a, b = _names_alike(mp256)
    first, second = (mp256 / Path(handles[0].stream.path).name,
                     mp256 / Path(handles[-1].stream.path).name)
    placeholder = _java_utf("\x01" * len(a))
    _replace_first(second, _java_utf(a), placeholder)  # swapped: ids mean the other state
    _replace_first(second, _java_utf(b), _java_utf(a))
    _replace_first(second, placeholder, _java_utf(b))
    reopened = FlinkCheckpoint.open(str(mp256))
    with pytest.raises(IncompatibleCheckpointError,
                       match=f"operator 'stateful': state '{a}' is declared differently in"
                             f" .*{first.name} and in .*{second.name}"):
        list(reopened.read_keyed_state(a, operator="stateful"))
    assert "is declared differently" in reopened.snapshot.undecodable(stateful)


def _flink_type(name: str):
    w = BinaryWriter()
    SIMPLE[name].write(w)
    return read_snapshot(BinaryReader(w.getvalue(), "snapshot"))


def test_broadcast_keys_java_tells_apart_but_python_cannot_are_refused_not_merged():
    """A broadcast HashMap<Double, Integer> holds 0.0 and -0.0 apart; a dict cannot."""
    info = StateInfo(0, "b", BROADCAST, {}, {"KEY_SERIALIZER": _flink_type("double"),
                                             "VALUE_SERIALIZER": _flink_type("int")})
    data = (struct.pack(">i", 2) + struct.pack(">d", 0.0) + struct.pack(">i", 1)
            + struct.pack(">d", -0.0) + struct.pack(">i", 2))
    with pytest.raises(IncompatibleCheckpointError,
                       match="broadcast state 'b' holds keys that Java tells apart but that"
                             " read as one value here .-0.0."):
        decode_pieces([BinaryReader(data, "file", end=len(data))], info,
                      DistributionMode.BROADCAST)

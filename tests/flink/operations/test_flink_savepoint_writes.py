"""Writing a Flink savepoint: published whole or not at all, and every refusal before a byte.

The savepoints written here are checked by statesource's reader only; whether Flink restores
them is decided by a real Flink in test_flink_savepoint_rescale.py.
"""

from __future__ import annotations

import collections
import os
import shutil
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from flink_entries import entries_by_state, key_stateful_by_its_event_pojo

from flink_snapshots import only
from statesource.errors import (
    CheckpointExistsError,
    CheckpointNotFoundError,
    CorruptCheckpointError,
    IncompatibleCheckpointError,
    InvalidArgumentError,
)
from statesource.flink.handles import SnapshotMetadata, StreamHandle
from statesource.flink.layouts.canonical import canonical_pairs
from statesource.flink.layouts.canonical_writer import KeyGroupFramer, frame_key_group
from statesource.flink.layouts.keyed import canonical_sections, variable_int_bytes
from statesource.flink.layouts.native import native_pairs
from statesource.flink.operations.rescale import (
    CANONICAL_SAVEPOINT_PROPERTIES,
    is_canonical_savepoint,
    rescale_max_parallelism,
)
from statesource.flink.operations.savepoint_target import FlinkSavepointTarget
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.serializers import primitives
from statesource.flink.serializers.base import FlinkType
from statesource.flink.serializers.collections import MapType
from statesource.flink.serializers.primitives import PrimitiveType
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.flink.snapshot.publish import SavepointWriter, is_staging_name
from statesource.flink.statefiles.keyed_header import KEY_VALUE, KeyedHeader, StateInfo
from statesource.keygroups import assign_to_key_group

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "flink"
MP256 = FIXTURES / "mp256" / "canonical"
REPOSITORY = Path(__file__).resolve().parents[3]


def leftovers(parent: Path) -> list[str]:
    return sorted(name for name in os.listdir(parent) if is_staging_name(name))


# -- what is written -----------------------------------------------------------------------


@pytest.mark.parametrize("variant, new", [("mp256", 1024), ("mp256", 128),
                                          ("mp128-snappy", 256), ("types", 4096),
                                          ("mp256", 2)])  # as many key groups as subtasks
def test_every_entry_is_kept_in_the_key_group_of_its_key(tmp_path, variant, new):
    """The reader finds every entry of every state (Avro and Kryo values moved as bytes
    included), and the reader's own check puts each in the key group of its key."""
    output = tmp_path / "out"
    done = rescale_max_parallelism(FIXTURES / variant / "canonical", output, new)
    before, after = entries_by_state(FIXTURES / variant / "canonical"), entries_by_state(output)
    assert before == after and sum(map(len, after.values())) > 0
    savepoint = FlinkCheckpoint.open(str(output))
    for op in done.operators:
        meta = savepoint.operator(op.operator)
        assert meta.max_parallelism == new
        for table in savepoint.read_keyed_state(meta.keyed_states[0].name,
                                                operator=op.operator):
            keys = meta.key_type.from_arrow(table.column("key"))
            for key, key_group in zip(keys, table.column("key_group").to_pylist()):
                assert key_group == assign_to_key_group(key, meta.key_type, new)


def test_file_paths_are_relative_so_the_savepoint_moves_whole(tmp_path):
    output = tmp_path / "out"
    rescale_max_parallelism(MP256, output, 512)
    metadata = FlinkSnapshot.open(str(output)).metadata
    files = set(os.listdir(output)) - {"_metadata"}
    named = {stream.path for stream in rescale_module_streams(metadata) if stream.inline is None}
    assert named == files and all(stream.relative for stream in rescale_module_streams(metadata)
                                  if stream.inline is None)
    moved = tmp_path / "elsewhere" / "savepoint"
    moved.parent.mkdir()
    shutil.move(output, moved)
    assert entries_by_state(moved) == entries_by_state(MP256)


def rescale_module_streams(metadata: SnapshotMetadata) -> list[StreamHandle]:
    from statesource.flink.snapshot.publish import referenced_streams

    return referenced_streams(metadata)


@pytest.mark.parametrize("variant", ["mp256", "mp128-snappy"])
def test_what_is_carried_over(tmp_path, variant):
    """Checkpoint id, master states, properties, operator state (same offsets, same bytes;
    inline in mp256, files copied in mp128-snappy), stateless operators; only max
    parallelism and keyed state change."""
    source, output = FIXTURES / variant / "canonical", tmp_path / "out"
    rescale_max_parallelism(source, output, 1024)
    old, new = FlinkSnapshot.open(str(source)), FlinkSnapshot.open(str(output))
    assert (new.metadata.checkpoint_id, new.metadata.master_states,
            new.metadata.properties) == (old.metadata.checkpoint_id,
                                         old.metadata.master_states, old.metadata.properties)
    assert [op.uid for op in new.operators] == [op.uid for op in old.operators]
    for before, after in zip(old.operators, new.operators):
        assert (after.operator_id, after.name, after.parallelism) == (
            before.operator_id, before.name, before.parallelism)
        assert after.max_parallelism == 1024
        for a, b in zip(before.subtasks, after.subtasks):
            assert [h.states for h in a.operator] == [h.states for h in b.operator]
            for x, y in zip(a.operator, b.operator):
                assert old.read_bytes(x.stream, 0, x.stream.size) == new.read_bytes(
                    y.stream, 0, y.stream.size)
            for x, y in zip(a.operator, b.operator):
                assert (x.stream.inline is None) == (y.stream.inline is None)
                if x.stream.inline is None:
                    assert x.stream.path == y.stream.path  # copied under its own name
    for name, uid in (("rules", "broadcaster"), ("seen", "stateful"), ("subtasks", "stateful")):
        assert FlinkCheckpoint.open(str(output)).read_operator_state(
            name, operator=uid) == FlinkCheckpoint.open(str(source)).read_operator_state(
            name, operator=uid)


def test_same_max_parallelism_keeps_every_pair_byte_for_byte(tmp_path):
    """A round trip moves pairs, never re-encodes them: each key group holds the same
    (composite key, value) pairs per state as before (in state order, not hash-map order)."""
    output = tmp_path / "out"
    rescale_max_parallelism(MP256, output, 256)
    assert pairs_by_key_group(output) == pairs_by_key_group(MP256)


def pairs_by_key_group(path: Path) -> dict:
    snapshot = FlinkSnapshot.open(str(path))
    found = {}
    for op in snapshot.operators:
        header = snapshot.header(op)
        for piece in snapshot.key_group_bytes(op):
            handle_header = snapshot.read_header(piece.handle)
            for state_id, pairs in canonical_pairs(
                    snapshot.piece_bytes(piece), "", piece.begin, piece.key_group,
                    handle_header, 2 if op.max_parallelism > 128 else 1):
                name = handle_header.states[state_id].name
                found[(op.label, piece.key_group, name)] = collections.Counter(pairs)
        assert header is not None or not snapshot.keyed_handles(op)
    return found


@pytest.mark.parametrize("variant", ["mp256", "mp128-snappy", "types"])
def test_the_pairs_walked_are_those_of_the_canonical_reader(variant):
    """The rescale's one-pass walk of a canonical key group gives the pairs
    ``keyed.canonical_sections`` (checked byte for byte by the round trips) gives."""
    snapshot = FlinkSnapshot.open(str(FIXTURES / variant / "canonical"))
    walked = 0
    for op in snapshot.operators:
        prefix = 2 if op.max_parallelism > 128 else 1
        for piece in snapshot.key_group_bytes(op):
            header = snapshot.read_header(piece.handle)
            raw = snapshot.piece_bytes(piece)
            expected = [(s.state_id, [(k[prefix:], v) for k, v in s.pairs]) for s in
                        canonical_sections(raw, "", piece.begin, piece.key_group, prefix,
                                           header.compressed)]
            assert canonical_pairs(
                raw, "", piece.begin, piece.key_group, header, prefix) == expected
            walked += 1
    assert walked > 10


@pytest.mark.parametrize("variant", ["mp256", "mp128-snappy", "types"])
def test_a_key_group_framed_pair_by_pair_is_the_one_framed_whole(variant):
    """``KeyGroupFramer`` (pairs as they arrive, interleaved across states) writes what
    ``frame_key_group`` writes, whose output the round trips hold to Flink's bytes."""
    snapshot = FlinkSnapshot.open(str(FIXTURES / variant / "canonical"))
    for op in snapshot.operators:
        prefix = 2 if op.max_parallelism > 128 else 1
        for piece in snapshot.key_group_bytes(op):
            header = snapshot.read_header(piece.handle)
            sections = canonical_sections(snapshot.piece_bytes(piece), "", piece.begin,
                                          piece.key_group, prefix, header.compressed)
            framer = KeyGroupFramer(piece.key_group, op.max_parallelism)
            longest = max(len(s.pairs) for s in sections)
            for index in range(longest):  # round robin over the states
                for state_id, pairs in sections:
                    if index < len(pairs):
                        framer.add(state_id, pairs[index][0][prefix:], pairs[index][1])
            assert framer.getvalue() == frame_key_group(piece.key_group, op.max_parallelism,
                                                        sections)


def test_the_framer_refuses_what_flink_could_not_read():
    framer = KeyGroupFramer(3, 128)
    with pytest.raises(InvalidArgumentError, match="has no entries"):
        framer.getvalue()
    with pytest.raises(InvalidArgumentError, match="state id 32767"):
        framer.add(32767, b"k", b"v")
    with pytest.raises(InvalidArgumentError, match="outside 0 .. 127"):
        KeyGroupFramer(128, 128)
    framer.add(0, b"k", b"v")
    assert framer.getvalue() == b"\0\0" + b"\0\0\0\x02\x83k" + b"\0\0\0\x01v" + b"\xff\xff"
    with pytest.raises(InvalidArgumentError, match="already framed"):
        framer.add(0, b"k2", b"v")
    with pytest.raises(InvalidArgumentError, match="nothing is added once"):
        framer.add(1, b"k2", b"v")


@pytest.mark.parametrize("cut, message", [(1, "truncated"), (3, "truncated"),
                                          (-1, "truncated: no room for a state id"),
                                          (None, "bytes after the end")])
def test_a_damaged_key_group_is_refused(cut, message):
    snapshot = FlinkSnapshot.open(str(MP256))
    op = snapshot.operator("stateful")
    piece = snapshot.key_group_bytes(op)[0]
    header = snapshot.read_header(piece.handle)
    raw = snapshot.piece_bytes(piece)
    raw = raw + b"\0" if cut is None else raw[:cut] if cut > 0 else raw[:-2]
    with pytest.raises(CorruptCheckpointError, match=message):
        canonical_pairs(raw, "file", piece.begin, piece.key_group, header, 2)


@pytest.mark.parametrize("variant, uids, least", [
    ("mp256", ("stateful", "windows"), 1000), ("mp128-snappy", ("stateful", "windows"), 1000),
    ("encoding", ("edges",), 100)])
def test_native_key_groups_convert_to_the_pairs_of_the_canonical_savepoint(variant, uids, least):
    """The same state saved natively and canonically (two savepoints of one run): each
    native key group converts to exactly the canonical one's pairs, byte for byte. Kryo
    values (operator ``opaque``) cannot be delimited in a native snapshot and are left out.
    ``encoding`` has a String key and a String namespace, each followed by its length in
    the composite key, two bytes for the keys and namespaces of 256 bytes or more."""
    native = FlinkSnapshot.open(str(FIXTURES / variant / "native"))
    canonical = FlinkSnapshot.open(str(FIXTURES / variant / "canonical"))
    compared = 0
    for uid in uids:
        ops = native.operator(uid), canonical.operator(uid)
        prefix = 2 if ops[0].max_parallelism > 128 else 1
        converted, stored = {}, {}
        for piece in native.key_group_bytes(ops[0]):
            header = native.read_header(piece.handle)
            for state_id, pairs in native_pairs(
                    native.piece_bytes(piece), "", piece.begin, piece.key_group, header):
                if pairs:  # a native key group lists every state, with a count of 0 if empty
                    converted[(piece.key_group, header.states[state_id].name)] = sorted(pairs)
        for piece in canonical.key_group_bytes(ops[1]):
            header = canonical.read_header(piece.handle)
            for state_id, pairs in canonical_pairs(
                    canonical.piece_bytes(piece), "", piece.begin, piece.key_group, header,
                    prefix):
                stored[(piece.key_group, header.states[state_id].name)] = sorted(pairs)
        assert converted == stored
        compared += sum(map(len, stored.values()))
    assert compared > least


def _simple(serializer: str) -> FlinkType:
    """The reader's type of one of Flink's simple serializers (``LongSerializer``)."""
    full = next(name for name in primitives._SIMPLE if name.endswith(f".{serializer}"
                                                                       f"${serializer}Snapshot"))
    return PrimitiveType(full)


def _native_map_group(value: str, user_value: bytes) -> tuple[bytes, KeyedHeader]:
    """A native key group 3 holding one map state (String keys, VoidNamespace) whose one
    entry is key ``k`` -> {``u``: the null flag and ``user_value``}, and its header."""
    string = _simple("StringSerializer")
    info = StateInfo(0, "totals", KEY_VALUE, {"KEYED_STATE_TYPE": "MAP"}, {
        "VALUE_SERIALIZER": MapType("MapSerializerSnapshot", string, _simple(value)),
        "NAMESPACE_SERIALIZER": _simple("VoidNamespaceSerializer")})
    raw = (struct.pack(">ihi", 3, 0, 1) + b"\0"  # key group, state id, count, the namespace
           + b"\x02k" + struct.pack(">i", 1) + b"\x02u" + user_value)
    return raw, KeyedHeader(6, False, string, (info,), 0)


def test_a_null_map_value_converts_to_the_null_its_serializer_writes():
    """Flink's canonical savepoint holds the null flag and then the null as the value's
    serializer writes it (a String's: one zero byte); the native one the flag alone."""
    raw, header = _native_map_group("StringSerializer", b"\x01")
    composite = b"\x02k\x00\x02u"  # StringValue "k", VoidNamespace's byte, StringValue "u"
    assert native_pairs(raw, "kg", 0, 3, header) == [
        (0, [(composite, b"\x01\x00")])]
    raw, header = _native_map_group("StringSerializer", b"\x00\x02v")
    assert native_pairs(raw, "kg", 0, 3, header) == [
        (0, [(composite, b"\x00\x02v")])]


def test_a_null_map_value_of_a_serializer_writing_no_null_keeps_the_flag_alone():
    """Flink fails to write a canonical savepoint with a null Long map value (its serializer
    writes no null), but its restore reads a null value's flag and nothing after it
    (HeapSavepointRestoreOperation.deserializeMapStateEntry): the converted pair keeps the
    flag alone rather than refusing a state the job holds."""
    raw, header = _native_map_group("LongSerializer", b"\x01")
    assert native_pairs(raw, "kg", 0, 3, header) == [
        (0, [(b"\x02k\x00\x02u", b"\x01")])]


def test_native_savepoint_refused_for_kryo_values(tmp_path):
    output = tmp_path / "out"
    with pytest.raises(IncompatibleCheckpointError,
                       match="operator 'opaque', state 'last_uuid' of a native snapshot.*"
                             "java.util.UUID.*canonical"):
        rescale_max_parallelism(FIXTURES / "mp256" / "native", output, 1024)
    assert os.listdir(tmp_path) == []


@pytest.fixture(scope="module")
def shared_java_snapshots() -> dict[str, Path]:
    return {"native": only("java/native/savepoint-*"), "chk-7": only("java/checkpoints/chk-7")}


def test_a_converted_snapshot_says_it_is_a_canonical_savepoint(tmp_path, shared_java_snapshots):
    """A native savepoint's or a checkpoint's properties become a canonical savepoint's
    (those of every Flink 2.3 canonical savepoint at hand); a canonical one keeps its own."""
    canonical = FlinkSnapshot.open(str(MP256)).metadata.properties
    assert canonical == CANONICAL_SAVEPOINT_PROPERTIES and is_canonical_savepoint(canonical)
    for native in (FIXTURES / "mp256" / "native", *shared_java_snapshots.values()):
        assert not is_canonical_savepoint(FlinkSnapshot.open(str(native)).metadata.properties)
    output = tmp_path / "out"
    checkpoint = shared_java_snapshots["chk-7"]
    done = rescale_max_parallelism(checkpoint, output, 256)
    assert done.converted
    assert FlinkSnapshot.open(str(output)).metadata.properties == CANONICAL_SAVEPOINT_PROPERTIES
    assert entries_by_state(output) == entries_by_state(checkpoint)


@pytest.mark.parametrize("value, expected", [(0, b"\0"), (5, b"\x05"), (255, b"\xff"),
                                             (256, b"\x00\x01"), (300, b"\x2c\x01"),
                                             (1 << 16, b"\0\0\x01")])
def test_variable_int_bytes_as_flink_writes_them(value, expected):
    assert variable_int_bytes(value) == expected


# -- refusals: nothing written -------------------------------------------------------------


@pytest.mark.parametrize("existing", ["empty directory", "savepoint", "file"])
def test_an_existing_target_is_refused_and_left_alone(tmp_path, existing):
    output = tmp_path / "out"
    if existing == "file":
        output.write_text("not mine")
    elif existing == "savepoint":
        shutil.copytree(MP256, output)
    else:
        output.mkdir()
    before = sorted(p.name for p in output.iterdir()) if output.is_dir() else output.read_text()
    with pytest.raises(CheckpointExistsError, match=f"{output} already exists"):
        rescale_max_parallelism(MP256, output, 1024)
    after = sorted(p.name for p in output.iterdir()) if output.is_dir() else output.read_text()
    assert after == before and os.listdir(tmp_path) == ["out"]


@pytest.mark.parametrize("max_parallelism, parallelism, message", [
    (0, None, "max parallelism"),
    (32769, None, "max parallelism"),
    (1, None, "operator 'window-sink' has parallelism 2, above the new max parallelism 1"),
    (128, 129, "parallelism"),
    (128, 1, r"operator 'stateful' holds operator state in subtasks \[1\]"),
])
def test_a_bad_max_parallelism_is_refused_before_anything_is_written(
        tmp_path, max_parallelism, parallelism, message):
    with pytest.raises(InvalidArgumentError, match=message):
        rescale_max_parallelism(MP256, tmp_path / "out", max_parallelism,
                                parallelism=parallelism)
    assert os.listdir(tmp_path) == []


def test_a_key_type_statesource_cannot_hash_is_refused(tmp_path, monkeypatch):
    """Keys of a POJO (here the fixture's Event, as if the job keyed by it): their Java
    hashCode is the class's own, so their key groups cannot be recomputed."""
    key_stateful_by_its_event_pojo(monkeypatch, MP256)
    with pytest.raises(IncompatibleCheckpointError,
                       match="operator 'stateful' is keyed by POJO FixtureJob\\$Event.*cannot"
                             " compute the key group"):
        rescale_max_parallelism(MP256, tmp_path / "out", 1024)
    assert os.listdir(tmp_path) == []


def test_a_key_that_does_not_hash_to_its_key_group_is_refused(tmp_path):
    """A key stored in another key group than its hash gives (the hash statesource computes
    would not be the job's): refused, since moving it by that hash would lose it."""
    source = tmp_path / "source"
    shutil.copytree(MP256, source)
    data = source / "160e1efc-ec06-4615-9bac-42079a4724da"
    data.chmod(0o644)
    raw = bytearray(data.read_bytes())
    offset = 3789  # key group 1: state id, key length, composite key (max_id of key 39)
    assert raw[offset + 6:offset + 17] == struct.pack(">H", 0x8001) + struct.pack(">q", 39) + b"\0"
    raw[offset + 7] = 2  # now it claims key group 2, inside key group 1's bytes
    data.write_bytes(bytes(raw))
    with pytest.raises(CorruptCheckpointError, match="entry of key group 2 in key group 1"):
        rescale_max_parallelism(source, tmp_path / "out", 1024)
    # the same entry in a key group of its own: consistent framing, wrong hash
    raw = bytearray(data.read_bytes())
    raw[offset + 7] = 1
    raw[offset + 15] = 40  # key 40, whose key group under 256 is not 1
    data.write_bytes(bytes(raw))
    with pytest.raises(CorruptCheckpointError,
                       match="160e1efc-ec06-4615-9bac-42079a4724da \\(key group 1\\), operator"
                             " 'stateful', state 'max_id': key 40 is stored in key group 1, but"
                             " its hash .* gives key group"):
        rescale_max_parallelism(source, tmp_path / "out", 1024)
    assert sorted(os.listdir(tmp_path)) == ["source"]


# -- failures and kills: no output, no temporary directory ----------------------------------


@pytest.mark.parametrize("where", ["keyed file", "operator state copy", "_metadata"])
def test_a_failure_mid_write_leaves_nothing(tmp_path, monkeypatch, where):
    calls = []
    if where == "_metadata":
        def broken_metadata(metadata):
            raise OSError("disk full")
        monkeypatch.setattr("statesource.flink.snapshot.publish.write_metadata", broken_metadata)
    else:
        write_file = SavepointWriter.write_file
        copy = where == "operator state copy"  # copies keep their names, keyed files get new

        def broken(self, chunks, name=None):
            if (name is not None) == copy:
                calls.append(name)
                if len(calls) == 2:
                    raise OSError("disk full")
            return write_file(self, chunks, name)
        monkeypatch.setattr(SavepointWriter, "write_file", broken)
    with pytest.raises(OSError, match="disk full"):
        rescale_max_parallelism(FIXTURES / "mp128-snappy" / "canonical", tmp_path / "out", 1024)
    assert os.listdir(tmp_path) == []
    assert where == "_metadata" or len(calls) == 2


def test_a_writer_not_published_removes_its_files(tmp_path):
    with SavepointWriter(tmp_path / "out") as writer:
        writer.write_file(b"state")
        assert len(leftovers(tmp_path)) == 1
    assert os.listdir(tmp_path) == []


def test_publish_refuses_metadata_naming_files_it_did_not_write(tmp_path):
    metadata = FlinkSnapshot.open(str(MP256)).metadata
    with pytest.raises(CorruptCheckpointError, match="not a file written into the savepoint"), \
            SavepointWriter(tmp_path / "out") as writer:
        writer.publish(metadata)
    assert os.listdir(tmp_path) == []


def test_a_target_created_while_writing_is_not_replaced(tmp_path, monkeypatch):
    """The rename is the commit, and it never replaces: an (even empty) directory that
    appeared at the output meanwhile wins, and the write is removed."""
    output = tmp_path / "out"
    publish = SavepointWriter.publish

    def racing(self, metadata):
        output.mkdir()
        return publish(self, metadata)
    monkeypatch.setattr(SavepointWriter, "publish", racing)
    with pytest.raises(CheckpointExistsError, match=f"{output} already exists"):
        rescale_max_parallelism(MP256, output, 1024)
    assert os.listdir(tmp_path) == ["out"] and os.listdir(output) == []


def test_a_killed_write_leaves_only_a_temporary_directory_nothing_reads(tmp_path):
    """A write killed after ``_metadata`` is written, before the rename: the output does
    not exist, the temporary directory is refused as a savepoint, and a new write of the
    same output succeeds."""
    output = tmp_path / "out"
    script = textwrap.dedent(f"""
        import os, signal
        import statesource.flink.snapshot.publish as publish
        publish.rename_no_replace = lambda source, target: os.kill(os.getpid(), signal.SIGKILL)
        from statesource.flink.operations.rescale import rescale_max_parallelism
        rescale_max_parallelism({str(MP256)!r}, {str(output)!r}, 1024)
    """)
    run = subprocess.run([sys.executable, "-c", script], env={
        **os.environ, "PYTHONPATH": os.pathsep.join([str(REPOSITORY), os.environ.get(
            "PYTHONPATH", "")])}, capture_output=True, text=True, timeout=120)
    assert run.returncode == -9, run.stderr
    (staging,) = os.listdir(tmp_path)
    assert is_staging_name(staging) and staging.startswith(".out.tmp-")
    assert "_metadata" in os.listdir(tmp_path / staging)
    with pytest.raises(CheckpointNotFoundError, match="unfinished savepoint write"):
        FlinkSnapshot.open(str(tmp_path / staging))
    with pytest.raises(CheckpointNotFoundError):
        FlinkSnapshot.open(str(output))
    with pytest.raises(CheckpointNotFoundError):
        FlinkSnapshot.open(str(tmp_path))
    rescale_max_parallelism(MP256, output, 1024)
    assert entries_by_state(output) == entries_by_state(MP256)


def test_a_target_reads_its_base_metadata_once(tmp_path, monkeypatch):
    """Opening the target, and publishing it unchanged, read the base's ``_metadata`` once
    (it is the largest file a rewrite reads on the driver); the result carries every state
    over."""
    opened = []
    real_open = FlinkSnapshot.open

    def counted(path, **options):
        opened.append(path)
        return real_open(path, **options)
    monkeypatch.setattr(FlinkSnapshot, "open", staticmethod(counted))
    target = FlinkSavepointTarget.open(str(MP256), str(tmp_path / "out"))
    target.publish()
    assert opened == [str(MP256)]
    assert entries_by_state(tmp_path / "out") == entries_by_state(MP256)

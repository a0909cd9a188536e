"""The Flink writers on hand-built input: exact bytes, what real files do not hold, and refusals.

Real files are written back byte for byte in test_flink_round_trips.py; here
each writer meets the cases no real snapshot at hand has (absolute paths,
master and raw states, finished operators, modified UTF-8 corner cases), and
every value it must refuse, with an error naming that value.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from statesource.errors import CorruptCheckpointError, InvalidArgumentError
from statesource.flink.binary.reader import BinaryReader, decode_modified_utf8
from statesource.flink.binary.writer import BinaryWriter, encode_modified_utf8
from statesource.flink.handles import (
    KeyedHandle,
    OperatorHandle,
    OperatorSnapshot,
    OperatorStateOffsets,
    SnapshotMetadata,
    StreamHandle,
    SubtaskState,
    operator_id_of,
)
from statesource.flink.layouts.canonical_writer import (
    assemble_keyed_file,
    frame_key_group,
    key_group_prefix,
)
from statesource.flink.layouts.keyed import CanonicalSection, canonical_sections
from statesource.flink.operations.rescale import CANONICAL_SAVEPOINT_PROPERTIES
from statesource.flink.serializers.tuples import TupleFlinkType
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.flink.snapshot.metadata import parse_metadata
from statesource.flink.snapshot.metadata_writer import write_metadata
from statesource.flink.statefiles.keyed_header_writer import write_keyed_header
from statesource.model import DistributionMode

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "flink"

# -- binary writer -------------------------------------------------------------------------


def test_integers_are_big_endian_and_read_back():
    w = BinaryWriter()
    w.u8(255)
    w.boolean(True)
    w.i16(-2)
    w.u16(0xFFFF)
    w.i32(-(1 << 31))
    w.i64((1 << 63) - 1)
    w.length_prefixed(b"ab")
    assert len(w) == 1 + 1 + 2 + 2 + 4 + 8 + 6
    data = w.getvalue()
    assert data[:6] == bytes.fromhex("ff01fffeffff")
    r = BinaryReader(data, "test")
    assert (r.u8(), r.boolean(), r.i16(), r.u16(), r.i32(), r.i64()) == (
        255, True, -2, 0xFFFF, -(1 << 31), (1 << 63) - 1)
    assert r.take(r.i32()) == b"ab" and r.at_end()


@pytest.mark.parametrize("method, value", [
    ("u8", 256), ("u8", -1), ("i16", 1 << 15), ("u16", -1), ("i32", 1 << 31),
    ("i32", -(1 << 31) - 1), ("i64", 1 << 63)])
def test_a_value_too_wide_for_its_field_is_refused(method, value):
    with pytest.raises(InvalidArgumentError, match=str(value)):
        getattr(BinaryWriter(), method)(value)


def test_write_utf_is_javas_modified_utf8():
    w = BinaryWriter()
    w.utf("a\0\u00e9\u20ac\U0001F600")
    # NUL as c0 80; the emoji as its surrogate pair, three bytes per unit (what Java writes)
    body = bytes.fromhex("61" "c080" "c3a9" "e282ac" "eda0bd" "edb880")
    assert w.getvalue() == len(body).to_bytes(2, "big") + body
    assert BinaryReader(w.getvalue(), "test").utf() == "a\0\u00e9\u20ac\U0001F600"


def test_a_lone_surrogate_is_written_back_as_read():
    text = decode_modified_utf8(bytes.fromhex("eda080"))
    assert text == "\ud800"
    assert encode_modified_utf8(text) == bytes.fromhex("eda080")


@pytest.mark.parametrize("text, fits", [
    ("x" * 65535, True), ("x" * 65536, False), ("\u00e9" * 32767, True),
    ("\u00e9" * 32768, False)])
def test_write_utf_refuses_more_than_65535_encoded_bytes(text, fits):
    w = BinaryWriter()
    if fits:
        w.utf(text)
        assert len(w) == 2 + len(text.encode("utf-8"))
    else:
        with pytest.raises(InvalidArgumentError, match="65536 encoded bytes"):
            w.utf(text)


def test_flink_strings_varints_and_floats_read_back_as_written():
    w = BinaryWriter()
    w.flink_string(None)
    w.flink_string("a\0\u00e9\u4000\U0001F600\ud800")
    w.flink_string("x" * 200)
    w.varint(300)
    w.f32(float("nan"))
    w.f64(-0.0)
    w.f64(float("nan"))
    data = w.getvalue()
    # null; 7 UTF-16 units (+1); 'a', NUL, e-acute in two bytes, U+4000 in three, a surrogate
    # pair and a lone surrogate; then a length of 201 in two bytes
    assert data[:20] == bytes.fromhex("00" "08" "61" "00" "e901" "808001" "bdb003" "80bc03"
                                      "80b003" "c901")
    r = BinaryReader(data, "test")
    assert r.flink_string() is None
    assert r.flink_string() == "a\0\u00e9\u4000\U0001F600\ud800"
    assert r.flink_string() == "x" * 200
    assert r.varint() == 300
    assert r.take(4) == bytes.fromhex("7fc00000")  # Java's canonical NaNs
    assert r.take(8) == bytes.fromhex("8000000000000000")
    assert r.take(8) == bytes.fromhex("7ff8000000000000") and r.at_end()


def test_a_float_beyond_a_java_float_and_a_negative_varint_are_refused():
    with pytest.raises(InvalidArgumentError, match="1e\\+39 does not fit in a float"):
        BinaryWriter().f32(1e39)
    with pytest.raises(InvalidArgumentError, match="-1 does not fit in a varint"):
        BinaryWriter().varint(-1)
    w = BinaryWriter()
    w.f32(float("inf"))
    w.f32(3.4028235e38)
    assert w.getvalue() == bytes.fromhex("7f800000" "7f7fffff")

# -- _metadata -----------------------------------------------------------------------------

def _master_state() -> bytes:
    w = BinaryWriter()
    w.i32(1)
    w.utf("hook")
    w.length_prefixed(b"payload")
    return w.getvalue()


def _every_kind_of_handle() -> SnapshotMetadata:
    """A model holding each handle kind the real files at hand do not."""
    absolute = StreamHandle("file:/elsewhere/chk-9/0f1e", False, 500)
    inline = StreamHandle(None, False, 3, b"abc", "inline-0")
    keyed_v1 = KeyedHandle(0, (120, 0, 300), absolute, False)
    keyed_v2 = KeyedHandle(3, (0, 130), StreamHandle("kg-file", True, 200), False, "handle-id")
    raw_keyed = KeyedHandle(0, (0, 0, 0), inline, False, "raw-id")
    operator_state = OperatorHandle(
        (OperatorStateOffsets("split", DistributionMode.SPLIT_DISTRIBUTE, (10, 20)),
         OperatorStateOffsets("union", DistributionMode.UNION, ()),
         OperatorStateOffsets("rules", DistributionMode.BROADCAST, (30,))), inline)
    keyed_op = OperatorSnapshot(
        "Keyed \u00e9", "keyed", operator_id_of("keyed"), 2, 5,
        (SubtaskState(0, (keyed_v1,), (operator_state,), (raw_keyed,), (operator_state,)),
         SubtaskState(1, (keyed_v2,), ())),
        StreamHandle(None, False, 2, b"\x00\x01", "coordinator"))
    anonymous = OperatorSnapshot(None, None, "00" * 16, 1, 128, ())
    finished = OperatorSnapshot("done", "done", operator_id_of("done"), 3, 128, (),
                                finished=True)
    return SnapshotMetadata(6, 9, (keyed_op, anonymous, finished), (_master_state(),),
                            CANONICAL_SAVEPOINT_PROPERTIES)


def test_every_handle_kind_is_written_and_parsed_back_to_the_same_model():
    metadata = _every_kind_of_handle()
    data = write_metadata(metadata)
    assert parse_metadata(data, "test") == metadata
    assert write_metadata(parse_metadata(data, "test")) == data


def _replace_operator(metadata: SnapshotMetadata, **changes) -> SnapshotMetadata:
    op = dataclasses.replace(metadata.operators[0], **changes)
    return dataclasses.replace(metadata, operators=(op,) + metadata.operators[1:])


def _replace_subtask(metadata: SnapshotMetadata, **changes) -> SnapshotMetadata:
    op = metadata.operators[0]
    subtask = dataclasses.replace(op.subtasks[1], **changes)
    return _replace_operator(metadata, subtasks=(op.subtasks[0], subtask))


def _refusals() -> list[tuple[object, str]]:
    md = _every_kind_of_handle()
    op = md.operators[0]
    keyed = op.subtasks[1].keyed[0]
    operator_state = op.subtasks[0].operator[0]
    return [
        (dataclasses.replace(md, version=5), "metadata version 5"),
        (dataclasses.replace(md, checkpoint_id=-1), "checkpoint id -1"),
        (_replace_operator(md, operator_id="abc"), "'abc'"),
        (_replace_operator(md, operator_id="zz" * 16), "'zzzz"),
        (_replace_operator(md, uid=""), "empty name or uid"),
        (_replace_operator(md, finished=True), "is finished"),
        (_replace_subtask(md, index=2), "subtask index 2"),
        (_replace_subtask(md, keyed=(keyed, keyed)), "2 keyed state handles"),
        (_replace_subtask(md, raw_operator=(operator_state, operator_state)),
         "2 raw operator state handles"),
        (_replace_subtask(md, keyed=(dataclasses.replace(keyed, savepoint=True),)),
         "'handle-id'"),
        (_replace_subtask(md, keyed=(dataclasses.replace(
            keyed, stream=StreamHandle(None, False, 7, b"x" * 7)),)), "inline state of 7 bytes"),
        (_replace_subtask(md, keyed=(dataclasses.replace(
            keyed, stream=StreamHandle(None, True, 7)),)), "7 bytes has no path"),
    ]


@pytest.mark.parametrize("index", range(len(_refusals())))
def test_metadata_flink_could_not_read_is_refused(index):
    metadata, message = _refusals()[index]
    with pytest.raises(InvalidArgumentError, match=message):
        write_metadata(metadata)  # type: ignore[arg-type]


# -- keyed-state header --------------------------------------------------------------------

def _fixture_header():
    snapshot = FlinkSnapshot.open(str(FIXTURES / "mp256" / "canonical"))
    header = snapshot.header(snapshot.operator("stateful"))
    assert header is not None
    return header


def test_serializer_snapshots_keep_their_bytes():
    header = _fixture_header()
    long_snapshot = BinaryWriter()
    long_snapshot.utf("org.apache.flink.api.common.typeutils.base.LongSerializer"
                      "$LongSerializerSnapshot")
    long_snapshot.i32(3)  # its version; a simple serializer's snapshot has no payload
    assert header.key.snapshot == long_snapshot.getvalue()
    for info in header.states:
        for serializer in info.serializers.values():
            assert BinaryReader(serializer.snapshot, "test").utf() == serializer.serializer


def test_a_header_without_flinks_snapshot_bytes_is_refused():
    header = _fixture_header()
    built = TupleFlinkType("org.example.TupleSerializerSnapshot", "Tuple0", [])
    with pytest.raises(InvalidArgumentError, match="the key serializer .*TupleSerializerSnapshot"):
        write_keyed_header(dataclasses.replace(header, key=built))


def test_a_state_out_of_its_position_is_refused():
    header = _fixture_header()
    swapped = (header.states[1], header.states[0]) + header.states[2:]
    with pytest.raises(InvalidArgumentError, match="has id 1 but is at position 0"):
        write_keyed_header(dataclasses.replace(header, states=swapped))


def test_a_header_of_another_version_is_refused():
    with pytest.raises(InvalidArgumentError, match="version 5"):
        write_keyed_header(dataclasses.replace(_fixture_header(), version=5))


# -- canonical key groups ------------------------------------------------------------------

SECTIONS = [CanonicalSection(1, [(b"\x03k1", b"v1"), (b"\x03k2", b"")]),
            CanonicalSection(0, [(b"\x03k3", b"v3")])]
FRAMED = bytes.fromhex(
    "0001" "00000003" "036b31" "00000002" "7631"  # state 1, first pair
    "00000003" "836b32" "00000000"  # its last pair: the flag on the key's first byte
    "0000" "00000003" "836b33" "00000002" "7633"  # state 0, one pair, flagged
    "ffff")  # end of the key group


def test_a_key_group_is_framed_as_flink_frames_it():
    assert frame_key_group(3, 128, SECTIONS) == FRAMED
    assert canonical_sections(FRAMED, "test", 0, 3, 1, False) == SECTIONS


def test_key_group_prefixes_take_two_bytes_beyond_128_key_groups():
    assert key_group_prefix(127, 128) == b"\x7f"
    assert key_group_prefix(300, 32768) == b"\x01\x2c"
    sections = [CanonicalSection(0, [(b"\x01\x2ckey", b"value")])]
    framed = frame_key_group(300, 32768, sections)
    assert framed[6] == 0x81  # the flag in the first byte of the two-byte prefix
    assert canonical_sections(framed, "test", 0, 300, 2, False) == sections


@pytest.mark.parametrize("key_group, max_parallelism, sections, message", [
    (3, 128, [CanonicalSection(0, [(b"\x04k", b"")])], "prefix 03 of key group 3"),
    (3, 128, [CanonicalSection(0, [(b"\x83k", b"")])], "key 836b"),
    (3, 128, [CanonicalSection(0, [])], "state 0 has no entries"),
    (3, 128, [], "key group 3 has no entries"),
    (3, 128, SECTIONS + SECTIONS[:1], "state id 1 in key group 3"),
    (3, 128, [CanonicalSection(0xFFFF, [(b"\x03k", b"")])], "state id 65535"),
    (128, 128, SECTIONS, "key group 128"),
    (3, 0, SECTIONS, "max parallelism 0"),
    (3, 40000, SECTIONS, "max parallelism 40000"),
])
def test_a_key_group_flink_could_not_read_is_refused(key_group, max_parallelism, sections,
                                                     message):
    with pytest.raises(InvalidArgumentError, match=message):
        frame_key_group(key_group, max_parallelism, sections)


def test_raw_sections_check_the_key_group_and_the_end():
    with pytest.raises(CorruptCheckpointError, match="entry of key group 3 in key group 4"):
        canonical_sections(FRAMED, "test", 0, 4, 1, False)
    with pytest.raises(CorruptCheckpointError, match="bytes after the end of the key group"):
        canonical_sections(FRAMED + b"\x00", "test", 0, 3, 1, False)


def test_a_file_records_empty_key_groups_at_offset_zero():
    data, offsets = assemble_keyed_file(b"HEADER", [b"", FRAMED, b"", b"xy"])
    assert data == b"HEADER" + FRAMED + b"xy"
    assert offsets == [0, 6, 0, 6 + len(FRAMED)]


def test_an_operator_listed_twice_is_refused():
    # Flink keys a snapshot's operators by id: a second entry is a file no Flink wrote
    metadata = _every_kind_of_handle()
    twice = dataclasses.replace(metadata, operators=(*metadata.operators,
                                                     metadata.operators[1]))
    with pytest.raises(CorruptCheckpointError, match=f"operator {'00' * 16} is listed twice"):
        parse_metadata(write_metadata(twice), "test")


def test_bytes_after_the_checkpoint_properties_are_refused():
    # the properties are one Java object, parsed to its end: what follows is no Flink's
    data = write_metadata(_every_kind_of_handle())
    with pytest.raises(CorruptCheckpointError, match="5 bytes after the checkpoint properties"):
        parse_metadata(data + b"junk!", "test")
    broken = data[:-20] + bytes(20)
    with pytest.raises(CorruptCheckpointError, match="the checkpoint properties is not a Java"
                                                     " serialization stream that parses"):
        parse_metadata(broken, "test")

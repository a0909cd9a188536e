"""flink-avro values: Flink's DataOutputEncoder layout, snapshot versions, and hostile bytes.

The bytes here are built by hand from that layout (fixed-width big-endian
numbers, 4-byte lengths, union indexes and enum ordinals, varint block
counts); test_types.py checks the same decoder against a real Flink job.
"""

from __future__ import annotations

import json
import struct
from datetime import date
from decimal import Decimal

import pytest

from statesource.errors import CorruptCheckpointError, IncompatibleCheckpointError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.serializers.avro import AVRO_SNAPSHOT, read_avro_snapshot

SOURCE = "state-file"


def utf(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">H", len(raw)) + raw


def string_value(text: str) -> bytes:
    """Flink's StringValue of ASCII text: varint of length + 1, then one byte per character."""
    size, out = len(text) + 1, bytearray()
    while size >= 0x80:
        out.append(size & 0x7F | 0x80)
        size >>= 7
    return bytes(out) + bytes([size]) + text.encode("ascii")


def snapshot(schema, version: int = 3, runtime: str = "org.apache.avro.generic.GenericRecord"):
    text = utf if version <= 2 else string_value
    payload = (text(runtime) if version >= 2 else b"") + text(json.dumps(schema))
    return read_avro_snapshot(AVRO_SNAPSHOT, BinaryReader(payload, SOURCE), version)


def string(text: str) -> bytes:
    return struct.pack(">i", len(text.encode())) + text.encode()


RECORD = {"type": "record", "name": "R", "fields": [
    {"name": "n", "type": "int"},
    {"name": "s", "type": ["null", "string"]},
    {"name": "xs", "type": {"type": "array", "items": "long"}},
    {"name": "m", "type": {"type": "map", "values": "double"}},
    {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
    {"name": "d", "type": {"type": "int", "logicalType": "date"}},
    {"name": "money", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6,
                               "scale": 2}},
]}
VALUE = (struct.pack(">i", 7) + struct.pack(">i", 1) + string("hé")
         + b"\x02" + struct.pack(">qq", 5, -1) + b"\x01" + struct.pack(">q", 9) + b"\x00"
         + b"\x01" + string("k") + struct.pack(">d", 0.5) + b"\x00"
         + struct.pack(">i", 1) + struct.pack(">i", 19000)
         + struct.pack(">i", 2) + (-1234).to_bytes(2, "big", signed=True))
DECODED = {"n": 7, "s": "hé", "xs": [5, -1, 9], "m": {"k": 0.5}, "e": "B",
           "d": date(2022, 1, 8), "money": Decimal("-12.34")}


def test_a_value_decodes_consuming_exactly_its_bytes():
    avro = snapshot(RECORD)
    r = BinaryReader(VALUE + b"next", SOURCE)
    assert avro.read(r) == DECODED
    assert r.data[r.pos:] == b"next"
    assert avro.avro() == RECORD and avro.runtime_class.endswith("GenericRecord")


@pytest.mark.parametrize("version", [1, 2, 3])
def test_every_snapshot_version_gives_the_schema(version):
    avro = snapshot(RECORD, version=version, runtime="com.example.R")
    assert avro.runtime_class == ("com.example.R" if version > 1
                                  else "org.apache.avro.generic.GenericRecord")
    assert avro.read(BinaryReader(VALUE, SOURCE)) == DECODED


def test_a_version_3_schema_longer_than_64_kb_reads():
    schema = {"type": "record", "name": "Wide", "fields": [
        {"name": f"field_{i:05}", "type": "int"} for i in range(3000)]}
    assert len(json.dumps(schema)) > 65535
    avro = snapshot(schema)
    value = b"".join(struct.pack(">i", i) for i in range(3000))
    assert avro.read(BinaryReader(value, SOURCE))["field_02999"] == 2999


def test_an_unknown_snapshot_version_is_refused_naming_it():
    with pytest.raises(IncompatibleCheckpointError, match="version 4 .*reads versions 1, 2, 3"):
        read_avro_snapshot(AVRO_SNAPSHOT, BinaryReader(b"", SOURCE), 4)


def test_a_schema_statesource_cannot_map_keeps_the_bytes_flink_wrote():
    schema = ["null", "int", "string"]
    avro = snapshot(schema, runtime="java.lang.Object")
    assert avro.avro() == {"type": "bytes", "java-class": "java.lang.Object",
                           "avro-schema": schema}
    raw = struct.pack(">i", 2) + string("abc")
    r = BinaryReader(raw + b"\x99", SOURCE)
    assert avro.read(r) == raw and r.remaining() == 1


@pytest.mark.parametrize("cut", [1, 5, 11, len(VALUE) - 1])
def test_a_truncated_value_names_the_file_and_offset(cut):
    avro = snapshot(RECORD)
    with pytest.raises(CorruptCheckpointError, match=r"state-file: .* at byte offset \d+"):
        avro.read(BinaryReader(VALUE[:cut], SOURCE))


@pytest.mark.parametrize("schema, data, problem", [
    ("string", struct.pack(">i", 0x7FFFFFFF) + b"abc", "invalid Avro string length 2147483647"),
    ("bytes", struct.pack(">i", -1), "invalid Avro bytes length -1"),
    ({"type": "array", "items": "long"}, b"\xff\xff\xff\x7f", "invalid Avro block count"),
    ({"type": "array", "items": "null"}, b"\xff\xff\xff\x7f", "invalid Avro block count"),
    ({"type": "map", "values": "int"}, b"\x90\x4e" + b"\0" * 8, "invalid Avro block count"),
    (["null", "int"], struct.pack(">i", 2), "invalid union branch 2"),
    ({"type": "enum", "name": "E", "symbols": ["A"]}, struct.pack(">i", -1),
     "invalid enum ordinal -1"),
    ("string", struct.pack(">i", 2) + b"\xff\xfe", "invalid UTF-8"),
])
def test_hostile_values_are_refused_never_misread(schema, data, problem):
    avro = snapshot(schema)
    with pytest.raises(CorruptCheckpointError, match=f"state-file: {problem}.* at byte offset 0"):
        avro.read(BinaryReader(data, SOURCE))


@pytest.mark.parametrize("text, problem", [
    ("{not json", "not valid JSON"),
    ('{"type": "record", "name": "R", "fields": [{"name": "a", "type": "Nope"}]}',
     "not valid Avro: unknown Avro type 'Nope'"),
    ('{"type": "enum", "name": "E"}', "not valid Avro: enum 'E' has no symbols"),
    ("[]", "not valid Avro: an empty Avro union"),
    ("42", "not valid Avro"),
])
def test_a_garbage_schema_names_the_file_and_offset(text, problem):
    payload = utf("org.apache.avro.generic.GenericRecord") + utf(text)
    with pytest.raises(CorruptCheckpointError,
                       match=f"state-file: the Avro schema of .* at byte offset 39 is {problem}"):
        read_avro_snapshot(AVRO_SNAPSHOT, BinaryReader(payload, SOURCE), 2)


def test_a_huge_declared_schema_length_is_refused():
    payload = utf("org.apache.avro.generic.GenericRecord") + b"\xff\xff{}"
    with pytest.raises(CorruptCheckpointError, match="truncated: needs 65535 bytes"):
        read_avro_snapshot(AVRO_SNAPSHOT, BinaryReader(payload, SOURCE), 2)


def test_recursive_references_are_delimited_and_kept_as_bytes():
    schema = {"type": "record", "name": "Node", "namespace": "n", "fields": [
        {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]}]}
    avro = snapshot(schema)
    data = (struct.pack(">i", 1) + struct.pack(">i", 1) + struct.pack(">i", 2)
            + struct.pack(">i", 0))
    r = BinaryReader(data + b"after", SOURCE)
    assert avro.read(r) == data and r.data[r.pos:] == b"after"
    assert avro.avro()["type"] == "bytes"  # recursion does not map to Arrow


def test_a_map_holding_one_user_key_twice_is_refused_never_merged():
    """Java keeps keys of a class without equals apart; merging them would drop entries."""
    from statesource.flink.layouts.keyed import KeyGroupState, _grouped
    from statesource.flink.serializers.collections import MapType
    from statesource.flink.serializers.primitives import PrimitiveType
    from statesource.flink.statefiles.keyed_header import StateInfo

    base = "org.apache.flink.api.common.typeutils.base."
    string, long = (PrimitiveType(name) for name in (
        base + "StringSerializer$StringSerializerSnapshot",
        base + "LongSerializer$LongSerializerSnapshot"))
    native = MapType("map", string, long)
    entry = b"\x02a" + b"\x00" + struct.pack(">q", 1)
    assert native.read(BinaryReader(struct.pack(">i", 1) + entry, SOURCE)) == {"a": 1}
    with pytest.raises(IncompatibleCheckpointError, match="state-file, byte offset 15: a map"
                                                          " holds the user key 'a' twice"):
        native.read(BinaryReader(struct.pack(">i", 2) + entry + entry, SOURCE))
    info = StateInfo(0, "m", 0, {"KEYED_STATE_TYPE": "MAP"},
                     {"VALUE_SERIALIZER": native, "NAMESPACE_SERIALIZER": long})
    pairs = KeyGroupState([7, 7], [None, None], [("a", 1), ("a", 2)])
    with pytest.raises(IncompatibleCheckpointError, match="state 'm' .* user key 'a' twice"):
        _grouped(info, pairs, BinaryReader(b"", SOURCE))


def test_deeply_nested_schemas_and_values_are_refused_not_crashed():
    deep = "[" * 5000 + "]" * 5000
    with pytest.raises(CorruptCheckpointError, match="at byte offset 39 is not valid"):
        read_avro_snapshot(AVRO_SNAPSHOT, BinaryReader(
            utf("org.apache.avro.generic.GenericRecord") + utf(deep), SOURCE), 2)
    schema = {"type": "record", "name": "Node", "fields": [
        {"name": "next", "type": ["null", "Node"]}]}
    avro = snapshot(schema)
    nested = struct.pack(">i", 1) * 20000 + struct.pack(">i", 0)
    with pytest.raises(CorruptCheckpointError, match="nested too deeply at byte offset 0"):
        avro.read(BinaryReader(nested, SOURCE))


def test_a_timestamp_beyond_the_year_9999_is_refused_naming_it():
    avro = snapshot({"type": "long", "logicalType": "timestamp-millis"})
    assert avro.read(BinaryReader(struct.pack(">q", -1), SOURCE)).isoformat() == \
        "1969-12-31T23:59:59.999000+00:00"
    with pytest.raises(IncompatibleCheckpointError,
                       match="timestamp-millis value 9223372036854775807 at byte offset 0"):
        avro.read(BinaryReader(struct.pack(">q", 2**63 - 1), SOURCE))


def test_a_time_of_day_outside_one_day_is_refused_not_wrapped():
    avro = snapshot({"type": "int", "logicalType": "time-millis"})
    assert str(avro.read(BinaryReader(struct.pack(">i", 86_399_999), SOURCE))) == "23:59:59.999000"
    for millis in (86_400_000, -1):
        with pytest.raises(IncompatibleCheckpointError, match=f"time-millis value {millis} "):
            avro.read(BinaryReader(struct.pack(">i", millis), SOURCE))


def test_avro_records_and_arrays_as_map_user_keys_are_hashable():
    from statesource.flink.serializers.collections import MapType

    key = snapshot({"type": "record", "name": "K", "fields": [
        {"name": "tags", "type": {"type": "array", "items": "int"}}]})
    value = snapshot("int")
    entry = b"\x01" + struct.pack(">i", 5) + b"\x00" + b"\x00" + struct.pack(">i", 9)
    (found,) = MapType("map", key, value).read(
        BinaryReader(struct.pack(">i", 1) + entry, SOURCE)).items()
    assert found == ({"tags": [5]}, 9) and hash(found[0])
    arrays = MapType("map", snapshot({"type": "array", "items": "int"}), value)
    assert arrays.read(BinaryReader(struct.pack(">i", 1) + entry, SOURCE)) == {(5,): 9}


def test_version_3_text_that_is_null_or_garbage_names_the_offset():
    with pytest.raises(CorruptCheckpointError, match="a null string .* at byte offset 0"):
        read_avro_snapshot(AVRO_SNAPSHOT, BinaryReader(b"\x00", SOURCE), 3)
    payload = string_value("org.apache.avro.generic.GenericRecord") + string_value("{oops")
    with pytest.raises(CorruptCheckpointError, match="at byte offset 38 is not valid JSON"):
        read_avro_snapshot(AVRO_SNAPSHOT, BinaryReader(payload, SOURCE), 3)
    with pytest.raises(CorruptCheckpointError, match="truncated"):
        read_avro_snapshot(AVRO_SNAPSHOT, BinaryReader(b"\xff\xff\x03abc", SOURCE), 3)


def test_fixed_decimals_times_and_local_timestamps():
    from datetime import datetime, time

    schema = {"type": "record", "name": "T", "fields": [
        {"name": "price", "type": {"type": "fixed", "name": "P", "size": 3,
                                   "logicalType": "decimal", "precision": 6, "scale": 3}},
        {"name": "at", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "uuid", "type": {"type": "string", "logicalType": "uuid"}}]}
    uuid = "0f8fad5b-d9cb-469f-a165-70867728950e"
    data = ((123456).to_bytes(3, "big", signed=True) + struct.pack(">q", 3_600_000_001)
            + struct.pack(">q", 86_400_123) + string(uuid))
    assert snapshot(schema).read(BinaryReader(data, SOURCE)) == {
        "price": Decimal("123.456"), "at": time(1, 0, 0, 1),
        "local": datetime(1970, 1, 2, 0, 0, 0, 123000), "uuid": uuid}

"""The encoders write what real Flink 2.3 wrote, byte for byte.

Every pair of every state of every canonical savepoint at hand (the shared
Java and PyFlink savepoints, the fixtures ``mp256``, ``mp128-snappy``,
``types`` and ``encoding``) is decoded with the reader into Python values and
built again by :class:`~statesource.flink.layouts.canonical_entries.StateEntries`:
from the values as the reader returns them (with the key group the file holds
them in), and from the values in statesource's shapes
(:func:`~statesource.flink.declarations.stored_converter`, the key group
computed from the key). The pairs must be the file's, and the key group framed
from them its bytes. Every key group of every native snapshot (savepoints and
checkpoints) is written again from its decoded entries with the same
serializers, up to the first state with Kryo values (which a native snapshot
does not frame), and so is every element of the fixtures' operator states.
``encoding`` (EncodingJob.java) holds what the others do not: a String key
with a String namespace (each followed by its length in the composite key),
null map values, TTL values wrapping a null, Rows of every kind, a POJO with
null fields, strings with NUL, surrogates and characters beyond the BMP, NaN
and -0.0, timers at the extremes of a long; its decoded values are checked
against ``expected.json`` (from the job's tables).
Generated values of every type, and generated entries and timers framed into a
key group and decoded by the reader, read back as written; values and entries
that do not fit their serializers are refused.
"""

from __future__ import annotations

import base64
import json
import math
import struct
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flink_snapshots import only
from statesource.errors import TypeMismatchError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.snappy import unframe
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.declarations import stored_converter
from statesource.flink.handles import OperatorSnapshot
from statesource.flink.layouts.canonical_entries import StateEntries
from statesource.flink.layouts.canonical_writer import frame_key_group
from statesource.flink.layouts.keyed import (
    CanonicalSection,
    KeyGroupState,
    canonical_sections,
    decode_canonical,
    variable_int_bytes,
)
from statesource.flink.layouts.native import NATIVE
from statesource.flink.serializers import primitives
from statesource.flink.serializers.avro import AVRO_SNAPSHOT, AvroFlinkType, read_avro_snapshot
from statesource.flink.serializers.base import FlinkType
from statesource.flink.serializers.collections import ListType, MapType, SetType
from statesource.flink.serializers.encoding import encode, type_name, value_writer
from statesource.flink.serializers.kryo import OpaqueType
from statesource.flink.serializers.nullable import NullableType
from statesource.flink.serializers.pojo import PojoFlinkType
from statesource.flink.serializers.primitives import PrimitiveType
from statesource.flink.serializers.rows import RowFlinkType
from statesource.flink.serializers.timer import TimerType, flip_sign_bit
from statesource.flink.serializers.ttl import TtlType
from statesource.flink.serializers.tuples import TupleFlinkType
from statesource.flink.snapshot.directory import FlinkSnapshot, KeyGroupBytes
from statesource.flink.statefiles import operator_state
from statesource.flink.statefiles.keyed_header import (
    KEY_VALUE,
    PRIORITY_QUEUE,
    KeyedHeader,
    StateInfo,
)
from statesource.keygroups import assign_to_key_group
from statesource.model import DistributionMode, StateKind
from statesource.types import STRING as STRING_TYPE
from statesource.types import Row, RowKind

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "flink"
ENCODING = FIXTURES / "encoding"
SHARED_CANONICAL = ["java/canonical/savepoint-*", "pyflink/savepoint-*"]
FIXTURE_CANONICAL = ["mp256/canonical", "mp128-snappy/canonical", "types/canonical",
                     "encoding/canonical"]
SHARED_NATIVE = ["java/native/savepoint-*", "java/checkpoints/chk-4", "java/checkpoints/chk-7"]
FIXTURE_NATIVE = ["mp256/native", "mp128-snappy/native", "types/native", "encoding/native",
                  "changes/checkpoints/chk-1", "changes/checkpoints/chk-2",
                  "changes/checkpoints/chk-3"]


# -- helpers --------------------------------------------------------------------------------

@pytest.fixture
def shared_snapshot(request: pytest.FixtureRequest) -> Path:
    """The shared snapshot the test is parametrized with (a pattern under flink-savepoints)."""
    return only(request.param)


_SIMPLE_BY_NAME = {name.rsplit(".", 1)[-1].split("$")[0]: name for name in primitives._SIMPLE}


def simple(name: str) -> PrimitiveType:
    """The reader's type of a simple serializer, by its class name (``LongSerializer``)."""
    full = _SIMPLE_BY_NAME[name]
    return PrimitiveType(full)


def list_of(element: FlinkType) -> ListType:
    return ListType("ListSerializerSnapshot", element)


def map_of(key: FlinkType, value: FlinkType) -> MapType:
    return MapType("MapSerializerSnapshot", key, value)


def tuple_of(fields: list[FlinkType]) -> TupleFlinkType:
    return TupleFlinkType("TupleSerializerSnapshot", f"Tuple{len(fields)}", fields)


def row_of(fields: list[FlinkType], with_kind: bool) -> RowFlinkType:
    return RowFlinkType("RowSerializerSnapshot", fields, with_kind)


def pojo_of(pojo_class: str, fields: list[tuple[str, FlinkType]]) -> PojoFlinkType:
    return PojoFlinkType("PojoSerializerSnapshot", pojo_class, fields)


def ttl_of(user: FlinkType) -> TtlType:
    return TtlType("TtlSerializerSnapshot", simple("LongSerializer"), user)


def timer_of(key: FlinkType, namespace: FlinkType) -> TimerType:
    return TimerType("TimerSerializerSnapshot", key, namespace)


def kryo(java_class: str) -> OpaqueType:
    return OpaqueType("KryoSerializerSnapshot", java_class)


STRING = simple("StringSerializer")
VOID = simple("VoidNamespaceSerializer")
WINDOW = simple("TimeWindow")
LONG_TYPE = simple("LongSerializer")


def keyed_operators(path: Path) -> Iterator[tuple[FlinkSnapshot, OperatorSnapshot, KeyedHeader]]:
    """The operators with keyed state of the snapshot at ``path``, with their headers."""
    snapshot = FlinkSnapshot.open(str(path))
    for op in snapshot.operators:
        header = snapshot.header(op)
        if header is not None:
            yield snapshot, op, header


def key_groups(snapshot: FlinkSnapshot, op: OperatorSnapshot
               ) -> Iterator[tuple[KeyGroupBytes, bytes, str]]:
    """Every non-empty key group of ``op``: where it is, its bytes, its file's name."""
    for piece in snapshot.key_group_bytes(op):
        yield piece, snapshot.piece_bytes(piece), snapshot.describe(piece.handle.stream)


def _same(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to NaN and -0.0 not equal to 0.0 (floats compared by their bits)."""
    if isinstance(a, float) and isinstance(b, float):
        return (a != a and b != b) or struct.pack(">d", a) == struct.pack(">d", b)
    if isinstance(a, Row) and isinstance(b, Row):
        return a.kind is b.kind and _same(a.fields, b.fields)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


# -- the encoding fixture decodes to what the job wrote -------------------------------------

def _decoded(kind: str) -> dict[str, dict[Any, Any]]:
    """``state name -> {(key, namespace): stored}`` of the fixture's operator."""
    snapshot = FlinkSnapshot.open(str(ENCODING / kind))
    op = snapshot.operator("edges")
    header = snapshot.header(op)
    assert header is not None
    found: dict[str, dict[Any, Any]] = {info.name: {} for info in header.states}
    for _, states in snapshot.read_key_groups(op):
        for state_id, entries in states.items():
            held = found[header.states[state_id].name]
            for key, namespace, stored in zip(entries.keys, entries.namespaces, entries.stored):
                if header.states[state_id].is_timer:
                    held.setdefault(key, []).append([namespace, stored])
                else:
                    held[(key, namespace)] = stored
    return found


def _pojo(fields: dict[str, Any]) -> dict[str, Any]:
    raw = fields["raw"]
    return {**fields, "raw": None if raw is None else base64.b64decode(raw)}


@pytest.mark.parametrize("kind", ["canonical", "native"])
def test_the_encoding_fixture_holds_what_the_job_wrote(kind):
    expected = json.loads((ENCODING / "expected.json").read_text())["keys"]
    found = _decoded(kind)
    for key, want in expected.items():
        assert _same({ns: v for (k, ns), v in found["named"].items() if k == key}, want["named"])
        assert _same(found["nullable"][(key, None)], want["nullable"])
        assert _same({user_key: value for user_key, (value, _) in
                      found["ttl_map"][(key, None)].items()}, want["ttl_map"])
        row = found["rows"][(key, None)]
        assert isinstance(row, Row) and row.kind.short_string == want["rows"]["kind"]
        assert _same(list(row.fields), want["rows"]["fields"])
        assert _same(dict(found["pojo"][(key, None)]), _pojo(want["pojo"]))
        for name in ("texts", "doubles", "floats"):
            assert _same(found[name][(key, None)], want[name]), name
        assert sorted(found["_timer_state/event_edge-timers"][key]) == sorted(
            want["event_timers"])
        assert found["_timer_state/processing_edge-timers"][key] == want["processing_timers"]
    assert {k for k, _ in found["named"]} == set(expected)
    assert math.isnan(expected["k"]["doubles"][2])  # the tables made it into the JSON intact


# -- values: native snapshots, generated values, refusals ------------------------------------

def reencode_native(path: Path) -> Counter[str]:
    """Writes every key group of a native snapshot again; the entries written, per state."""
    written: Counter[str] = Counter()
    for snapshot, op, header in keyed_operators(path):
        blocked = {info.state_id for info in header.states
                   if info.name in NATIVE.blockers(header)}
        write_key = value_writer(header.key)
        for piece, data, source in key_groups(snapshot, op):
            body = unframe(data[4:], source, piece.begin + 4) if header.compressed else data[4:]
            w = BinaryWriter()
            for state_id, found in snapshot.decode_piece(op, piece, data,
                                                         stop_at=blocked).items():
                info = header.states[state_id]
                w.i16(state_id)
                w.i32(len(found.keys))
                entries = zip(found.keys, found.namespaces, found.stored)
                if info.is_timer:
                    write_timer = value_writer(info.timer)
                    for key, namespace, timestamp in entries:
                        write_timer(w, (timestamp, key, namespace))
                else:
                    write_namespace, write_value = (value_writer(info.namespace),
                                                    value_writer(info.value))
                    for key, namespace, stored in entries:
                        write_namespace(w, namespace)
                        write_key(w, key)
                        write_value(w, stored)
                written[f"{op.uid}/{info.name}"] += len(found.keys)
            again = w.getvalue()
            assert again == (body[:len(again)] if blocked else body), (op.uid, piece.key_group)
    assert written
    return written


@pytest.mark.parametrize("shared_snapshot", SHARED_NATIVE, indirect=True)
def test_shared_native_snapshots_are_encoded_byte_for_byte(shared_snapshot):
    reencode_native(shared_snapshot)


@pytest.mark.parametrize("name", FIXTURE_NATIVE)
def test_fixture_native_snapshots_are_encoded_byte_for_byte(name):
    reencode_native(FIXTURES / name)


def reencode_operator_states(path: Path) -> Counter[str]:
    """Writes every element of every operator state again; the elements written, per state.

    Each element of a list state, and a broadcast state's size and entries, lie at
    the offsets ``_metadata`` records (in a compressed file, each a Snappy stream).
    """
    snapshot = FlinkSnapshot.open(str(path))
    written: Counter[str] = Counter()
    for op in snapshot.operators:
        for handle in (h for subtask in op.subtasks for h in subtask.operator):
            data = snapshot.read_bytes(handle.stream, 0, handle.stream.size)
            source = snapshot.describe(handle.stream)
            header = operator_state.read_operator_header(BinaryReader(data, source))
            infos = {info.name: info for info in header.list_states + header.broadcast_states}
            compressed = header.compressed
            bounds = sorted({o for state in handle.states for o in state.offsets} | {len(data)})
            for state in handle.states:
                info = infos[state.name]
                for offset in state.offsets:
                    r = operator_state.read_piece(data, source, offset, bounds, compressed)
                    start = r.pos
                    w = BinaryWriter()
                    if state.mode is DistributionMode.BROADCAST:  # a size, then (key, value)s
                        key_type = info.serializers["KEY_SERIALIZER"]
                        entries = [(key_type.read(r), info.value.read(r))
                                   for _ in range(r.count("broadcast state size"))]
                        w.i32(len(entries))
                        for key, value in entries:
                            value_writer(key_type)(w, key)
                            value_writer(info.value)(w, value)
                    else:
                        value_writer(info.value)(w, info.value.read(r))
                    assert w.getvalue() == bytes(r.data[start:r.pos]), (op.uid, state.name)
                    written[f"{op.uid}/{state.name}"] += 1
    return written


@pytest.mark.parametrize("name", ["mp256/canonical", "mp256/native", "mp128-snappy/canonical",
                                  "mp128-snappy/native"])
def test_operator_state_elements_are_encoded_byte_for_byte(name):
    assert reencode_operator_states(FIXTURES / name) == {
        "stateful/subtasks": 2, "stateful/seen": 2, "broadcaster/rules": 2}


SETTINGS = settings(max_examples=150, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
def java_text(text: str) -> str:
    """``text`` as a Java string reads back: a surrogate pair is one character."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


TEXT = st.text(st.characters(exclude_categories=[])).map(java_text)
LONGS = st.integers(-(1 << 63), (1 << 63) - 1)
Typed = tuple[FlinkType, st.SearchStrategy]
LEAVES: list[Typed] = [
    (simple("StringSerializer"), st.none() | TEXT),
    (simple("LongSerializer"), LONGS),
    (simple("IntSerializer"), st.integers(-(1 << 31), (1 << 31) - 1)),
    (simple("ShortSerializer"), st.integers(-(1 << 15), (1 << 15) - 1)),
    (simple("ByteSerializer"), st.integers(-128, 127)),
    (simple("BooleanSerializer"), st.booleans()),
    (simple("CharSerializer"), st.characters(max_codepoint=0xFFFF, exclude_categories=[])),
    (simple("DoubleSerializer"), st.floats()),
    (simple("FloatSerializer"), st.floats(width=32)),
    (simple("BytePrimitiveArraySerializer"), st.binary()),
]
MAP_KEYS: list[Typed] = [LEAVES[0], LEAVES[1], LEAVES[2], LEAVES[6], LEAVES[5]]


def _not_null(strategy: st.SearchStrategy) -> st.SearchStrategy:
    return strategy.filter(lambda v: v is not None)


def _tuple_type(children: list[Typed]) -> Typed:
    flink_type = tuple_of([t for t, _ in children])
    return flink_type, st.tuples(*(_not_null(s) for _, s in children))


def _row_type(children: list[Typed], with_kind: bool) -> Typed:
    flink_type = row_of([t for t, _ in children], with_kind)
    kinds = st.sampled_from(list(RowKind)) if with_kind else st.just(RowKind.INSERT)
    return flink_type, st.builds(lambda kind, fields: Row(*fields, kind=kind), kinds,
                                 st.tuples(*(st.none() | s for _, s in children)))


def _pojo_type(children: list[Typed]) -> Typed:
    names = [f"field{i}" for i in range(len(children))]
    flink_type = pojo_of("org.example.Pojo", [(n, t) for n, (t, _) in zip(names, children)])
    record = st.fixed_dictionaries({n: st.none() | s for n, (_, s) in zip(names, children)})
    return flink_type, st.none() | record


def _map_type(key: Typed, value: Typed) -> Typed:
    """A map and its values: null ones too, but not under TTL (Flink wraps every value there,
    and the reader refuses a null)."""
    values = value[1] if isinstance(value[0], TtlType) else st.none() | value[1]
    return map_of(key[0], value[0]), st.dictionaries(key[1], values, max_size=3)


def _composites(children: st.SearchStrategy) -> st.SearchStrategy:
    some = st.lists(children, min_size=1, max_size=3)
    return st.one_of(
        children.map(lambda c: (list_of(c[0]), st.lists(c[1], max_size=3))),
        st.builds(_map_type, st.sampled_from(MAP_KEYS + [_tuple_type(MAP_KEYS[:2])]), children),
        some.map(_tuple_type),
        st.builds(_row_type, some, st.booleans()),
        some.map(_pojo_type),
        children.map(lambda c: (ttl_of(c[0]), st.tuples(c[1], LONGS))),
    )


TYPED = st.recursive(st.sampled_from(LEAVES), _composites, max_leaves=6)


def _decode(flink_type: FlinkType, data: bytes) -> Any:
    r = BinaryReader(data, "test")
    value = flink_type.read(r)
    assert r.at_end()
    return value


@SETTINGS
@given(st.data())
def test_generated_values_read_back_as_written(data):
    flink_type, values = data.draw(TYPED)
    value = data.draw(values)
    encoded = encode(flink_type, value)
    back = _decode(flink_type, encoded)
    assert _same(back, value), (type_name(flink_type), value, back)
    assert encode(flink_type, back) == encoded
    if value is not None:  # statesource's shapes (Tuples and Rows as dicts, ...) write the same
        assert encode(flink_type, flink_type.to_value(value)) == encoded


def _avro_type(schema: Any, runtime_class: str = "org.apache.avro.generic.GenericRecord"
               ) -> AvroFlinkType:
    """The reader's type of an ``AvroSerializerSnapshot`` (version 2) of ``schema``."""
    w = BinaryWriter()
    w.utf(runtime_class)
    w.utf(json.dumps(schema))
    return read_avro_snapshot(AVRO_SNAPSHOT, BinaryReader(w.getvalue(), "test"), 2)


INNER = {"type": "record", "name": "Inner", "fields": [{"name": "x", "type": "int"}]}
AVRO_SCHEMA = {"type": "record", "name": "Everything", "namespace": "test", "fields": [
    {"name": "i", "type": "int"}, {"name": "l", "type": "long"},
    {"name": "f", "type": "float"}, {"name": "d", "type": "double"},
    {"name": "b", "type": "boolean"}, {"name": "s", "type": "string"},
    {"name": "n", "type": ["null", "string"]}, {"name": "n2", "type": ["long", "null"]},
    {"name": "by", "type": "bytes"},
    {"name": "fx", "type": {"type": "fixed", "name": "F", "size": 3}},
    {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}},
    {"name": "a", "type": {"type": "array", "items": "long"}},
    {"name": "m", "type": {"type": "map", "values": ["null", "double"]}},
    {"name": "date", "type": {"type": "int", "logicalType": "date"}},
    {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "tu", "type": {"type": "long", "logicalType": "time-micros"}},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tsu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "lts", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9,
                             "scale": 2}},
    {"name": "decf", "type": {"type": "fixed", "name": "DF", "size": 5, "logicalType": "decimal",
                              "precision": 10, "scale": 3}},
    {"name": "inner", "type": INNER}, {"name": "again", "type": ["null", "Inner"]}]}
_UTC = timezone.utc
_MILLIS = st.integers(0, 999).map(lambda ms: ms * 1000)
AVRO_VALUES = st.fixed_dictionaries({
    "i": st.integers(-(1 << 31), (1 << 31) - 1), "l": LONGS,
    "f": st.floats(width=32), "d": st.floats(), "b": st.booleans(),
    "s": st.text(), "n": st.none() | st.text(), "n2": st.none() | LONGS, "by": st.binary(),
    "fx": st.binary(min_size=3, max_size=3), "e": st.sampled_from("ABC"),
    "a": st.lists(LONGS, max_size=200), "m": st.dictionaries(st.text(), st.none() | st.floats()),
    "date": st.dates(),
    "tm": st.builds(lambda t, us: t.replace(microsecond=us), st.times(), _MILLIS),
    "tu": st.times(),
    "ts": st.builds(lambda t, us: t.replace(microsecond=us),
                    st.datetimes(timezones=st.just(_UTC)), _MILLIS),
    "tsu": st.datetimes(timezones=st.just(_UTC)),
    "lts": st.builds(lambda t, us: t.replace(microsecond=us), st.datetimes(), _MILLIS),
    "dec": st.decimals(-(10 ** 7) + 1, 10 ** 7 - 1, places=2),
    "decf": st.decimals(-(10 ** 7) + 1, 10 ** 7 - 1, places=3),
    "inner": st.fixed_dictionaries({"x": st.integers(-5, 5)}),
    "again": st.none() | st.fixed_dictionaries({"x": st.integers(-5, 5)})})


@SETTINGS
@given(AVRO_VALUES)
def test_generated_avro_values_read_back_as_written(value):
    flink_type = _avro_type(AVRO_SCHEMA)
    encoded = encode(flink_type, value)
    assert _same(_decode(flink_type, encoded), value)


def test_avro_decimals_are_written_as_avros_conversion_writes_them():
    schema = {"type": "record", "name": "D", "fields": [
        {"name": "b", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9,
                               "scale": 2}},
        {"name": "f", "type": {"type": "fixed", "name": "F", "size": 3,
                               "logicalType": "decimal", "precision": 6, "scale": 1}}]}
    flink_type = _avro_type(schema)
    cases = {Decimal("0"): "0000000100" "000000", Decimal("1.27"): "000000017f" "00000d",
             Decimal("1.28"): "000000020080" "00000d", Decimal("-1.28"): "0000000180" "fffff3",
             Decimal("-1.29"): "00000002ff7f" "fffff3"}
    for number, hex_bytes in cases.items():
        assert encode(flink_type, {"b": number, "f": number.quantize(Decimal("0.1"))}) == (
            bytes.fromhex(hex_bytes)), number


def test_values_kept_as_bytes_are_written_back_as_they_are():
    unmapped = _avro_type(["null", "long", "string"])  # no statesource mapping: kept as bytes
    assert unmapped.unmapped is not None
    raw = bytes.fromhex("0000000100000000000000ff")  # union branch 1, a long
    assert _decode(unmapped, raw) == raw
    assert encode(unmapped, raw) == raw
    assert encode(kryo("java.util.UUID"), b"\x01\x02") == b"\x01\x02"


PAIR = tuple_of([STRING, LONG_TYPE])
LEGACY_ROW = row_of([STRING], False)
POINT = pojo_of("org.example.Point", [("label", STRING), ("x", LONG_TYPE)])
REFUSED = [
    (LONG_TYPE, "7", "'7' does not fit Long: expected an int"),
    (LONG_TYPE, True, "True does not fit Long: expected an int"),
    (LONG_TYPE, 1 << 63, "9223372036854775808 does not fit Long: out of range"),
    (LONG_TYPE, None, "None does not fit Long: Long cannot be null"),
    (simple("IntSerializer"), 1 << 31, "2147483648 does not fit Integer: out of range"),
    (simple("ShortSerializer"), -40000, "-40000 does not fit Short"),
    (simple("ByteSerializer"), 128, "128 does not fit Byte"),
    (simple("DoubleSerializer"), "1.0", "'1.0' does not fit Double: expected a float"),
    (simple("DoubleSerializer"), (1 << 53) + 1, "does not fit Double"),
    (simple("FloatSerializer"), 1e39, "1e\\+39 does not fit Float: too large for a Java float"),
    (simple("BooleanSerializer"), 1, "1 does not fit Boolean: expected a bool"),
    (simple("CharSerializer"), "\U0001F600", "does not fit Character: expected a str of one"),
    (STRING, b"x", "b'x' does not fit String: expected a str"),
    (simple("BytePrimitiveArraySerializer"), None, "None does not fit byte\\[\\]"),
    (VOID, 0, "0 does not fit VoidNamespace"),
    (WINDOW, (1,), "\\(1,\\) does not fit TimeWindow"),
    (list_of(LONG_TYPE), [1, "x"],
     "element 1 of List<Long>: 'x' does not fit Long"),
    (list_of(LONG_TYPE), None, "List<Long> cannot be null"),
    (map_of(STRING, LONG_TYPE), {"a": "b"},
     "the value of key 'a' of Map<String, Long>: 'b' does not fit Long"),
    (map_of(LONG_TYPE, LONG_TYPE),
     [{"key": 1, "value": 2}, {"key": 1, "value": 3}], "the key 1 is there twice"),
    (PAIR, ("a", None), "field f1 is null: Flink tuples hold no nulls"),
    (PAIR, ("a",), "expected 2 fields"),
    (PAIR, {"f0": "a", "f1": "b"}, "field f1 of Tuple2<String, Long>: 'b' does not fit Long"),
    (LEGACY_ROW, Row("a", kind=RowKind.DELETE), "legacy mode"),
    (row_of([STRING], True), {"row_kind": "?", "f0": "a"},
     "unknown row kind '\\?'"),
    (POINT, {"label": "a", "y": 1}, "expected a dict of the fields label, x"),
    (POINT, {"label": "a", "x": 1.5}, "field 'x' of POJO org.example.Point: 1.5 does not fit"),
    (ttl_of(STRING), "v",
     "expected \\(value, last-access timestamp\\)"),
    (timer_of(STRING, VOID), ("t", "k", None),
     "Timer<String, VoidNamespace>: the timestamp is a long"),
    (kryo("java.util.UUID"), uuid.UUID(int=1),
     "does not fit Kryo java.util.UUID: statesource writes back the bytes"),
]


@pytest.mark.parametrize("index", range(len(REFUSED)))
def test_a_value_that_does_not_fit_its_serializer_is_refused(index):
    flink_type, value, message = REFUSED[index]
    with pytest.raises(TypeMismatchError, match=message):
        encode(flink_type, value)


def test_a_field_missing_from_a_record_is_a_null_one():
    assert encode(POINT, {"label": "a"}) == encode(POINT, {"label": "a", "x": None})
    row = row_of([STRING, LONG_TYPE], True)
    deleted = Row(None, 5, kind=RowKind.DELETE)
    assert encode(row, {"row_kind": "-D", "f1": 5}) == encode(row, deleted)
    with pytest.raises(TypeMismatchError, match="field f1 is null: Flink tuples hold no nulls"):
        encode(PAIR, {"f0": "a"})


def test_an_avro_value_that_does_not_fit_its_schema_is_refused():
    flink_type = _avro_type(INNER, "org.example.Inner")
    with pytest.raises(TypeMismatchError, match="Avro org.example.Inner: .*field 'x'"):
        encode(flink_type, {"x": "one"})
    with pytest.raises(TypeMismatchError, match="lone surrogate"):
        encode(_avro_type("string"), "\ud800")


def test_a_serializer_statesource_does_not_know_is_refused():
    class Custom(FlinkType):
        serializer = "org.example.CustomSerializerSnapshot"

    with pytest.raises(TypeMismatchError, match="cannot encode values of CustomSerializerSnapshot"):
        encode(Custom(), 1)


# -- canonical pairs: every savepoint, generated entries, composite keys -----------------------

def reencode_canonical(path: Path) -> Counter[str]:
    """Checks every pair of a canonical savepoint; the pairs checked, per operator/state."""
    checked: Counter[str] = Counter()
    for snapshot, op, header in keyed_operators(path):
        entries = {info.state_id: StateEntries(header.key, info, op.max_parallelism)
                   for info in header.states}
        convert = {info.state_id: None if info.is_timer else stored_converter(info)
                   for info in header.states}
        for piece, data, source in key_groups(snapshot, op):
            kg = piece.key_group
            sections = canonical_sections(data, source, piece.begin, kg,
                                          entries[0].keys.prefix_bytes, header.compressed)
            decoded = snapshot.decode_piece(op, piece, data)
            rebuilt = []
            for state_id, pairs in sections:
                state, to_model = entries[state_id], convert[state_id]
                found = decoded[state_id]
                as_read, as_model = [], []
                for key, namespace, stored in zip(found.keys, found.namespaces, found.stored):
                    as_read += state.pairs(key, namespace, stored, kg)
                    model = stored if to_model is None else to_model(stored)
                    as_model += state.pairs(key, namespace, model)
                name = f"{op.uid}/{header.states[state_id].name}"
                assert as_read == pairs, (name, kg)
                assert as_model == pairs, (name, kg)
                checked[name] += len(pairs)
                rebuilt.append(CanonicalSection(state_id, as_read))
            plain = unframe(data, source, piece.begin) if header.compressed else data
            assert frame_key_group(kg, op.max_parallelism, rebuilt) == plain
    assert checked
    return checked


@pytest.mark.parametrize("shared_snapshot", SHARED_CANONICAL, indirect=True)
def test_shared_canonical_savepoints_are_encoded_byte_for_byte(shared_snapshot):
    checked = reencode_canonical(shared_snapshot)
    # value, TTL value, list (TTL list of PyFlink's bytes) and map states; both hold 2,198 pairs
    assert sum(checked.values()) == 2198


@pytest.mark.parametrize("name", FIXTURE_CANONICAL)
def test_fixture_canonical_savepoints_are_encoded_byte_for_byte(name):
    reencode_canonical(FIXTURES / name)


def test_every_state_of_the_encoding_fixture_has_pairs():
    checked = reencode_canonical(ENCODING / "canonical")
    assert checked == {
        "edges/named": 24, "edges/nullable": 24, "edges/ttl_map": 24, "edges/rows": 8,
        "edges/pojo": 8, "edges/texts": 8, "edges/doubles": 8, "edges/floats": 8,
        "edges/_timer_state/event_edge-timers": 24,
        "edges/_timer_state/processing_edge-timers": 8}


_KINDS = {StateKind.VALUE: "VALUE", StateKind.LIST: "LIST", StateKind.MAP: "MAP"}


def _state(kind: StateKind, value: FlinkType, namespace: FlinkType) -> StateInfo:
    return StateInfo(0, "state", KEY_VALUE, {"KEYED_STATE_TYPE": _KINDS[kind]},
                     {"VALUE_SERIALIZER": value, "NAMESPACE_SERIALIZER": namespace})


def _round_trip(key_type: FlinkType, info: StateInfo, max_parallelism: int,
                entries: list[tuple[Any, Any, Any]]) -> KeyGroupState:
    """``entries`` as pairs of one key group, framed, and decoded by the reader."""
    state = StateEntries(key_type, info, max_parallelism)
    key_group = state.keys.key_group_of(entries[0][0])
    pairs = [p for key, ns, stored in entries for p in state.pairs(key, ns, stored, key_group)]
    header = KeyedHeader(6, False, key_type, (info,), 0)
    framed = frame_key_group(key_group, max_parallelism, [CanonicalSection(0, pairs)])
    return decode_canonical(framed, "test", 0, header, key_group, state.keys.prefix_bytes)[0]


@SETTINGS
@given(st.data(), TEXT, st.sampled_from([STRING, VOID, WINDOW]),
       st.sampled_from([StateKind.VALUE, StateKind.LIST, StateKind.MAP]),
       st.sampled_from([1, 128, 129, 32768]))
def test_generated_entries_read_back_as_written(data, key, namespace_type, kind, max_parallelism):
    element, values = data.draw(TYPED)
    value: FlinkType = element
    stored: st.SearchStrategy = _not_null(values)
    if kind is StateKind.LIST:
        value = list_of(element)
        stored = st.lists(_not_null(values), min_size=1, max_size=3)
    elif kind is StateKind.MAP:
        value = map_of(STRING, element)
        stored = st.dictionaries(TEXT, values if element is STRING else _not_null(values),
                                 min_size=1, max_size=3)
    namespaces = {STRING: st.none() | TEXT, VOID: st.none(), WINDOW: st.tuples(LONGS, LONGS)}
    namespace = data.draw(namespaces[namespace_type])
    entry = (key, namespace, data.draw(stored))
    found = _round_trip(STRING, _state(kind, value, namespace_type), max_parallelism, [entry])
    assert _same(list(zip(found.keys, found.namespaces, found.stored)), [entry])


@SETTINGS
@given(LONGS, TEXT, TEXT, st.sampled_from([128, 32768]))
def test_generated_timers_read_back_as_written(timestamp, key, namespace, max_parallelism):
    timer = StateInfo(0, "_timer_state/event_t", PRIORITY_QUEUE, {}, {
        "VALUE_SERIALIZER": timer_of(STRING, STRING)})
    found = _round_trip(STRING, timer, max_parallelism, [(key, namespace, timestamp)])
    assert (found.keys, found.namespaces, found.stored) == ([key], [namespace], [timestamp])


def test_a_key_and_a_namespace_of_varying_size_are_each_followed_by_their_length():
    state = StateEntries(STRING, _state(StateKind.VALUE, STRING, STRING), 32768)
    key, namespace = "k" * 300, "\u4000" * 150  # 302 and 452 bytes: two-byte lengths
    pairs = state.pairs(key, namespace, "v", key_group=300)
    w = BinaryWriter()
    w.flink_string(key)
    key_bytes = w.getvalue()
    w = BinaryWriter()
    w.flink_string(namespace)
    namespace_bytes = w.getvalue()
    assert (len(key_bytes), len(namespace_bytes)) == (302, 452)
    assert pairs == [(b"\x01\x2c" + key_bytes + b"\x2e\x01" + namespace_bytes + b"\xc4\x01",
                      b"\x02v")]
    assert variable_int_bytes(0) == b"\x00"
    assert variable_int_bytes(0x12345) == b"\x45\x23\x01"
    fixed = StateEntries(STRING, _state(StateKind.VALUE, STRING, WINDOW), 128)
    assert fixed.pairs("k", (1, 2), None) == []  # a null value state holds nothing
    assert fixed.pairs("k", (1, 2), "v", 5) == [(
        b"\x05\x02k" + (1).to_bytes(8, "big") + (2).to_bytes(8, "big"), b"\x02v")]


def test_the_key_group_is_the_keys_unless_given():
    state = StateEntries(STRING, _state(StateKind.VALUE, STRING, VOID), 32768)
    group = assign_to_key_group("user-7", STRING_TYPE, 32768)
    ((key, _),) = state.pairs("user-7", None, "v")
    assert key[:2] == group.to_bytes(2, "big")
    ((key, _),) = state.pairs("user-7", None, "v", key_group=group ^ 1)  # the caller answers
    assert key[:2] == (group ^ 1).to_bytes(2, "big")


def test_timers_flip_the_sign_of_their_timestamp():
    timer = StateInfo(0, "_timer_state/event_t", PRIORITY_QUEUE, {}, {
        "VALUE_SERIALIZER": timer_of(simple("LongSerializer"), VOID)})
    state = StateEntries(simple("LongSerializer"), timer, 128)
    assert flip_sign_bit(-1) == (1 << 63) - 1 and flip_sign_bit(0) == -(1 << 63)
    ((key, value),) = state.pairs(7, None, -1, key_group=3)
    assert key == b"\x03" + bytes.fromhex("7fffffffffffffff") + (7).to_bytes(8, "big") + b"\x00"
    assert value == b""


def test_what_flink_keeps_no_entry_for_has_no_pair():
    long_type = simple("LongSerializer")
    for kind, value_type, empty in [
            (StateKind.LIST, list_of(long_type), []),
            (StateKind.MAP, map_of(STRING, long_type), {}),
            (StateKind.VALUE, long_type, None)]:
        state = StateEntries(STRING, _state(kind, value_type, VOID), 128)
        assert state.pairs("k", None, empty) == []
        assert state.pairs("k", None, None) == []


def test_entries_flink_cannot_hold_are_refused_naming_the_state():
    long_list = _state(StateKind.LIST, list_of(LONG_TYPE), VOID)
    with pytest.raises(TypeMismatchError, match="state 'state', element 1: None .* no nulls"):
        StateEntries(STRING, long_list, 128).pairs("k", None, [1, None])
    with pytest.raises(TypeMismatchError, match="a key is never null"):
        StateEntries(STRING, long_list, 128).pairs(None, None, [1])
    long_map = _state(StateKind.MAP, map_of(STRING, LONG_TYPE), VOID)
    with pytest.raises(TypeMismatchError, match="state 'state', user value: None .* Long cannot"):
        StateEntries(STRING, long_map, 128).pairs("k", None, {"a": None})
    string_map = _state(StateKind.MAP, map_of(STRING, STRING), VOID)
    assert StateEntries(STRING, string_map, 128).pairs("k", None, {"a": None}, 1) == [
        (b"\x01\x02k\x00\x02a", b"\x01\x00")]  # the null flag, then the null as String writes it
    with pytest.raises(TypeMismatchError, match="state 'state', entry: the namespace: 1"):
        StateEntries(STRING, long_map, 128).pairs("k", 1, {"a": 1})


@pytest.mark.parametrize(("flink_type", "values"), [
    (SetType("SetSerializer", LONG_TYPE), [[], [1, None, -5]]),
    (NullableType("NullableSerializer", LONG_TYPE, 8), [None, 7]),
    (NullableType("NullableSerializer", STRING, 0), [None, "x"]),
    (NullableType("NullableSerializer", ListType(
        "ListSerializer", NullableType("NullableSerializer", LONG_TYPE, 8)), 0),
     [None, [], [1, None]]),
])
def test_sets_and_nullables_round_trip(flink_type, values):
    """Flink 2.x wraps a POJO's lists, maps and sets (and their elements) this way."""
    for value in values:
        data = encode(flink_type, value)
        r = BinaryReader(data, "test")
        assert flink_type.read(r) == value and r.pos == len(data)
    padded_null = encode(NullableType("NullableSerializer", LONG_TYPE, 8), None)
    assert padded_null == b"\x01" + bytes(8)

"""Derived serializer snapshots are byte-exact against every real Flink 2.3 keyed-state header.

Every serializer snapshot of every keyed-state file of the shared snapshots and the fixtures
(keys, values, namespaces, timers, and every snapshot nested in them) is parsed by the reader,
mapped to its declaration (:meth:`FlinkType.declared`) and written again: the bytes are the
ones Flink wrote, or the serializer is one statesource refuses to derive (Kryo, Avro, PyFlink's
map keys). Then the statesource path: each state's declaration as the metadata view gives it
(kind, namespace type, Avro value schemas, TTL), its key type and its timers' types are turned
into meta infos and whole headers, which are the files' own bytes wherever the types are
derivable. What no real file holds is checked against Flink itself in
``test_serializer_snapshots_in_flink.py``.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from flink_snapshots import only
from statesource.errors import InvalidArgumentError, TypeMismatchError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.declarations import declaration, value_avro
from statesource.flink.serializers.base import REFUSED, flink_type, snapshot_bytes
from statesource.flink.serializers.collections import ListSerializer, MapSerializer, SetSerializer
from statesource.flink.serializers.mapping import (
    PojoClass,
    extracted_list,
    extracted_set,
    serializer_for_schema,
    serializer_for_type,
)
from statesource.flink.serializers.nullable import NullableSerializer, nullable
from statesource.flink.serializers.pojo import PojoField, PojoFlinkType, PojoSerializer
from statesource.flink.serializers.primitives import GLOBAL_WINDOW, SIMPLE, SimpleSerializer
from statesource.flink.serializers.rows import RowSerializer
from statesource.flink.serializers.ttl import TtlSerializer
from statesource.flink.serializers.tuples import TupleSerializer
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.flink.statefiles.keyed_header import KeyedHeader, StateInfo, read_keyed_header
from statesource.flink.statefiles.keyed_header_writer import write_keyed_header
from statesource.flink.statefiles.state_meta_writer import (
    key_serializer,
    state_info,
    state_meta_info_bytes,
    timer_state_info,
    timer_state_name,
)
from statesource.model import StateDeclaration, StateKind, TtlConfig
from statesource.schema import ValueSchema
from statesource.types import LONG, TIMEWINDOW, VOID

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "flink"
SHARED = ["java/canonical/savepoint-*", "java/native/savepoint-*", "java/checkpoints/chk-4",
          "java/checkpoints/chk-7", "pyflink/savepoint-*"]
FIXTURE_SNAPSHOTS = [f"{variant}/{kind}" for variant in ("mp256", "mp128-snappy", "types")
                     for kind in ("canonical", "native")] + [
                         f"changes/checkpoints/chk-{i}" for i in (1, 2, 3)]

_KRYO = "org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot"
_AVRO = "org.apache.flink.formats.avro.typeutils.AvroSerializerSnapshot"
_WRAPPER = ("org.apache.flink.streaming.api.utils.ByteArrayWrapperSerializer"
            "$ByteArrayWrapperSerializerSnapshot")


def _headers() -> list[tuple[str, KeyedHeader, bytes]]:
    """Every keyed-state file of every real snapshot: (where, its header, its header bytes)."""
    found = []
    for directory in [only(p) for p in SHARED] + [FIXTURES / p for p in FIXTURE_SNAPSHOTS]:
        snapshot = FlinkSnapshot.open(str(directory))
        for op in snapshot.operators:
            for handle in snapshot.keyed_handles(op):
                data = snapshot.read_bytes(handle.stream, 0, handle.stream.size)
                source = snapshot.describe(handle.stream)
                header = read_keyed_header(BinaryReader(data, source))
                found.append((source, header, data[:header.data_start]))
    return found


@pytest.fixture(scope="module")
def headers() -> list[tuple[str, KeyedHeader, bytes]]:
    return _headers()


def _short(snapshot_class: str) -> str:
    return snapshot_class.rsplit(".", 1)[-1]


def test_every_real_snapshot_is_rewritten_byte_for_byte_or_refused(headers):
    exact: Counter[str] = Counter()
    refused: Counter[str] = Counter()
    for where, header, _ in headers:
        roots = [header.key] + [s for info in header.states for s in info.serializers.values()]
        for read in (t for root in roots for t in root.nested()):
            try:
                declared = read.declared()
            except TypeMismatchError as error:
                assert _short(read.serializer) in str(error) or any(
                    _short(c) in str(error) for c in REFUSED), error
                refused[_short(read.serializer)] += 1
                continue
            assert snapshot_bytes(declared) == read.snapshot, (where, read.serializer)
            again = flink_type(declared)
            assert again.snapshot == read.snapshot and type(again) is type(read)
            exact[_short(read.serializer)] += 1
    assert len(headers) == 54
    assert exact == {
        "VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot": 254,
        "LongSerializer$LongSerializerSnapshot": 220,
        "StringSerializer$StringSerializerSnapshot": 164,
        "TimerSerializerSnapshot": 108,
        "TupleSerializerSnapshot": 50,
        "IntSerializer$IntSerializerSnapshot": 44,
        "TimeWindow$Serializer$TimeWindowSerializerSnapshot": 42,
        "MapSerializerSnapshot": 34,
        "ListSerializerSnapshot": 34,
        "DoubleSerializer$DoubleSerializerSnapshot": 30,
        "TtlStateFactory$TtlSerializerSnapshot": 16,
        "PojoSerializerSnapshot": 16,
        "RowSerializer$RowSerializerSnapshot": 10,
        "BytePrimitiveArraySerializer$BytePrimitiveArraySerializerSnapshot": 8,
    }
    # what holds a refused serializer is refused with it: lists of Avro records, PyFlink's maps
    assert refused == {"AvroSerializerSnapshot": 16, "KryoSerializerSnapshot": 12,
                       "ListSerializerSnapshot": 4, "MapSerializerSnapshot": 2,
                       "ByteArrayWrapperSerializer$ByteArrayWrapperSerializerSnapshot": 2}


def _pojo_classes(info: StateInfo) -> dict[str, PojoClass]:
    """The POJOs of a state as a user declares them: by record name, class and declaring classes."""
    return {t.avro()["name"]: PojoClass(t.pojo_class, t.declaring_classes)
            for root in info.serializers.values() for t in root.nested()
            if isinstance(t, PojoFlinkType)}


def _refused_somewhere(info: StateInfo) -> list[str]:
    return [t.serializer for root in info.serializers.values() for t in root.nested()
            if t.serializer in REFUSED]


def test_declared_states_keys_and_timers_give_the_real_headers(headers):
    """From statesource's declarations (types, Avro schemas, TTL) to Flink's bytes."""
    whole = states = timers = 0
    for where, header, data in headers:
        derived = []
        for info in header.states:
            if info.is_timer:
                timer = info.timer
                made = timer_state_info(info.name, timer.key.data_type(),
                                        timer.namespace.data_type(), info.state_id)
                timers += 1
            elif _refused_somewhere(info):
                made = info  # carried over: asserted refused below
            else:
                made = state_info(declaration(info), info.state_id, pojos=_pojo_classes(info))
                states += 1
            assert state_meta_info_bytes(made) == state_meta_info_bytes(info), (where, info.name)
            derived.append(made)
        rebuilt = dataclasses.replace(header, key=key_serializer(header.key.data_type()),
                                      states=tuple(derived))
        assert write_keyed_header(rebuilt) == data
        whole += not any(map(_refused_somewhere, header.states))
    assert (whole, states, timers) == (36, 158, 108)


def test_states_with_kryo_or_avro_values_are_refused_from_their_schemas(headers):
    """The reader's schemas of Kryo values name the class (a ValueSchema drops it: "bytes")."""
    refused = set()
    for _, header, _ in headers:
        for info in header.states:
            if not {t.serializer for t in info.value.nested()} & {_KRYO, _AVRO}:
                continue
            errors = []
            for schema in value_avro(info).values():
                try:
                    serializer_for_schema(schema)
                except TypeMismatchError as error:
                    errors.append(str(error))
            assert errors, info.name
            assert all("Kryo" in e or "Avro" in e for e in errors), errors
            refused.add(info.name)
    assert refused == {"money", "last_uuid", "profile", "point", "score", "visits"}


def test_pyflink_map_keys_cannot_be_told_from_bytes_and_are_refused_when_read():
    """PyFlink wraps pickled map keys in ByteArrayWrapper: "bytes" derives Java's byte[]."""
    header = _pyflink_header()
    (info,) = [s for s in header.states if s.name == "python-state-sum_by_tag"]
    with pytest.raises(TypeMismatchError, match="PyFlink"):
        info.value.declared()
    derived = state_info(declaration(info), info.state_id)
    assert state_meta_info_bytes(derived) != state_meta_info_bytes(info)
    with pytest.raises(TypeMismatchError, match="PyFlink"):
        SimpleSerializer(_WRAPPER)


def _pyflink_header() -> KeyedHeader:
    snapshot = FlinkSnapshot.open(str(only("pyflink/savepoint-*")))
    op = snapshot.operator("stateful")
    header = snapshot.header(op)
    assert header is not None
    return header


# -- declarations ---------------------------------------------------------------------------

def test_types_map_to_flink_serializers():
    assert serializer_for_type("long") is SIMPLE["long"]
    assert serializer_for_type(VOID) is SIMPLE["void"]
    assert serializer_for_type(TIMEWINDOW) is SIMPLE["timewindow"]
    nested = serializer_for_type("tuple<string,row<int,bytes>>")
    assert nested == TupleSerializer((SIMPLE["string"], RowSerializer((SIMPLE["int"],
                                                                       SIMPLE["bytes"]))))
    assert isinstance(nested, TupleSerializer)
    assert nested.java_class == "org.apache.flink.api.java.tuple.Tuple2"
    assert GLOBAL_WINDOW.snapshot_class.endswith("GlobalWindow$Serializer"
                                                 "$GlobalWindowSerializerSnapshot")


def test_value_schemas_map_to_flink_serializers():
    short = {"type": "int", "java-class": "java.lang.Short"}
    char = {"type": "string", "java-class": "java.lang.Character"}
    assert serializer_for_schema(ValueSchema.parse(short)) is SIMPLE["short"]
    assert serializer_for_schema(char) is SIMPLE["char"]
    assert serializer_for_schema(["null", "double"]) is SIMPLE["double"]
    assert serializer_for_schema({"type": "map", "values": ["null", "long"]}) == MapSerializer(
        SIMPLE["string"], SIMPLE["long"])
    entries = {"type": "array", "items": {"type": "record", "name": "MapEntry", "fields": [
        {"name": "key", "type": "int"}, {"name": "value", "type": ["null", "bytes"]}]}}
    assert serializer_for_schema(entries) == MapSerializer(SIMPLE["int"], SIMPLE["bytes"])
    tuple_of_row = ValueSchema.parse({
        "type": "record", "name": "Tuple2", "fields": [
            {"name": "f0", "type": ["null", "long"]},
            {"name": "f1", "type": ["null", {"type": "record", "name": "Row", "fields": [
                {"name": "row_kind", "type": "string"},
                {"name": "f0", "type": ["null", "string"]}]}]}]})
    assert serializer_for_schema(tuple_of_row) == serializer_for_type("tuple<long,row<string>>")
    assert serializer_for_schema(ValueSchema.parse({"type": "array", "items": "string"})) == \
        ListSerializer(SIMPLE["string"])


def test_a_record_is_a_pojo_when_its_class_is_declared():
    schema = {"type": "record", "name": "Event", "namespace": "com.acme", "fields": [
        {"name": "zeta", "type": "string"}, {"name": "id", "type": "long"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "next", "type": ["null", "Event"]}]}
    with pytest.raises(TypeMismatchError, match=r"pojos=\{'com.acme.Event'"):
        serializer_for_schema(schema)
    with pytest.raises(TypeMismatchError, match="contains itself"):
        serializer_for_schema(schema, {"com.acme.Event": PojoClass("com.acme.Event")})
    del schema["fields"][3]
    pojo = serializer_for_schema(schema, {"Event": PojoClass(
        "com.acme.Event", {"id": "com.acme.Base"})})
    assert pojo == PojoSerializer("com.acme.Event", (
        PojoField("id", SIMPLE["long"], "com.acme.Base"),
        PojoField("tags", extracted_list(SIMPLE["string"])),  # a POJO's fields are extracted
        PojoField("zeta", SIMPLE["string"])))
    assert [f.name for f in pojo.fields] == ["id", "tags", "zeta"]  # Flink's order: by name
    as_set = serializer_for_schema(schema, {"Event": PojoClass(
        "com.acme.Event", serializers={"tags": extracted_set(SIMPLE["string"])})})
    assert isinstance(as_set, PojoSerializer)
    assert as_set.fields[1] == PojoField("tags", NullableSerializer(SetSerializer(
        SIMPLE["string"])))
    with pytest.raises(TypeMismatchError, match="does not have"):
        serializer_for_schema(schema, {"Event": PojoClass("com.acme.Event", {"nope": "X"})})


def test_extracted_collections_are_nullable_and_hold_no_generic_types():
    strings = {"type": "array", "items": "string"}
    assert serializer_for_schema(strings) == ListSerializer(SIMPLE["string"])
    assert serializer_for_schema(strings, extracted=True) == NullableSerializer(ListSerializer(
        NullableSerializer(SIMPLE["string"])))
    longs = {"type": "map", "values": "long"}
    assert serializer_for_schema(longs, extracted=True) == NullableSerializer(MapSerializer(
        NullableSerializer(SIMPLE["string"]), SIMPLE["long"]))
    pair = {"type": "record", "name": "Tuple2", "fields": [
        {"name": "f0", "type": strings}, {"name": "f1", "type": "long"}]}
    assert serializer_for_schema(pair, extracted=True) == TupleSerializer((
        extracted_list(SIMPLE["string"]), SIMPLE["long"]))  # a Tuple's List is extracted too
    for generic in ({"type": "array", "items": strings}, {"type": "map", "values": strings},
                    {"type": "array", "items": pair}):
        assert serializer_for_schema(generic) is not None  # Types.LIST and Types.MAP hold them
        with pytest.raises(TypeMismatchError, match="Kryo"):
            serializer_for_schema(generic, extracted=True)
    row = {"type": "record", "name": "Row", "fields": [{"name": "row_kind", "type": "string"},
                                                       {"name": "f0", "type": "long"}]}
    with pytest.raises(TypeMismatchError, match="Row field a Kryo type"):
        serializer_for_schema(row, extracted=True)
    assert nullable(nullable(SIMPLE["long"])) == NullableSerializer(SIMPLE["long"])
    with pytest.raises(InvalidArgumentError, match="twice"):
        NullableSerializer(NullableSerializer(SIMPLE["long"]))


@pytest.mark.parametrize("schema, problem", [
    ({"type": "enum", "name": "Level", "symbols": ["LOW"]}, "enum"),
    ({"type": "fixed", "name": "Digest", "size": 2}, "fixed"),
    ({"type": "string", "logicalType": "uuid"}, "logical type 'uuid'"),
    ({"type": "bytes", "java-class": "java.util.UUID"}, "Kryo"),
    ({"type": "bytes", "java-class": "x.Y", "avro-schema": {}}, "Avro"),
    (["null", "long", "string"], "union"),
    ({"type": "record", "name": "Point", "fields": [{"name": "x", "type": "long"}]}, "POJO"),
])
def test_schemas_without_a_derivable_serializer_are_refused(schema, problem):
    with pytest.raises(TypeMismatchError, match=problem):
        serializer_for_schema(schema)


def test_bad_declarations_are_refused():
    with pytest.raises(InvalidArgumentError, match="1 to 25"):
        TupleSerializer((SIMPLE["long"],) * 26)
    with pytest.raises(InvalidArgumentError, match="not a parameterless"):
        SimpleSerializer("com.acme.MySerializer$Snapshot")
    with pytest.raises(TypeMismatchError, match="Kryo"):
        SimpleSerializer(_KRYO)
    with pytest.raises(InvalidArgumentError, match="twice"):
        PojoSerializer("A", (PojoField("x", SIMPLE["long"]), PojoField("x", SIMPLE["int"])))
    with pytest.raises(InvalidArgumentError, match="no fields"):
        PojoSerializer("A", ())
    with pytest.raises(InvalidArgumentError, match="FlinkSerializer"):
        ListSerializer("long")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="TTL"):
        TtlSerializer(TtlSerializer(SIMPLE["long"]))
    with pytest.raises(TypeMismatchError, match="key type"):
        key_serializer("void")


def test_pojo_fields_sort_as_java_strings():
    # Java compares UTF-16 code units: U+FFFF sorts after U+10000 (a surrogate pair)
    pojo = PojoSerializer("A", (PojoField("\uffff", SIMPLE["int"]),
                                PojoField("\U00010000", SIMPLE["int"]),
                                PojoField("B", SIMPLE["int"]), PojoField("a", SIMPLE["int"])))
    assert [f.name for f in pojo.fields] == ["B", "a", "\U00010000", "\uffff"]


def test_state_info_of_declarations():
    ttl = TtlConfig(timedelta(days=1))
    list_state = StateDeclaration("events", StateKind.LIST, VOID, {
        "element": ValueSchema.parse("string")}, ttl)
    info = state_info(list_state, 3)
    assert (info.state_id, info.name, info.backend_type) == (3, "events", 0)
    assert info.options == {"KEYED_STATE_TYPE": "LIST"}
    assert list(info.serializers) == ["VALUE_SERIALIZER", "NAMESPACE_SERIALIZER"]
    assert info.ttl and info.kind is StateKind.LIST
    window = StateDeclaration("window-contents", StateKind.AGGREGATING, TIMEWINDOW, {
        "accumulator": ValueSchema.parse("long")})
    contents = state_info(window, serializers={"accumulator": SIMPLE["long"]})
    assert contents.namespace.data_type() is TIMEWINDOW and contents.value.data_type() is LONG
    with pytest.raises(InvalidArgumentError, match="no value roles"):
        state_info(window, serializers={"value": SIMPLE["long"]})
    record = StateDeclaration("last", StateKind.VALUE, VOID, {"value": ValueSchema.parse({
        "type": "record", "name": "Event", "fields": [{"name": "id", "type": "long"}]})})
    with pytest.raises(TypeMismatchError, match="state 'last', value: .*Event"):
        state_info(record)
    timers = timer_state_info(timer_state_name("user-timers", event_time=True), "long")
    assert timers.name == "_timer_state/event_user-timers"
    assert timers.is_timer and timers.options == {}
    assert timers.timer.key.data_type() is LONG and timers.timer.namespace.data_type() is VOID

"""Derived serializer snapshots are the bytes Flink 2.3 itself writes, for what no real file holds.

``tests/flinkrestore/SerializerSnapshots.java`` asks Flink's own classes for the snapshots
(``TypeInformation.createSerializer(...).snapshotConfiguration()``, ``TtlSerializer``,
``TimerSerializer``, ``RegisteredKeyValueStateBackendMetaInfo`` and
``RegisteredPriorityQueueStateBackendMetaInfo`` written by Flink's meta-info writer): every
primitive, the window namespaces, nested Tuples, Rows (with field names), lists and maps, a
POJO with inherited, boxed, primitive and nested POJO fields, a POJO of lists, maps and sets
(which Flink 2.x's type extraction makes nullable), TTL wrappers, timers, key
serializers behind their proxy version and whole meta infos of every state kind with and
without TTL. Each must equal what statesource derives from the declared types. One JVM for
all cases (about 2 s); marked ``realflink``, failing (never skipped) without Flink's jars or a
JDK (tests/conftest.py).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from flink_restore import JVM_FLAGS, SOURCES, _tool, compiled_classes, flink_lib
from statesource.errors import TypeMismatchError
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.serializers.base import FlinkSerializer, snapshot_bytes
from statesource.flink.serializers.collections import ListSerializer, MapSerializer
from statesource.flink.serializers.kryo import KRYO_SNAPSHOT
from statesource.flink.serializers.mapping import (
    PojoClass,
    extracted_list,
    extracted_map,
    extracted_set,
    serializer_for_schema,
    serializer_for_type,
)
from statesource.flink.serializers.pojo import PojoField, PojoSerializer
from statesource.flink.serializers.primitives import GLOBAL_WINDOW, SIMPLE
from statesource.flink.serializers.timer import TimerSerializer
from statesource.flink.serializers.ttl import TtlSerializer
from statesource.flink.serializers.tuples import TupleSerializer
from statesource.flink.statefiles.keyed_header_writer import write_proxied_snapshot
from statesource.flink.statefiles.state_meta_writer import (
    key_serializer,
    state_info,
    state_meta_info_bytes,
    timer_state_info,
    timer_state_name,
)
from statesource.model import StateDeclaration, StateKind, TtlConfig
from statesource.schema import ValueSchema
from statesource.types import TIMEWINDOW, VOID

ORACLE = SOURCES / "SerializerSnapshots.java"
CHILD = "SerializerSnapshots$Child"
BASE = "SerializerSnapshots$Base"
INNER = "SerializerSnapshots$Inner"
BAG = "SerializerSnapshots$Bag"

PRIMITIVES = {"String": "string", "Long": "long", "Integer": "int", "Short": "short",
              "Byte": "byte", "Boolean": "boolean", "Character": "char", "Double": "double",
              "Float": "float", "byte[]": "bytes"}
INNER_POJO = PojoSerializer(INNER, (
    PojoField("s", SIMPLE["short"]), PojoField("b", SIMPLE["byte"]),
    PojoField("c", SIMPLE["char"]), PojoField("flag", SIMPLE["boolean"]),
    PojoField("f", SIMPLE["float"]), PojoField("raw", SIMPLE["bytes"])))
CHILD_POJO = PojoSerializer(CHILD, (  # declared in any order: the snapshot sorts by name
    PojoField("name", SIMPLE["string"]), PojoField("zeta", SIMPLE["string"], BASE),
    PojoField("alpha", SIMPLE["int"]), PojoField("score", SIMPLE["double"]),
    PojoField("inner", INNER_POJO), PojoField("id", SIMPLE["long"], BASE)))
CHILD_RECORD = {"type": "record", "name": "Child", "fields": [
    {"name": "id", "type": "long"}, {"name": "zeta", "type": ["null", "string"]},
    {"name": "name", "type": ["null", "string"]}, {"name": "alpha", "type": "int"},
    {"name": "score", "type": ["null", "double"]},
    {"name": "inner", "type": ["null", {"type": "record", "name": "Inner", "fields": [
        {"name": "s", "type": {"type": "int", "java-class": "java.lang.Short"}},
        {"name": "b", "type": {"type": "int", "java-class": "java.lang.Byte"}},
        {"name": "c", "type": {"type": "string", "java-class": "java.lang.Character"}},
        {"name": "flag", "type": "boolean"}, {"name": "f", "type": "float"},
        {"name": "raw", "type": ["null", "bytes"]}]}]}]}
CHILD_CLASSES = {"Child": PojoClass(CHILD, {"id": BASE, "zeta": BASE}), "Inner": PojoClass(INNER)}
BAG_POJO = PojoSerializer(BAG, (
    PojoField("tags", extracted_list(SIMPLE["string"])),
    PojoField("counts", extracted_map(SIMPLE["string"], SIMPLE["long"])),
    PojoField("ids", extracted_set(SIMPLE["int"])),
    PojoField("inners", extracted_list(INNER_POJO)),
    PojoField("byInner", extracted_map(INNER_POJO, SIMPLE["string"])),
    PojoField("blobs", extracted_map(SIMPLE["string"], SIMPLE["bytes"])),
    PojoField("pair", TupleSerializer((extracted_list(SIMPLE["long"]), SIMPLE["string"])))))
INNER_RECORD = CHILD_RECORD["fields"][5]["type"][1]
BAG_RECORD = {"type": "record", "name": "Bag", "fields": [
    {"name": "tags", "type": ["null", {"type": "array", "items": ["null", "string"]}]},
    {"name": "counts", "type": ["null", {"type": "map", "values": ["null", "long"]}]},
    {"name": "ids", "type": ["null", {"type": "array", "items": ["null", "int"]}]},
    {"name": "inners", "type": ["null", {"type": "array", "items": ["null", INNER_RECORD]}]},
    {"name": "byInner", "type": ["null", {"type": "array", "items": {
        "type": "record", "name": "MapEntry", "fields": [
            {"name": "key", "type": "Inner"}, {"name": "value", "type": ["null", "string"]}]}}]},
    {"name": "blobs", "type": ["null", {"type": "map", "values": ["null", "bytes"]}]},
    {"name": "pair", "type": ["null", {"type": "record", "name": "Tuple2", "fields": [
        {"name": "f0", "type": ["null", {"type": "array", "items": "long"}]},
        {"name": "f1", "type": ["null", "string"]}]}]}]}
BAG_CLASSES = {"Bag": PojoClass(BAG, serializers={"ids": extracted_set(SIMPLE["int"])}),
               "Inner": PojoClass(INNER)}

# id -> (the Java side's type spec, what statesource derives)
SERIALIZERS: dict[str, tuple[Any, FlinkSerializer]] = {
    **{java: (java, serializer_for_type(ours)) for java, ours in PRIMITIVES.items()},
    "void": ("void", serializer_for_type(VOID)),
    "window": ("window", serializer_for_type(TIMEWINDOW)),
    "global_window": ("global_window", GLOBAL_WINDOW),
    "nested tuple": ({"tuple": ["String", {"tuple": ["Integer", "Boolean", "Character"]},
                                {"row": ["Long"]}]},
                     serializer_for_type("tuple<string,tuple<int,boolean,char>,row<long>>")),
    "tuple25": ({"tuple": ["Long"] * 25}, serializer_for_type(f"tuple<{','.join(['long'] * 25)}>")),
    "named row": ({"row": [["user", "String"], ["n", "Short"],
                           ["pair", {"tuple": ["Byte", "Float"]}]]},
                  serializer_for_type("row<string,short,tuple<byte,float>>")),
    "list of maps of lists": ({"list": {"map": ["String", {"list": "Double"}]}},
                              serializer_for_schema({"type": "array", "items": {
                                  "type": "map", "values": {"type": "array",
                                                            "items": "double"}}})),
    "map of tuple keys": ({"map": [{"tuple": ["String", "Long"]}, "byte[]"]},
                          MapSerializer(serializer_for_type("tuple<string,long>"),
                                        SIMPLE["bytes"])),
    "list of rows": ({"list": {"row": ["Integer", "String"]}},
                     ListSerializer(serializer_for_type("row<int,string>"))),
    "pojo": ({"pojo": CHILD}, CHILD_POJO),
    "pojo from a schema": ({"pojo": CHILD}, serializer_for_schema(CHILD_RECORD, CHILD_CLASSES)),
    "list of pojos": ({"list": {"pojo": INNER}}, ListSerializer(INNER_POJO)),
    "pojo of collections": ({"pojo": BAG}, BAG_POJO),
    "pojo of collections from a schema": ({"pojo": BAG},
                                          serializer_for_schema(BAG_RECORD, BAG_CLASSES)),
    "ttl": ({"ttl": {"tuple": ["Double", "Long"]}},
            TtlSerializer(serializer_for_type("tuple<double,long>"))),
    "ttl pojo": ({"ttl": {"pojo": CHILD}}, TtlSerializer(CHILD_POJO)),
    "timer": ({"timer": [{"row": ["String"]}, "window"]},
              TimerSerializer(serializer_for_type("row<string>"), SIMPLE["timewindow"])),
}
# Avro's logical types, as the Java classes a job holds them in (and each timestamp class)
LOGICAL: dict[str, tuple[Any, Any, str | None]] = {
    "date": ("LocalDate", {"type": "int", "logicalType": "date"}, None),
    "time-millis": ("LocalTime", {"type": "int", "logicalType": "time-millis"}, None),
    "time-micros": ("LocalTime", {"type": "long", "logicalType": "time-micros"}, None),
    "timestamp-millis": ("Instant", {"type": "long", "logicalType": "timestamp-millis"}, None),
    "local-timestamp-micros": ("LocalDateTime", {"type": "long",
                                                 "logicalType": "local-timestamp-micros"}, None),
    "timestamp-micros as LocalDateTime": ("LocalDateTime", {
        "type": "long", "logicalType": "timestamp-micros"}, "LocalDateTime"),
    "local-timestamp-millis as Instant": ("Instant", {
        "type": "long", "logicalType": "local-timestamp-millis"}, "Instant"),
    "timestamp-millis as Timestamp": ({"class": "java.sql.Timestamp"}, {
        "type": "long", "logicalType": "timestamp-millis"}, "Timestamp"),
    "decimal": ("BigDecimal", {"type": "bytes", "logicalType": "decimal", "precision": 9,
                               "scale": 2}, None),
    "decimal on fixed": ("BigDecimal", {"type": "fixed", "name": "Money", "size": 8,
                                        "logicalType": "decimal", "precision": 18}, None),
    "list of dates": ({"list": "LocalDate"}, {"type": "array", "items": {
        "type": "int", "logicalType": "date"}}, None),
}
SERIALIZERS.update({
    f"logical {name}": (java, serializer_for_schema(ValueSchema.parse(schema),
                                                    timestamp_class=chosen))
    for name, (java, schema, chosen) in LOGICAL.items()})
KEYS = {"Long": "long", "Character": "char", "row": "row<string>",
        "tuple": "tuple<string,int,row<bytes>>"}
KEY_SPECS = {"Long": "Long", "Character": "Character", "row": {"row": ["String"]},
             "tuple": {"tuple": ["String", "Integer", {"row": ["byte[]"]}]}}

TTL = TtlConfig(timedelta(hours=1))


def _state(name: str, kind: StateKind, schemas: dict, namespace=VOID,
           ttl: bool = False) -> StateDeclaration:
    return StateDeclaration(name, kind, namespace, {
        role: ValueSchema.parse(schema) for role, schema in schemas.items()}, TTL if ttl else None)


TUPLE2 = {"type": "record", "name": "Tuple2", "fields": [
    {"name": "f0", "type": ["null", "double"]}, {"name": "f1", "type": ["null", "long"]}]}
# id -> (the Java side's state spec, the declaration statesource derives it from)
STATES: dict[str, tuple[dict, StateDeclaration]] = {}
for ttl in (False, True):
    suffix = " with ttl" if ttl else ""
    STATES.update({
        "value" + suffix: ({"kind": "value", "value": "Long"},
                           _state("v", StateKind.VALUE, {"value": "long"}, ttl=ttl)),
        "reducing" + suffix: ({"kind": "reducing", "value": "String"},
                              _state("v", StateKind.REDUCING, {"value": "string"}, ttl=ttl)),
        "aggregating" + suffix: ({"kind": "aggregating", "value": {"tuple": ["Double", "Long"]},
                                  "namespace": "window"},
                                 _state("v", StateKind.AGGREGATING, {"accumulator": TUPLE2},
                                        TIMEWINDOW, ttl)),
        "list" + suffix: ({"kind": "list", "element": {"tuple": ["Double", "Long"]}},
                          _state("v", StateKind.LIST, {"element": TUPLE2}, ttl=ttl)),
        "map" + suffix: ({"kind": "map", "user_key": "String", "user_value": "Integer"},
                         _state("v", StateKind.MAP, {"user_key": "string",
                                                     "user_value": ["null", "int"]}, ttl=ttl)),
        "map of pojos" + suffix: ({"kind": "map", "user_key": {"tuple": ["String", "Long"]},
                                   "user_value": {"pojo": CHILD}},
                                  _state("v", StateKind.MAP, {
                                      "user_key": {"type": "record", "name": "Tuple2", "fields": [
                                          {"name": "f0", "type": "string"},
                                          {"name": "f1", "type": "long"}]},
                                      "user_value": ["null", CHILD_RECORD]}, ttl=ttl)),
    })
TIMERS = {
    "user timers": ({"name": "_timer_state/event_user-timers", "key": "Long",
                     "namespace": "void"}, (timer_state_name("user-timers", True), "long",
                                            "void")),
    "window timers": ({"name": "_timer_state/processing_window-timers",
                       "key": {"tuple": ["String", "Integer"]}, "namespace": "window"},
                      (timer_state_name("window-timers", False), "tuple<string,int>",
                       "timewindow")),
}


def _run_oracle(cases: list[dict]) -> dict[str, bytes]:
    classes = compiled_classes([ORACLE])
    lib = flink_lib()
    with tempfile.TemporaryDirectory(prefix="serializer-snapshots-") as work:
        given, out = Path(work) / "cases.json", Path(work) / "out.json"
        given.write_text(json.dumps(cases))
        run = subprocess.run([_tool("java") or "java", *JVM_FLAGS, "-cp",
                              os.pathsep.join([str(classes), f"{lib}/*"]),
                              "SerializerSnapshots", str(given), str(out)],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-4000:]
        return {k: base64.b64decode(v) for k, v in json.loads(out.read_text()).items()}


@pytest.fixture(scope="module")
def flink() -> dict[str, bytes]:
    cases = [{"id": f"serializer {k}", "serializer": java} for k, (java, _) in SERIALIZERS.items()]
    cases += [{"id": "serializer uuid", "serializer": {"class": "java.util.UUID"}}]
    cases += [{"id": f"key {k}", "key": spec} for k, spec in KEY_SPECS.items()]
    cases += [{"id": f"state {k}", "state": {"name": "v", "ttl": ours.ttl is not None, **java}}
              for k, (java, ours) in STATES.items()]
    cases += [{"id": f"timers {k}", "timers": java} for k, (java, _) in TIMERS.items()]
    return _run_oracle(cases)


@pytest.mark.parametrize("case", SERIALIZERS)
def test_serializer_snapshots_are_flinks(flink, case):
    assert snapshot_bytes(SERIALIZERS[case][1]) == flink[f"serializer {case}"]


def test_uuids_are_kryos_in_flink_and_refused(flink):
    """Flink has no serializer of java.util.UUID (Kryo's snapshot): statesource refuses the
    logical type, naming the String it can write instead."""
    assert flink["serializer uuid"][2:].startswith(KRYO_SNAPSHOT.encode())
    with pytest.raises(TypeMismatchError, match=r"logical type 'uuid'.*Kryo.*a String"):
        serializer_for_schema({"type": "string", "logicalType": "uuid"})


@pytest.mark.parametrize("case", KEYS)
def test_key_serializers_are_flinks(flink, case):
    w = BinaryWriter()
    write_proxied_snapshot(w, key_serializer(KEYS[case]), "the key")
    assert w.getvalue() == flink[f"key {case}"]


@pytest.mark.parametrize("case", STATES)
def test_state_meta_infos_are_flinks(flink, case):
    info = state_info(STATES[case][1], pojos=CHILD_CLASSES)
    assert state_meta_info_bytes(info) == flink[f"state {case}"]


@pytest.mark.parametrize("case", TIMERS)
def test_timer_meta_infos_are_flinks(flink, case):
    name, key, namespace = TIMERS[case][1]
    assert state_meta_info_bytes(timer_state_info(name, key, namespace)) == flink[f"timers {case}"]

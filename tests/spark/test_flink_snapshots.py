"""flinkstate on real Flink snapshots, and operator state through Spark for both inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql.datasource import EqualTo

from flink_fixture_checks import (
    FLINK_1X,
    SNAPSHOTS_1X,
    expected_keyed,
    expected_operator_states,
    found_keyed,
    operator_state_of_rows,
)
from flink_snapshots import expected, only
from statesource import CheckpointWriter
from statesource.checkpointing.writer import SubtaskBackends
from statesource.flink.reader import FlinkCheckpoint
from statesource.keygroups import key_group_range_for_operator
from statesource.spark.source import FlinkStateDataSource
from statesource.state.keyed_backend import KeyedStateBackend
from statesource.state.operator_backend import OperatorStateBackend

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "flink"


@pytest.fixture(scope="module")
def canonical():
    return str(only("java/canonical/savepoint-*"))


def load(spark, path, source="flinkstate", **options):
    return spark.read.format(source).options(**options).load(path)


@pytest.mark.parametrize("pattern", ["java/canonical/savepoint-*", "java/native/savepoint-*",
                                     "java/checkpoints"])
def test_every_state_through_spark_matches_the_expected_state(spark, pattern):
    truth = expected("java")["state"]
    path = str(only(pattern)) if "*" in pattern else str(only(pattern + "/chk-7").parent)
    counts = {r.key: (r.key_group, r.operator_index, r.value)
              for r in load(spark, path, operator="stateful", state="count").collect()}
    assert counts == {k: (w["key_group_if_plain_string_key"],
                          w["key_group_if_plain_string_key"] * 2 // 128, w["count"])
                      for k, w in truth.items()}
    tags = load(spark, path, operator="stateful", state="tags", flattenCollections="false")
    assert {r.key: r.list_value for r in tags.collect()} == {k: w["tags"] for k, w in
                                                             truth.items()}
    sums = load(spark, path, operator="stateful", state="sum_by_tag")
    grouped: dict = {}
    for row in sums.collect():
        grouped.setdefault(row.key, {})[row.user_key] = row.user_value
    assert grouped == {k: w["sum_by_tag"] for k, w in truth.items()}
    ttl = load(spark, path, operator="stateful", state="last_seq_ttl")
    assert ttl.columns[-1] == "ttl_timestamp"
    assert {r.key: r.value for r in ttl.collect()} == {k: w["last_seq_ttl"]
                                                       for k, w in truth.items()}


def test_operator_by_hex_id_and_timer_schema(spark, canonical):
    df = load(spark, canonical, operator="2bf2326fd66dcbd2442fd50df173e152",
              state="_timer_state/event_user-timers")
    assert df.schema.simpleString() == ("struct<key_group:int,operator_index:int,key:string,"
                                        "namespace:void,timestamp:bigint>")
    assert df.count() == 0  # this job registers no timers


def test_key_pushdown_reads_only_that_key_groups_bytes(canonical):
    source = FlinkStateDataSource({"path": canonical, "operator": "stateful", "state": "count",
                                   "filterPushdown": "true"})
    reader = source.reader(source.schema())
    assert list(reader.pushFilters([EqualTo(("key",), "key-0")])) == []
    (partition,) = reader.partitions()
    key_group = expected("java")["state"]["key-0"]["key_group_if_plain_string_key"]
    assert list(partition.value.key_groups()) == [key_group]
    reads = []
    reader.read_listener = lambda file, offset, length: reads.append((offset, length))
    rows = [row for batch in reader.read(partition) for row in batch.to_pylist()]
    assert [(r["key"], r["value"]) for r in rows] == [("key-0", expected("java")["state"]
                                                      ["key-0"]["count"])]
    (piece,) = [p for p in FlinkCheckpoint.open(canonical).snapshot.key_group_bytes(
        FlinkCheckpoint.open(canonical).snapshot.operator("stateful")) if p.key_group == key_group]
    assert reads == [(piece.begin, piece.end - piece.begin)]


def test_metadata_view_of_a_flink_snapshot(spark, canonical):
    rows = spark.read.format("flinkstate-metadata").load(canonical).collect()
    kinds = {(r.operator_uid, r.state_name): r.kind for r in rows}
    assert kinds[("stateful", "tags")] == "list"
    assert kinds[("stateful", "_timer_state/event_user-timers")] == "timers"
    assert kinds[("src", "SourceReaderState")] == "operator-split"


def test_metadata_view_lists_an_undecodable_operator_with_its_reason(spark):
    # tests/fixtures/flink/isolation: "custom" has a serializer no tool knows, "counts" not
    path = str(Path(__file__).resolve().parents[1] / "fixtures" / "flink" / "isolation"
               / "canonical")
    rows = spark.read.format("flinkstate-metadata").load(path).collect()
    (custom,) = [r for r in rows if r.operator_uid == "custom"]
    assert (custom.state_name, custom.kind) == (None, "keyed")
    assert "IsolationJob$TaggedStringSerializer$Snapshot" in custom.unreadable
    count = next(r for r in rows if (r.operator_uid, r.state_name) == ("counts", "count"))
    assert count.unreadable is None and count.kind == "value"
    values = spark.read.format("flinkstate").option("operator", "counts") \
        .option("state", "count").load(path).collect()
    assert len(values) == 40 and {r.value for r in values} == {10}


PYTHON_SOURCE_1X = ["flink-1.20/checkpoint", "flink-1.18/rocksdb", "flink-1.15/canonical"]
"""The 1.x snapshots also read with the Python source, one of each Flink version. Every one is
read with the JVM reader, and test_jvm_flink.py holds the two readers to the same rows on every
state of every fixture."""


def _collected(spark, path: str, source: str, **options) -> list[dict]:
    return [row.asDict(recursive=True) for row in load(spark, path, source, **options).collect()]


@pytest.mark.parametrize(("snapshot", "source_format"), [
    *((snapshot, "jvm") for snapshot in SNAPSHOTS_1X),
    *((snapshot, "python") for snapshot in PYTHON_SOURCE_1X)], indirect=["source_format"])
def test_every_keyed_state_of_flink_1x_snapshots_through_spark(spark, snapshot, source_format):
    # FixtureJob1x.java by a real Flink 1.20, 1.18 and 1.15: every keyed and timer state is the
    # job's model; each operator named by its uid, which _metadata versions 3 and 4 know only
    # by its hash
    version = snapshot.split("/")[0]
    path = str(FIXTURES / snapshot)
    truth = json.loads((FIXTURES / version / "expected.json").read_text())
    keyed = expected_keyed(truth, flink1x=True)
    for (operator, state), want in keyed.items():
        # the heap's native ones too: Flink 1.x's Kryo UUIDs are found where they end there
        rows = _collected(spark, path, source_format, operator=operator, state=state)
        assert found_keyed(rows, operator, state, truth) == want, (operator, state)
    meta = spark.read.format("flinkstate-metadata").load(path).collect()
    assert {r.state_name for r in meta} == {state for _, state in keyed} | {
        state for _, state in expected_operator_states(truth)}


@pytest.mark.parametrize("snapshot", [f"{version}/{kind}" for version, kind in zip(
    FLINK_1X, ("checkpoint", "canonical", "rocksdb"))])
def test_operator_states_of_flink_1x_snapshots_through_spark(spark, snapshot):
    # split, union and broadcast; Flink 1.15's files are version 5 (the Python source reads
    # operator state on both paths)
    path = str(FIXTURES / snapshot)
    truth = json.loads((FIXTURES / snapshot.split("/")[0] / "expected.json").read_text())
    for (operator, state), want in expected_operator_states(truth).items():
        rows = _collected(spark, path, "flinkstate", operator=operator, operatorState=state)
        assert operator_state_of_rows(rows) == want, (snapshot, state)


def test_operator_state_of_a_statesource_checkpoint(spark, tmp_path):
    subtasks = []
    for index in range(2):
        backend = OperatorStateBackend()
        backend.get_list_state("offsets", "long").update([index * 10 + j for j in range(3)])
        backend.get_broadcast_state("rules", "string", "long").put_all({"r": 1, "s": 2})
        keyed = KeyedStateBackend("long", 128, key_group_range_for_operator(128, 2, index))
        subtasks.append(SubtaskBackends(keyed=keyed, operator=backend))
    CheckpointWriter(str(tmp_path)).write(1, {"src": subtasks})
    offsets = load(spark, str(tmp_path), operatorState="offsets")
    assert offsets.schema.simpleString() == "struct<operator_index:int,list_element:bigint>"
    assert sorted(tuple(r) for r in offsets.collect()) == [
        (0, 0), (0, 1), (0, 2), (1, 10), (1, 11), (1, 12)]
    rules = load(spark, str(tmp_path), operatorState="rules")
    assert sorted(tuple(r) for r in rules.collect()) == [
        (0, "r", 1), (0, "s", 2), (1, "r", 1), (1, "s", 2)]


def test_operator_state_of_a_flink_snapshot(spark, canonical):
    df = load(spark, canonical, operator="src", operatorState="SourceReaderState")
    assert df.schema.simpleString() == "struct<operator_index:int,list_element:binary>"
    assert df.count() == 0


def test_window_state_and_timers_of_a_compressed_savepoint(spark):
    path = str(FIXTURES / "mp128-snappy" / "canonical")
    windows = load(spark, path, operator="windows", state="window-contents")
    assert windows.schema.simpleString() == (
        "struct<key_group:int,operator_index:int,key:struct<f0:string,f1:int>,"
        "namespace:struct<start:bigint,end:bigint>,accumulator:bigint>")
    truth = json.loads((FIXTURES / "mp128-snappy" / "expected.json").read_text())["windows"]
    got = {json.dumps([r.key.f0, r.key.f1, r.namespace.start]): r.accumulator
           for r in windows.collect()}
    assert got == {k: w["sum"] for k, w in truth.items()}
    timers = load(spark, path, operator="windows", state="_timer_state/event_window-timers")
    assert timers.where("timestamp = namespace.end - 1").count() == len(truth)


@pytest.mark.parametrize("kind", ["canonical", "native"])
def test_avro_values_and_struct_user_keys_through_spark(spark, kind):
    path = str(FIXTURES / "types" / kind)
    truth = json.loads((FIXTURES / "types" / "expected.json").read_text())["keys"]
    profiles = load(spark, path, operator="typed", state="profile")
    assert "value:struct<user:string,visits:int,total:bigint" in profiles.schema.simpleString()
    got = {r.key: (r.value.user, r.value.visits, r.value.level, r.value.nick, r.value.home.zip,
                   r.value.counts, r.value.tags) for r in profiles.collect()}
    assert got == {int(k): (w["profile"]["user"], w["profile"]["visits"], w["profile"]["level"],
                            w["profile"]["nick"], w["profile"]["home"]["zip"],
                            w["profile"]["counts"], w["profile"]["tags"])
                   for k, w in truth.items()}
    visits = load(spark, path, operator="typed", state="visits", flattenCollections="false")
    assert {r.key: [v.asDict() for v in r.list_value] for r in visits.collect()} == {
        int(k): w["visits"] for k, w in truth.items()}
    pojos = load(spark, path, operator="typed", state="pojos").where("key = 3")
    assert pojos.schema["user_key"].dataType.simpleString() == "struct<bucket:int,user:string>"
    assert {json.dumps([r.user_key.user, r.user_key.bucket]): r.user_value
            for r in pojos.collect()} == truth["3"]["pojos"]
    (nested,) = load(spark, path, operator="typed", state="pojos",
                     flattenCollections="false").where("key = 3").collect()
    assert {json.dumps([k.user, k.bucket]): v for k, v in nested.map_value.items()} == \
        truth["3"]["pojos"]
    pairs = load(spark, path, operator="typed", state="pairs")
    assert pairs.where("user_key.f0 = 'u1' and user_key.f1 = 1").count() == len(
        [k for k, w in truth.items() if '["u1", 1]' in w["pairs"]])


def test_kryo_values_of_a_canonical_savepoint_through_spark(spark):
    path = str(FIXTURES / "types" / "canonical")
    money = load(spark, path, operator="kryo", state="money")
    assert money.schema["value"].dataType.simpleString() == "binary"
    values = [r.value for r in money.collect()]
    assert len(values) == 10 and all(v.endswith(b"EU" + bytes([ord("R") | 0x80])) for v in values)
    (meta,) = [r for r in spark.read.format("flinkstate-metadata").load(path).collect()
               if r.state_name == "money"]
    assert "AvroFixtureJob$Money" in str(meta)

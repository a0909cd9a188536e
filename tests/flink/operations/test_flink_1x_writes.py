"""Savepoints written from Flink 1.x snapshots, for Flink 1.x: restored by a real Flink 1.20.

The ``flink-1.20``, ``flink-1.18`` and ``flink-1.15`` fixtures (FixtureJob1x.java by a real
Flink 1.20.5, 1.18.1 and 1.15.4; RocksDB's own files among them, written as canonical files)
are rescaled, erased, have a state dropped, one rewritten from Spark and new ones added;
each output keeps its ``_metadata`` version (4, or 3 without checkpoint properties)
and the serializer snapshots the job's Flink wrote, new states get theirs as 1.20 derives
them, a bootstrap and an export are written for 1.20 when asked; and a Flink 1.20.5
(``apache-flink-libraries``, installed beside 2.3 by the README's test command) restores
each with every key compared to the job's model (generate.py).
"""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F
from test_compressed_output import compression_flags
from test_flink_export import (
    USER_SPEC,
    USERS,
    backends_of,
    check_restored,
    populate_users,
    restore_spec,
)

from flink_fixture_checks import FIXTURES, FLINK_1X, check_fixture, fixture_spec
from flink_restore import FLINK_1X_VERSION, restore, values
from sample_state import dump, merged
from statesource.checkpointing import CheckpointWriter
from statesource.cli import main
from statesource.flink.operations.edit import drop_state, erase_keys
from statesource.flink.operations.rescale import is_canonical_savepoint, rescale_max_parallelism
from statesource.flink.serializers.mapping import PojoClass
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.spark import rewrite, write_state
from statesource.state.clock import ManualClock

pytestmark = pytest.mark.realflink

JOB = FIXTURES / "FixtureJob1x.java"
TTL = ("last_ttl",)


def truth_of(version: str, max_parallelism: int | None = None) -> dict:
    truth = json.loads((FIXTURES / version / "expected.json").read_text())
    truth["max_parallelism"] = max_parallelism or truth["max_parallelism"]
    return truth


def restored(savepoint, max_parallelism: int, parallelism: int = 2) -> list[dict]:
    return restore(savepoint, fixture_spec(max_parallelism, parallelism, flink1x=True),
                   java_sources=[JOB], flink=FLINK_1X_VERSION)


def check_ttl(rows: list[dict], truth: dict, erased: tuple[int, ...] = ()) -> None:
    assert values(rows, "stateful", "last_ttl") == {
        int(k): w["last_ttl"] for k, w in truth["stateful"].items() if int(k) not in erased}


def version_of(savepoint) -> int:
    return FlinkSnapshot.open(str(savepoint)).metadata.version


@pytest.mark.parametrize("version, kind", [("flink-1.20", "canonical"),
                                           ("flink-1.20", "rocksdb-native"),
                                           ("flink-1.20", "native"),
                                           ("flink-1.15", "rocksdb")])
def test_a_new_max_parallelism_up_and_back_down_across_the_prefix_width(version, kind,
                                                                        tmp_path):
    """Up Snappy-compressed on request (as a 1.x job with snapshot-compression writes it),
    down uncompressed on request: Flink 1.20 restores both. The native savepoint's Kryo
    ``UUID`` values are found where they end by parsing their Kryo 2 bytes."""
    up, down = tmp_path / "up", tmp_path / "down"
    rescale_max_parallelism(str(FIXTURES / version / kind), str(up), 256,  # 2-byte prefix
                            compression="snappy")
    rescale_max_parallelism(str(up), str(down), 100, parallelism=3,  # 1-byte again
                            compression="none")
    assert version_of(up) == version_of(down) == FLINK_1X[version]
    assert (compression_flags(up), compression_flags(down)) == ({True}, {False})
    for savepoint, max_parallelism in ((up, 256), (down, 100)):
        truth = truth_of(version, max_parallelism)
        rows = restored(savepoint, max_parallelism)
        check_fixture(rows, truth, 2, added=TTL)
        check_ttl(rows, truth)


@pytest.mark.parametrize("version, kind", [("flink-1.20", "native"),
                                           ("flink-1.20", "rocksdb-checkpoint"),
                                           ("flink-1.18", "checkpoint"),
                                           ("flink-1.15", "checkpoint")])
def test_erased_keys_of_a_converted_snapshot(version, kind, tmp_path):
    # the edited operator is converted to canonical, the others' native files are copied
    # (RocksDB's files: converted to canonical ones too)
    erased = (3, 17)
    output = tmp_path / "erased"
    erase_keys(str(FIXTURES / version / kind), str(output), "stateful", list(erased))
    metadata = FlinkSnapshot.open(str(output)).metadata
    assert metadata.version == FLINK_1X[version]
    assert bool(metadata.properties) == (FLINK_1X[version] == 4)
    truth = truth_of(version)
    rows = restored(output, 128)
    check_fixture(rows, truth, 2, erased=erased, added=TTL)
    check_ttl(rows, truth, erased)


def test_a_dropped_state_is_gone_and_the_rest_restores(tmp_path):
    output = tmp_path / "dropped"
    drop_state(str(FIXTURES / "flink-1.20" / "canonical"), str(output), "stateful", "avg")
    truth = truth_of("flink-1.20")
    rows = restored(output, 128)
    check_fixture(rows, truth, 2, dropped={"avg"}, added=TTL)


def test_a_state_rewritten_from_spark_keeps_the_version_and_restores(spark, tmp_path):
    source = FIXTURES / "flink-1.20" / "canonical"
    total = (spark.read.format("flinkstate").option("operator", "stateful")
             .option("state", "total").load(str(source)))
    output = tmp_path / "doubled"
    write_state(total.select("key", (F.col("value") * 2).alias("value")), str(source),
                "stateful", "total", output=str(output))
    assert version_of(output) == 4
    truth = truth_of("flink-1.20")
    for want in truth["stateful"].values():
        want["total"] *= 2
    rows = restored(output, 128)
    check_fixture(rows, truth, 2, added=TTL)
    check_ttl(rows, truth)


def test_new_states_and_a_new_operator_written_into_a_1x_savepoint_restore(spark, tmp_path):
    """A state new to the job's operator (its POJO class declared), a new keyed operator, and
    the states it holds, written as Flink 1.20 derives their serializers."""
    source = FIXTURES / "flink-1.20" / "canonical"
    truth = truth_of("flink-1.20")
    events = {int(k): {**w["last"], "amount": w["last"]["amount"] * 2}
              for k, w in truth["stateful"].items()}
    previous = spark.createDataFrame(
        sorted(events.items()),
        "key long, value struct<id: long, key: long, user: string, amount: double, ts: long>")
    names = spark.createDataFrame(
        [(f"user-{i}", f"name-{i}-{j}") for i in range(40) for j in range(i % 3 + 1)],
        "key string, list_element string")
    output = tmp_path / "added"
    with rewrite(spark, str(source), output=str(output),
                 pojos={"value": PojoClass("FixtureJob1x$Event")}) as staged:
        staged.replace(previous, "stateful", "previous", kind="value")
        staged.replace(names, "bootstrapped", "names", kind="list", parallelism=3,
                       max_parallelism=128)
    assert version_of(output) == 4
    spec = fixture_spec(128, flink1x=True)
    spec["operators"][0]["keyed_states"].append(
        {"name": "previous", "kind": "value", "value": {"pojo": "FixtureJob1x$Event"}})
    spec["operators"].append({"uid": "bootstrapped", "key": "String", "parallelism": 3,
                              "keyed_states": [{"name": "names", "kind": "list",
                                                "element": "String"}]})
    rows = restore(output, spec, java_sources=[JOB], flink=FLINK_1X_VERSION)
    check_fixture(rows, truth, 2, added={"previous", *TTL})
    assert values(rows, "stateful", "previous") == events
    assert values(rows, "bootstrapped", "names") == {
        f"user-{i}": [f"name-{i}-{j}" for j in range(i % 3 + 1)] for i in range(40)}


def test_a_savepoint_bootstrapped_for_flink_1_20_restores_there(spark, tmp_path):
    output = tmp_path / "fresh"
    prices = spark.createDataFrame(
        [(f"k{i}", f"item{j}", i + j / 4) for i in range(50) for j in range(i % 4)],
        "key string, user_key string, user_value double")
    with rewrite(spark, None, output=str(output), checkpoint_id=7,
                 flink_version="1.20") as staged:
        staged.replace(prices, "fresh", "prices", kind="map", parallelism=2,
                       max_parallelism=128)
    metadata = FlinkSnapshot.open(str(output)).metadata
    assert (metadata.version, metadata.checkpoint_id) == (4, 7)
    assert is_canonical_savepoint(metadata.properties)
    rows = restore(output, {"max_parallelism": 128, "parallelism": 2, "operators": [
        {"uid": "fresh", "key": "String", "keyed_states": [
            {"name": "prices", "kind": "map", "user_key": "String",
             "user_value": "Double"}]}]}, flink=FLINK_1X_VERSION)
    assert values(rows, "fresh", "prices") == {
        f"k{i}": [[f"item{j}", i + j / 4] for j in range(i % 4)] for i in range(50) if i % 4}


def test_a_checkpoint_exported_for_flink_1_20_restores_there(tmp_path):
    clock = ManualClock(1_700_000_000_000)
    users = backends_of("string", 128, 2, USERS, populate_users, clock)
    with CheckpointWriter(str(tmp_path / "checkpoints")) as writer:
        writer.write(7, {"users": users})
    assert main(["export-flink", str(tmp_path / "checkpoints"), "--output",
                 str(tmp_path / "savepoint"), "--flink-version", "1.20"]) == 0
    assert version_of(tmp_path / "savepoint") == 4
    rows = restore(tmp_path / "savepoint", restore_spec(128, "users", "String", USER_SPEC, 2),
                   flink=FLINK_1X_VERSION)
    check_restored(rows, "users", USER_SPEC, merged([dump(b) for b in users]))

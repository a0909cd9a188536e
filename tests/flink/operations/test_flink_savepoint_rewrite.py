"""Rewrites of a Flink savepoint from Spark, and bootstraps: restored by a real Flink 2.3.

``write_state``, ``rewrite`` and ``df.write.format("flinkstate")`` with an ``output`` write
a new canonical savepoint through the Flink savepoint target
(``statesource.flink.operations.savepoint_target``);
``erase_keys`` takes its keys from a DataFrame. Each test restores what was written with
``tests/flink_restore.py`` and compares every key of every state with the fixture's
``expected.json`` changed as the test changed it. Flink refusing a savepoint raises
``FlinkRestoreError``: a failing test, never a skip.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from pyspark.sql import functions as F
from test_compressed_output import compression_flags

from flink_fixture_checks import (
    FIXTURES,
    check_fixture,
    check_shared_java,
    fixture_spec,
    fixture_truth,
    shared_java_spec,
)
from flink_restore import FIXTURE_JOB, restore, rows_of, values
from flink_snapshots import expected, only
from statesource.errors import (
    CheckpointExistsError,
    IncompatibleCheckpointError,
    InvalidArgumentError,
    StateNotFoundError,
    TypeMismatchError,
)
from statesource.flink.operations.rescale import is_canonical_savepoint
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.serializers.mapping import PojoClass
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.model import StateDeclaration, StateKind, TtlConfig
from statesource.schema import ValueSchema
from statesource.spark import erase_keys, rewrite, write_state
from statesource.types import VOID

MP256 = FIXTURES / "mp256" / "canonical"
SNAPPY = FIXTURES / "mp128-snappy" / "canonical"


def _read(spark, path, operator, state):
    return (spark.read.format("flinkstate").option("operator", operator)
            .option("state", state).load(str(path)))


def _without(spec: dict, operator: str, state: str) -> dict:
    for op in spec["operators"]:
        if op["uid"] == operator:
            op["keyed_states"] = [s for s in op["keyed_states"] if s["name"] != state]
    return spec


def test_a_rewritten_value_state_restores_and_nothing_else_changes(spark, tmp_path):
    truth = fixture_truth("mp256")
    total = _read(spark, MP256, "stateful", "total")
    output = tmp_path / "doubled"
    info = write_state(total.select("key", (F.col("value") * 2).alias("value")), str(MP256),
                       "stateful", "total", output=str(output))
    assert info.path == str(output)
    assert info.checkpoint_id == FlinkCheckpoint.open(str(MP256)).checkpoint_id
    assert repr(info).startswith(f"CheckpointInfo(checkpoint_id={info.checkpoint_id},")
    assert [p.name for p in tmp_path.iterdir()] == ["doubled"]  # the work directory is gone
    for want in truth["stateful"].values():
        want["total"] *= 2
    rows = restore(output, fixture_spec(256), java_sources=[FIXTURE_JOB])
    check_fixture(rows, truth, parallelism=2)


@pytest.fixture(scope="module")
def shared_java_bases():
    return {"native": only("java/native/savepoint-*"), "chk-7": only("java/checkpoints/chk-7")}


@pytest.mark.parametrize("base", ["native", "chk-7"])
def test_a_rewrite_of_a_native_snapshot_is_canonical_and_restores(spark, tmp_path,
                                                                  shared_java_bases, base):
    """A NATIVE base (the shared Java job's savepoint, or its retained checkpoint chk-7,
    which holds the final state): the rewritten operator is converted, so every keyed-state
    file of the output is a canonical savepoint's, and a real Flink restores the job's
    expected state with the ``count`` state doubled."""
    truth = expected("java")
    source = shared_java_bases[base]
    count = _read(spark, source, "stateful", "count")
    output = tmp_path / "doubled"
    write_state(count.select("key", (F.col("value") * 2).alias("value")), str(source),
                "stateful", "count", output=str(output))
    written = FlinkSnapshot.open(str(output))
    assert is_canonical_savepoint(written.metadata.properties)
    handles = [h for op in written.operators for h in written.keyed_handles(op)]
    assert handles and all(h.savepoint and h.stream.relative for h in handles)
    for want in truth["state"].values():
        want["count"] *= 2
    rows = restore(output, shared_java_spec(truth["max_parallelism"], truth["parallelism"]),
                   java_sources=[FIXTURE_JOB])
    check_shared_java(rows, truth)


def test_one_rewrite_replaces_drops_adds_and_bootstraps_an_operator(spark, tmp_path):
    """In one savepoint: a map state rewritten (one user gone, the others' counts up), a
    state dropped, a new state in the operator, and a new keyed operator with its uid."""
    truth = fixture_truth("mp256")
    keys = sorted(int(k) for k in truth["stateful"])
    per_user = _read(spark, MP256, "stateful", "per_user")
    bonus = spark.createDataFrame([(k, k * 10) for k in keys], "key long, value long")
    names = spark.createDataFrame(
        [(f"user-{i}", f"name-{i}-{j}") for i in range(40) for j in range(i % 3 + 1)],
        "key string, list_element string")
    output = tmp_path / "edited"
    with rewrite(spark, str(MP256), output=str(output)) as staged:
        staged.replace(per_user.where(F.col("user_key") != "u0")
                       .withColumn("user_value", F.col("user_value") + 1),
                       "stateful", "per_user")
        staged.drop("stateful", "last")
        staged.replace(bonus, "stateful", "bonus", kind="value")
        staged.replace(names, "bootstrapped", "names", kind="list", parallelism=3,
                       max_parallelism=256)
    for want in truth["stateful"].values():
        want["per_user"] = {u: n + 1 for u, n in want["per_user"].items() if u != "u0"}
    spec = _without(fixture_spec(256), "stateful", "last")
    spec["operators"][0]["keyed_states"].append({"name": "bonus", "kind": "value",
                                                 "value": "Long"})
    spec["operators"].append({"uid": "bootstrapped", "key": "String", "parallelism": 3,
                              "keyed_states": [{"name": "names", "kind": "list",
                                                "element": "String"}]})
    rows = restore(output, spec, java_sources=[FIXTURE_JOB])
    check_fixture(rows, truth, parallelism=2, dropped={"last"}, added={"bonus"})
    assert values(rows, "stateful", "bonus") == {k: k * 10 for k in keys}
    assert values(rows, "bootstrapped", "names") == {
        f"user-{i}": [f"name-{i}-{j}" for j in range(i % 3 + 1)] for i in range(40)}


def test_a_savepoint_bootstrapped_from_nothing_restores(spark, tmp_path):
    """No base: a new keyed operator with map, window-namespaced and TTL states,
    Snappy-compressed on request."""
    output = tmp_path / "fresh"
    prices = spark.createDataFrame(
        [(f"k{i}", f"item{j}", i + j / 4) for i in range(50) for j in range(i % 4)],
        "key string, user_key string, user_value double")
    window = spark.createDataFrame(
        [(f"k{i}", (1000 * i, 1000 * i + 500), i) for i in range(20)],
        "key string, namespace struct<start: long, end: long>, value long")
    counts = (spark.createDataFrame([(f"k{i}", i * 3, 1_700_000_000_000 + i) for i in range(30)],
                                    "key string, value long, ms long")
              .select("key", "value", F.timestamp_millis("ms").alias("ttl_timestamp")))
    ttl = StateDeclaration("counts", StateKind.VALUE, VOID, {"value": ValueSchema.parse("long")},
                           TtlConfig(ttl=timedelta(hours=1)))
    with rewrite(spark, None, output=str(output), checkpoint_id=7,
                 compression="snappy") as staged:
        staged.replace(prices, "fresh", "prices", kind="map", parallelism=2,
                       max_parallelism=128)
        staged.replace(window, "fresh", "windowed", kind="value", namespace_type="timewindow")
        staged.replace(counts, "fresh", "counts", declaration=ttl)
    assert compression_flags(output) == {True}
    rows = restore(output, {"max_parallelism": 128, "parallelism": 2, "operators": [
        {"uid": "fresh", "key": "String", "keyed_states": [
            {"name": "prices", "kind": "map", "user_key": "String", "user_value": "Double"},
            {"name": "windowed", "kind": "value", "value": "Long", "namespace": "window"},
            {"name": "counts", "kind": "value", "value": "Long", "ttl": True}]}]})
    (snapshot,) = [row for row in rows if row["kind"] == "snapshot"]
    assert snapshot["checkpointId"] == 7
    assert values(rows, "fresh", "prices") == {
        f"k{i}": [[f"item{j}", i + j / 4] for j in range(i % 4)] for i in range(50)
        if i % 4}
    assert values(rows, "fresh", "windowed") == {
        (f"k{i}", (("end", 1000 * i + 500), ("start", 1000 * i))): i for i in range(20)}
    assert values(rows, "fresh", "counts") == {f"k{i}": i * 3 for i in range(30)}
    assert {row["key"]: row["ttlTimestamp"] for row in rows_of(rows, "fresh", "counts")} == {
        f"k{i}": 1_700_000_000_000 + i for i in range(30)}


def test_a_pojo_valued_state_bootstrapped_from_spark_restores_as_the_jobs_class(spark, tmp_path):
    """A new value state whose struct values are declared the job's ``Event`` POJO by the
    write option ``pojoClasses`` (the record derived from column ``value`` is named
    ``value``): Flink restores each as a ``FixtureJob$Event``."""
    truth = fixture_truth("mp256")
    events = {int(k): {**w["last"], "amount": w["last"]["amount"] * 2, "user": None}
              if int(k) % 5 == 0 else {**w["last"], "amount": w["last"]["amount"] * 2}
              for k, w in truth["stateful"].items()}
    rows = spark.createDataFrame(
        sorted(events.items()),
        "key long, value struct<id: long, key: long, user: string, amount: double, ts: long>")
    output = tmp_path / "with-pojos"
    with pytest.raises(TypeMismatchError, match="declare the POJO it is"):
        write_state(rows, str(MP256), "stateful", "previous", output=str(output), kind="value")
    write_state(rows, str(MP256), "stateful", "previous", output=str(output), kind="value",
                pojos={"value": PojoClass("FixtureJob$Event")})
    spec = fixture_spec(256)
    spec["operators"][0]["keyed_states"].append(
        {"name": "previous", "kind": "value", "value": {"pojo": "FixtureJob$Event"}})
    restored = restore(output, spec, java_sources=[FIXTURE_JOB])
    check_fixture(restored, truth, parallelism=2, added={"previous"})
    assert values(restored, "stateful", "previous") == events


def test_keys_erased_by_a_dataframe(spark, tmp_path):
    truth = fixture_truth("mp256")
    erased = sorted(int(k) for k in truth["stateful"])[2:5]
    keys = spark.createDataFrame([(k,) for k in [*erased, erased[0], 10**12]], "key long")
    output = tmp_path / "erased"
    done = erase_keys(str(MP256), str(output), "stateful", keys)
    assert done.missing == (10**12,)
    rows = restore(output, fixture_spec(256), java_sources=[FIXTURE_JOB])
    check_fixture(rows, truth, parallelism=2, erased=erased)


def test_df_write_with_an_output_writes_a_savepoint(spark, tmp_path):
    """``df.write.format("flinkstate")`` with ``output``: the commit, on Spark's side, publishes
    the savepoint; here from a Snappy-compressed base, kept compressed, and with the option
    ``compression`` ``none`` uncompressed."""
    base = FlinkCheckpoint.open(str(SNAPPY))
    output = tmp_path / "written"
    rows = _read(spark, SNAPPY, "stateful", "max_id").coalesce(1)
    (rows.select("key", (F.col("value") + 1).alias("value")).write.format("flinkstate")
     .mode("append").option("path", str(SNAPPY)).option("output", str(output))
     .option("operator", "stateful").option("state", "max_id").save())
    assert compression_flags(output) == {True}
    (rows.write.format("flinkstate").mode("append").option("path", str(SNAPPY))
     .option("output", str(tmp_path / "plain")).option("compression", "none")
     .option("operator", "stateful").option("state", "max_id").save())
    assert compression_flags(tmp_path / "plain") == {False}
    written = FlinkCheckpoint.open(str(output))
    assert written.checkpoint_id == base.checkpoint_id
    before = {r.key: r.value for r in rows.collect()}
    after = {r.key: r.value for r in _read(spark, output, "stateful", "max_id").collect()}
    assert after == {k: v + 1 for k, v in before.items()}
    for state in ("total", "events", "per_user"):
        assert (sorted(_read(spark, output, "stateful", state).collect())
                == sorted(_read(spark, SNAPPY, "stateful", state).collect())), state


@pytest.mark.parametrize("case, error, words", [
    ("in-place", InvalidArgumentError, ["Flink snapshot", "output"]),
    ("operator-state", IncompatibleCheckpointError, ["'seen'", "operator state"]),
    ("timer-state", IncompatibleCheckpointError, ["timer state"]),
    ("wrong-value-type", TypeMismatchError, ["column value has type string", "double"]),
    ("wrong-key-type", TypeMismatchError, ["column key has type string", "long"]),
    ("output-exists", CheckpointExistsError, ["already exists"]),
    ("unknown-state-without-kind", InvalidArgumentError, ["'nope'", "give kind"]),
    ("kryo-value-not-bytes", TypeMismatchError, ["column value has type string", "binary"]),
])
def test_refusals_write_nothing(spark, tmp_path, case, error, words):
    output = tmp_path / "out"
    rows = spark.createDataFrame([(1, 2.5)], "key long, value double")
    options = {"output": str(output)}
    operator, state = "stateful", "total"
    if case == "in-place":
        options = {}
    elif case == "operator-state":
        state = "seen"
    elif case == "timer-state":
        state, options = "_timer_state/event_user-timers", {**options, "kind": "value"}
    elif case == "wrong-value-type":
        rows = spark.createDataFrame([(1, "x")], "key long, value string")
    elif case == "wrong-key-type":
        rows = spark.createDataFrame([("a", 2.5)], "key string, value double")
    elif case == "output-exists":
        output.mkdir()
    elif case == "unknown-state-without-kind":
        state = "nope"
    elif case == "kryo-value-not-bytes":  # its values are written back as the bytes Kryo wrote
        operator, state = "opaque", "last_uuid"
        rows = spark.createDataFrame([(1, "x")], "key long, value string")
    with pytest.raises(error) as raised:
        write_state(rows, str(MP256), operator, state, **options)
    assert all(word in str(raised.value) for word in words), str(raised.value)
    assert [p.name for p in tmp_path.iterdir()] == (["out"] if case == "output-exists" else [])


def test_dropping_a_state_that_does_not_exist_writes_nothing(spark, tmp_path):
    """The replacement staged before the refused drop is removed with the rest."""
    refused = pytest.raises(StateNotFoundError, match="operator 'stateful' has no state 'nope';"
                                                      " available: .*'total'")
    with refused, rewrite(spark, str(MP256), output=str(tmp_path / "out")) as staged:
        staged.replace(_read(spark, MP256, "stateful", "total"), "stateful", "total")
        staged.drop("stateful", "nope")
    assert list(tmp_path.iterdir()) == []

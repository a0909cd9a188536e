"""A rewritten SQL savepoint restores in the same SQL job, and the job carries on as if nothing
but the rewrite happened.

The ``sql`` fixture's savepoint holds SqlJob's state after events 0 .. 359. Rescaled to a new
max parallelism, or with some keys erased, it is restored by the same SQL job
(tests/sql_restore.py: SqlJob's very queries, in a real Flink 2.3, with
``pipeline.max-parallelism`` set to the savepoint's) fed events 360 .. 719. What the job emits
must be what a model of all events says: aggregates that go on counting (a restart shows as an
``+I`` where an ``+U`` belongs, and as counts too low), join partners from the savepoint, one
dedup row per user (the first, from the savepoint), windows of the savepoint's minutes. Erased
keys start fresh: the model leaves their savepoint events out, per query.
"""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F
from sql_fixture import AGGREGATE, DEDUP, JOIN, SQL, WINDOW
from sql_restore import WINDOW_MILLIS, event, expected_output, run_sql_job, shaped

from statesource.flink.operations.edit import erase_keys
from statesource.flink.operations.rescale import rescale_max_parallelism
from statesource.flink.reader import FlinkCheckpoint
from statesource.spark import rewrite

FIRST, LAST = 360, 720
"""The fixture's state holds events 0 .. FIRST - 1; the restored job reads FIRST .. LAST - 1."""
ERASED = {"agg_sink": [("u0", 0), ("u3", None), ("user-15-long", 2)],
          "join_sink": [("item-1",), ("item-12",)],
          "dedup_sink": [("u1",), ("user-20-long",)],
          "window_sink": [("u8",)]}
"""Keys erased per query (their sink table), as the key rows' field values."""
OPERATORS = {"agg_sink": AGGREGATE, "join_sink": JOIN, "dedup_sink": DEDUP, "window_sink": WINDOW}


def _assert_same(output: dict, model: dict) -> None:
    got = shaped(output)
    for table, expected in model.items():
        assert got[table] == expected, table


@pytest.mark.realflink
def test_a_rescaled_sql_savepoint_carries_on_in_the_same_sql_job(tmp_path):
    """The heap backend's native savepoint, re-keyed to max parallelism 256 (and converted
    to the canonical layout), restores into RocksDB."""
    rescale_max_parallelism(str(SQL / "native"), str(tmp_path / "out"), 256)
    assert {op.max_parallelism for op in FlinkCheckpoint.open(
        str(tmp_path / "out")).snapshot.operators} == {256}
    output = run_sql_job(tmp_path / "out", 256, FIRST, LAST, backend="rocksdb")
    _assert_same(output, expected_output(FIRST, LAST))


@pytest.mark.realflink
def test_erased_sql_keys_start_fresh_in_the_same_sql_job(tmp_path):
    source = SQL / "canonical"
    for table, keys in ERASED.items():
        absent = ("nobody", 1) if table == "agg_sink" else ("nobody",)
        done = erase_keys(str(source), str(tmp_path / table), OPERATORS[table], [*keys, absent])
        assert done.missing == (absent,)
        assert done.total > 0
        source = tmp_path / table
    model, unerased = expected_output(FIRST, LAST, ERASED), expected_output(FIRST, LAST)
    for table in ERASED:  # the erasure shows in every query
        assert model[table] != unerased[table], table
    _assert_same(run_sql_job(source, 128, FIRST, LAST), model)


@pytest.mark.realflink
def test_sql_states_rewritten_from_spark_carry_on_in_the_same_sql_job(spark, tmp_path):
    """Four SQL states replaced from DataFrames of their own schema (value rows, and rows
    as a map's user keys) in one rewrite: the job carries on from the new values."""
    def read(operator, state):
        return (spark.read.format("flinkstate").option("operator", operator)
                .option("state", state).load(str(SQL / "canonical")))

    output = tmp_path / "rewritten"
    with rewrite(spark, str(SQL / "canonical"), output=str(output)) as staged:
        counts = read(AGGREGATE, "accState")
        staged.replace(counts.withColumn("value", F.col("value").withField(
            "f0", F.col("value.f0") + 100)), AGGREGATE, "accState")
        left = read(JOIN, "left-records")
        staged.replace(left.withColumn("user_key", F.col("user_key").withField(
            "f2", F.concat(F.lit("L-"), F.col("user_key.f2")))), JOIN, "left-records")
        waiting = read(DEDUP, "waiting-to-emit-on-timer")
        staged.replace(waiting.withColumn("value", F.col("value").withField(
            "f2", F.concat(F.col("value.f2"), F.lit("-x")))), DEDUP, "waiting-to-emit-on-timer")
        windows = read(WINDOW, "window-aggs")
        staged.replace(windows.withColumn("value", F.col("value").withField(
            "f0", F.col("value.f0") + 1000)), WINDOW, "window-aggs")
    model = expected_output(FIRST, LAST)
    old = [event(i) for i in range(FIRST)]
    old_groups = {json.dumps([e["usr"], e["grp"]]) for e in old}
    for key, changes in model["agg_sink"].items():
        for _, row in changes:
            row[2] += 100 if key in old_groups else 0
    for _, row in model["join_sink"]:
        row[2] = "L-" + row[2] if row[0] < FIRST else row[2]
    for _, row in model["dedup_sink"]:
        row[2] += "-x"
    old_windows = {(e["usr"], e["ts_millis"] // WINDOW_MILLIS * WINDOW_MILLIS) for e in old}
    for _, row in model["window_sink"]:
        row[3] += 1000 if (row[0], row[1][0]) in old_windows else 0
    model = {table: sorted(rows, key=json.dumps) if table != "agg_sink" else rows
             for table, rows in model.items()}
    _assert_same(run_sql_job(output, 128, FIRST, LAST), model)

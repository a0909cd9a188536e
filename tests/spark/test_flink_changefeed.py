"""``flinkstate`` with ``readChangeFeed`` over retained Flink checkpoints: the DataFrame and
SQL equal the model's difference (tests/flink_changes.py) and the Python feed."""

from __future__ import annotations

import pytest
from pyspark.sql.datasource import EqualTo

from flink_changes import (
    ALL_STATES,
    IDS,
    PHASES,
    ROOT,
    change_row,
    model_changes,
    operator_of,
)
from statesource.flink.operations.changefeed import FlinkChangeFeed
from statesource.keygroups import assign_to_key_group
from statesource.spark.source import FlinkStateDataSource
from statesource.types import STRING


def _feed(spark, operator="tracker", **options):
    return spark.read.format("flinkstate").option("readChangeFeed", "true").options(
        operator=operator, **options).load(str(ROOT))


@pytest.mark.parametrize("state", ALL_STATES)
def test_the_dataframe_is_the_model_difference(spark, state):
    df = _feed(spark, operator=operator_of(state), state=state,
               changeStartCheckpointId=str(IDS[0]), changeEndCheckpointId=str(IDS[2]))
    rows = {change_row(r, state) for r in df.collect()}
    assert rows == model_changes(state, PHASES[0], PHASES[2])
    if state == "last_ttl":
        assert {"old_ttl_timestamp", "new_ttl_timestamp"} <= set(df.columns)


def test_sql_with_the_default_end(spark):
    spark.sql(f"""CREATE OR REPLACE TEMPORARY VIEW tag_changes USING flinkstate OPTIONS (
        path '{ROOT}', operator 'tracker', state 'per_tag', readChangeFeed 'true',
        changeStartCheckpointId '{IDS[1]}')""")
    counts = {r["change_type"]: r["n"] for r in spark.sql(
        "SELECT change_type, count(*) AS n FROM tag_changes GROUP BY change_type").collect()}
    expected = model_changes("per_tag", PHASES[1], PHASES[2])
    assert counts == {t: n for t in ("insert", "update", "delete")
                      if (n := sum(1 for row in expected if row[1] == t))}


def test_partitions_cover_the_key_groups_not_shared():
    source = FlinkStateDataSource({"path": str(ROOT), "operator": "tracker", "state": "count",
                                   "readChangeFeed": "true",
                                   "changeStartCheckpointId": str(IDS[0])})
    planned = [kg for part in source.reader(source.schema()).partitions() for kg in part.value]
    feed = FlinkChangeFeed.open(str(ROOT), IDS[0], operator="tracker", state="count")
    assert planned == feed.changed_key_groups() == list(range(128))


def test_unknown_checkpoint_id_is_an_error_listing_the_ids():
    with pytest.raises(Exception, match=r"no Flink checkpoint 42 .*\[1, 2, 3\]"):
        FlinkStateDataSource({"path": str(ROOT), "operator": "tracker", "state": "count",
                              "readChangeFeed": "true", "changeStartCheckpointId": "42"}).schema()


def test_key_pushdown_plans_and_reads_only_that_key_group():
    source = FlinkStateDataSource({"path": str(ROOT), "operator": "tracker", "state": "tags",
                                   "readChangeFeed": "true", "filterPushdown": "true",
                                   "changeStartCheckpointId": str(IDS[0]),
                                   "changeEndCheckpointId": str(IDS[2])})
    reader = source.reader(source.schema())
    assert list(reader.pushFilters([EqualTo(("key",), "k15")])) == []
    (partition,) = reader.partitions()
    assert partition.value == (assign_to_key_group("k15", STRING, 128),)
    rows = {change_row(r, "tags") for batch in reader.read(partition) for r in batch.to_pylist()}
    expected = {row for row in model_changes("tags", PHASES[0], PHASES[2]) if row[2] == "k15"}
    assert expected and rows == expected


@pytest.mark.parametrize("condition", ["key IN ('k00', 'k15', 'k47', 'nobody')",
                                       "key_group < 40"])
def test_pushdown_through_spark_equals_the_model(spark, condition):
    df = _feed(spark, state="per_tag", filterPushdown="true",
               changeStartCheckpointId=str(IDS[0]), changeEndCheckpointId=str(IDS[2]))
    pushed = {change_row(r, "per_tag") for r in df.where(condition).collect()}
    everything = model_changes("per_tag", PHASES[0], PHASES[2])
    expected = ({row for row in everything if row[0] < 40} if condition.startswith("key_group")
                else {row for row in everything if row[2] in ("k00", "k15", "k47")})
    assert expected and pushed == expected

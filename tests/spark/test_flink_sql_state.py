"""Flink SQL state through Spark: the aggregation, join, deduplication and window states.

The ``sql`` fixture (SqlJob.java by a real Flink 2.3; tests/flink/test_sql_state.py) read with
``spark.read.format("flinkstate")``, the operator named as Flink named it
(``GroupAggregate[5]``): every row equals the job's model, on both read paths (the JVM reader
leaves SQL rows to the Python source, which must then read them all). The metadata view names
the operators.
"""

from __future__ import annotations

import pytest
from sql_fixture import AGGREGATE, DEDUP, JOIN, SQL, STATES, WINDOW, expected, key_of, shaped

from statesource.flink.reader import FlinkCheckpoint
from statesource.keygroups import assign_to_key_group
from statesource.schema import hashable_record

pytestmark = pytest.mark.spark

READ = [(AGGREGATE, "accState"), (AGGREGATE, "distinctAcc_0"), (JOIN, "left-records"),
        (JOIN, "right-records"), (DEDUP, "waiting-to-emit-on-timer"), (WINDOW, "window-aggs")]


def _triples(state: tuple[str, str], rows: list[dict]) -> list[tuple]:
    if STATES[state] != "map":
        return [(row["key"], row["namespace"], row["value"]) for row in rows]
    grouped: dict = {}
    for row in rows:
        entry = grouped.setdefault(key_of(row["key"], row["namespace"]),
                                   (row["key"], row["namespace"], {}))
        entry[2][hashable_record(row["user_key"])] = row["user_value"]
    return list(grouped.values())


@pytest.mark.parametrize("kind", ["canonical", "rocksdb"])
def test_sql_states_read_exactly(source_format, spark, kind):
    for state in READ:
        operator, name = state
        df = (spark.read.format(source_format).option("operator", operator)
              .option("state", name).load(str(SQL / kind)))
        rows = df.toArrow().to_pylist()  # instants as such (collect() makes them local)
        assert shaped(STATES[state], _triples(state, rows)) == expected(operator, name), state


def test_every_row_sits_in_its_keys_key_group(spark):
    """The ``key_group`` of each row is the one Flink's hash of the key row's bytes gives."""
    df = (spark.read.format("flinkstate").option("operator", AGGREGATE)
          .option("state", "accState").load(str(SQL / "rocksdb")))
    key_type = FlinkCheckpoint.open(str(SQL / "rocksdb")).operator(AGGREGATE).key_type
    rows = df.collect()
    assert len(rows) == len(expected(AGGREGATE, "accState"))
    for row in rows:
        assert assign_to_key_group(tuple(row["key"]), key_type, 128) == row["key_group"]


def test_the_metadata_view_names_sql_operators(spark):
    rows = spark.read.format("flinkstate-metadata").load(str(SQL / "native")).collect()
    named = {(row["operator_uid"], row["operator_name"]) for row in rows
             if row["kind"] == "value"}
    assert {("5_group-aggregate", AGGREGATE), ("16_deduplicate", DEDUP)} <= named
    key_types = {row["operator_name"]: row["key_type"] for row in rows if row["key_type"]}
    assert key_types[AGGREGATE] == "sqlrow<STRING, INT>"

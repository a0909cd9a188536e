"""Flink SQL state through Spark: the aggregation, join, deduplication and window states.

The ``sql`` fixture (SqlJob.java by a real Flink 2.3; tests/flink/test_sql_state.py) read with
``spark.read.format("flinkstate")``, the operator named as Flink named it
(``GroupAggregate[5]``): every row equals the job's model, on both read paths. The JVM reader
decodes the states whose row types it takes (FlinkBinaryRowDecoder.java) and leaves the others
(a wide decimal, a timestamp past microseconds, a RAW, a TIME) to the Python source. The
metadata view names the operators.
"""

from __future__ import annotations

import shutil
import struct

import pytest
from conftest import READ_PATHS
from sql_fixture import AGGREGATE, DEDUP, JOIN, SQL, STATES, WINDOW, expected, key_of, shaped

from statesource.flink.layouts.canonical import CANONICAL
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


ON_JVM = {(DEDUP, "waiting-to-emit-on-timer"), (WINDOW, "window-aggs")}
"""The states of READ whose binary rows the JVM reader decodes itself (both kinds read here
are canonical savepoints, of the heap and of the RocksDB backend)."""


@pytest.mark.parametrize("kind", ["canonical", "rocksdb"])
def test_sql_states_read_exactly(source_format, spark, kind):
    for state in READ:
        operator, name = state
        df = (spark.read.format(source_format).option("operator", operator)
              .option("state", name).load(str(SQL / kind)))
        executed = df._jdf.queryExecution().executedPlan().toString()
        on_jvm = source_format == READ_PATHS["jvm"] and state in ON_JVM
        assert ("Flink key groups" in executed) == on_jvm, (state, executed)
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


def test_a_row_pointing_outside_itself_fails_alike_on_both_read_paths(source_format, spark,
                                                                      tmp_path):
    """A dedup row whose text field points past the row's end: each reader names the fault
    (the JVM reader's binary row decoder as the Python one), and neither reads other bytes."""
    copy = tmp_path / "damaged"
    shutil.copytree(SQL / "canonical", copy)
    snapshot = FlinkCheckpoint.open(str(copy)).snapshot
    op = snapshot.operator(DEDUP)
    piece = next(iter(snapshot.key_group_bytes(op)))
    header = snapshot.handle_header(op, piece.handle)
    data = snapshot.key_group_data(piece, snapshot.piece_bytes(piece))
    value = next(pairs[0][1] for state_id, pairs in CANONICAL.pairs(data, header, 1)
                 if header.states[state_id].name == "waiting-to-emit-on-timer")
    assert value[20:24].hex() == "75380000"  # the key field usr, "u8", inline in its slot
    damaged = value[:20] + struct.pack("<q", 1000 << 32 | 2) + value[28:]
    path = copy / piece.handle.stream.path
    raw = path.read_bytes()
    assert raw.count(value) == 1
    path.write_bytes(raw.replace(value, damaged))
    df = (spark.read.format(source_format).option("operator", DEDUP)
          .option("state", "waiting-to-emit-on-timer").load(str(copy)))
    executed = df._jdf.queryExecution().executedPlan().toString()
    assert ("Flink key groups" in executed) == (source_format == READ_PATHS["jvm"])
    with pytest.raises(Exception, match="points to bytes 1000 .. 1002 outside the variable part"):
        df.collect()

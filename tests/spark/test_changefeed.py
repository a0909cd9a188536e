"""``flinkstate`` with ``readChangeFeed``: the DataFrame equals the Python change feed."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from pyspark.sql.datasource import EqualTo
from pyspark.sql.functions import col

from sample_state import KEYS, descriptors, populate
from statesource import CheckpointWriter
from statesource.format.changefeed import ChangeFeed
from statesource.keygroups import assign_to_key_group, key_group_range_for_operator
from statesource.spark.source import FlinkStateDataSource
from statesource.state.clock import ManualClock
from statesource.state.keyed_backend import KeyedStateBackend
from statesource.types import STRING

MAX_PARALLELISM = 128
STATES = [d.name for d in descriptors()]


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """Checkpoints 1 (full), 2 and 3 (incremental) of two subtasks, a few keys changed each."""
    root = tmp_path_factory.mktemp("changefeed")
    clock = ManualClock(1_700_000_000_000)
    subtasks = []
    for index in range(2):
        owned = key_group_range_for_operator(MAX_PARALLELISM, 2, index)
        backend = KeyedStateBackend("string", MAX_PARALLELISM, owned, clock=clock)
        populate(backend, [k for k in KEYS if backend._key_group_of(k) in owned])
        subtasks.append(backend)
    with CheckpointWriter(str(root), incremental=True) as writer:
        writer.write(1, {"activity": subtasks})
        for checkpoint_id, keys in ((2, KEYS[:5] + ["fresh-1"]), (3, KEYS[3:9])):
            clock.advance(1000)
            for backend in subtasks:
                owned = [k for k in keys if backend._key_group_of(k) in backend.key_group_range]
                populate(backend, owned)
                states = {d.name: backend.get_state(d) for d in descriptors()}
                for key in owned[:1]:
                    backend.set_current_key(key)
                    states["value"].clear()
                    states["list"].update([])
            writer.write(checkpoint_id, {"activity": subtasks})
    return str(root)


def feed(spark, path, **options):
    return spark.read.format("flinkstate").option("readChangeFeed", "true").options(
        **options).load(path)


def canonical(rows) -> list[str]:
    """Rows as sorted JSON; timestamps as epoch milliseconds (Spark hands out local naive
    datetimes, Arrow UTC-aware ones: ``timestamp()`` reads both right)."""
    return sorted(json.dumps(r, sort_keys=True, default=_millis) for r in rows)


def _millis(value) -> int:
    if isinstance(value, datetime):
        return round(value.timestamp() * 1000)
    raise TypeError(value)


def plain(row) -> dict:
    def convert(value):
        if hasattr(value, "asDict"):
            return {k: convert(v) for k, v in value.asDict().items()}
        if isinstance(value, dict):
            return {k: convert(v) for k, v in value.items()}
        if isinstance(value, list):
            return [convert(v) for v in value]
        return value
    return convert(row)


@pytest.mark.parametrize("state", STATES)
def test_the_change_feed_dataframe_equals_the_python_feed(spark, chain, state):
    rows = [plain(r) for r in feed(spark, chain, state=state, changeStartCheckpointId="1",
                                   changeEndCheckpointId="3").collect()]
    expected = [row for table in ChangeFeed.open(chain, 1, 3, state=state).read()
                for row in table.to_pylist()]
    assert expected, "the chain must change every state"
    assert canonical(rows) == canonical(expected)


def test_sql_and_the_default_end(spark, chain):
    spark.sql(f"""CREATE OR REPLACE TEMPORARY VIEW value_changes USING flinkstate OPTIONS (
        path '{chain}', state 'value', readChangeFeed 'true', changeStartCheckpointId '2')""")
    counts = {r["change_type"]: r["n"] for r in spark.sql(
        "SELECT change_type, count(*) AS n FROM value_changes GROUP BY change_type").collect()}
    python = ChangeFeed.open(chain, 2, 3, state="value").counts()
    assert counts == {k: v for k, v in (("insert", python.inserts), ("update", python.updates),
                                        ("delete", python.deletes)) if v}


def test_only_changed_key_groups_are_planned(chain):
    source = FlinkStateDataSource({"path": chain, "state": "map", "readChangeFeed": "true",
                                   "changeStartCheckpointId": "2"})
    planned = [kg for part in source.reader(source.schema()).partitions() for kg in part.value]
    assert planned == ChangeFeed.open(chain, 2, 3, state="map").changed_key_groups()
    assert 0 < len(planned) < MAX_PARALLELISM


@pytest.mark.parametrize(("options", "message"), [
    ({"readChangeFeed": "true"}, "changeStartCheckpointId is required"),
    ({"readChangeFeed": "true", "changeStartCheckpointId": "1", "checkpointId": "2"},
     "checkpointId does not apply with readChangeFeed"),
    ({"changeStartCheckpointId": "1"}, "need readChangeFeed"),
    ({"readChangeFeed": "true", "changeStartCheckpointId": "3", "changeEndCheckpointId": "1"},
     "runs forward"),
    ({"readChangeFeed": "maybe"}, "readChangeFeed must be true or false"),
])
def test_change_feed_option_errors(chain, options, message):
    with pytest.raises(Exception, match=message):
        FlinkStateDataSource({"path": chain, "state": "value", **options}).schema()


def test_key_pushdown_into_the_change_feed(spark, chain):
    wanted = KEYS[3]
    df = feed(spark, chain, state="list", changeStartCheckpointId="1",
              changeEndCheckpointId="3", filterPushdown="true").where(col("key") == wanted)
    expected = [row for table in ChangeFeed.open(chain, 1, 3, state="list").read()
                for row in table.to_pylist() if row["key"] == wanted]
    assert expected
    assert canonical(plain(r) for r in df.collect()) == canonical(expected)
    source = FlinkStateDataSource({"path": chain, "state": "list", "readChangeFeed": "true",
                                   "filterPushdown": "true", "changeStartCheckpointId": "1"})
    reader = source.reader(source.schema())
    assert list(reader.pushFilters([EqualTo(("key",), wanted)])) == []
    assert [p.value for p in reader.partitions()] == [
        (assign_to_key_group(wanted, STRING, MAX_PARALLELISM),)]

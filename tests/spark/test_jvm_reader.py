"""The JVM reader behind format("flinkstate"): parity with the Python source on typed state,
pruning, counts, errors on damaged files, Arrow memory, and what it hands to Python.

The connector's own suite (test_flinkstate.py) runs on both paths too; this module covers
what only the JVM path does, and types that suite does not hold.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from decimal import Decimal
from pathlib import Path

import pytest
from conftest import jvm_reader_loaded

from statesource import Checkpoint, CheckpointWriter
from statesource.checkpointing.writer import SubtaskBackends
from statesource.format import ipc, retain
from statesource.model import TtlConfig
from statesource.spark import write_state
from statesource.spark.jvm.plan import FlinkStatePythonSource, jvm_plan
from statesource.spark.options import parse_read_options
from statesource.spark.read.keyed import open_target
from statesource.state.clock import ManualClock
from statesource.state.descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)
from statesource.state.keyed_backend import KeyedStateBackend
from statesource.state.operator_backend import OperatorStateBackend

V1_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "v1-checkpoints"
UTC = dt.timezone.utc
TTL = TtlConfig(dt.timedelta(seconds=60))
TYPED = {
    "stamp": {"type": "long", "logicalType": "timestamp-millis"},
    "local": {"type": "long", "logicalType": "local-timestamp-millis"},
    "money": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
    "day": {"type": "int", "logicalType": "date"},
    "digest": {"type": "fixed", "name": "Digest", "size": 4},  # fixed_size_binary: Python's
    "nested": {"type": "record", "name": "N", "fields": [
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "hits", "type": {"type": "map", "values": "long"}},
        {"name": "note", "type": ["null", "string"]}]},
}


def typed_value(name: str, i: int):
    return {
        "stamp": dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=1001 * i),
        "local": dt.datetime(1969, 12, 31, 23, 59) + dt.timedelta(milliseconds=7 * i),
        "money": Decimal(i * 37 - 500) / 100,
        "day": dt.date(1, 1, 1) + dt.timedelta(days=i * 401),
        "digest": i.to_bytes(4, "big"),
        "nested": {"tags": [f"t{j}" for j in range(i % 3)], "hits": {"h": i},
                   "note": None if i % 2 else "\U0001f600"},
    }[name]


@pytest.fixture(scope="module")
def typed_root(tmp_path_factory):
    """One operator keyed by row<string,int>, with typed values, a TTL list and a TTL map."""
    root = tmp_path_factory.mktemp("typed")
    clock = ManualClock(1_700_000_000_000)
    backend = KeyedStateBackend("row<string,int>", 64, clock=clock)
    states = {name: backend.get_state(ValueStateDescriptor(name, schema))
              for name, schema in TYPED.items()}
    ttl_list = backend.get_state(ListStateDescriptor("ttl_list", "double", ttl=TTL))
    ttl_map = backend.get_state(MapStateDescriptor("ttl_map", "int", "boolean", ttl=TTL))
    for i in range(700):
        backend.set_current_key((f"k{i % 350}", i % 7))
        for name, state in states.items():
            state.update(typed_value(name, i))
        ttl_list.add(i / 3 if i % 5 else float("nan"))
        ttl_map.put(i, bool(i % 2))
        clock.advance(13)
    CheckpointWriter(str(root)).write(1, {"typed": [backend]})
    return str(root)


@pytest.fixture
def jvm(spark):
    spark.dataSource.register(FlinkStatePythonSource)
    jvm_reader_loaded(spark)
    return spark


def scan_of(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def both(spark, path, **options):
    return [spark.read.format(name).options(**options).load(path)
            for name in ("flinkstate", "flinkstate-python")]


def rows_of(df) -> list[str]:
    return sorted(json.dumps(r.asDict(recursive=True), default=repr, sort_keys=True)
                  for r in df.collect())


@pytest.mark.parametrize("state", [*TYPED, "ttl_list", "ttl_map"])
def test_every_column_equals_the_python_source(jvm, typed_root, state):
    on_jvm, on_python = both(jvm, typed_root, state=state)
    assert on_jvm.schema == on_python.schema
    assert ("JVM columnar" in scan_of(on_jvm)) == (state != "digest")
    assert rows_of(on_jvm) == rows_of(on_python)
    assert on_jvm.count() == Checkpoint.open(typed_root).operator().keyed_state(state).rows


def test_nested_collections_and_remote_paths_go_to_python(jvm, typed_root):
    nested = jvm.read.format("flinkstate").options(state="ttl_list",
                                                   flattenCollections="false").load(typed_root)
    assert "JVM columnar" not in scan_of(nested) and "Python" in scan_of(nested)
    assert nested.count() == 350


def test_version_1_checkpoints_read_alike(jvm, tmp_path):
    root = tmp_path / "v1"
    shutil.copytree(V1_FIXTURE, root)
    for state in ("value", "list", "ttl_map"):
        on_jvm, on_python = both(jvm, str(root), state=state)
        assert "JVM columnar" in scan_of(on_jvm)
        assert rows_of(on_jvm) == rows_of(on_python) and on_jvm.count() > 0


def test_key_pushdown_prunes_to_one_partition(jvm, typed_root):
    df = jvm.read.format("flinkstate").option("state", "stamp").load(typed_root)
    key_group = df.where("key.f0 = 'k7'").select("key_group").first()[0]
    pruned = df.where(f"key_group = {key_group}")
    assert pruned.rdd.getNumPartitions() == 1
    assert "pruned by [EqualTo(key_group," in scan_of(pruned)
    assert {r.key_group for r in pruned.collect()} == {key_group}
    # composite keys are not pruned by key (Spark's struct equality is not Flink's), only filtered
    by_key = df.where("key = named_struct('row_kind', '+I', 'f0', 'k7', 'f1', 0)")
    assert "pruned by []" in scan_of(by_key)


def test_string_key_pushdown_and_pruning_off(jvm, tmp_path):
    backend = KeyedStateBackend("string", 128)
    counts = backend.get_state(ValueStateDescriptor("counts", "long"))
    for i in range(500):
        backend.set_current_key(f"user-{i}")
        counts.update(i)
    CheckpointWriter(str(tmp_path)).write(1, {"op": [backend]})
    df = jvm.read.format("flinkstate").load(str(tmp_path))
    lookup = df.where("key IN ('user-7', 'user-300', 'nobody')")
    assert lookup.rdd.getNumPartitions() == 1 and "In(key," in scan_of(lookup)
    assert sorted(r.value for r in lookup.collect()) == [7, 300]
    off = jvm.read.format("flinkstate").option("filterPushdown", "false").load(str(tmp_path))
    assert "pruned by []" in scan_of(off.where("key = 'user-7'"))
    assert [r.value for r in off.where("key = 'user-7'").collect()] == [7]


def data_file_of(root: str, state: str) -> Path:
    checkpoint = Checkpoint.open(root)
    (data_file,) = checkpoint.operator().keyed_state(state).files
    return Path(checkpoint.data_file(data_file.path).path)


def damaged_copy(tmp_path, root: str, damage) -> str:
    copy = tmp_path / "damaged"
    shutil.copytree(root, copy)
    damage(data_file_of(str(copy), "stamp"))
    return str(copy)


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-100])


@pytest.mark.parametrize(("damage", "message"), [
    (flip_a_byte, "checksum mismatch in bytes"),
    (truncate, "bytes, the metadata says"),
])
def test_damaged_files_fail_alike_and_release_memory(jvm, typed_root, tmp_path, damage,
                                                     message):
    damaged = damaged_copy(tmp_path, typed_root, damage)
    for df in both(jvm, damaged, state="stamp"):
        with pytest.raises(Exception) as raised:
            df.select("value").collect()
        assert message in str(raised.value) and data_file_of(damaged, "stamp").name in str(
            raised.value)
    assert shim_memory(jvm) == 0


@pytest.fixture(scope="module")
def batched_root(tmp_path_factory):
    """Long keys and values, each key group's rows in several record batches."""
    root = tmp_path_factory.mktemp("batched")
    backend = KeyedStateBackend("long", 16)
    state = backend.get_state(ValueStateDescriptor("counts", "long"))
    for key in range(300):
        backend.set_current_key(key)
        state.update(key)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ipc, "MAX_ROWS_PER_BATCH", 8)
        CheckpointWriter(str(root)).write(1, {"op": [backend]})
    return str(root)


def _range_of_the_next_key_group(state: dict) -> None:
    """Key group 1's location names key group 2's bytes (its CRC holds); 2 is not listed."""
    ranges = state["files"][0]["keyGroups"]
    assert ranges["keyGroup"][1:3] == [1, 2]
    for name, column in ranges.items():
        if name != "keyGroup":
            column[1] = column[2]
        del column[2]


def _fewer_batches(state: dict) -> None:
    """Key group 0's first batches only, its bytes still all of them (the CRC holds)."""
    ranges = state["files"][0]["keyGroups"]
    assert ranges["batchCount"][0] == 3
    ranges["batchCount"][0] = 2
    ranges["rows"][0] = ranges["entries"][0] = 16


def _a_row_more(state: dict) -> None:
    ranges = state["files"][0]["keyGroups"]
    ranges["rows"][0] += 1
    ranges["entries"][0] += 1


def _doubles(state: dict) -> None:
    """Values declared as doubles: the same layout, other values, unless the file's own
    schema is checked."""
    state["valueSchemas"]["value"] = "double"


@pytest.mark.parametrize(("edit", "message"), [
    (_range_of_the_next_key_group, "the bytes recorded for key group 1 hold rows of key group"),
    (_fewer_batches, "metadata says 16 rows in"),
    (_a_row_more, "rows in 1128 bytes of 3 batches, the metadata says 19 rows"),
    (_doubles, "holds other columns than the metadata's types make"),
])
def test_metadata_misdescribing_the_bytes_fails_alike(jvm, batched_root, tmp_path, edit,
                                                       message):
    """The JVM reader refuses what the Python reader refuses, never reading other rows."""
    copy = tmp_path / "edited"
    shutil.copytree(batched_root, copy)
    metadata = copy / "chk-1" / "_metadata.json"
    document = json.loads(metadata.read_text())
    edit(document["operators"][0]["keyedStates"][0])
    metadata.write_text(json.dumps(document))
    for name in ("flinkstate", "flinkstate-python"):
        with pytest.raises(Exception, match=message):
            jvm.read.format(name).load(str(copy)).select("key", "value").collect()


def test_counts_per_key_group_come_from_the_metadata(jvm, typed_root, tmp_path):
    """count(*), and queries of key_group / operator_index alone, read no data: every row of a
    key group's byte range is in that key group, and the metadata counts them.

    A query of any other column reads it (Spark evaluates every filter), and so meets the damage.
    """
    damaged = damaged_copy(tmp_path, typed_root, flip_a_byte)
    df = jvm.read.format("flinkstate").option("state", "stamp").load(damaged)
    assert df.count() == Checkpoint.open(typed_root).operator().keyed_state("stamp").rows == 350
    per_group = "SELECT key_group, operator_index, count(*) AS n FROM {} GROUP BY 1, 2"
    df.createOrReplaceTempView("damaged_stamps")
    jvm.read.format("flinkstate-python").option("state", "stamp").load(
        typed_root).createOrReplaceTempView("python_stamps")
    assert (rows_of(jvm.sql(per_group.format("damaged_stamps")))
            == rows_of(jvm.sql(per_group.format("python_stamps"))))
    assert df.where("operator_index = 0").count() == 350
    with pytest.raises(Exception, match="checksum mismatch"):
        df.where("value IS NOT NULL").count()


def test_early_limit_releases_arrow_memory(jvm, typed_root):
    df = jvm.read.format("flinkstate").option("state", "nested").load(typed_root)
    assert len(df.limit(3).collect()) == 3
    assert len(df.where("value.note IS NULL").limit(1).collect()) == 1
    assert shim_memory(jvm) == 0


def test_paths_outside_the_root_are_refused_alike(jvm, tmp_path):
    backend = KeyedStateBackend("int", 8)
    counts = backend.get_state(ValueStateDescriptor("counts", "long"))
    backend.set_current_key(1)
    counts.update(1)
    root = tmp_path / "root"
    CheckpointWriter(str(root)).write(1, {"op": [backend]})
    inside = data_file_of(str(root), "counts")
    outside = tmp_path / "elsewhere.arrow"
    shutil.move(inside, outside)
    inside.symlink_to(outside)
    for df_name in ("flinkstate", "flinkstate-python"):
        with pytest.raises(Exception, match="outside the checkpoint root"):
            jvm.read.format(df_name).load(str(root)).collect()


def shim_memory(spark) -> int:
    loader = spark._jsparkSession.sharedState().jarClassLoader()
    memory = loader.loadClass("org.statesource.shim.ShimMemory")
    return memory.getMethod("allocatedBytes", None).invoke(None, None)


def test_incremental_checkpoints_read_alike(jvm, tmp_path):
    """Format v3: a state's files cover overlapping key-group ranges; every key group is still
    read from the one file that holds it. (No delta runs: every change rewrites its key group
    whole, ``max_delta_runs=0``; the JVM reader declines runs.)"""
    backend = KeyedStateBackend("string", 32)
    counts = backend.get_state(ValueStateDescriptor("counts", "long"))
    truth = {}
    with CheckpointWriter(str(tmp_path), incremental=True, max_delta_runs=0) as writer:
        for checkpoint_id, keys in ((1, range(200)), (2, range(0, 200, 37)), (3, range(190, 260))):
            for i in keys:
                backend.set_current_key(f"k{i}")
                counts.update(i * checkpoint_id)
                truth[f"k{i}"] = i * checkpoint_id
            writer.write(checkpoint_id, {"op": [backend]})
    assert Checkpoint.open(str(tmp_path)).metadata.format_version == 3
    for parallelism in ("1", "4", "32"):  # one slice, and slices the files cut across
        on_jvm, on_python = both(jvm, str(tmp_path), state="counts", parallelism=parallelism)
        assert "JVM columnar" in scan_of(on_jvm)
        assert rows_of(on_jvm) == rows_of(on_python)
        assert {r.key: r.value for r in on_jvm.collect()} == truth


FLINK_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "flink"
FLINK_SAVEPOINT = FLINK_FIXTURES / "mp256" / "canonical"


@pytest.mark.parametrize("path, options", [
    # a native key group's section of Avro values, which the JVM cannot pass, comes first
    (FLINK_FIXTURES / "types" / "native", {"operator": "typed", "state": "point_pojo"}),
    (FLINK_FIXTURES / "mp128-snappy" / "canonical", {"operator": "opaque", "state": "last_uuid"}),
    (FLINK_SAVEPOINT, {"operator": "stateful", "operatorState": "seen"}),
    (None, {"operatorState": "offsets"}),
    (None, {"readChangeFeed": "true", "state": "counts", "changeStartCheckpointId": "1"}),
], ids=["flink-native-after-avro", "flink-kryo-value", "flink-operator-state", "operator-state",
      "change-feed"])
def test_what_the_jvm_does_not_read_goes_to_python(jvm, tmp_path, path, options):
    if path is None:
        path = tmp_path
        backend = KeyedStateBackend("string", 32)
        counts = backend.get_state(ValueStateDescriptor("counts", "long"))
        with CheckpointWriter(str(path)) as writer:
            for checkpoint_id in (1, 2):
                for i in range(10 * checkpoint_id):
                    backend.set_current_key(f"k{i}")
                    counts.update(i)
                operator_state = OperatorStateBackend()
                operator_state.get_list_state("offsets", "long").update([checkpoint_id, 7])
                writer.write(checkpoint_id, {"op": [SubtaskBackends(backend, operator_state)]})
    on_jvm, on_python = both(jvm, str(path), **options)
    assert "JVM columnar" not in scan_of(on_jvm)
    assert on_jvm.schema == on_python.schema
    assert rows_of(on_jvm) == rows_of(on_python) and on_jvm.count() > 0


def test_writes_reach_the_python_writer(jvm, typed_root, tmp_path):
    """The JVM provider reads only: ``df.write.format("flinkstate")`` is the Python writer's."""
    root = tmp_path / "root"
    shutil.copytree(typed_root, root)
    days = jvm.read.format("flinkstate").option("state", "day").load(str(root))
    later = days.selectExpr("key", "namespace", "date_add(value, 1) AS value")
    later.write.format("flinkstate").mode("append").options(operator="typed", state="day") \
        .save(str(root))
    rewritten = jvm.read.format("flinkstate").options(state="day", checkpointId="2").load(
        str(root))
    assert "JVM columnar" in scan_of(rewritten)
    assert ({r.key: r.value for r in rewritten.collect()}
            == {r.key: r.value + dt.timedelta(days=1) for r in days.collect()})
    # write_state shuffles by the shim's key-group functions (row<string,int> keys); a wrong
    # subtask would split one Flink subtask over two tasks and fail the commit.
    fresh = str(tmp_path / "fresh")
    write_state(later.repartition(5), fresh, "four", "day", kind="value",
                key_type="row<string,int>", parallelism=4, max_parallelism=64)
    on_jvm, on_python = both(jvm, fresh, state="day")
    assert rows_of(on_jvm) == rows_of(on_python)
    assert sorted(rows_of(on_jvm.drop("key_group", "operator_index"))) == sorted(rows_of(later))


def test_the_plan_lists_key_groups_in_order_across_overlapping_files(tmp_path):
    """The JVM cuts partitions from the plan's order; an incremental checkpoint's files overlap,
    so listing locations file by file would put a changed key group after the others."""
    backend = KeyedStateBackend("string", 32)
    counts = backend.get_state(ValueStateDescriptor("counts", "long"))
    with CheckpointWriter(str(tmp_path), incremental=True, max_delta_runs=0) as writer:
        for checkpoint_id, keys in ((1, range(200)), (2, range(0, 200, 37))):
            for i in keys:
                backend.set_current_key(f"k{i}")
                counts.update(i)
            writer.write(checkpoint_id, {"op": [backend]})
    options = {"path": str(tmp_path), "state": "counts"}
    plan = jvm_plan(open_target(parse_read_options(options)), options)
    groups = plan["keyGroups"]["keyGroup"]
    assert groups == sorted(set(groups)) and len(set(plan["keyGroups"]["file"])) == 2


def test_a_bare_count_is_one_row_from_the_metadata(jvm, typed_root, tmp_path):
    """count(*) without filters is pushed whole: no aggregate or shuffle in Spark, one row even
    for a state with no entries; with a filter Spark counts the rows read."""
    df = jvm.read.format("flinkstate").option("state", "stamp").load(typed_root)
    counted = df.selectExpr("count(*) AS n", "count(*) AS m")
    plan = scan_of(counted)
    assert "count(*) from the metadata" in plan and "HashAggregate" not in plan
    assert tuple(counted.collect()[0]) == (350, 350)
    assert df.where("key_group < 10").count() == df.where("key_group < 10").collect().__len__()
    backend = KeyedStateBackend("string", 16)
    backend.get_state(ValueStateDescriptor("empty", "long"))
    CheckpointWriter(str(tmp_path)).write(1, {"op": [backend]})
    on_jvm, on_python = both(jvm, str(tmp_path), state="empty")
    assert on_jvm.count() == on_python.count() == 0
    assert jvm.read.format("flinkstate").option("state", "empty").load(str(tmp_path)) \
        .selectExpr("count(*)").collect()[0][0] == 0


KEYS_BY_TYPE = {
    "string": [f"user-{i}" for i in range(300)] + ["", "ünï", "\U0001f600"],
    "char": ["a", "b", "ß", "Z"],
    "int": list(range(-150, 150)),
    "long": [i * 10_000_000_000 for i in range(-50, 50)],
    "short": list(range(-40, 40)),
    "byte": list(range(-20, 20)),
    "boolean": [True, False],
}


@pytest.mark.parametrize("key_type", sorted(KEYS_BY_TYPE))
def test_key_lookups_return_exactly_the_keys_rows(jvm, tmp_path, key_type):
    """The reader returns only the span of a batch that may hold the pushed keys; lookups of
    present and absent keys, alone and in IN lists, must still return exactly their rows."""
    keys = KEYS_BY_TYPE[key_type]
    backend = KeyedStateBackend(key_type, 8)  # few key groups: many keys share each batch
    values = backend.get_state(ValueStateDescriptor("v", "long"))
    for i, key in enumerate(keys):
        backend.set_current_key(key)
        values.update(i)
    CheckpointWriter(str(tmp_path)).write(1, {"op": [backend]})
    df = jvm.read.format("flinkstate").load(str(tmp_path))
    df.createOrReplaceTempView("lookups")
    present = keys[:: max(1, len(keys) // 7)]
    absent = {"string": "nobody", "char": "q", "int": 999, "long": 7, "short": 99,
              "byte": 99, "boolean": None}[key_type]
    for key in present:
        rows = df.where(df.key == key).collect()
        assert [(r.key, r.value) for r in rows] == [(key, keys.index(key))]
    wanted = present[:3] + ([absent] if absent is not None else [])
    rows = df.where(df.key.isin(wanted)).collect()
    assert sorted(r.value for r in rows) == sorted(keys.index(k) for k in wanted if k in keys)
    if absent is not None:
        assert df.where(df.key == absent).count() == 0


def test_key_lookups_slice_nested_and_timestamp_columns_alike(jvm, tmp_path):
    """The span handed on is cut from every column: records, lists, maps, decimals and
    millisecond timestamps (widened after the cut) read as the Python source reads them."""
    backend = KeyedStateBackend("string", 4)
    states = {name: backend.get_state(ValueStateDescriptor(name, TYPED[name]))
              for name in ("nested", "stamp", "money")}
    for i in range(400):
        backend.set_current_key(f"k{i % 200}")
        for name, state in states.items():
            state.update(typed_value(name, i))
    CheckpointWriter(str(tmp_path)).write(1, {"op": [backend]})
    for name in states:
        on_jvm, on_python = both(jvm, str(tmp_path), state=name)
        for where in ("key = 'k17'", "key IN ('k3', 'k150', 'k199', 'none')"):
            assert rows_of(on_jvm.where(where)) == rows_of(on_python.where(where)), (name, where)
            assert on_jvm.where(where).count() == (1 if "=" in where else 3)


def test_every_session_of_the_application_reads_once_the_shim_is_loaded(jvm, typed_root):
    """The jar is application-wide, so the Python source it plans through must be too: a
    session that never registered anything (auto-registration gives it ``flinkstate-python``)
    reads exactly what the loading session reads, through the JVM reader."""
    other = jvm.newSession()
    on_other = other.read.format("flinkstate").option("state", "stamp").load(typed_root)
    assert "JVM columnar" in scan_of(on_other)
    assert rows_of(on_other) == rows_of(
        jvm.read.format("flinkstate-python").option("state", "stamp").load(typed_root))


def test_a_read_that_falls_back_says_why(jvm, typed_root, caplog, monkeypatch):
    from statesource.spark.jvm import plan as planning

    monkeypatch.setattr(planning, "_logged", set())  # said once per reason and process
    with caplog.at_level("WARNING", logger="statesource.jvm"):
        plan = jvm_plan(open_target(parse_read_options({"path": typed_root, "state": "ttl_list",
                                                        "flattenCollections": "false"})), {})
    assert not plan["servable"]
    assert any("uses the Python reader" in r.getMessage() and "flattenCollections=false"
               in r.getMessage() for r in caplog.records)


def test_a_checkpoint_retired_while_a_query_reads_it_is_said_so(jvm, typed_root, tmp_path):
    """``retain`` may retire a checkpoint between a query's plan and its tasks: both readers
    say it is gone, not that a file is corrupt, nor with a bare Java exception."""
    root = tmp_path / "root"
    shutil.copytree(typed_root, root)
    CheckpointWriter(str(root)).write(2, {"other": [KeyedStateBackend("int", 64)]})
    on_the_jvm, in_python = both(jvm, str(root), state="stamp", checkpointId="1")
    retain(str(root), 1)
    with pytest.raises(Exception, match="CheckpointNotFoundError: data file .*stamp.* is"
                                        " missing: the checkpoint was removed after the query"):
        on_the_jvm.select("value").collect()
    with pytest.raises(Exception, match="CheckpointNotFoundError: checkpoint path .*chk-1 does"
                                        " not exist"):  # the Python source reopens it first
        in_python.select("value").collect()

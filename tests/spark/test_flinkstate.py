"""The flinkstate sources against the pure-Python reader, the backend model and Flink's ranges."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pyspark.sql.datasource import (
    DataSourceReader,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
)

import statesource
from sample_state import KEYS, dump, merged, populate
from statesource import Checkpoint, CheckpointWriter, InvalidArgumentError
from statesource.format.keyed_state_meta import KeyedStateMeta
from statesource.format.locations import DataFile, KeyGroupLocation
from statesource.format.source import STATESOURCE
from statesource.keygroups import (
    KeyGroupRange,
    assign_to_key_group,
    key_group_range_for_operator,
)
from statesource.model import StateKind
from statesource.spark import register
from statesource.spark.compat import pushdown_safe_by_default
from statesource.spark.jvm.plan import FlinkStatePythonSource
from statesource.spark.options import parse_read_options
from statesource.spark.read import slices as slicing
from statesource.spark.source import FlinkStateDataSource
from statesource.state.clock import ManualClock
from statesource.state.keyed_backend import KeyedStateBackend
from statesource.types import STRING, VOID

MAX_PARALLELISM = 128
STATES = ["value", "windowed", "list", "map", "reduce", "agg", "ttl_value", "ttl_list", "ttl_map"]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A checkpoint written by 2 subtasks, and the merged content of their backends."""
    root = tmp_path_factory.mktemp("flinkstate")
    clock = ManualClock(1_700_000_000_000)
    subtasks = []
    for index in range(2):
        owned = key_group_range_for_operator(MAX_PARALLELISM, 2, index)
        backend = KeyedStateBackend("string", MAX_PARALLELISM, owned, clock=clock)
        populate(backend, [k for k in KEYS if backend._key_group_of(k) in owned])
        subtasks.append(backend)
    CheckpointWriter(str(root)).write(4, {"activity": subtasks})
    return str(root), merged([dump(b) for b in subtasks])


def load(spark, path, fmt="flinkstate", **options):
    return spark.read.format(fmt).options(**options).load(path)


def plain(value):
    """Spark Rows as dicts, recursively, to compare with Arrow's to_pylist()."""
    if hasattr(value, "asDict"):
        return {k: plain(v) for k, v in value.asDict().items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def without_ttl(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in ("ttl_timestamp", "ttl_timestamps")}


VALUE_COLUMN = {"value": "value", "windowed": "value", "reduce": "value", "agg": "accumulator",
                "ttl_value": "value"}


def written_rows(model: dict, state: str) -> list[dict]:
    """The flattened rows Spark must return, built from what the backends held (``dump``),
    not from the checkpoint reader that Spark's read path itself calls."""
    rows = []
    for (key, namespace), stored in model[state].items():
        key_group = assign_to_key_group(key, STRING, MAX_PARALLELISM)
        base = {"key_group": key_group, "operator_index": key_group * 2 // MAX_PARALLELISM,
                "key": key, "namespace": namespace}
        ttl = state.startswith("ttl_")
        if isinstance(stored, list):
            rows += [{**base, "list_element": element[0] if ttl else element}
                     for element in stored]
        elif state.endswith("map"):
            rows += [{**base, "user_key": user_key, "user_value": value[0] if ttl else value}
                     for user_key, value in stored.items()]
        else:
            rows.append({**base, VALUE_COLUMN[state]: stored[0] if ttl else stored})
    return rows


def canonical(rows: list[dict]) -> list[str]:
    return sorted(json.dumps(row, sort_keys=True, default=str) for row in rows)


@pytest.mark.parametrize("state", STATES)
def test_dataframe_equals_the_rows_written(spark, written, state, source_format):
    path, model = written
    rows = [without_ttl(plain(r)) for r in load(spark, path, source_format, state=state).collect()]
    assert canonical(rows) == canonical(written_rows(model, state))


@pytest.mark.parametrize("state", ["ttl_value", "ttl_list", "ttl_map"])
def test_ttl_timestamps_equal_the_ones_written(spark, written, state, source_format):
    path, model = written
    df = load(spark, path, source_format, state=state, flattenCollections="false")
    column = {"ttl_value": "unix_millis(ttl_timestamp)",
              "ttl_list": "transform(ttl_timestamps, t -> unix_millis(t))",
              "ttl_map": "transform_values(ttl_timestamps, (k, t) -> unix_millis(t))"}[state]
    stamps = {(r.key, r.namespace): r.ts for r in df.selectExpr("key", "namespace",
                                                                 f"{column} AS ts").collect()}
    expected = {}
    for entry, stored in model[state].items():
        if state == "ttl_value":
            expected[entry] = stored[1]
        elif state == "ttl_list":
            expected[entry] = [ts for _, ts in stored]
        else:
            expected[entry] = {k: ts for k, (_, ts) in stored.items()}
    assert stamps == expected


def test_nested_collections_equal_the_backend(spark, written, source_format):
    path, model = written
    lists = load(spark, path, source_format, state="list", flattenCollections="false").collect()
    assert {(r.key, r.namespace): r.list_value for r in lists} == model["list"]
    maps = load(spark, path, source_format, state="ttl_map", flattenCollections="false").collect()
    assert {(r.key, r.namespace): r.map_value for r in maps} == {
        entry: {k: v for k, (v, _) in stored.items()} for entry, stored in model["ttl_map"].items()}
    assert all(r.ttl_timestamps.keys() == r.map_value.keys() for r in maps)


def test_value_state_equals_the_backend(spark, written, source_format):
    path, model = written
    rows = load(spark, path, source_format, state="windowed").collect()
    assert {(r.key, r.namespace): r.value for r in rows} == model["windowed"]


@pytest.mark.parametrize("parallelism", [1, 2, 3, 7])
def test_partitions_cover_every_key_group_once(spark, written, parallelism, monkeypatch,
                                               source_format):
    path, _ = written
    coarse = slicing.TARGET_ROWS
    for target_rows in (coarse, 40):  # the default, and small enough to force splits
        monkeypatch.setattr(slicing, "TARGET_ROWS", target_rows)
        source = FlinkStateDataSource({"path": path, "state": "list",
                                       "parallelism": str(parallelism)})
        partitions = source.reader(source.schema()).partitions()
        covered = [kg for p in partitions for kg in p.value.key_groups()]
        assert covered == list(range(MAX_PARALLELISM))
        boundaries = {key_group_range_for_operator(MAX_PARALLELISM, parallelism, i).start
                      for i in range(parallelism)}
        if target_rows == coarse:
            assert {p.value.start for p in partitions} <= boundaries
        else:
            assert len(partitions) > parallelism
    misplaced = load(spark, path, source_format, state="list",
                     parallelism=str(parallelism)).where(
        f"operator_index != key_group * {parallelism} div {MAX_PARALLELISM}").count()
    assert misplaced == 0


def test_key_pushdown_reads_only_that_key_groups_bytes(written):
    path, _ = written
    source = FlinkStateDataSource({"path": path, "state": "list", "filterPushdown": "true"})
    reader = source.reader(source.schema())
    wanted = KEYS[17]
    assert list(reader.pushFilters([EqualTo(("key",), wanted)])) == []
    (partition,) = reader.partitions()
    (key_group,) = partition.value.key_groups()
    reads = []
    reader.read_listener = lambda file, offset, length: reads.append((offset, length))
    rows = [row for batch in reader.read(partition) for row in batch.to_pylist()]
    state = Checkpoint.open(path).operator().keyed_state("list")
    (location,) = [loc for _, loc in state.key_group_locations() if loc.key_group == key_group]
    assert reads == [(location.offset, location.length)]
    full_scan = [row for table in Checkpoint.open(path).read_keyed_state("list")
                 for row in table.to_pylist() if row["key"] == wanted]
    assert [without_ttl(r) for r in rows] == [
        {**r, "operator_index": key_group * 2 // MAX_PARALLELISM} for r in full_scan]


def test_pushdown_through_spark_matches_a_full_scan(spark, written, source_format):
    path, _ = written
    for condition in [f"key = '{KEYS[3]}'", f"key IN ('{KEYS[3]}', '{KEYS[99]}', 'nobody')",
                      "key_group >= 100 AND key_group < 110", "operator_index = 1",
                      "key_group IN (3, 5) AND value IS NULL"]:
        if "value" in condition:
            condition = condition.replace("value", "user_value")
        df = load(spark, path, source_format, state="map", filterPushdown="true")
        pushed = sorted(map(plain, df.where(condition).collect()), key=str)
        full = sorted(map(plain, load(spark, path, source_format, state="map").collect()),
                      key=str)
        filtered = sorted(map(plain, spark.createDataFrame(full, df.schema).where(condition)
                              .collect()), key=str)
        assert pushed == filtered, condition


def read_all(reader) -> list[str]:
    return canonical([row for partition in reader.partitions()
                      for batch in reader.read(partition) for row in batch.to_pylist()])


COMPARISONS = {EqualTo: lambda a, b: a == b, GreaterThan: lambda a, b: a > b,
               GreaterThanOrEqual: lambda a, b: a >= b, LessThan: lambda a, b: a < b,
               LessThanOrEqual: lambda a, b: a <= b}


@pytest.mark.parametrize("column", ["key_group", "operator_index"])
def test_every_pushed_comparison_matches_a_full_scan(written, column):
    path, model = written
    rows = written_rows(model, "list")
    for parallelism in (2, 3):
        options = {"path": path, "state": "list", "parallelism": str(parallelism)}
        for row in rows:
            row["operator_index"] = row["key_group"] * parallelism // MAX_PARALLELISM
        limit = MAX_PARALLELISM if column == "key_group" else parallelism
        populated = sorted({row[column] for row in rows})
        bounds = sorted({-1, 0, 1, limit - 1, limit, *populated[:3], *populated[-3:]})
        for bound in bounds:
            for comparison, holds in COMPARISONS.items():
                source = FlinkStateDataSource({**options, "filterPushdown": "true"})
                reader = source.reader(source.schema())
                assert list(reader.pushFilters([comparison((column,), bound)])) == []
                expected = [r for r in rows if holds(r[column], bound)]
                assert read_all(reader) == canonical(expected), (comparison, bound, parallelism)
        for values in [(populated[0], populated[-1]), (-1, limit), (populated[1],)]:
            source = FlinkStateDataSource({**options, "filterPushdown": "true"})
            reader = source.reader(source.schema())
            assert list(reader.pushFilters([In((column,), values)])) == []
            assert read_all(reader) == canonical([r for r in rows if r[column] in values])


def uniform_state(rows_per_key_group: int) -> KeyedStateMeta:
    """A state whose every key group holds the same number of rows (for planning only)."""
    locations = tuple(KeyGroupLocation(kg, kg, 1, 8 + kg * 100, 100, rows_per_key_group, 1, 0)
                      for kg in range(MAX_PARALLELISM))
    data_file = DataFile("chk-1/data/x.arrow", KeyGroupRange(0, MAX_PARALLELISM - 1),
                         8 + MAX_PARALLELISM * 100, locations)
    return KeyedStateMeta("x", StateKind.VALUE, VOID, {}, None, (data_file,))


@pytest.mark.parametrize(("parallelism", "subtasks_per_partition"),
                         [(2, 1), (3, 1), (4, 1), (8, 1), (4, 2), (8, 2), (8, 4)])
def test_partitions_start_at_subtask_boundaries(monkeypatch, parallelism,
                                                subtasks_per_partition):
    """With even key groups and a target of whole subtasks, slices are exactly Flink's
    subtask ranges (or runs of them). (Subtasks of unequal size, as at parallelism 7,
    are cut where the row target falls: slices are balanced by rows first.)"""
    state = uniform_state(10)
    ranges = [key_group_range_for_operator(MAX_PARALLELISM, parallelism, i)
              for i in range(parallelism)]
    total = 10 * MAX_PARALLELISM
    monkeypatch.setattr(slicing, "TARGET_ROWS",
                        -(-total * subtasks_per_partition // parallelism))
    rows = {loc.key_group: loc.rows for _, loc in state.key_group_locations()}
    slices = slicing.plan_slices(rows, MAX_PARALLELISM, parallelism, None, cores=1)
    expected = [(group[0].start, group[-1].end)
                for group in (ranges[i:i + subtasks_per_partition]
                              for i in range(0, parallelism, subtasks_per_partition))]
    assert [(s.start, s.end) for s in slices] == expected


def test_filters_are_accepted_only_where_applied_exactly(written):
    path, _ = written
    source = FlinkStateDataSource({"path": path, "state": "value", "filterPushdown": "true"})
    reader = source.reader(source.schema())
    rest = list(reader.pushFilters([
        GreaterThanOrEqual(("key_group",), 10), LessThan(("operator_index",), 1),
        In(("key",), (KEYS[0], KEYS[1])), GreaterThanOrEqual(("value",), 3),
        EqualTo(("key",), 5),
    ]))
    assert rest == [GreaterThanOrEqual(("value",), 3)]
    assert reader.pushdown.keys == []  # 5 is no string: no key matches both predicates
    assert reader.partitions() == []


def reused_relation_counts(spark, path, pushdown: str, fmt: str) -> tuple[int, int]:
    """A filtered query, then an unfiltered one, on the same DataFrame."""
    df = load(spark, path, fmt, state="value", filterPushdown=pushdown)
    df.where(f"key = '{KEYS[0]}'").count()
    return df.count(), load(spark, path, fmt, state="value").count()


def test_default_pushdown_never_leaks_into_a_later_query(spark, written, source_format):
    path, _ = written
    source = FlinkStateDataSource({"path": path, "state": "value"})
    reader_class = type(source.reader(source.schema()))
    pushed_by_default = reader_class.pushFilters is not DataSourceReader.pushFilters
    assert pushed_by_default == pushdown_safe_by_default()
    pushdown = "true" if pushed_by_default or source_format == "flinkstate" else "false"
    after, fresh = reused_relation_counts(spark, path, pushdown, source_format)
    assert after == fresh
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW reused USING `{source_format}`"
              f" OPTIONS (path '{path}', state 'value')")
    spark.sql(f"SELECT * FROM reused WHERE key = '{KEYS[0]}'").collect()
    assert spark.sql("SELECT count(*) FROM reused").first()[0] == fresh


def test_pushdown_default_matches_the_installed_spark(spark, written):
    """If this fails, pyspark changed: move compat.LAST_AFFECTED_VERSION accordingly.

    A property of Python sources: the JVM reader plans every query afresh (above).
    """
    spark.dataSource.register(FlinkStatePythonSource)
    after, fresh = reused_relation_counts(spark, written[0], "true", "flinkstate-python")
    assert (after == fresh) == pushdown_safe_by_default()


def test_pushdown_version_gate():
    assert not pushdown_safe_by_default("4.1.0")
    assert not pushdown_safe_by_default("4.3.0")
    assert pushdown_safe_by_default("4.4.0.dev0")
    assert pushdown_safe_by_default("5.0.0")


def test_sql_view_and_metadata_view(spark, written, source_format):
    path, model = written
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW counts USING `{source_format}`"
              f" OPTIONS (path '{path}', state 'value')")
    total = spark.sql("SELECT sum(value) AS total, count(*) AS n FROM counts").first()
    assert (total.total, total.n) == (sum(model["value"].values()), len(model["value"]))
    meta = {r.state_name: r for r in spark.read.format("flinkstate-metadata").load(path)
            .collect()}
    assert sorted(meta) == sorted(STATES)
    assert meta["list"].entries == len(model["list"])
    assert meta["list"].rows == sum(len(v) for v in model["list"].values())
    assert (meta["value"].parallelism, meta["value"].max_parallelism) == (2, MAX_PARALLELISM)
    assert json.loads(meta["map"].value_types)["user_key"] == "string"
    assert meta["value"].checkpoint_id == 4 and meta["value"].operator_uid == "activity"


def test_explicit_registration_is_harmless(spark, written):
    register(spark)
    assert load(spark, written[0], state="value").count() == len(written[1]["value"])


def error_of(spark, fmt, path, **options) -> str:
    with pytest.raises(Exception) as caught:
        spark.read.format(fmt).options(**options).load(path).count()
    return str(caught.value)


def test_errors_name_the_bad_input(spark, written, tmp_path, source_format):
    path, _ = written

    def error(where, **options):
        return error_of(spark, source_format, where, **options)

    assert "checkpoint path /nowhere/at/all does not exist" in error("/nowhere/at/all")
    (tmp_path / "chk-9").mkdir()
    assert "no complete checkpoint under" in error(str(tmp_path))
    assert "no operator named 'x'; available: 'activity'" in error(path, operator="x",
                                                                    state="value")
    assert "choose a keyed state of operator 'activity': there are 9: 'agg'" in error(path)
    assert "option parallelism must be an integer >= 1, got 'two'" in error(
        path, state="value", parallelism="two")
    assert "parallelism 129 is outside [1, 128]" in error(path, state="value",
                                                           parallelism="129")
    assert "option flattenCollections must be true or false, got 'maybe'" in error(
        path, state="list", flattenCollections="maybe")
    assert "unknown option(s) stat;" in error(path, stat="value")
    assert "no complete checkpoint 5 under" in error(path, state="value", checkpointId="5")


def test_unknown_format_version_is_refused(spark, written, tmp_path, source_format):
    path, _ = written
    source = Checkpoint.open(path).location.path
    copy = tmp_path / "chk-4"
    subprocess.run(["cp", "-r", source, str(copy)], check=True)
    metadata = copy / "_metadata.json"
    document = json.loads(metadata.read_text())
    metadata.write_text(json.dumps({**document, "formatVersion": 99}))
    assert "format version 99; this statesource reads versions [1, 2, 3, 4, 5]" in error_of(
        spark, source_format, str(tmp_path), state="value")


def test_auto_registration_from_another_directory(written, tmp_path):
    """An installed statesource needs no register() call, whatever the working directory."""
    script = textwrap.dedent(f"""
        import os, sys
        os.environ["PYSPARK_PYTHON"] = sys.executable
        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master("local[1]")
                 .config("spark.ui.enabled", "false").getOrCreate())
        print(spark.read.format("flinkstate").option("state", "value").load({written[0]!r}).count())
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if editable_install():  # the workers' path README.md tells contributors to set
        env["PYTHONPATH"] = str(Path(statesource.__file__).parent / "spark" / "autoload")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.stdout.strip().splitlines()[-1:] == [str(len(written[1]["value"]))], done.stderr


def editable_install() -> bool:
    """Whether statesource is installed with ``pip install -e`` (PEP 610's direct_url.json;
    a source tree's own ``statesource.egg-info`` has none)."""
    return any(json.loads(d.read_text("direct_url.json") or "{}").get("dir_info", {})
               .get("editable", False)
               for d in importlib.metadata.distributions(name="statesource"))


def test_create_table_is_refused_with_the_alternative(spark, written, source_format):
    """The Python source refuses at CREATE TABLE; the JVM reader at the table's first query.

    (A table the JVM path let through stays in the session's in-memory catalog: even DROP
    TABLE loads it, and fails the same way.)
    """
    table = "refused_" + source_format.replace("-", "_")
    with pytest.raises(Exception, match="Use CREATE TEMPORARY VIEW"):
        spark.sql(f"CREATE TABLE {table} USING `{source_format}`"
                  f" OPTIONS (path '{written[0]}', state 'value')")
        spark.sql(f"SELECT * FROM {table}").collect()


@pytest.mark.parametrize("cores", [1, 2, 3])
def test_slices_are_sized_for_whole_waves_of_tasks(written, monkeypatch, cores):
    state = Checkpoint.open(written[0]).operator().keyed_state("list")
    rows = {loc.key_group: loc.rows for _, loc in state.key_group_locations()}
    total = sum(rows.values())
    monkeypatch.setattr(slicing, "TARGET_ROWS", total // 5)
    slices = slicing.plan_slices(rows, MAX_PARALLELISM, 2, None, cores=cores)
    count = -(-total // (total // 5))  # 5 or 6 slices' worth of rows
    count = -(-count // cores) * cores  # rounded up to whole waves of tasks
    target = -(-total // count)
    sizes = [sum(rows.get(kg, 0) for kg in s.key_groups()) for s in slices]
    assert sum(sizes) == total
    assert all(size >= target for size in sizes[:-1])
    assert all(size < target + max(rows.values()) for size in sizes)


def test_the_reader_shipped_to_tasks_carries_no_metadata(written):
    import pickle

    source = FlinkStateDataSource({"path": written[0], "state": "list", "filterPushdown": "true"})
    reader = source.reader(source.schema())
    list(reader.pushFilters([EqualTo(("key",), KEYS[1])]))
    (partition,) = reader.partitions()
    shipped = pickle.loads(pickle.dumps(reader))
    assert shipped._opened is None and shipped.pushdown.keys == [KEYS[1]]
    expected = [row["list_element"] for table in Checkpoint.open(written[0]).read_keyed_state(
        "list") for row in table.to_pylist() if row["key"] == KEYS[1]]
    assert [r["list_element"] for b in shipped.read(partition) for r in b.to_pylist()] == expected
    assert expected


def test_planning_opens_the_snapshot_once_and_tasks_never_probe(written, monkeypatch):
    """The driver opens a snapshot once per query; a task reopens it by its known kind."""
    import pickle

    import statesource.sources as sources

    opened: list[str] = []
    probed: list[object] = []
    real_open, real_probe = sources._OPENERS[STATESOURCE], sources.find_flink_snapshot

    def counting_open(path, **kwargs):
        opened.append(path)
        return real_open(path, **kwargs)

    def counting_probe(*args):
        probed.append(args)
        return real_probe(*args)

    monkeypatch.setitem(sources._OPENERS, STATESOURCE, counting_open)
    monkeypatch.setattr(sources, "find_flink_snapshot", counting_probe)
    source = FlinkStateDataSource({"path": written[0], "state": "list", "filterPushdown": "true"})
    reader = source.reader(source.schema())
    list(reader.pushFilters([EqualTo(("key",), KEYS[1])]))
    partitions = reader.partitions()
    assert (len(opened), len(probed)) == (1, 1)
    for partition in partitions:
        shipped = pickle.loads(pickle.dumps(reader))
        list(shipped.read(partition))
    assert (len(opened), len(probed)) == (1 + len(partitions), 1)


@pytest.mark.parametrize("text", [" 3", "3 ", "+3", "1_0", "\u0663", "3.0", "0x3", "", "-1",
                                  "99999999999999999999"])
def test_integer_options_take_plain_ascii_digits_only(written, text):
    for option in ("parallelism", "checkpointId"):
        with pytest.raises(InvalidArgumentError, match=f"option {option} must be an integer"):
            parse_read_options({"path": written[0], option: text})


def test_integer_options_accept_plain_digits(written):
    parsed = parse_read_options({"path": written[0], "parallelism": "007", "checkpointId": "4"})
    assert (parsed.parallelism, parsed.checkpoint_id) == (7, 4)

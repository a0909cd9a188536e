"""The flinkstate writer: round trips, carried-over states, bootstrap, refusals, races, crashes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from sample_state import KEYS, dump, merged, populate
from statesource import (
    Checkpoint,
    CheckpointExistsError,
    CheckpointWriter,
    StateSourceError,
    restore_keyed_backend,
)
from statesource.flink.serializers.mapping import PojoClass
from statesource.keygroups import key_group_range_for_operator, operator_index_for_key_group
from statesource.spark import rewrite, write_state
from statesource.state.clock import ManualClock
from statesource.state.keyed_backend import KeyedStateBackend

STATES = ["value", "windowed", "list", "map", "reduce", "agg", "ttl_value", "ttl_list", "ttl_map"]
CLOCK_MS = 1_700_000_000_000


def write_base(root: Path) -> dict:
    """Checkpoint 1 under ``root`` written by 2 subtasks; returns the backends' content."""
    clock = ManualClock(CLOCK_MS)
    subtasks = []
    for index in range(2):
        owned = key_group_range_for_operator(128, 2, index)
        backend = KeyedStateBackend("string", 128, owned, clock=clock)
        populate(backend, [k for k in KEYS[:120] if backend._key_group_of(k) in owned])
        subtasks.append(backend)
    CheckpointWriter(str(root)).write(1, {"op": subtasks})
    return merged([dump(b) for b in subtasks])


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("writer-base")
    return root, write_base(root)


@pytest.fixture
def root(base, tmp_path):
    copy = tmp_path / "checkpoints"
    shutil.copytree(base[0], copy)
    return copy


def load(spark, path, **options):
    return spark.read.format("flinkstate").options(**options).load(str(path))


def restored_content(path, parallelism: int, checkpoint_id: int | None = None) -> dict:
    checkpoint = Checkpoint.open(str(path), checkpoint_id=checkpoint_id)
    backends = [restore_keyed_backend(checkpoint, i, parallelism, clock=ManualClock(CLOCK_MS))
                for i in range(parallelism)]
    for index, backend in enumerate(backends):
        for entries in dump(backend).values():
            for key, _ in entries:
                group = backend._key_group_of(key)
                assert operator_index_for_key_group(128, parallelism, group) == index
    return merged([dump(b) for b in backends])


def rows_of(df) -> list[str]:
    return sorted(json.dumps(r.asDict(recursive=True), sort_keys=True, default=str)
                  for r in df.collect())


def test_read_write_read_round_trips_every_state_kind(spark, base, root):
    _, content = base
    for state in STATES:
        before = load(spark, root, state=state)
        expected = rows_of(before)
        info = write_state(before, str(root), "op", state)
        assert rows_of(load(spark, root, state=state, checkpointId=str(info.checkpoint_id))) \
            == expected
    for parallelism in (1, 2, 3, 7):
        assert restored_content(root, parallelism) == content


def test_carried_over_states_share_the_base_files(spark, root):
    first = Checkpoint.open(str(root))
    write_state(load(spark, root, state="value"), str(root), "op", "value")
    second = Checkpoint.open(str(root))
    assert second.checkpoint_id == 2
    for state in STATES:
        paths = [f.path for f in second.operator().keyed_state(state).files]
        old = [f.path for f in first.operator().keyed_state(state).files]
        assert (paths == old) is (state != "value")
    assert all(p.startswith("chk-2/") for p in
               (f.path for f in second.operator().keyed_state("value").files))


def test_fix_values_for_some_keys(spark, root, base):
    fixed = (load(spark, root, state="value")
             .withColumn("value", F.when(F.col("key") == KEYS[3], F.lit(-1))
                         .otherwise(F.col("value"))))
    write_state(fixed, str(root), "op", "value")
    content = restored_content(root, 2)
    assert content["value"][(KEYS[3], None)] == -1
    expected = {**base[1]["value"], (KEYS[3], None): -1}
    assert content["value"] == expected
    assert content["list"] == base[1]["list"]


def test_plain_df_write_succeeds_when_partitions_hold_whole_subtasks(spark, root, base):
    df = load(spark, root, state="reduce", parallelism="2")
    df.repartition(2, "operator_index").write.format("flinkstate").mode("append") \
        .options(operator="op", state="reduce").save(str(root))
    assert Checkpoint.open(str(root)).checkpoint_id == 2
    assert restored_content(root, 3)["reduce"] == base[1]["reduce"]


def test_plain_df_write_of_scattered_rows_fails_naming_the_helper(spark, root):
    df = load(spark, root, state="value").repartition(3)
    with pytest.raises(Exception, match="statesource.spark.write_state"):
        df.write.format("flinkstate").mode("append").options(operator="op", state="value") \
            .save(str(root))
    assert Checkpoint.open(str(root)).checkpoint_id == 1
    assert not (root / "chk-2").exists() or not list((root / "chk-2").rglob("*.arrow"))


def test_bootstrap_a_state_from_a_table_and_restore_it(spark, tmp_path):
    table = spark.createDataFrame([(f"user-{i}", i * 10) for i in range(500)],
                                  "key string, value bigint")
    info = write_state(table, str(tmp_path), "users", "score", kind="value", parallelism=3,
                       max_parallelism=64)
    op = info.metadata.operator("users")
    assert (op.parallelism, op.max_parallelism, str(op.key_type)) == (3, 64, "string")
    assert op.keyed_state("score").schemas["value"].avro == "long"
    checkpoint = Checkpoint.open(str(tmp_path))
    content = merged([dump(restore_keyed_backend(checkpoint, i, 3)) for i in range(3)])
    assert content["score"] == {(f"user-{i}", None): i * 10 for i in range(500)}


def test_bootstrap_list_state_keeps_the_order_column(spark, tmp_path):
    rows = [("a", 3, "third"), ("a", 1, "first"), ("b", 1, "only"), ("a", 2, "second")]
    df = spark.createDataFrame(rows, "key string, position int, list_element string")
    write_state(df, str(tmp_path), "op", "pages", kind="list", order_column="position")
    content = dump(restore_keyed_backend(Checkpoint.open(str(tmp_path)), 0, 1))
    assert content["pages"] == {("a", None): ["first", "second", "third"], ("b", None): ["only"]}


def test_several_states_change_in_one_checkpoint_or_none(spark, root, base):
    with rewrite(spark, str(root)) as staged:
        staged.replace(load(spark, root, state="value").filter(F.col("key") != KEYS[0]),
                       "op", "value")
        staged.replace(spark.createDataFrame([("x", 1)], "key string, value bigint"), "op",
                       "fresh", kind="value")
        staged.drop("op", "windowed")
    assert staged.info is not None and staged.info.checkpoint_id == 2
    op = Checkpoint.open(str(root)).operator()
    assert sorted(s.name for s in op.keyed_states) == sorted(
        [s for s in STATES if s != "windowed"] + ["fresh"])
    content = restored_content(root, 1)
    assert (KEYS[0], None) not in content["value"]
    assert content["fresh"] == {("x", None): 1}
    files_before = sorted(root.rglob("*.arrow"))
    with pytest.raises(RuntimeError, match="changed my mind"), rewrite(spark, str(root)) as rw:
        rw.replace(load(spark, root, state="value"), "op", "value")
        raise RuntimeError("changed my mind")
    assert sorted(root.rglob("*.arrow")) == files_before
    assert Checkpoint.open(str(root)).checkpoint_id == 2


@pytest.mark.parametrize(("rows", "schema", "options", "message"), [
    ([(None, 1)], "key string, value bigint", {}, "column key is null"),
    ([("a", "x")], "key string, value string", {}, "column value has type string"),
    ([("a", 1), ("a", 2)], "key string, value bigint", {},
     r"\(key, namespace\) appears more than once, e.g. key 'a'"),
    ([(1, 1)], "key bigint, value bigint", {}, "column key has type int64; keys of type string"),
    ([("a", 1)], "key string, value bigint", {"max_parallelism": 200},
     "max_parallelism is '200', but the state already has 128"),
])
def test_bad_input_is_refused_and_nothing_is_written(spark, root, rows, schema, options, message):
    df = spark.createDataFrame(rows, schema)
    files_before = sorted(root.rglob("*"))
    with pytest.raises(Exception, match=message):
        write_state(df, str(root), "op", "value", **options)
    assert sorted(root.rglob("*")) == files_before


@pytest.mark.parametrize(("options", "message"), [
    ({"kind": "value", "max_parallelism": 40000},
     r"max parallelism 40000 is outside \[1, 32768\]"),
    ({"kind": "value", "max_parallelism": 2, "parallelism": 3},
     r"parallelism 3 is outside \[1, 2\]"),
    ({"kind": "value", "max_parallelism": 0}, "max_parallelism must be an integer >= 1"),
    ({"kind": "value", "base_checkpoint_id": 9}, "base checkpoint 9 does not exist"),
    ({"kind": "value", "checkpoint_id": 1}, "checkpoint 1 already exists"),
    ({"kind": "nonsense"}, "kind must be one of"),
    ({}, "give kind"),
    ({"kind": "value", "pojos": {"E": PojoClass("x.E")}},
     r"POJO classes \(E\) are of a new Flink savepoint's records"),
])
def test_bad_requests_name_the_problem(spark, root, options, message):
    df = spark.createDataFrame([("a", 1)], "key string, value bigint")
    with pytest.raises(StateSourceError, match=message):
        write_state(df, str(root), "other", "new", **options)


@pytest.mark.parametrize(("options", "message"), [
    ({"kind": "value", "colour": "red"}, "unknown write option"),
    ({"kind": "value", "pojoClasses": "[1]"}, "option pojoClasses must be a JSON object"),
    ({"kind": "value", "pojoClasses": '{"E": 7}'}, "option pojoClasses: record 'E' is declared 7"),
    ({}, "give option kind"),
])
def test_bad_write_options_name_the_problem(spark, root, options, message):
    df = spark.createDataFrame([("a", 1)], "key string, value bigint")
    with pytest.raises(Exception, match=message):
        (df.write.format("flinkstate").mode("append")
         .options(operator="other", state="new", **options).save(str(root)))


def test_a_misspelt_keyword_is_a_type_error_naming_it(spark, root):
    df = spark.createDataFrame([("a", 1)], "key string, value bigint")
    with pytest.raises(TypeError, match="maxParallelism"):
        write_state(df, str(root), "other", "new", kind="value", maxParallelism=4)


def test_two_writers_racing_for_one_id_exactly_one_wins(spark, root):
    df = load(spark, root, state="value")
    outcomes: list[str] = []

    def attempt() -> None:
        try:
            write_state(df, str(root), "op", "value", checkpoint_id=5)
            outcomes.append("won")
        except CheckpointExistsError:
            outcomes.append("lost")

    threads = [threading.Thread(target=attempt) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert sorted(outcomes) == ["lost", "won"]
    committed = Checkpoint.open(str(root), checkpoint_id=5)
    referenced = set(committed.metadata.referenced_files())
    assert {str(p.relative_to(root)) for p in (root / "chk-5").rglob("*.arrow")} <= referenced


def test_a_failing_task_leaves_no_checkpoint_and_no_files(spark, root):
    df = load(spark, root, state="value").withColumn(
        "value", F.when(F.col("key") == KEYS[7], F.lit(None)).otherwise(F.col("value")))
    with pytest.raises(Exception, match="does not match Avro schema"):
        write_state(df, str(root), "op", "value")
    assert Checkpoint.open(str(root)).checkpoint_id == 1
    assert not list(root.glob("chk-2/**/*.arrow"))


def test_a_driver_killed_before_commit_leaves_no_checkpoint(spark, root):
    script = textwrap.dedent(f"""
        import os
        from statesource.spark import session, write_state
        from statesource.spark.write import rewrite
        rewrite.commit_on_driver = lambda *a, **k: os._exit(9)  # the commit runs on the driver
        spark = session("killed", master="local[1]")
        df = spark.read.format("flinkstate").load({str(root)!r}, state="value")
        write_state(df, {str(root)!r}, "op", "value")
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                            timeout=300)
    assert result.returncode == 9, result.stderr.decode()[-2000:]
    assert Checkpoint.open(str(root)).checkpoint_id == 1
    written = list(root.glob("chk-2/data/*.arrow"))
    assert written  # the tasks did write; nothing references those files
    assert Checkpoint.open(str(root)).metadata.referenced_files().keys().isdisjoint(
        str(p.relative_to(root)) for p in written)


def test_more_bad_columns_are_refused(spark, root):
    cases = [
        (spark.createDataFrame([("a", 1.5)], "key string, value double"),
         "value", "column value has type double"),
        (spark.createDataFrame([("a", 1, 999)], "key string, value bigint, key_group int"),
         "value", "column key_group says 999"),
        (spark.createDataFrame([("a", "0x10", "v")],
                               "key string, namespace string, value string"),
         "windowed", "column namespace has type string"),
        (spark.createDataFrame([("a", 1, 5)], "key string, value bigint, ttl_timestamp bigint"),
         "value", r"unexpected \['ttl_timestamp'\]"),
    ]
    for df, state, message in cases:
        with pytest.raises(Exception, match=message):
            write_state(df, str(root), "op", state)
    with pytest.raises(Exception, match="column value has type double"):
        cases[0][0].write.format("flinkstate").mode("append") \
            .options(operator="op", state="value").save(str(root))
    assert not (root / "_pins").exists()  # refused writes let go of their base at once
    with pytest.raises(Exception, match="mode\\('overwrite'\\) is not supported"):
        load(spark, root, state="value").write.format("flinkstate").mode("overwrite") \
            .options(operator="op", state="value").save(str(root))
    assert Checkpoint.open(str(root)).checkpoint_id == 1


def test_a_new_state_of_an_operator_state_only_operator_keeps_its_max_parallelism(spark,
                                                                                   tmp_path):
    from statesource.state import OperatorStateBackend

    source = OperatorStateBackend()
    source.get_list_state("offsets", "long").update([1, 2])
    CheckpointWriter(str(tmp_path)).write(1, {"src": [source]})
    max_parallelism = Checkpoint.open(str(tmp_path)).operator("src").max_parallelism
    df = spark.createDataFrame([("a", 1)], "key string, value bigint")
    with pytest.raises(Exception, match="max_parallelism is '7'"):
        write_state(df, str(tmp_path), "src", "counts", kind="value", max_parallelism=7)
    info = write_state(df, str(tmp_path), "src", "counts", kind="value")
    assert info.metadata.operator("src").max_parallelism == max_parallelism


def test_replacing_a_state_twice_in_one_rewrite_keeps_only_the_last_files(spark, root):
    with rewrite(spark, str(root)) as staged:
        staged.replace(load(spark, root, state="value"), "op", "value")
        staged.replace(load(spark, root, state="value").filter(F.col("key") != KEYS[1]),
                       "op", "value")
    referenced = set(Checkpoint.open(str(root)).metadata.referenced_files())
    assert {str(p.relative_to(root)) for p in (root / "chk-2").rglob("*.arrow")} <= referenced


def test_double_keys_are_told_apart_as_java_does(spark, tmp_path):
    """0.0 and -0.0 are two keys, every NaN one (``Double.equals``), in the writer too."""
    nan = float("nan")
    df = spark.createDataFrame([(0.0, 1), (-0.0, 2), (nan, 3)], "key double, value bigint")
    write_state(df, str(tmp_path), "op", "by_double", kind="value", key_type="double")
    content = dump(restore_keyed_backend(Checkpoint.open(str(tmp_path)), 0, 1))["by_double"]
    assert sorted(content.values()) == [1, 2, 3]
    twice = spark.createDataFrame([(nan, 1), (nan, 2)], "key double, value bigint")
    with pytest.raises(Exception, match=r"\(key, namespace\) appears more than once"):
        write_state(twice, str(tmp_path), "op", "by_double")


def test_a_null_tuple_field_and_a_tuple_of_nulls_are_two_keys(spark, tmp_path):
    """Java's ``Tuple2.equals`` tells a null field from a tuple whose fields are null; both
    hash alike, so they meet in one key group and only equality keeps them apart."""
    df = spark.createDataFrame([(("a", None), 1), (("a", (None, None)), 2)],
                               "key struct<f0:string,f1:struct<f0:int,f1:int>>, value bigint")
    write_state(df, str(tmp_path), "op", "nested", kind="value",
                key_type="tuple<string,tuple<int,int>>")
    content = dump(restore_keyed_backend(Checkpoint.open(str(tmp_path)), 0, 1))["nested"]
    assert content == {(("a", None), None): 1, (("a", (None, None)), None): 2}

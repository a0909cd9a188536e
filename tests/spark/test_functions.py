"""flink_key_group / flink_operator_index in Spark SQL, through the Java shim and the Python path.

Both paths must give Flink's golden answers, agree on nested composite keys, return NULL for
NULL, and fail with the same statesource message.
"""

from __future__ import annotations

import logging
import random

import pyarrow as pa
import pytest
from pyspark.sql.functions import col

from golden_columns import golden_tables
from golden_vectors import rows
from statesource.errors import JvmShimUnavailableError
from statesource.jvm import find_javac
from statesource.jvm.build import CACHE_ENV
from statesource.keygroups import assign_to_key_group
from statesource.spark.functions import (
    flink_key_group,
    flink_operator_index,
    register_functions,
)
from statesource.spark.jvm import session as jvm_session
from statesource.spark.write.shuffle import jvm_subtask_column
from statesource.types import Row, RowKind, parse_type


@pytest.fixture(params=["jvm", "python"])
def path(request, spark):
    """Registers the functions on the shared session through one path."""
    if request.param == "jvm":
        try:
            find_javac()
        except JvmShimUnavailableError as error:
            pytest.skip(f"the Java shim needs a JDK, and this machine has none: {error}")
    assert register_functions(spark, use_jvm=request.param == "jvm") == request.param
    return request.param


def python_udfs_in_plan(df) -> bool:
    plan = df._jdf.queryExecution().executedPlan().toString()
    return "ArrowEvalPython" in plan or "BatchEvalPython" in plan


def mismatches(df, computed: str, expected: str) -> list:
    return df.where(f"NOT ({computed} <=> {expected})").limit(5).collect()


def test_golden_key_groups_of_every_key_type(spark, path):
    for golden in golden_tables():
        df = spark.createDataFrame(golden.table)
        assert not mismatches(df, "flink_key_group(key, max_parallelism)", "expected"), \
            golden.key_type
    sample = spark.createDataFrame(golden_tables()[0].table)
    selected = sample.select(flink_key_group("key", col("max_parallelism")))
    assert python_udfs_in_plan(selected) == (path == "python")


def test_golden_operator_indexes(spark, path):
    golden = rows("operator_index.csv")
    table = pa.table({name: pa.array([int(r[name]) for r in golden], pa.int32())
                      for name in ("key_group", "max_parallelism", "parallelism",
                                   "operator_index")})
    df = spark.createDataFrame(table)
    computed = "flink_operator_index(key_group, max_parallelism, parallelism)"
    assert not mismatches(df, computed, "operator_index")
    assert df.select(flink_operator_index("key_group", 128, 4)).count() == len(golden)


NESTED = parse_type("row<string,tuple<string,int>,row<double,bytes>>")


def random_nested_keys(count: int) -> list[Row]:
    """Nested rows with the awkward values: nulls, NaN, -0.0, infinities, non-BMP text."""
    rng = random.Random(12)
    texts = ["", "a", "é", "\U0001f600x", "ab\U00010348", None]
    doubles = [0.0, -0.0, float("nan"), float("inf"), -1.5, 1e300, None]

    def pick(options):
        return options[rng.randrange(len(options))]

    keys = []
    for _ in range(count):
        innermost = Row(pick(doubles), pick([b"", b"\x00\xff", bytes(range(5)), None]),
                        kind=pick(list(RowKind)))
        tuple_field = pick([(pick(texts), rng.randint(-(2**31), 2**31 - 1)), None])
        keys.append(Row(pick(texts), tuple_field, pick([innermost, None]),
                        kind=pick(list(RowKind))))
    return keys


def test_nested_composite_keys_match_the_reference(spark, path):
    keys = random_nested_keys(400)
    expected = [assign_to_key_group(k, NESTED, 4096) for k in keys]
    df = spark.createDataFrame(pa.table({"key": NESTED.to_arrow(keys),
                                         "expected": pa.array(expected, pa.int32())}))
    assert not mismatches(df, "flink_key_group(key, 4096)", "expected")


def test_null_arguments_give_null(spark, path):
    row = spark.sql("SELECT flink_key_group(CAST(NULL AS STRING), 128) AS a,"
                    " flink_key_group('alice', CAST(NULL AS INT)) AS b,"
                    " flink_key_group('alice', 128) AS c,"
                    " flink_operator_index(CAST(NULL AS INT), 128, 4) AS d,"
                    " flink_operator_index(116, 128, 4) AS e").collect()[0]
    assert tuple(row) == (None, None, 116, None, 3)  # alice -> 116: README, golden-checked CLI


@pytest.mark.parametrize(("query", "message"), [
    ("SELECT flink_key_group('a', 0)", "max parallelism 0 is outside [1, 32768]"),
    ("SELECT flink_key_group('a', 40000L)", "max parallelism 40000 is outside [1, 32768]"),
    ("SELECT flink_operator_index(1, 4, 5)",
     "parallelism 5 is outside [1, 4] (the max parallelism)"),
    ("SELECT flink_operator_index(4, 4, 2)",
     "key group 4 is outside [0, 3] for max parallelism 4"),
    ("SELECT flink_key_group(X'01', 128)", "bytes cannot be a key type"),
    ("SELECT flink_key_group(named_struct('f0', X'01'), 128)",
     "tuple field type bytes hashes by identity"),
    ("SELECT flink_key_group(named_struct('row_kind', 'x', 'f0', 1), 128)",
     "unknown row kind 'x'"),
    ("SELECT flink_key_group(DATE'2024-01-01', 128)", "cannot be a Flink key"),
])
def test_errors_are_the_same_on_both_paths(spark, path, query, message):
    with pytest.raises(Exception) as raised:  # noqa: B017 - Spark wraps the task's error
        spark.sql(query).collect()
    assert message in str(raised.value)


def test_without_javac_the_python_path_serves_and_says_so_once(spark, tmp_path, monkeypatch,
                                                                 caplog):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(jvm_session, "_told", [])
    with caplog.at_level(logging.WARNING, logger="statesource.jvm"):
        assert register_functions(spark) == "python"
        assert register_functions(spark) == "python"
    told = [r.getMessage() for r in caplog.records if r.name == "statesource.jvm"]
    assert len(told) == 1 and "no javac found" in told[0] and "Python path" in told[0]
    assert spark.sql("SELECT flink_key_group('alice', 128)").collect()[0][0] == 116


@pytest.fixture
def jdk(spark):
    """The shim loaded on the shared session (the writer uses its functions only then)."""
    try:
        find_javac()
    except JvmShimUnavailableError as error:
        pytest.skip(f"the Java shim needs a JDK, and this machine has none: {error}")
    assert register_functions(spark) == "jvm"


@pytest.mark.parametrize("parallelism", [1, 3, 7])
def test_the_writers_shuffle_column_gives_flinks_subtasks(spark, jdk, parallelism):
    """write_state shuffles by a JVM column; on Flink's vectors it names each key's subtask."""
    for golden in golden_tables():
        max_parallelisms = golden.table.column("max_parallelism").to_pylist()
        chosen = max(set(max_parallelisms), key=max_parallelisms.count)
        df = spark.createDataFrame(golden.table).where(col("max_parallelism") == chosen)
        subtask = jvm_subtask_column(df, "key", parse_type(golden.key_type), chosen, parallelism)
        assert subtask is not None, golden.key_type
        expected = f"CAST(expected AS BIGINT) * {parallelism} DIV {chosen}"
        assert not mismatches(df.withColumn("subtask", subtask), "subtask", expected), \
            golden.key_type
        assert not python_udfs_in_plan(df.withColumn("subtask", subtask))


def test_the_writers_shuffle_column_refuses_a_column_of_another_type(spark, jdk):
    """Integers are not longs to Java's hashCode (-1 hashes to -1 as an Integer, 0 as a Long)."""
    ints = spark.createDataFrame([(-1,)], "key int")
    assert jvm_subtask_column(ints, "key", parse_type("long"), 128, 2) is None
    longs = ints.selectExpr("CAST(key AS BIGINT) AS key")
    assert jvm_subtask_column(longs, "key", parse_type("long"), 128, 2) is not None

"""Paths given to Spark reads and writes are checked where they enter: a snapshot's metadata
file means its snapshot, as in Flink; any other file, and an output that cannot be made, is
refused naming it; Spark's ``statestore`` option names are answered with this source's."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from tmpfs import tmpfs

from statesource.errors import InvalidArgumentError, StorageError
from statesource.flink.reader import FlinkCheckpoint
from statesource.spark import write_state

FLINK = Path(__file__).resolve().parents[1] / "fixtures" / "flink" / "mp256" / "canonical"


def error_of(spark, fmt: str, path: str, **options: str) -> str:
    with pytest.raises(Exception) as caught:
        spark.read.format(fmt).options(**options).load(path).count()
    return str(caught.value)


def test_a_flink_metadata_file_reads_as_its_savepoint(spark, source_format):
    by_file = spark.read.format(source_format).options(operator="stateful", state="total") \
        .load(str(FLINK / "_metadata"))
    expected = pa.concat_tables(FlinkCheckpoint.open(str(FLINK)).read_keyed_state(
        "total", operator="stateful")).to_pylist()
    assert sorted((r.key, r.value) for r in by_file.collect()) == sorted(
        (r["key"], r["value"]) for r in expected)
    listed = spark.read.format("flinkstate-metadata").load(str(FLINK / "_metadata"))
    assert "total" in {r.state_name for r in listed.collect()}


def test_a_file_that_is_no_snapshot_is_named(spark, source_format):
    state_file = next(p for p in FLINK.iterdir() if p.name != "_metadata")
    message = error_of(spark, source_format, str(state_file), state="total")
    assert f"checkpoint path {state_file} is a file, not a directory" in message


def test_statestore_options_are_answered_with_ours(spark, source_format):
    message = error_of(spark, source_format, str(FLINK), batchId="1", operatorId="0",
                       state="total")
    assert ("unknown option(s) batchid (Spark's statestore option; here: checkpointId),"
            " operatorid (Spark's statestore option; here: operator)") in message


@pytest.mark.parametrize("flink", [True, False])
def test_a_write_whose_output_cannot_be_made_is_refused_naming_it(spark, tmp_path, flink):
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    rows = spark.createDataFrame([("k", 1)], "key string, value long")
    if flink:
        with pytest.raises(InvalidArgumentError, match=f"savepoint output {a_file}/new cannot"
                           f" be created: {a_file} is a file, not a directory"):
            write_state(rows, None, "op", "value", output=str(a_file / "new"),
                        kind="value", key_type="string", max_parallelism=128)
    else:
        with pytest.raises(InvalidArgumentError, match=f"checkpoint root {a_file}/new cannot"
                           f" be created: {a_file} is a file, not a directory"):
            write_state(rows, str(a_file / "new"), "op", "value", kind="value",
                        key_type="string", max_parallelism=128)
    assert [p.name for p in tmp_path.iterdir()] == ["a-file"]


def test_a_full_disk_under_a_spark_write_is_our_one_line_error(spark, tmp_path):
    """The tasks' section files fill a tmpfs: Spark's exception (the worker's traceback,
    then the JVM's) is re-raised as the task's own error, naming the file and the cause."""
    rows = spark.createDataFrame([(f"k{i}", i) for i in range(3000)], "key string, value long")
    with tmpfs(tmp_path / "disk", "8k") as disk:
        with pytest.raises(StorageError) as refused:
            write_state(rows, None, "op", "value", output=str(disk / "new"), kind="value",
                        key_type="string", max_parallelism=128)
        message = str(refused.value)
        assert message.startswith(f"cannot write {disk}/.new.tmp-")
        assert "No space left on device" in message and "\n" not in message
        assert not (disk / "new").exists()

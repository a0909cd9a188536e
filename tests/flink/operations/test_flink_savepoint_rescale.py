"""A savepoint under a new max parallelism restores in a real Flink 2.3 with exactly its state.

``rescale_max_parallelism`` writes a new canonical savepoint; each test restores it through
``tests/flink_restore.py`` in a real Flink configured with ``pipeline.max-parallelism`` = the
new value, and compares every key of every keyed state, every timer (with its window
namespace) and every operator state with the fixture's ``expected.json`` (computed from the
job's input events, not from any snapshot). On the heap backend the harness also reports
the key group whose map holds each entry and timer: ``check_placement`` requires it to be
the key group Flink computes for the key under the new max parallelism, so an entry left in
its old key group fails the test (the state API would not even find it).

Flink refusing a savepoint raises ``FlinkRestoreError``: a failing test, never a skip.
"""

from __future__ import annotations

import json

import pytest

from flink_fixture_checks import (
    FIXTURES,
    check_fixture,
    check_pyflink,
    check_shared_java,
    fixture_spec,
    fixture_truth,
    pyflink_spec,
    shared_java_spec,
)
from flink_restore import FIXTURE_JOB, restore, subtasks, values
from flink_snapshots import expected, only
from statesource.errors import CheckpointExistsError, InvalidArgumentError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.snappy import STREAM_IDENTIFIER
from statesource.flink.operations.rescale import rescale_max_parallelism
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.flink.statefiles.keyed_header import read_keyed_header
from statesource.format.columns import KEY_GROUP
from statesource.spark import rescale_max_parallelism as spark_rescale
from statesource.spark.schema import OPERATOR_INDEX


def check_written(path, max_parallelism: int, parallelism: int = 2,
                  compressed: bool = False) -> None:
    """What the writer put in ``_metadata`` and the headers, before Flink reads it: every
    operator at the new max parallelism, keyed state in canonical savepoint handles of
    files named relative to ``_metadata``, one per subtask, Snappy-compressed or not."""
    snapshot = FlinkSnapshot.open(str(path))
    assert {op.max_parallelism for op in snapshot.operators} == {max_parallelism}
    for op in snapshot.operators:
        handles = snapshot.keyed_handles(op)
        if not handles:
            continue
        assert op.parallelism == parallelism and len(handles) == parallelism
        assert [(h.start, h.end) for h in handles] == [
            (i * max_parallelism // parallelism, (i + 1) * max_parallelism // parallelism - 1)
            for i in range(parallelism)]
        for handle in handles:
            assert handle.savepoint and handle.stream.relative and "/" not in handle.stream.path
            data = snapshot.read_bytes(handle.stream, 0, handle.stream.size)
            header = read_keyed_header(BinaryReader(data, handle.stream.path))
            assert header.compressed is compressed
            framed = [data[o:o + len(STREAM_IDENTIFIER)] == STREAM_IDENTIFIER
                      for o in handle.offsets if o]
            assert framed == [compressed] * len(framed)


def rescaled_fixture(tmp_path, variant: str, kind: str, max_parallelism: int, **options):
    output = tmp_path / f"{variant}-{kind}-mp{max_parallelism}"
    done = rescale_max_parallelism(FIXTURES / variant / kind, output, max_parallelism,
                                   **options)
    assert done.output == str(output)
    assert {op.operator for op in done.operators} == {"stateful", "opaque", "windows"}
    return output, done


@pytest.mark.parametrize("variant, new, compression", [
    ("mp256", 1024, None),             # up, the 2-byte key-group prefix stays
    ("mp256", 128, "snappy"),          # down, 2-byte prefix -> 1 byte; compressed on request
    ("mp128-snappy", 256, None),       # up from a Snappy-compressed savepoint, kept compressed
    ("mp128-snappy", 1024, "none"),    # the case: 8 times the key groups; uncompressed
    ("mp256", 256, None),              # nothing changed: a round trip
], ids=["256-to-1024", "256-to-128-snappy", "snappy-128-to-256", "snappy-128-to-1024-plain",
        "256-round-trip"])
def test_a_new_max_parallelism_restores_with_every_key_in_its_new_key_group(
        tmp_path, variant, new, compression):
    """Snappy compression (``execution.checkpointing.snapshot-compression``) is kept from
    the input, or as asked: Flink reads each file as its header says."""
    output, done = rescaled_fixture(tmp_path, variant, "canonical", new,
                                    compression=compression)
    compressed = compression == "snappy" or (compression is None and variant != "mp256")
    assert done.compressed is compressed
    check_written(output, new, compressed=compressed)
    truth = fixture_truth(variant)
    assert not done.converted
    assert sum(op.timers for op in done.operators) == sum(
        len(w["timers"]) for w in truth["stateful"].values()) + len(truth["windows"])
    rows = restore(output, fixture_spec(new), java_sources=[FIXTURE_JOB])
    check_fixture(rows, {**truth, "max_parallelism": new}, parallelism=2)


def test_the_widest_prefix_and_back(tmp_path):
    """128 -> 32768 -> 128: the most key groups Flink allows, then a 2-byte prefix down to
    1 byte, each savepoint restored."""
    truth = fixture_truth("mp128-snappy")
    wide, _ = rescaled_fixture(tmp_path, "mp128-snappy", "canonical", 32768)
    check_written(wide, 32768, compressed=True)  # as the input was
    rows = restore(wide, fixture_spec(32768), java_sources=[FIXTURE_JOB])
    check_fixture(rows, {**truth, "max_parallelism": 32768}, parallelism=2)
    back = tmp_path / "back-to-128"
    rescale_max_parallelism(wide, back, 128)
    check_written(back, 128, compressed=True)
    rows = restore(back, fixture_spec(128), java_sources=[FIXTURE_JOB])
    check_fixture(rows, {**truth, "max_parallelism": 128}, parallelism=2)


def test_a_rescaled_savepoint_restores_on_rocksdb_at_another_parallelism(tmp_path):
    """RocksDB restores canonical savepoints only: the output is one, and Flink re-splits its
    key groups and operator state for 3 subtasks."""
    output, _ = rescaled_fixture(tmp_path, "mp256", "canonical", 1024)
    rows = restore(output, fixture_spec(1024, 3, "rocksdb"), java_sources=[FIXTURE_JOB])
    assert {d["keyedBackend"] for d in subtasks(rows, "stateful").values()} == {
        "RocksDBKeyedStateBackend"}
    check_fixture(rows, {**fixture_truth("mp256"), "max_parallelism": 1024}, parallelism=3,
                  heap=False)


def test_keyed_state_split_for_a_parallelism_of_its_own(tmp_path):
    """``parallelism=4`` writes four keyed-state files per keyed operator (operator state
    stays with its two subtasks); Flink restores it at parallelism 4."""
    output, done = rescaled_fixture(tmp_path, "mp256", "canonical", 512, parallelism=4)
    check_written(output, 512, parallelism=4)
    assert {(op.parallelism, op.new_parallelism) for op in done.operators} == {(2, 4)}
    rows = restore(output, fixture_spec(512, 4), java_sources=[FIXTURE_JOB])
    check_fixture(rows, {**fixture_truth("mp256"), "max_parallelism": 512}, parallelism=4)


@pytest.fixture(scope="module")
def shared_java_native():
    return only("java/native/savepoint-*")


def test_a_native_savepoint_is_converted_and_restores(tmp_path, shared_java_native):
    """A native savepoint (entries in the serializers' own layout) becomes a canonical one:
    String keys (composite keys with a key length), list, map and TTL values."""
    truth = expected("java")
    output = tmp_path / "java-native-mp1024"
    done = rescale_max_parallelism(shared_java_native, output, 1024)
    assert done.converted
    check_written(output, 1024, truth["parallelism"])
    rows = restore(output, shared_java_spec(1024, truth["parallelism"]),
                   java_sources=[FIXTURE_JOB])
    check_shared_java(rows, truth)


@pytest.fixture(scope="module")
def shared_pyflink_savepoint():
    return only("pyflink/savepoint-*")


def test_row_keys_of_a_pyflink_job_rescale(tmp_path, shared_pyflink_savepoint):
    """PyFlink keys by a one-field ``Row``, whose Java hashCode includes its row kind; the
    values are PyFlink's bytes (list states, one with TTL) and move untouched."""
    truth = expected("pyflink")
    output = tmp_path / "pyflink-mp4096"
    rescale_max_parallelism(shared_pyflink_savepoint, output, 4096)
    check_written(output, 4096, truth["parallelism"])
    rows = restore(output, pyflink_spec(4096, truth["parallelism"]), opt_jars=["flink-python"])
    check_pyflink(rows, truth)


def test_null_map_values_of_a_native_savepoint_restore_as_nulls(tmp_path):
    """The encoding fixture's native savepoint holds map values that are null (a null flag
    alone there): converted to the canonical layout (the flag, then the null as String's
    serializer writes it) and rescaled, Flink restores every map as the job wrote it."""
    truth = json.loads((FIXTURES / "encoding" / "expected.json").read_text())["keys"]
    output = tmp_path / "encoding-native-mp200"
    assert rescale_max_parallelism(FIXTURES / "encoding" / "native", output, 200).converted
    spec = {"max_parallelism": 200, "ignore_unclaimed_state": True, "operators": [
        {"uid": "edges", "key": "String", "keyed_states": [
            {"name": "nullable", "kind": "map", "user_key": "String",
             "user_value": "String"}]}]}
    restored = values(restore(output, spec, java_sources=[FIXTURES / "EncodingJob.java"]),
                      "edges", "nullable")
    wanted = {key: sorted(map(list, states["nullable"].items()))
              for key, states in truth.items() if states["nullable"]}
    assert any(None in dict(pairs).values() for pairs in wanted.values())
    assert {key: sorted(pairs) for key, pairs in restored.items()} == wanted


# -- from Spark: statesource.spark.rescale_max_parallelism to an output ----------------------


def test_a_new_max_parallelism_from_spark_reads_back_and_restores(spark, tmp_path):
    """``statesource.spark.rescale_max_parallelism(spark, <Flink savepoint>, DIR, M)``
    runs the rescale on the driver: every state reads back with the same rows in the key
    groups of the new max parallelism, and a real Flink restores the fixture's state."""
    source = FIXTURES / "mp128-snappy" / "canonical"
    output = tmp_path / "from-spark"
    done = spark_rescale(spark, str(source), str(output), 1024)
    assert done.output == str(output) and done.max_parallelism == 1024
    check_written(output, 1024, compressed=True)  # as the input was
    for state in ("total", "events", "per_user"):
        before = _read(spark, source, state)
        after = _read(spark, output, state)
        assert sorted(after.drop(KEY_GROUP, OPERATOR_INDEX).collect()) == sorted(
            before.drop(KEY_GROUP, OPERATOR_INDEX).collect()), state
        groups = {row[KEY_GROUP] for row in after.select(KEY_GROUP).collect()}
        assert max(groups) >= 128 and max(groups) < 1024, state  # the new layout's
    rows = restore(output, fixture_spec(1024), java_sources=[FIXTURE_JOB])
    check_fixture(rows, {**fixture_truth("mp128-snappy"), "max_parallelism": 1024},
                  parallelism=2)


@pytest.mark.parametrize("case, error, words", [
    ("output-exists", CheckpointExistsError, ["already exists"]),
    ("max-parallelism-0", InvalidArgumentError, ["max parallelism", "0"]),
    ("max-parallelism-32769", InvalidArgumentError, ["max parallelism", "32769"]),
    ("below-parallelism", InvalidArgumentError, ["parallelism 2", "max parallelism 1"]),
    ("one-operator", InvalidArgumentError, ["every operator", "operator"]),
    ("in-place", InvalidArgumentError, ["Flink snapshot", "output"]),
])
def test_refusals_from_spark_write_nothing(spark, tmp_path, case, error, words):
    output = tmp_path / "out"
    max_parallelism, target, options = 1024, str(output), {}
    if case == "output-exists":
        output.mkdir()
    elif case.startswith("max-parallelism-"):
        max_parallelism = int(case.rsplit("-", 1)[1])
    elif case == "below-parallelism":
        max_parallelism = 1
    elif case == "one-operator":
        options["operator"] = "stateful"
    elif case == "in-place":
        target = None
    with pytest.raises(error) as raised:
        spark_rescale(spark, str(FIXTURES / "mp256" / "canonical"), target, max_parallelism,
                      **options)
    assert all(word in str(raised.value) for word in words), str(raised.value)
    assert [p.name for p in tmp_path.iterdir()] == (["out"] if case == "output-exists" else [])


def _read(spark, path, state):
    return (spark.read.format("flinkstate").option("operator", "stateful")
            .option("state", state).load(str(path)))

"""Savepoints written from Flink 1.x snapshots, for Flink 1.x: restored by a real Flink 1.20.

The ``flink-1.20`` and ``flink-1.15`` fixtures (FixtureJob1x.java by a real Flink 1.20.5 and
1.15.4) are rescaled, erased, have a state dropped and one rewritten from Spark; each output
keeps its ``_metadata``
version (4, or 3 without checkpoint properties) and the serializer snapshots the job's Flink
wrote, and a Flink 1.20.5 (``apache-flink-libraries``, installed beside 2.3 by the README's
test command) restores it with every key compared to the job's model (generate.py).
"""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from flink_fixture_checks import FIXTURES, check_fixture, fixture_spec
from flink_restore import FLINK_1X_VERSION, restore, values
from statesource.errors import IncompatibleCheckpointError
from statesource.flink.operations.edit import drop_state, erase_keys
from statesource.flink.operations.rescale import rescale_max_parallelism
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.spark import write_state

pytestmark = pytest.mark.realflink

JOB = FIXTURES / "FixtureJob1x.java"
TTL = ("last_ttl",)
VERSIONS = {"flink-1.20": 4, "flink-1.15": 3}


def truth_of(version: str, max_parallelism: int | None = None) -> dict:
    truth = json.loads((FIXTURES / version / "expected.json").read_text())
    truth["max_parallelism"] = max_parallelism or truth["max_parallelism"]
    return truth


def restored(savepoint, max_parallelism: int, parallelism: int = 2) -> list[dict]:
    return restore(savepoint, fixture_spec(max_parallelism, parallelism, flink1x=True),
                   java_sources=[JOB], flink=FLINK_1X_VERSION)


def check_ttl(rows: list[dict], truth: dict, erased: tuple[int, ...] = ()) -> None:
    assert values(rows, "stateful", "last_ttl") == {
        int(k): w["last_ttl"] for k, w in truth["stateful"].items() if int(k) not in erased}


def version_of(savepoint) -> int:
    return FlinkSnapshot.open(str(savepoint)).metadata.version


@pytest.mark.parametrize("version, kind", [("flink-1.20", "canonical"),
                                           ("flink-1.15", "rocksdb")])
def test_a_new_max_parallelism_up_and_back_down_across_the_prefix_width(version, kind,
                                                                        tmp_path):
    up, down = tmp_path / "up", tmp_path / "down"
    rescale_max_parallelism(str(FIXTURES / version / kind), str(up), 256)  # 2-byte prefix
    rescale_max_parallelism(str(up), str(down), 100, parallelism=3)  # 1-byte again
    assert version_of(up) == version_of(down) == VERSIONS[version]
    for savepoint, max_parallelism in ((up, 256), (down, 100)):
        truth = truth_of(version, max_parallelism)
        rows = restored(savepoint, max_parallelism)
        check_fixture(rows, truth, 2, added=TTL)
        check_ttl(rows, truth)


@pytest.mark.parametrize("version, kind", [("flink-1.20", "native"),
                                           ("flink-1.15", "checkpoint")])
def test_erased_keys_of_a_converted_snapshot(version, kind, tmp_path):
    # the edited operator is converted to canonical, the others' native files are copied
    erased = (3, 17)
    output = tmp_path / "erased"
    erase_keys(str(FIXTURES / version / kind), str(output), "stateful", list(erased))
    metadata = FlinkSnapshot.open(str(output)).metadata
    assert metadata.version == VERSIONS[version]
    assert bool(metadata.properties) == (version == "flink-1.20")
    truth = truth_of(version)
    rows = restored(output, 128)
    check_fixture(rows, truth, 2, erased=erased, added=TTL)
    check_ttl(rows, truth, erased)


def test_a_dropped_state_is_gone_and_the_rest_restores(tmp_path):
    output = tmp_path / "dropped"
    drop_state(str(FIXTURES / "flink-1.20" / "canonical"), str(output), "stateful", "avg")
    truth = truth_of("flink-1.20")
    rows = restored(output, 128)
    check_fixture(rows, truth, 2, dropped={"avg"}, added=TTL)


def test_a_state_rewritten_from_spark_keeps_the_version_and_restores(spark, tmp_path):
    source = FIXTURES / "flink-1.20" / "canonical"
    total = (spark.read.format("flinkstate").option("operator", "stateful")
             .option("state", "total").load(str(source)))
    output = tmp_path / "doubled"
    write_state(total.select("key", (F.col("value") * 2).alias("value")), str(source),
                "stateful", "total", output=str(output))
    assert version_of(output) == 4
    truth = truth_of("flink-1.20")
    for want in truth["stateful"].values():
        want["total"] *= 2
    rows = restored(output, 128)
    check_fixture(rows, truth, 2, added=TTL)
    check_ttl(rows, truth)


def test_a_state_new_to_a_flink_1x_savepoint_is_refused(spark, tmp_path):
    source = FIXTURES / "flink-1.15" / "canonical"
    keys = spark.createDataFrame([(1, 2)], "key long, value long")
    with pytest.raises(IncompatibleCheckpointError,
                       match="written by Flink 1.11 to 1.15 \\(metadata version 3\\), and a state"
                             " new to it would get serializer snapshots as Flink 2.x writes"):
        write_state(keys, str(source), "stateful", "fresh", output=str(tmp_path / "out"),
                    kind="value")
    assert list(tmp_path.iterdir()) == []

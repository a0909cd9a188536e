"""Flink 1.x snapshots (``_metadata`` 3 and 4): read everywhere, named by uid, never rewritten.

The ``flink-1.20`` and ``flink-1.15`` fixtures are FixtureJob1x.java run by a real Flink
1.20.5 and 1.15.4 (generate.py ``--flink-1x``): heap canonical and native savepoints, a
retained heap checkpoint and a RocksDB canonical savepoint. Their states decode exactly
(test_generated_fixtures.py) and their files write back byte for byte
(test_flink_round_trips.py). Here: operators named by uid although versions 3 and 4 record
only ids, ``inspect`` and ``import-flink``, and writes refused until statesource writes
savepoints Flink 1.x restores.
"""

from __future__ import annotations

import json

import pytest

from flink_fixture_checks import FIXTURES
from statesource.cli import main
from statesource.errors import IncompatibleCheckpointError
from statesource.flink.handles import operator_id_of
from statesource.flink.operations.edit import erase_keys
from statesource.flink.operations.rescale import rescale_max_parallelism
from statesource.flink.operations.savepoint_target import FlinkSavepointTarget
from statesource.flink.reader import FlinkCheckpoint
from statesource.format.reader import Checkpoint

FLINK_120 = FIXTURES / "flink-1.20"
KINDS = ["canonical", "native", "checkpoint", "rocksdb"]
VERSIONS = {"flink-1.20": 4, "flink-1.15": 3}
TRUTH = json.loads((FLINK_120 / "expected.json").read_text())


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kind", KINDS)
def test_operators_are_named_by_uid_through_flinks_hash_of_it(version, kind):
    checkpoint = FlinkCheckpoint.open(str(FIXTURES / version / kind))
    assert checkpoint.snapshot.metadata.version == VERSIONS[version]
    op = checkpoint.snapshot.operator("stateful")
    assert (op.uid, op.name, op.operator_id) == (None, None, operator_id_of("stateful"))
    assert checkpoint.snapshot.operator(op.operator_id) is op  # the hex id keeps working
    assert checkpoint.operator("stateful").uid == op.operator_id  # what listings show


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kind", ["canonical", "rocksdb"])  # native ones hold Kryo values
def test_import_keeps_every_key(version, kind, tmp_path, capsys):
    assert main(["import-flink", str(FIXTURES / version / kind), str(tmp_path)]) == 0
    imported = Checkpoint.open(str(tmp_path))
    stateful = operator_id_of("stateful")
    rows = [row for table in imported.read_keyed_state("max_id", operator=stateful)
            for row in table.to_pylist()]
    assert {str(row["key"]): row["value"] for row in rows} == {
        key: want["max_id"] for key, want in TRUTH["stateful"].items()}
    checkpoint_id = FlinkCheckpoint.open(str(FIXTURES / version / kind)).checkpoint_id
    assert f"imported Flink checkpoint {checkpoint_id}" in capsys.readouterr().out


def test_inspect_reads_a_flink_1x_snapshot(capsys):
    assert main(["inspect", str(FLINK_120 / "canonical")]) == 0
    out = capsys.readouterr().out
    assert f"operator {operator_id_of('stateful')}" in out and "last_ttl" in out


@pytest.mark.parametrize("write", [
    lambda source, out: rescale_max_parallelism(source, out, 256),
    lambda source, out: erase_keys(source, out, "stateful", [3]),
    lambda source, out: FlinkSavepointTarget.open(source, out),
], ids=["rescale", "erase", "spark-write"])
@pytest.mark.parametrize("version, writer", [("flink-1.20", "1.16 to 1.20"),
                                             ("flink-1.15", "1.11 to 1.15")])
def test_no_savepoint_is_written_for_a_flink_1x_input(write, version, writer, tmp_path):
    with pytest.raises(IncompatibleCheckpointError,
                       match=f"written by Flink {writer} \\(metadata version {VERSIONS[version]}"
                             "\\): statesource reads it, but writes savepoints only for Flink 2.x"):
        write(str(FIXTURES / version / "canonical"), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_the_commands_refuse_in_one_line(tmp_path, capsys):
    assert main(["rescale", str(FLINK_120 / "native"), "--max-parallelism", "256",
                 "--output", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "statesource import-flink" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("version", VERSIONS)
def test_diff_between_flink_1x_snapshots(version, capsys):
    # the job's final state at both ends: the heap savepoint and RocksDB's, of two runs of
    # the same job; only TTL timestamps (the clock's) tell them apart
    source = FIXTURES / version
    assert main(["diff", str(source / "canonical"), str(source / "rocksdb")]) == 0
    out = capsys.readouterr().out
    stateful = out[out.index(f"operator {operator_id_of('stateful')}"):]
    for state in ("total", "max_id", "avg", "events", "per_user", "last"):
        assert f"  {state:<20} {0:>9,} {0:>9,} {0:>9,}  0 (of" in stateful

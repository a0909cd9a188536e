"""Flink 1.x snapshots (``_metadata`` 3 and 4): read everywhere, named by uid, rewritten alike.

The ``flink-1.20``, ``flink-1.18`` and ``flink-1.15`` fixtures are FixtureJob1x.java run by a
real Flink 1.20.5, 1.18.1 and 1.15.4 (generate.py ``--flink-1x``): heap canonical and native
savepoints, a retained heap checkpoint and a RocksDB canonical savepoint (and from 1.20,
RocksDB's native savepoint and checkpoint: its own files). Their states decode
exactly (test_generated_fixtures.py, and through Spark: tests/spark/test_flink_snapshots.py)
and their files write back byte for byte (test_flink_round_trips.py). Here: operators named by
uid although versions 3 and 4 record only ids, ``inspect``, ``import-flink`` and ``diff``; the
rescale command keeps the version (restored by a real Flink 1.20, as Spark's writes are:
test_flink_1x_writes.py); what a new state of a 1.x savepoint cannot have (a POJO's collection
fields, which 1.x gives Kryo, and ``Set``s) is refused, and a Flink version is asked of new
savepoints only.
"""

from __future__ import annotations

import json
import pickle
import shutil

import pytest

from flink_fixture_checks import CASES_1X, FIXTURES, FLINK_1X
from statesource.cli import main
from statesource.errors import InvalidArgumentError, TypeMismatchError
from statesource.flink.handles import operator_id_of
from statesource.flink.operations.savepoint_target import FlinkSavepointTarget
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.serializers.collections import SetSerializer
from statesource.flink.serializers.mapping import PojoClass
from statesource.flink.serializers.primitives import SIMPLE
from statesource.flink.statefiles.state_meta_writer import state_info
from statesource.format.reader import Checkpoint
from statesource.model import StateDeclaration, StateKind
from statesource.schema import ValueSchema
from statesource.sources import open_target
from statesource.types import LONG, VOID

FLINK_120 = FIXTURES / "flink-1.20"
TRUTH = json.loads((FLINK_120 / "expected.json").read_text())


@pytest.mark.parametrize("version, kind", CASES_1X)
def test_operators_are_named_by_uid_through_flinks_hash_of_it(version, kind):
    checkpoint = FlinkCheckpoint.open(str(FIXTURES / version / kind))
    assert checkpoint.snapshot.metadata.version == FLINK_1X[version]
    op = checkpoint.snapshot.operator("stateful")
    assert (op.uid, op.name, op.operator_id) == (None, None, operator_id_of("stateful"))
    assert checkpoint.snapshot.operator(op.operator_id) is op  # the hex id keeps working
    assert checkpoint.operator("stateful").uid == op.operator_id  # what listings show


@pytest.mark.parametrize("version, kind", CASES_1X)  # the heap's native ones: Kryo UUIDs too
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


def test_the_rescale_command_keeps_the_version(tmp_path, capsys):
    assert main(["rescale", str(FLINK_120 / "canonical"), "--max-parallelism", "256",
                 "--output", str(tmp_path / "out")]) == 0
    assert FlinkCheckpoint.open(str(tmp_path / "out")).snapshot.metadata.version == 4
    assert "wrote" in capsys.readouterr().out


@pytest.mark.parametrize("version", FLINK_1X)
def test_diff_between_flink_1x_snapshots(version, capsys):
    # the job's final state at both ends: the heap savepoint and RocksDB's, of two runs of
    # the same job; only TTL timestamps (the clock's) tell them apart
    source = FIXTURES / version
    assert main(["diff", str(source / "canonical"), str(source / "rocksdb")]) == 1  # last_ttl
    out = capsys.readouterr().out
    stateful = out[out.index(f"operator {operator_id_of('stateful')}"):]
    for state in ("total", "max_id", "avg", "events", "per_user", "last"):
        assert f"  {state:<20} {0:>9,} {0:>9,} {0:>9,}  0 (of" in stateful


def test_a_write_target_names_a_1x_operator_without_the_storage(tmp_path):
    # a Spark Connect client plans with a pickled copy of the target, which never opens the
    # base: the uid is resolved from what was read at opening (the copy here has no base left)
    base = tmp_path / "base"
    shutil.copytree(FLINK_120 / "canonical", base)
    copy = pickle.loads(pickle.dumps(FlinkSavepointTarget.open(str(base), str(tmp_path / "o"))))
    shutil.rmtree(base)
    assert copy.operator_uid("stateful") == operator_id_of("stateful")
    assert copy.operator_uid(operator_id_of("opaque")) == operator_id_of("opaque")
    assert copy.operator_uid("new-operator") == "new-operator"


PROFILE = {"type": "record", "name": "Profile", "fields": [
    {"name": "visits", "type": "long"},
    {"name": "tags", "type": {"type": "array", "items": "string"}}]}


def _profile(name: str) -> StateDeclaration:
    return StateDeclaration(name, StateKind.VALUE, VOID, {"value": ValueSchema.parse(PROFILE)})


def test_a_pojo_with_a_collection_field_is_refused_for_flink_1x(tmp_path):
    # Flink 1.x serializes a POJO's List field with Kryo (2.x with its ListSerializer)
    pojos = {"Profile": PojoClass("com.example.Profile")}
    output = tmp_path / "out"
    target = FlinkSavepointTarget.open(str(FLINK_120 / "canonical"), str(output), pojos=pojos)
    with pytest.raises(TypeMismatchError, match="state 'profile'.*the value.tags: Flink 1.x's"
                                                " type extraction makes a List a Kryo type"):
        target.sink("stateful", _profile("profile"), LONG, 128)
    fresh = FlinkSavepointTarget.open(None, str(tmp_path / "fresh"), pojos=pojos)
    assert fresh.sink("users", _profile("profile"), LONG, 128).info.value.nested()
    assert not output.exists()


def test_a_set_is_refused_for_flink_1x():
    pojo = PojoClass("com.example.Profile", serializers={"tags": SetSerializer(SIMPLE["string"])})
    declaration = _profile("profile")
    assert state_info(declaration, pojos={"Profile": pojo}).value.nested()
    with pytest.raises(TypeMismatchError, match="field tags of POJO com.example.Profile:"
                                                " SetSerializerSnapshot is new in Flink 2.0"):
        state_info(declaration, pojos={"Profile": pojo}, flink_major=1)


def test_a_flink_version_is_of_a_new_savepoint_only(tmp_path):
    with pytest.raises(InvalidArgumentError, match="Flink version 2.3: .*canonical was written"
                                                   " by Flink 1.16 to 1.20"):
        FlinkSavepointTarget.open(str(FLINK_120 / "canonical"), str(tmp_path / "o"),
                                  flink_version="2.3")
    assert FlinkSavepointTarget.open(str(FLINK_120 / "canonical"), str(tmp_path / "o"),
                                     flink_version="1.18").operator_uid("x") == "x"
    with pytest.raises(InvalidArgumentError, match="Flink version 1.20 is of a new Flink"):
        open_target(str(tmp_path / "checkpoints"), flink_version="1.20")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("release", ["1.15", "3.0", "latest", ""])
def test_export_for_a_release_statesource_does_not_write_is_one_line(release, tmp_path,
                                                                      capsys):
    assert main(["export-flink", str(tmp_path), "--output", str(tmp_path / "sp"),
                 "--flink-version", release]) == 1
    err = capsys.readouterr().err
    assert f"Flink version {release!r} is not one statesource writes savepoints for: give one" \
           " of 1.17, 1.18, 1.19, 1.20, 2.0, 2.1, 2.2, 2.3" in err and err.count("\n") == 1
    assert not (tmp_path / "sp").exists()

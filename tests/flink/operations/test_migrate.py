"""Flink 1.x snapshots migrated to Flink 2.3 savepoints, restored by a real Flink 2.3.

The ``flink-1.20`` and ``flink-1.15`` fixtures (FixtureJob1x.java by a real Flink 1.20.5 and
1.15.4) hold, besides plain states whose bytes and serializer snapshots 2.x reads as they
are, a Kryo ``UUID`` state (``opaque``/``last_uuid``): Kryo 2 bytes, which Flink 2.x's Kryo 5
does not read, so the plan re-encodes it. A native snapshot frames no value: there each UUID's
end is found by parsing its Kryo 2 bytes, so it migrates from there too (what cannot be
parsed walls its operator off: test_migrate_kryo_native.py). The output is
a ``_metadata`` version 6 savepoint with the uids given, which Flink 2.3 restores with every key
of the job's model (generate.py), the UUIDs included.
"""

from __future__ import annotations

import json

import pytest

from flink_fixture_checks import FIXTURES, check_fixture, fixture_spec
from flink_restore import FlinkRestoreError, restore
from statesource.cli import main
from statesource.errors import InvalidArgumentError
from statesource.flink.handles import operator_id_of
from statesource.flink.operations.migrate import BYTES, REENCODED, migrate
from statesource.flink.snapshot.directory import FlinkSnapshot

CLASSES = FIXTURES / "flink2" / "FixtureJob1x.java"
UIDS = ("stateful", "opaque", "windows", "broadcaster")


def test_the_plan_re_encodes_kryo_and_moves_the_rest():
    plan = migrate(str(FIXTURES / "flink-1.20" / "canonical"), None, dry_run=True)
    (kryo,) = [s for s in plan.states if s.action == REENCODED]
    assert (kryo.operator, kryo.state, kryo.kind) == (operator_id_of("opaque"), "last_uuid",
                                                      "keyed")
    moved = {(s.operator, s.state) for s in plan.states if s.action == BYTES}
    assert (operator_id_of("stateful"), "last") in moved  # a POJO without collections
    assert (operator_id_of("broadcaster"), "rules") in moved
    assert not plan.unmigratable


@pytest.mark.parametrize("kind", ["native", "checkpoint"])
def test_a_native_snapshot_is_walked_past_its_kryo_state(kind):
    plan = migrate(str(FIXTURES / "flink-1.20" / kind), None, dry_run=True)
    (kryo,) = [s for s in plan.states if s.action == REENCODED]
    assert (kryo.operator, kryo.state) == (operator_id_of("opaque"), "last_uuid")
    assert not plan.unmigratable


@pytest.mark.parametrize("uids, problem", [
    ({operator_id_of("stateful"): "opaque"}, "uid 'opaque' hashes to operator id"),
    ({operator_id_of("nope"): "nope"}, "uid 'nope' .* names no operator"),
])
def test_a_uid_must_hash_to_its_operator(uids, problem, tmp_path):
    with pytest.raises(InvalidArgumentError, match=problem):
        migrate(str(FIXTURES / "flink-1.20" / "canonical"), str(tmp_path / "out"), uids=uids,
                skip_unmigratable=True)


def test_only_1x_snapshots_migrate_and_only_to_2x(tmp_path):
    with pytest.raises(InvalidArgumentError, match="Flink 2.0 to 2.3 already"):
        migrate(str(FIXTURES / "mp256" / "canonical"), str(tmp_path / "out"))
    with pytest.raises(InvalidArgumentError, match="--to 1.20 is a Flink 1.x release"):
        migrate(str(FIXTURES / "flink-1.20" / "canonical"), str(tmp_path / "out"), to="1.20")


@pytest.mark.realflink
@pytest.mark.parametrize("version, kind", [("flink-1.20", "canonical"), ("flink-1.20", "native"),
                                           ("flink-1.15", "rocksdb")])
def test_a_migrated_savepoint_restores_in_flink_2_3(version, kind, tmp_path):
    output = tmp_path / "migrated"
    done = migrate(str(FIXTURES / version / kind), str(output), skip_unmigratable=True,
                   uids={operator_id_of(uid): uid for uid in UIDS})
    assert not done.unmigratable
    metadata = FlinkSnapshot.open(str(output)).metadata
    assert metadata.version == 6
    assert {op.uid for op in metadata.operators} == {*UIDS, None}  # the sources' none
    truth = json.loads((FIXTURES / version / "expected.json").read_text())
    rows = restore(output, fixture_spec(128, flink1x=True), java_sources=[CLASSES])
    check_fixture(rows, truth, 2, dropped=set(), added=("last_ttl",))


@pytest.mark.realflink
def test_flink_2_3_itself_cannot_restore_the_1x_savepoint():
    # why migration exists: the Kryo 2 state fails the restore of its operator
    with pytest.raises(FlinkRestoreError, match="Could not restore keyed state backend for"
                                                f" Dump_{operator_id_of('opaque')}"):
        restore(FIXTURES / "flink-1.20" / "canonical", fixture_spec(128, flink1x=True),
                java_sources=[CLASSES])


def test_the_command_plans_writes_and_names_uids(tmp_path, capsys):
    source = str(FIXTURES / "flink-1.20" / "canonical")
    assert main(["migrate", source, "--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["output"] is None and plan["to"] == "2.3"
    assert {(s["state"], s["action"]) for s in plan["states"]
            if s["operator"] == operator_id_of("opaque")} == {
        ("last_uuid", "re-encoded"), ("_timer_state/event_user-timers", "bytes"),
        ("_timer_state/processing_user-timers", "bytes")}
    assert main(["migrate", source, "--output", str(tmp_path / "out"),
                 "--uid", "stateful", "--uid", f"{operator_id_of('windows')}=windows"]) == 0
    assert "left out" not in capsys.readouterr().out
    assert {op.uid for op in FlinkSnapshot.open(str(tmp_path / "out")).metadata.operators} == {
        "stateful", "windows", None}


@pytest.mark.parametrize("arguments, problem", [
    (["--dry-run", "--uid", "abc=x"], "--uid abc=x: 'abc' is not an operator id"),
    (["--dry-run", "--uid", f"{operator_id_of('x')}="], "the uid is empty"),
    ([], "needs --output DIR, or --dry-run"),
    (["--dry-run", "--field-type", "profile.tags"], "expected STATE.FIELD=CLASS"),
    (["--dry-run", "--field-type", "last_uuid.tags=String"],
     "--field-type last_uuid.tags: no keyed state of"),
])
def test_bad_command_lines_are_one_line(arguments, problem, capsys):
    assert main(["migrate", str(FIXTURES / "flink-1.20" / "canonical"), *arguments]) == 1
    err = capsys.readouterr().err
    assert problem in err and err.count("\n") == 1


@pytest.mark.parametrize("field_types, problem", [
    ({"profile.counts": "String"}, "a java.util.Map field takes key and value classes, 1 given"),
    ({"profile.tags": ("String", "Long")}, "takes element classes, 2 given"),
    ({"profile.tags": "Char"}, "'Char' is no element class .* one of Boolean, Byte"),
    ({"profile.visits": "Long"}, "those that do: profile.counts, profile.tags"),
])
def test_declared_field_types_name_a_collection_field_and_its_classes(field_types, problem):
    with pytest.raises(InvalidArgumentError, match=problem):
        migrate(str(FIXTURES / "kryo" / "flink-1.20" / "canonical"), None, dry_run=True,
                field_types=field_types)


def test_declared_field_types_show_in_the_plan():
    plan = migrate(str(FIXTURES / "kryo" / "flink-1.20" / "canonical"), None, dry_run=True,
                   field_types={"profile.tags": "java.lang.String",
                                "profile.counts": ("String", "Long")})
    (profile,) = [s for s in plan.states if s.state == "profile"]
    assert "'tags' (java.util.List<String>)" in profile.reason
    assert "'counts' (java.util.Map<String, Long>)" in profile.reason

"""``migrate`` of Kryo state, against what a real Flink 2.3 writes itself (the ``kryo`` fixture).

The fixture (tests/kryo_fixture.py; generate.py ``--kryo-1x``) holds canonical savepoints of one
job (KryoJob.java) run by Flink 1.20 and by Flink 2.3, on the heap backend and RocksDB, from
the same events: a POJO whose ``List`` and ``Map`` fields 1.20 wrote with Kryo 2, a ``UUID``
and a ``HashMap`` under Kryo, timers and plain states, and a user class that is no POJO under
Kryo, which cannot migrate. Here, without a JVM: the plan and its refusal, and the migrated
savepoint compared, state by state, with Flink 2.3's own: the entries statesource reads (the
values it decodes, Kryo values as their bytes) and each keyed file's header, where every
serializer snapshot is. What Flink 2.3 restores from it, and how the job continues on it:
test_migrate_kryo_restore.py.
"""

from __future__ import annotations

import json

import pytest
from kryo_fixture import KRYO, UIDS, truth

from statesource.cli import main
from statesource.errors import IncompatibleCheckpointError
from statesource.flink.handles import operator_id_of
from statesource.flink.operations import migrate as migration
from statesource.flink.operations.migrate import BYTES, UNMIGRATABLE, migrate
from statesource.flink.operations.reencode import KeptValues
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.snapshot.directory import FlinkSnapshot

BACKENDS = ["canonical", "rocksdb"]
"""The fixture's savepoints of each Flink: the heap backend's and RocksDB's."""
KRYO_STATES = {("profiles", "profile"), ("uuids", "last_uuid"), ("uuids", "bag")}
"""The states whose values 1.20 wrote with Kryo 2 (the POJO through its collection fields)
and which migrate re-encodes."""
NOTE = ("notes", "note")
"""The state of a user class under Kryo, which cannot migrate."""


def source(backend: str) -> str:
    return str(KRYO / "flink-1.20" / backend)


def uids() -> dict[str, str]:
    return {operator_id_of(uid): uid for uid in UIDS}


@pytest.mark.parametrize("flink", ["flink-1.20", "flink-2.3"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_fixture_holds_the_model_in_its_plain_states(flink, backend):
    """The states statesource decodes on both sides match the model of the events (the
    Kryo ones are checked by the restores in Flink 1.20 and 2.3)."""
    model = truth()
    checkpoint = FlinkCheckpoint.open(str(KRYO / flink / backend))
    read = entries(checkpoint, "profiles", "total")
    assert read == {key: s["total"] for key, s in model.items()}
    assert entries(checkpoint, "profiles", "per_tag") == {
        key: s["per_tag"] for key, s in model.items()}
    timers: dict = {}
    for key, ts in entries(checkpoint, "profiles", "_timer_state/event_user-timers",
                           many=True):
        timers.setdefault(key, []).append(ts)
    assert {key: sorted(found) for key, found in timers.items()} == {
        key: s["timers"] for key, s in model.items()}
    if flink == "flink-2.3":  # 2.3's POJO has collection fields statesource decodes
        assert entries(checkpoint, "profiles", "profile") == {
            key: s["profile"] for key, s in model.items()}


def test_the_plan_re_encodes_kryo_and_names_the_user_class_it_cannot_migrate():
    plan = migrate(source("canonical"), None, dry_run=True, uids=uids())
    actions = {(uid_of(s.operator), s.state): s for s in plan.states}
    (refused,) = plan.unmigratable
    assert (uid_of(refused.operator), refused.state, refused.kind) == (*NOTE, "keyed")
    assert "KryoJob$Note" in refused.reason
    assert "Kryo" in refused.reason
    for state in KRYO_STATES:
        assert actions[state].action not in (BYTES, UNMIGRATABLE), actions[state]
    for state in [("profiles", "total"), ("profiles", "per_tag"),
                  ("profiles", "_timer_state/event_user-timers")]:
        assert actions[state].action == BYTES


def test_the_user_class_refuses_the_migration_and_nothing_is_written(tmp_path):
    with pytest.raises(IncompatibleCheckpointError,
                       match=f"operator '{operator_id_of('notes')}', keyed state 'note':"
                             r" .*KryoJob\$Note") as refused:
        migrate(source("canonical"), str(tmp_path / "out"), uids=uids())
    for state in KRYO_STATES:  # only the user class is named
        assert f"'{state[1]}'" not in str(refused.value)
    assert list(tmp_path.iterdir()) == []


def test_the_command_names_the_state_the_class_and_the_reason(tmp_path, capsys):
    assert main(["migrate", source("rocksdb"), "--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    refused = [s for s in plan["states"] if s["action"] == UNMIGRATABLE]
    assert [(s["operator"], s["state"]) for s in refused] == [(operator_id_of("notes"), "note")]
    assert "KryoJob$Note" in refused[0]["reason"]
    assert main(["migrate", source("rocksdb"), "--output", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "KryoJob$Note" in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("backend", BACKENDS)
def test_skip_unmigratable_leaves_the_user_class_out(backend, tmp_path):
    done = migrate(source(backend), str(tmp_path / "out"), uids=uids(), skip_unmigratable=True)
    assert [(uid_of(s.operator), s.state) for s in done.unmigratable] == [NOTE]
    migrated = FlinkCheckpoint.open(str(tmp_path / "out"))
    assert "note" not in names(migrated, "notes")
    assert names(migrated, "profiles") == names(FlinkCheckpoint.open(source(backend)), "profiles")


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_migrated_savepoint_holds_what_flink_2_3_writes_itself(backend, tmp_path):
    """State by state, the entries of the migrated 1.20 savepoint are those of Flink 2.3's
    savepoint of the same job after the same events, and each keyed file's header (its
    serializer snapshots) is the one 2.3 writes."""
    migrate(source(backend), str(tmp_path / "out"), uids=uids(), skip_unmigratable=True)
    assert_as_flink_2_3_writes(str(tmp_path / "out"), backend)


@pytest.mark.parametrize("limit", [0, 20_000])
def test_what_the_plan_keeps_for_the_write_does_not_change_the_savepoint(
        limit, tmp_path, monkeypatch):
    """The write re-encodes what the plan's scan kept, or reads and decodes a state again
    where it was not kept whole: with nothing kept (0), or a budget that runs out some key
    groups into each state (20,000 bytes: after 8 of the POJO's, 31 of ``last_uuid``'s, 65
    of ``bag``'s; what was kept of it is let go), the savepoint is still the one Flink 2.3
    writes."""
    monkeypatch.setattr(migration, "KeptValues", lambda *_: KeptValues(limit))
    migrate(source("canonical"), str(tmp_path / "out"), uids=uids(), skip_unmigratable=True)
    assert_as_flink_2_3_writes(str(tmp_path / "out"), "canonical")


def assert_as_flink_2_3_writes(out: str, backend: str) -> None:
    migrated = FlinkCheckpoint.open(out)
    flink = FlinkCheckpoint.open(str(KRYO / "flink-2.3" / backend))
    assert FlinkSnapshot.open(out).metadata.version == 6
    for uid in UIDS:
        wanted = names(flink, uid) - ({NOTE[1]} if uid == NOTE[0] else set())
        assert names(migrated, uid) == wanted
        for state in sorted(wanted):
            assert (entries(migrated, uid, state, many=True)
                    == entries(flink, uid, state, many=True)), (uid, state)
    for uid in ("profiles", "uuids"):  # every state moved: the headers are whole
        assert headers(migrated, uid) == headers(flink, uid), uid


# ------------------------------------------------------------------------------ helpers


def uid_of(operator_id: str) -> str:
    return {operator_id_of(uid): uid for uid in UIDS}.get(operator_id, operator_id)


def names(checkpoint: FlinkCheckpoint, uid: str) -> set[str]:
    header = checkpoint.snapshot.header(checkpoint.snapshot.operator(operator_id_of(uid)))
    return {info.name for info in header.states} if header else set()


def entries(checkpoint: FlinkCheckpoint, uid: str, state: str, many: bool = False):
    """``key -> value`` of one keyed state (``many``: a sorted list of ``(key, value)``, for
    timers, of which a key has many), namespaces left out: every state here has none."""
    found = []
    for _, keys, namespaces, stored in checkpoint.entries(state, operator=operator_id_of(uid)):
        assert set(namespaces) == {None}
        found += zip(keys, stored)
    if many:
        return sorted(found, key=repr)
    assert len({key for key, _ in found}) == len(found)
    return dict(found)


def headers(checkpoint: FlinkCheckpoint, uid: str) -> dict[tuple[int, int], bytes]:
    """Each keyed file's header bytes, by the key groups the file holds."""
    snapshot = checkpoint.snapshot
    op = snapshot.operator(operator_id_of(uid))
    return {(h.start, h.end): snapshot.header_bytes(op, h)
            for h in snapshot.keyed_handles(op)}

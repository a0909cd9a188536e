"""Kryo state in Flink 1.20's native snapshots: read, migrated, restored by a real Flink 2.3.

The ``kryo`` fixture (tests/kryo_fixture.py; generate.py ``--kryo-1x``) holds, besides the
canonical savepoints, what the same Flink 1.20 run of KryoJob.java took next: a native
savepoint and a retained checkpoint of the heap backend (the native layout: nothing frames
a value, so a Kryo value's end is found by parsing its Kryo 2 bytes) and of RocksDB (its
own SST files). Here:

- every state statesource reads of them holds what the canonical savepoint of the same run
  holds, Kryo values as the same bytes (found where they end in the native layout);
- the user class under Kryo (``notes``' ``note``) cannot be parsed, so in the native layout
  no key group of its operator can be walked past it: the migration refuses, naming it, or
  leaves that operator out whole and says so; reading it fails with one clear error;
- a value that cannot be parsed in a state of JDK classes (a ``java.sql.Time`` where the
  fixture has a ``UUID``) walls its operator off the same way, found by the plan's scan;
- migrated, each snapshot holds what Flink 2.3 writes itself for the same job (entries and
  header bytes), and a real Flink 2.3 restores it with every key of the model.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from kryo_fixture import JOB, KRYO, UIDS, spec
from test_migrate_kryo import entries, headers, names, uid_of, uids
from test_migrate_kryo_restore import ALL, expected_state, restored_state

from flink_restore import restore
from statesource.cli import main
from statesource.errors import CorruptCheckpointError, IncompatibleCheckpointError
from statesource.flink.handles import operator_id_of
from statesource.flink.operations.migrate import BYTES, UNMIGRATABLE, migrate
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.snapshot.directory import FlinkSnapshot

HEAP = ["native", "checkpoint"]
"""The heap backend's native savepoint and checkpoint: the native layout."""
KINDS = {"native": "canonical", "checkpoint": "canonical", "rocksdb-native": "rocksdb",
         "rocksdb-checkpoint": "rocksdb"}
"""Each 1.20 snapshot kind, and Flink 2.3's savepoint of the same backend."""
READ = [("profiles", "total"), ("profiles", "per_tag"), ("profiles", "profile"),
        ("profiles", "_timer_state/event_user-timers"), ("uuids", "last_uuid"),
        ("uuids", "bag")]
RE_ENCODED = {("profiles", "profile"), ("uuids", "last_uuid"), ("uuids", "bag")}
UUID_VALUE = bytes.fromhex("5401e3bece9d80889fe00d89eda281ee8d8792fc")
"""A ``last_uuid`` value as Kryo 2 wrote it in the fixture: class id 82 (+2), a new object,
two variable-length longs."""


def source(kind: str) -> str:
    return str(KRYO / "flink-1.20" / kind)


def with_value(copy: Path, value: bytes) -> None:
    """The native savepoint copied to ``copy``, its one :data:`UUID_VALUE` made ``value``."""
    shutil.copytree(source("native"), copy)
    (held,) = [f for f in copy.iterdir() if UUID_VALUE in f.read_bytes()]
    data = held.read_bytes()
    assert data.count(UUID_VALUE) == 1
    held.write_bytes(data.replace(UUID_VALUE, value))


@pytest.mark.parametrize("kind", KINDS)
def test_native_snapshots_read_what_the_canonical_savepoint_holds(kind):
    native = FlinkCheckpoint.open(source(kind))
    canonical = FlinkCheckpoint.open(source("canonical"))
    for uid, state in READ:
        assert entries(native, uid, state, many=True) == entries(canonical, uid, state,
                                                                 many=True), (uid, state)


@pytest.mark.parametrize("kind", HEAP)
def test_the_user_class_cannot_be_read_where_nothing_frames_it(kind):
    with pytest.raises(IncompatibleCheckpointError,
                       match=r"state 'note' of a native snapshot: .*KryoJob\$Note.*take a"
                             " canonical savepoint"):
        entries(FlinkCheckpoint.open(source(kind)), "notes", "note")


@pytest.mark.parametrize("kind", HEAP)
def test_the_user_class_walls_its_operator_off(kind, tmp_path, capsys):
    plan = migrate(source(kind), None, dry_run=True, uids=uids())
    (refused,) = plan.unmigratable
    assert (uid_of(refused.operator), refused.state) == ("notes", None)
    assert "state 'note' cannot move as its bytes" in refused.reason
    assert r"KryoJob$Note" in refused.reason
    actions = {(uid_of(s.operator), s.state): s.action for s in plan.states}
    assert all(actions[state] not in (BYTES, UNMIGRATABLE) for state in RE_ENCODED)
    assert main(["migrate", source(kind), "--output", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert f"operator '{operator_id_of('notes')}', the operator: state 'note'" in err
    assert "--skip-unmigratable leaves them out" in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()
    assert main(["migrate", source(kind), "--output", str(tmp_path / "out"),
                 "--skip-unmigratable"]) == 0
    said = capsys.readouterr().out
    assert operator_id_of("notes") in said and "left out" in said
    left = {op.operator_id for op in FlinkSnapshot.open(str(tmp_path / "out")).metadata.operators}
    assert operator_id_of("notes") not in left
    assert {operator_id_of("profiles"), operator_id_of("uuids")} <= left


def test_a_value_that_cannot_be_parsed_walls_its_operator_off(tmp_path):
    """One ``UUID`` of the native savepoint made a ``java.sql.Time`` (Chill's id 78): the
    plan's scan cannot find where it ends, so its operator cannot be walked past."""
    copy = tmp_path / "native"
    with_value(copy, bytes([78 + 2]) + UUID_VALUE[1:])
    with pytest.raises(IncompatibleCheckpointError,
                       match=f"operator '{operator_id_of('uuids')}', the operator: state"
                             " 'last_uuid' of a native snapshot: .* java.sql.Time"):
        migrate(str(copy), str(tmp_path / "out"), uids=uids())
    assert not (tmp_path / "out").exists()
    done = migrate(str(copy), str(tmp_path / "out"), uids=uids(), skip_unmigratable=True)
    assert sorted((uid_of(s.operator), s.state) for s in done.unmigratable) == [
        ("notes", None), ("uuids", None)]
    left = {op.operator_id for op in FlinkSnapshot.open(str(tmp_path / "out")).metadata.operators}
    assert operator_id_of("uuids") not in left and operator_id_of("profiles") in left


def test_a_corrupt_value_refuses_the_migration_and_the_read(tmp_path):
    """One ``UUID``'s reference marker made a null (which Kryo never writes after a class):
    no bytes after it can be trusted to be where they seem, so nothing is left out or
    written; the error names the file."""
    copy = tmp_path / "native"
    with_value(copy, UUID_VALUE[:1] + b"\x00" + UUID_VALUE[2:])
    for dry_run in (True, False):
        with pytest.raises(CorruptCheckpointError, match="a null reference after a class"):
            migrate(str(copy), None if dry_run else str(tmp_path / "out"), dry_run=dry_run,
                    skip_unmigratable=True)
    assert not (tmp_path / "out").exists()
    with pytest.raises(CorruptCheckpointError, match="a null reference after a class"):
        entries(FlinkCheckpoint.open(str(copy)), "uuids", "last_uuid")


def test_a_pojo_field_that_cannot_be_parsed_in_a_canonical_savepoint_says_so(tmp_path):
    """Inside a POJO nothing frames a Kryo field even in a canonical savepoint: one
    ``profile``'s ``List`` field's first element made a ``java.sql.Time`` (Chill's id 78) is
    refused naming the class and the file, without calling the snapshot native or advising
    the canonical savepoint it is."""
    copy = tmp_path / "canonical"
    shutil.copytree(source("canonical"), copy)
    name = b"java.util.ArrayLis\xf4"  # the field's class, by name; a new object, its size
    held = min(f for f in copy.iterdir() if name in f.read_bytes())
    data = bytearray(held.read_bytes())
    at = data.index(name) + len(name) + 2
    assert data[at - 2:at + 2] == b"\x01\x03\x03\x01"  # 3 elements, the first a new String
    data[at] = 78 + 2
    held.write_bytes(bytes(data))
    with pytest.raises(IncompatibleCheckpointError, match=f"{held.name}, byte offset \\d+: a"
                       " Kryo value of java.sql.Time") as raised:
        entries(FlinkCheckpoint.open(str(copy)), "profiles", "profile", many=True)
    assert "native" not in str(raised.value)
    assert "take a canonical savepoint" not in str(raised.value)


@pytest.mark.parametrize("kind", KINDS)
def test_migrated_native_snapshots_hold_what_flink_2_3_writes_itself(kind, tmp_path):
    out = str(tmp_path / "out")
    migrate(source(kind), out, uids=uids(), skip_unmigratable=True)
    migrated = FlinkCheckpoint.open(out)
    flink = FlinkCheckpoint.open(str(KRYO / "flink-2.3" / KINDS[kind]))
    assert FlinkSnapshot.open(out).metadata.version == 6
    for uid in ("profiles", "uuids"):
        assert names(migrated, uid) == names(flink, uid)
        for state in sorted(names(flink, uid)):
            assert (entries(migrated, uid, state, many=True)
                    == entries(flink, uid, state, many=True)), (uid, state)
        assert headers(migrated, uid) == headers(flink, uid), uid
    if kind in HEAP:  # walled off whole
        assert operator_id_of("notes") not in {
            op.operator_id for op in FlinkSnapshot.open(out).metadata.operators}
    else:
        assert names(migrated, "notes") == names(flink, "notes") - {"note"}


@pytest.mark.realflink
@pytest.mark.parametrize("kind", KINDS)
def test_a_migrated_native_snapshot_restores_in_flink_2_3_with_every_key(kind, tmp_path):
    output = tmp_path / "migrated"
    migrate(source(kind), str(output), skip_unmigratable=True,
            uids={operator_id_of(uid): uid for uid in UIDS})
    backend = "rocksdb" if kind.startswith("rocksdb") else "hashmap"
    rows = restore(output, spec(backend, ALL), java_sources=[JOB])
    assert restored_state(rows, ALL) == expected_state(ALL)

"""RocksDB databases of a max parallelism above 128 (two-byte key-group prefixes), rebuilt by a
rescaled restore: IncrementalJob.java's rescaled run (tests/fixtures/flink/rescaled, Flink 2.3,
max parallelism 1000, generate.py ``--only-rescaled``; ``rescaled-1.20``, Flink 1.20, max
parallelism 256, ``--rescaled-1x``): an incremental checkpoint at parallelism 2 (``first``),
and one of the job restored from it at parallelism 3 (``second``), each subtask's database
rebuilt from the old ones: Flink opens the old database that overlaps most, clips it to the
new key groups by range deletions, and copies the other old databases' keys of its key groups
in (RocksDBIncrementalRestoreOperation, RocksDBIncrementalCheckpointUtils.clipDBWithKeyGroupRange).
So the second checkpoint's tables hold keys of key groups of other subtasks, hidden by range
deletions: the fixture's fact asserted here, which the readers must answer as Flink does.

Truth: the job's model after each phase (expected.json, from the events alone), Flink's own
canonical savepoint of each checkpoint's state (``<phase>/savepoint``), and a real Flink of
the same version restoring a new max parallelism of the second checkpoint, every key compared.
The JVM reader of the same fixtures: tests/spark/test_jvm_rocksdb.py.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path

import pytest

from flink_fixture_checks import (
    INCREMENTAL_STATES,
    RESCALED,
    check_incremental_restore,
    found_keyed,
    incremental_keyed,
    incremental_spec,
)
from flink_restore import FLINK_1X_VERSION, restore
from statesource.flink.handles import RocksDBHandle
from statesource.flink.operations.rescale import rescale_max_parallelism
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.rocksdb.database import read_live_files
from statesource.flink.rocksdb.table import SstFile
from statesource.flink.snapshot.directory import FlinkSnapshot

TRUTHS = {version: json.loads((path / "expected.json").read_text())
          for version, path in RESCALED.items()}
VERSIONS = list(RESCALED)
PHASES = ["first", "second"]


def _checkpoint(version: str, phase: str) -> Path:
    return RESCALED[version] / phase / TRUTHS[version]["checkpoints"][phase]


def _savepoint(version: str, phase: str) -> Path:
    return RESCALED[version] / phase / "savepoint"


def _read(path: Path, version: str, phase: str, keys: Collection[str] | None = None
          ) -> dict[str, dict[str, list]]:
    """Every state of ``incr`` at ``path`` in the model's form (each row checked to lie in its
    key's key group and subtask), of the keys ``keys`` alone if given (a lookup)."""
    truth = {"max_parallelism": TRUTHS[version]["max_parallelism"],
             "parallelism": TRUTHS[version]["parallelism"][phase]}
    source = FlinkCheckpoint.open(str(path))
    found = {}
    for state in INCREMENTAL_STATES:
        rows = [row for table in source.read_keyed_state(state, operator="incr", keys=keys)
                for row in table.to_pylist() if keys is None or row["key"] in keys]
        found[state] = found_keyed(rows, "incr", state, truth)
    return found


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("phase", PHASES)
def test_every_state_reads_as_the_model_and_as_flinks_canonical_savepoint(version, phase):
    expected = incremental_keyed(TRUTHS[version][phase])
    assert _read(_checkpoint(version, phase), version, phase) == expected
    assert _read(_savepoint(version, phase), version, phase) == expected


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("phase", PHASES)
def test_each_database_reads_as_the_bytes_of_flinks_canonical_savepoint(version, phase):
    """Flink writes its canonical savepoint of a RocksDB job iterating each key group of the
    backend's range: the transcoded database, byte for byte, key group for key group."""
    ours = FlinkSnapshot.open(str(_checkpoint(version, phase)))
    flinks = FlinkSnapshot.open(str(_savepoint(version, phase)))
    pairs = list(zip(ours.keyed_handles(ours.operator("incr")),
                     flinks.keyed_handles(flinks.operator("incr")), strict=True))
    assert len(pairs) == TRUTHS[version]["parallelism"][phase]
    for mine, theirs in pairs:
        assert (mine.start, mine.offsets) == (theirs.start, theirs.offsets)
        assert ours.read_bytes(mine.stream, 0, mine.stream.size) == flinks.read_bytes(
            theirs.stream, 0, theirs.stream.size)


def _tables(version: str, phase: str) -> list[tuple[RocksDBHandle, str, list[SstFile]]]:
    """(handle, column family, its live tables) of every subtask's database."""
    source = FlinkCheckpoint.open(str(_checkpoint(version, phase)))
    read = source.snapshot.read_bytes
    found = []
    for subtask in source.snapshot.operator("incr").subtasks:
        for handle in subtask.keyed:
            assert isinstance(handle, RocksDBHandle)
            files = {f.name: (lambda f=f: read(f.stream, 0, f.stream.size)) for f in handle.files}
            found += [(handle, family, tables)
                      for family, tables in read_live_files(files).items()]
    return found


def _key_group(key: bytes) -> int:
    return int.from_bytes(key[:2], "big")  # two-byte prefixes: max parallelism > 128


@pytest.mark.parametrize("version", VERSIONS)
def test_the_rescaled_databases_hold_keys_of_other_subtasks_under_range_deletions(version):
    """The fact the fixture covers: after the rescaled restore, the databases' tables hold keys
    of key groups outside their subtask's range (the old databases' tables, whole), and range
    deletions (with two-byte bounds) over key groups outside it cover every such key."""
    strays = clipped = 0
    for handle, family, tables in _tables(version, "second"):
        deletions = [d for table in tables for d in table.range_deletions()]
        for deletion in deletions:
            assert len(deletion.start) == len(deletion.end) == 2, family
            assert not handle.start <= _key_group(deletion.start) <= handle.end
            assert _key_group(deletion.end) - 1 < handle.start or _key_group(
                deletion.start) > handle.end
        clipped += len(deletions)
        for table in tables:
            for key, sequence, _, _ in table.entries():
                if not handle.start <= _key_group(key) <= handle.end:
                    strays += 1
                    assert any(d.start <= key < d.end and sequence < d.sequence
                               for d in deletions), (family, key.hex())
    assert strays > 100 and clipped >= 3
    for handle, family, tables in _tables(version, "first"):  # never rescaled: none of that
        assert not any(table.range_deletions() for table in tables), family
        assert all(handle.start <= _key_group(key) <= handle.end
                   for table in tables for key, _, _, _ in table.entries()), family


def test_flink_2_3s_rescale_left_a_table_of_a_range_deletion_alone():
    """A column family with no entries (no processing-time timer was ever registered) holds,
    after the restore, one table of the clip's range deletion and nothing else."""
    empty = [tables for _, family, tables in _tables("2.3", "second")
             if family == "_timer_state/processing_user-timers"]
    assert len(empty) == 3
    for (table,) in empty:
        assert table.range_deletions() and not list(table.entries())


@pytest.mark.parametrize("version", VERSIONS)
def test_a_lookup_of_each_key_equals_the_full_read(version):
    whole = _read(_checkpoint(version, "second"), version, "second")
    for key in sorted(TRUTHS[version]["second"]):
        found = _read(_checkpoint(version, "second"), version, "second", keys=[key])
        assert found == {state: {where: entries for where, entries in by_key.items()
                                 if json.loads(where)[0] == key}
                         for state, by_key in whole.items()}, key


@pytest.mark.realflink
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("backend", ["rocksdb", "hashmap"])
def test_a_new_max_parallelism_of_the_rescaled_checkpoint_restores_every_key(
        version, backend, tmp_path):
    """To max parallelism 128 (one-byte prefixes), at parallelism 2: each Flink restores it."""
    rescale_max_parallelism(str(_checkpoint(version, "second")), str(tmp_path / "out"), 128)
    flink = {"1.20": {"flink": FLINK_1X_VERSION}}.get(version, {})
    rows = restore(tmp_path / "out", incremental_spec(backend, 128, 2), **flink)
    check_incremental_restore(rows, TRUTHS[version]["second"])

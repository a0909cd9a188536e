"""The JVM reader's plan of RocksDB state (statesource.flink.jvm_layout): made from each
database's meta data and MANIFEST alone, nothing converted; per database the live tables of
the state's column family, found where the Python reader finds them (a checkpoint's shared
files in its job's ``shared/``, by the absolute paths another machine recorded); and the
states it declines, each with its reason, so that a silent hand-over to the Python source
fails here. The rows the plan reads: tests/spark/test_jvm_rocksdb.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from statesource.flink.handles import RocksDBHandle
from statesource.flink.jvm_layout import jvm_layout
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.rocksdb import read_live_files

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "flink"
HEAP_TIMERS = "heap timers kept in the raw keyed state"
KRYO = "has serializers the column decoders do not take"
DECLINED = {
    "flink-1.20/rocksdb-native": {"last_uuid": KRYO},
    "flink-1.20/rocksdb-checkpoint": {"last_uuid": KRYO},
    "incremental/rocksdb-timers/chk-2": {},
    "incremental/heap-timers/chk-2": {"_timer_state/processing_user-timers": HEAP_TIMERS,
                                      "_timer_state/event_user-timers": HEAP_TIMERS},
    "lazy/rocksdb-native": {},
    "lazy/rocksdb-incremental/chk-5": {},
}
"""Snapshots of RocksDB databases and the states whose plan the JVM reader declines: Kryo
values (no column decoder), and heap timers, which are raw keyed state."""


def _rocksdb_snapshots() -> list[str]:
    """Every fixture of RocksDB databases (some are being added beside this test)."""
    found = []
    for metadata in FIXTURES.rglob("_metadata"):
        snapshot = FlinkCheckpoint.open(str(metadata.parent)).snapshot
        if any(isinstance(h, RocksDBHandle) for op in snapshot.operators
               for s in op.subtasks for h in s.keyed):
            found.append(str(metadata.parent.relative_to(FIXTURES)))
    return sorted(found)


SNAPSHOTS = _rocksdb_snapshots()


def test_the_fixtures_named_are_found():
    assert set(DECLINED) <= set(SNAPSHOTS)


@pytest.mark.parametrize("snapshot", SNAPSHOTS)
def test_each_state_is_planned_from_the_manifests_alone_or_declined_with_its_reason(snapshot):
    checkpoint = FlinkCheckpoint.open(str(FIXTURES / snapshot))
    declined: dict[str, str] = {}
    for op in checkpoint.snapshot.operators:
        handles = [h for s in op.subtasks for h in s.keyed if isinstance(h, RocksDBHandle)]
        tables = {(h.start, family): _paths(checkpoint, h, found) for h in handles
                  for family, found in _live_tables(checkpoint, h).items()}
        for info in checkpoint.snapshot.header(op).states if handles else ():
            layout = jvm_layout(checkpoint, op.operator_id, info.name)
            if isinstance(layout, str):
                declined[info.name] = layout
                continue
            paths = [path for path, _, _ in layout.files]
            weights = {}
            for database in layout.state["rocksdb"]:
                first, count = database["firstFile"], database["fileCount"]
                (handle,) = [h for h in handles if f"key groups {h.start}.." in database["source"]]
                assert paths[first:first + count] == tables[(handle.start, info.name)]
                share = sum(size for _, _, size in layout.files[first:first + count])
                weights.update(dict.fromkeys(range(handle.start, handle.end + 1),
                                             share // handle.count))
            assert sum(d["fileCount"] for d in layout.state["rocksdb"]) == len(paths)
            # every key group of each database holding the state, weighed by its tables' share
            assert [(r.key_group, r.length) for r in layout.key_groups] == sorted(weights.items())
        assert checkpoint.snapshot.unconverted_table_bytes(op) is not None or not handles, \
            "planning converted a database"
        if any(checkpoint.snapshot.heap_timers(s) for s in op.subtasks):
            assert all(declined.get(info.name, "").find(HEAP_TIMERS) >= 0
                       for info in checkpoint.timer_states(op.operator_id))
    named = {name: next((r for r in (HEAP_TIMERS, KRYO) if r in reason), reason)
             for name, reason in declined.items()}
    assert set(named.values()) <= {HEAP_TIMERS, KRYO}, named
    assert named == DECLINED.get(snapshot, named)


def _live_tables(checkpoint: FlinkCheckpoint, handle: RocksDBHandle) -> dict[str, list[str]]:
    """Each column family's live tables, by their RocksDB names, as the Python reader opens
    them."""
    read = checkpoint.snapshot.read_bytes
    families = read_live_files({f.name: read(f.stream, 0, f.stream.size) for f in handle.files})
    return {family: [t.source for t in found] for family, found in families.items()}


def _paths(checkpoint: FlinkCheckpoint, handle: RocksDBHandle, names: list[str]) -> list[str]:
    streams = {f.name: f.stream for f in handle.files}
    return [os.path.realpath(checkpoint.snapshot.file_location(streams[n]).path) for n in names]


def test_shared_tables_named_by_another_machines_paths_are_the_jobs_own():
    path = FIXTURES / "lazy" / "rocksdb-incremental" / "chk-5"
    layout = jvm_layout(FlinkCheckpoint.open(str(path)), "lazy", "count")
    assert not isinstance(layout, str)
    shared = os.path.realpath(path.parent / "shared")
    assert layout.files and all(p.startswith(shared + os.sep) for p, _, _ in layout.files)
    assert all(Path(p).is_file() and Path(p).stat().st_size == size
               for p, _, size in layout.files)

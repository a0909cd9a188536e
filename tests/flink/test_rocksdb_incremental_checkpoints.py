"""Two retained incremental RocksDB checkpoints of one real Flink run, the second sharing the
first's SST files, with RocksDB timers and with heap timers: IncrementalJob.java run by Flink 2.3
(tests/fixtures/flink/incremental, generate.py ``--only-incremental``) and by Flink 1.20
(``incremental-1.20``, ``--incremental-1x``), whose heap timers are raw keyed state in 1.20's
legacy timer format. Beside them, Flink 2.3's run of the same job with incremental
checkpointing off (``incremental/full-checkpoint``, generate.py ``--only-full-checkpoint``): two
checkpoints each holding its whole databases in its own directory.

Truth: the job's model of its state after each phase (expected.json, from the events alone),
and a real Flink of the same version restoring a new max parallelism of the second checkpoint,
every key compared.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flink_fixture_checks import (
    FULL_CHECKPOINT,
    INCREMENTAL,
    INCREMENTAL_RUNS,
    check_incremental_restore,
    incremental_spec,
)
from flink_restore import FLINK_1X_VERSION, restore
from statesource.flink.handles import RocksDBHandle
from statesource.flink.operations.edit import drop_state, erase_keys
from statesource.flink.operations.rescale import rescale_max_parallelism
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.rocksdb import keys
from statesource.flink.rocksdb.database import read_live_files

TRUTHS = {version: json.loads((path / "expected.json").read_text())
          for version, path in INCREMENTAL.items()}
VERSIONS = list(INCREMENTAL)
RUNS = ["rocksdb-timers", "heap-timers"]
EVENT_TIMERS = "_timer_state/event_user-timers"


def _checkpoint(run: str, phase: str, version: str = "2.3") -> str:
    checkpoints = TRUTHS[version]["checkpoints"][run]
    return str(INCREMENTAL[version] / run / checkpoints[0 if phase == "first" else 1])


def _state(source: FlinkCheckpoint, state: str) -> dict:
    found: dict = {}
    for table in source.read_keyed_state(state, operator="incr"):
        for row in table.to_pylist():
            if state == "seen":
                found.setdefault(row["key"], []).append(row["list_element"])
            elif state == "tags":
                found.setdefault(row["key"], {})[row["user_key"]] = row["user_value"]
            elif state == EVENT_TIMERS:
                found.setdefault(row["key"], []).append(row["timestamp"])
            else:
                found[row["key"]] = row["value"]
    return found


def _model(phase: str, state: str, version: str = "2.3") -> dict:
    held = TRUTHS[version][phase]
    if state == "tags":
        return {key: s["tags"] for key, s in held.items() if s["tags"]}
    return {key: s[state] for key, s in held.items() if state in s}


@pytest.mark.parametrize(("version", "run"), INCREMENTAL_RUNS)
@pytest.mark.parametrize("phase", ["first", "second"])
def test_every_state_of_each_checkpoint_reads_as_the_model(version, run, phase):
    source = FlinkCheckpoint.open(_checkpoint(run, phase, version))
    for state in ("count", "seen", "tags"):
        assert _state(source, state) == _model(phase, state, version), state
    assert [t.name for t in source.timer_states("incr")] == [
        "_timer_state/processing_user-timers", EVENT_TIMERS]
    found = _state(source, EVENT_TIMERS)
    assert {key: sorted(t) for key, t in found.items()} == _model(phase, "timers", version)
    assert not _state(source, "_timer_state/processing_user-timers")


def _rocksdb_handles(run: str, phase: str, version: str) -> list[tuple[FlinkCheckpoint,
                                                                        RocksDBHandle]]:
    source = FlinkCheckpoint.open(_checkpoint(run, phase, version))
    return [(source, h) for s in source.snapshot.operator("incr").subtasks for h in s.keyed
            if isinstance(h, RocksDBHandle)]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("run", RUNS)
def test_the_second_checkpoint_shares_sst_files_of_the_first(version, run):
    def tables(phase: str) -> set[str]:
        return {str(f.stream.path) for _, h in _rocksdb_handles(run, phase, version)
                for f in h.shared}

    first, second = tables("first"), tables("second")
    assert first & second
    assert second - first  # and tables of its own: the second phase's writes


@pytest.mark.parametrize("phase", ["first", "second"])
def test_a_full_checkpoint_holds_its_whole_databases_in_its_own_directory(phase):
    """Incremental checkpointing off, Flink 2.3 records no shared file: every file of each
    subtask's database, its SST files among them, is the checkpoint's own, named relative to
    its directory (so no other checkpoint holds it), and the job's ``shared/`` stays empty."""
    directory = Path(_checkpoint(FULL_CHECKPOINT, phase))
    handles = _rocksdb_handles(FULL_CHECKPOINT, phase, "2.3")
    assert len(handles) == TRUTHS["2.3"]["parallelism"]
    for _, handle in handles:
        assert not handle.shared
        assert sum(f.name.endswith(".sst") for f in handle.private) >= 2
        for file in handle.private:
            assert file.stream.relative and file.stream.path is not None
            assert (directory / file.stream.path).is_file(), file
    assert not any((directory.parent / "shared").glob("*"))


def _seen_operand_keys(run: str, phase: str, version: str) -> list[list[set[bytes]]]:
    """Per subtask, per live table of ``seen``, the keys it holds merge operands of."""
    found = []
    for source, handle in _rocksdb_handles(run, phase, version):
        read = source.snapshot.read_bytes
        files = {f.name: (lambda f=f, read=read: read(f.stream, 0, f.stream.size))
                 for f in handle.files}
        found.append([{key for key, _, kind, _ in table.entries() if kind == keys.MERGE}
                      for table in read_live_files(files)["seen"]])
    return found


@pytest.mark.parametrize(("version", "run"), INCREMENTAL_RUNS)
def test_a_list_states_appends_lie_as_operands_in_several_tables(version, run):
    """So the reader's merge across tables is what makes the lists the model's: in some
    subtask's database of the run's checkpoints, keys of ``seen`` whose merge operands are
    in more than one SST file."""
    spread = sum(len(a & b) for phase in ("first", "second")
                 for tables in _seen_operand_keys(run, phase, version)
                 for i, a in enumerate(tables) for b in tables[i + 1:])
    assert spread > 10


def test_flink_1_20s_rocksdb_compacted_a_list_state_before_the_second_checkpoint():
    """RocksDB 6.20 (Flink 1.20) compacted the heap-timer run's ``seen`` to level 1 before its
    second checkpoint: the appends are merged values there, not operands, so that checkpoint
    (which reads as the model, above) covers compaction's output beside fresh level-0 tables."""
    subtasks = _seen_operand_keys("heap-timers", "second", "1.20")
    assert all(tables for tables in subtasks)
    assert not any(operands for tables in subtasks for operands in tables)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_lookup_in_the_second_checkpoint_equals_the_model(version):
    source = FlinkCheckpoint.open(_checkpoint("rocksdb-timers", "second", version))
    for key in ("k0", "k3", "k20", "k29"):
        rows = [r for t in source.read_keyed_state("seen", operator="incr", keys=[key])
                for r in t.to_pylist() if r["key"] == key]
        assert [r["list_element"] for r in rows] == TRUTHS[version]["second"][key]["seen"]
    assert not source.snapshot._canonical


@pytest.mark.realflink
@pytest.mark.parametrize(("version", "run", "backend", "timer_service"), [
    *((version, run, backend, timer_service) for version in VERSIONS
      for run, backend, timer_service in (
          ("rocksdb-timers", "hashmap", None), ("rocksdb-timers", "rocksdb", None),
          ("heap-timers", "rocksdb", "HEAP"), ("heap-timers", "hashmap", None))),
    ("2.3", FULL_CHECKPOINT, "rocksdb", None), ("2.3", FULL_CHECKPOINT, "hashmap", None)])
def test_a_new_max_parallelism_of_the_second_checkpoint_restores_every_key(
        version, run, backend, timer_service, tmp_path):
    """Each Flink restores the rescale of its own checkpoint, Flink 1.20 the heap timers of
    its raw keyed state, which the rescale writes as timer states."""
    rescale_max_parallelism(_checkpoint(run, "second", version), str(tmp_path / "out"), 256)
    flink = {"1.20": {"flink": FLINK_1X_VERSION}}.get(version, {})
    rows = restore(tmp_path / "out", incremental_spec(backend, timer_service=timer_service),
                   **flink)
    check_incremental_restore(rows, TRUTHS[version]["second"])


@pytest.mark.parametrize("version", VERSIONS)
def test_a_rescale_writes_heap_timers_as_the_canonical_savepoints_timer_states(version, tmp_path):
    """Flink writes heap timers of a RocksDB checkpoint (not of a savepoint) as raw keyed state,
    in the legacy timer format; its canonical savepoint of the job holds them as timer states
    after the RocksDB ones. The rescaled savepoint holds them so, and no raw keyed state."""
    checkpoint = _checkpoint("heap-timers", "second", version)
    expected_timers = _model("second", "timers", version)
    op = FlinkCheckpoint.open(checkpoint).snapshot.operator("incr")
    assert all(s.raw_keyed for s in op.subtasks)
    result = rescale_max_parallelism(checkpoint, str(tmp_path / "out"), 256)
    assert result.operators[0].timers == sum(map(len, expected_timers.values()))
    rescaled = FlinkCheckpoint.open(str(tmp_path / "out"))
    assert not any(s.raw_keyed for s in rescaled.snapshot.operator("incr").subtasks)
    header = rescaled.snapshot.header(rescaled.snapshot.operator("incr"))
    assert header is not None
    assert [i.name for i in header.states] == ["count", "seen", "tags",
                                               "_timer_state/processing_user-timers",
                                               EVENT_TIMERS]
    found = _state(rescaled, EVENT_TIMERS)
    assert {key: sorted(t) for key, t in found.items()} == expected_timers
    for state in ("count", "seen", "tags"):
        assert _state(rescaled, state) == _model("second", state, version), state


@pytest.mark.parametrize("version", VERSIONS)
def test_an_erase_and_a_drop_take_heap_timers_as_timer_states(version, tmp_path):
    """Erasing keys removes their heap timers too; dropping the timer state removes them all;
    neither leaves the raw keyed state they came from."""
    checkpoint = _checkpoint("heap-timers", "second", version)
    expected_timers = _model("second", "timers", version)
    erased = erase_keys(checkpoint, str(tmp_path / "erased"), "incr", ["k0", "k3"])
    assert not erased.missing
    source = FlinkCheckpoint.open(str(tmp_path / "erased"))
    assert not any(s.raw_keyed for s in source.snapshot.operator("incr").subtasks)
    found = _state(source, EVENT_TIMERS)
    expected = {key: t for key, t in expected_timers.items() if key not in ("k0", "k3")}
    assert {key: sorted(t) for key, t in found.items()} == expected
    assert _state(source, "count") == {key: c for key, c in
                                       _model("second", "count", version).items()
                                       if key not in ("k0", "k3")}
    dropped = drop_state(checkpoint, str(tmp_path / "dropped"), "incr", EVENT_TIMERS)
    assert dict(dropped.removed)[EVENT_TIMERS] == sum(map(len, expected_timers.values()))
    source = FlinkCheckpoint.open(str(tmp_path / "dropped"))
    assert not any(s.raw_keyed for s in source.snapshot.operator("incr").subtasks)
    assert [t.name for t in source.timer_states("incr")] == ["_timer_state/processing_user-timers"]
    assert _state(source, "seen") == _model("second", "seen", version)


@pytest.mark.realflink
def test_a_real_flink_restores_an_erase_of_a_heap_timer_checkpoint_without_its_keys(tmp_path):
    erased = ("k0", "k3")
    erase_keys(_checkpoint("heap-timers", "second"), str(tmp_path / "out"), "incr", erased)
    rows = restore(tmp_path / "out", incremental_spec("rocksdb", 128, timer_service="HEAP"))
    check_incremental_restore(rows, TRUTHS["2.3"]["second"], erased)

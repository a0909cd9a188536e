"""Two retained incremental RocksDB checkpoints of one real Flink 2.3 run, the second sharing the
first's SST files (tests/fixtures/flink/incremental: IncrementalJob.java, generate.py
``--only-incremental``), with RocksDB timers and with heap timers.

Truth: the job's model of its state after each phase (expected.json, from the events alone),
and a real Flink restoring a new max parallelism of the second checkpoint, every key compared.
"""

from __future__ import annotations

import json

import pytest

from flink_fixture_checks import FIXTURES
from flink_restore import restore, timers, values
from statesource.flink.handles import RocksDBHandle
from statesource.flink.operations.edit import drop_state, erase_keys
from statesource.flink.operations.rescale import rescale_max_parallelism
from statesource.flink.reader import FlinkCheckpoint

INCREMENTAL = FIXTURES / "incremental"
TRUTH = json.loads((INCREMENTAL / "expected.json").read_text())
RUNS = ["rocksdb-timers", "heap-timers"]
EVENT_TIMERS = "_timer_state/event_user-timers"


def _checkpoint(run: str, phase: str) -> str:
    return str(INCREMENTAL / run / TRUTH["checkpoints"][run][0 if phase == "first" else 1])


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


def _model(phase: str, state: str) -> dict:
    held = TRUTH[phase]
    if state == "tags":
        return {key: s["tags"] for key, s in held.items() if s["tags"]}
    return {key: s[state] for key, s in held.items() if state in s}


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("phase", ["first", "second"])
def test_every_state_of_each_checkpoint_reads_as_the_model(run, phase):
    source = FlinkCheckpoint.open(_checkpoint(run, phase))
    for state in ("count", "seen", "tags"):
        assert _state(source, state) == _model(phase, state), state
    assert [t.name for t in source.timer_states("incr")] == [
        "_timer_state/processing_user-timers", EVENT_TIMERS]
    found = _state(source, EVENT_TIMERS)
    assert {key: sorted(t) for key, t in found.items()} == _model(phase, "timers")
    assert not _state(source, "_timer_state/processing_user-timers")


@pytest.mark.parametrize("run", RUNS)
def test_the_second_checkpoint_shares_sst_files_of_the_first(run):
    def tables(phase: str) -> set[str]:
        op = FlinkCheckpoint.open(_checkpoint(run, phase)).snapshot.operator("incr")
        return {str(f.stream.path) for s in op.subtasks for h in s.keyed
                if isinstance(h, RocksDBHandle) for f in h.shared}

    first, second = tables("first"), tables("second")
    assert first & second
    assert second - first  # and tables of its own: the second phase's writes


def test_a_lookup_in_the_second_checkpoint_equals_the_model():
    source = FlinkCheckpoint.open(_checkpoint("rocksdb-timers", "second"))
    for key in ("k0", "k3", "k20", "k29"):
        rows = [r for t in source.read_keyed_state("seen", operator="incr", keys=[key])
                for r in t.to_pylist() if r["key"] == key]
        assert [r["list_element"] for r in rows] == TRUTH["second"][key]["seen"]
    assert not source.snapshot._canonical


def _spec(backend: str, timer_service: str | None = None) -> dict:
    states = [{"name": "count", "kind": "value", "value": "Long"},
              {"name": "seen", "kind": "list", "element": "Long"},
              {"name": "tags", "kind": "map", "user_key": "String", "user_value": "Long"}]
    return {"max_parallelism": 256, "parallelism": 3, "state_backend": backend,
            **({"timer_service": timer_service} if timer_service else {}),
            "operators": [{"uid": "incr", "key": "String", "keyed_states": states,
                           "timers": [{"name": "user-timers"}]}]}


@pytest.mark.realflink
@pytest.mark.parametrize(("run", "backend", "timer_service"), [
    ("rocksdb-timers", "hashmap", None), ("rocksdb-timers", "rocksdb", None),
    ("heap-timers", "rocksdb", "HEAP"), ("heap-timers", "hashmap", None)])
def test_a_new_max_parallelism_of_the_second_checkpoint_restores_every_key(
        run, backend, timer_service, tmp_path):
    rescale_max_parallelism(_checkpoint(run, "second"), str(tmp_path / "out"), 256)
    _assert_restored_as_the_model(restore(tmp_path / "out", _spec(backend, timer_service)))


def _assert_restored_as_the_model(rows: list, erased: tuple[str, ...] = ()) -> None:
    """Every key and timer a real Flink restored equals the second phase's model (but for
    the keys ``erased``)."""
    def kept(model: dict) -> dict:
        return {key: value for key, value in model.items() if key not in erased}

    for state in ("count", "seen", "tags"):
        restored = values(rows, "incr", state)
        if state == "tags":
            restored = {key: dict(pairs) for key, pairs in restored.items()}
        assert restored == kept(_model("second", state)), state
    restored_timers = {key: [timestamp for _, timestamp in entries]
                       for key, entries in timers(rows, "incr", "user-timers").items()}
    assert restored_timers == kept(_model("second", "timers"))


def test_a_rescale_writes_heap_timers_as_the_canonical_savepoints_timer_states(tmp_path):
    """Flink writes heap timers of a RocksDB checkpoint (not of a savepoint) as raw keyed state,
    in the legacy timer format; its canonical savepoint of the job holds them as timer states
    after the RocksDB ones. The rescaled savepoint holds them so, and no raw keyed state."""
    op = FlinkCheckpoint.open(_checkpoint("heap-timers", "second")).snapshot.operator("incr")
    assert all(s.raw_keyed for s in op.subtasks)
    result = rescale_max_parallelism(_checkpoint("heap-timers", "second"),
                                     str(tmp_path / "out"), 256)
    assert result.operators[0].timers == sum(map(len, _model("second", "timers").values()))
    rescaled = FlinkCheckpoint.open(str(tmp_path / "out"))
    assert not any(s.raw_keyed for s in rescaled.snapshot.operator("incr").subtasks)
    header = rescaled.snapshot.header(rescaled.snapshot.operator("incr"))
    assert header is not None
    assert [i.name for i in header.states] == ["count", "seen", "tags",
                                               "_timer_state/processing_user-timers",
                                               EVENT_TIMERS]
    found = _state(rescaled, EVENT_TIMERS)
    assert {key: sorted(t) for key, t in found.items()} == _model("second", "timers")
    for state in ("count", "seen", "tags"):
        assert _state(rescaled, state) == _model("second", state), state


def test_an_erase_and_a_drop_take_heap_timers_as_timer_states(tmp_path):
    """Erasing keys removes their heap timers too; dropping the timer state removes them all;
    neither leaves the raw keyed state they came from."""
    erased = erase_keys(_checkpoint("heap-timers", "second"), str(tmp_path / "erased"), "incr",
                        ["k0", "k3"])
    assert not erased.missing
    source = FlinkCheckpoint.open(str(tmp_path / "erased"))
    assert not any(s.raw_keyed for s in source.snapshot.operator("incr").subtasks)
    found = _state(source, EVENT_TIMERS)
    expected = {key: t for key, t in _model("second", "timers").items() if key not in ("k0", "k3")}
    assert {key: sorted(t) for key, t in found.items()} == expected
    assert _state(source, "count") == {key: c for key, c in _model("second", "count").items()
                                       if key not in ("k0", "k3")}
    dropped = drop_state(_checkpoint("heap-timers", "second"), str(tmp_path / "dropped"), "incr",
                         EVENT_TIMERS)
    assert dict(dropped.removed)[EVENT_TIMERS] == sum(map(len, _model("second", "timers").values()))
    source = FlinkCheckpoint.open(str(tmp_path / "dropped"))
    assert not any(s.raw_keyed for s in source.snapshot.operator("incr").subtasks)
    assert [t.name for t in source.timer_states("incr")] == ["_timer_state/processing_user-timers"]
    assert _state(source, "seen") == _model("second", "seen")


@pytest.mark.realflink
def test_a_real_flink_restores_an_erase_of_a_heap_timer_checkpoint_without_its_keys(tmp_path):
    erased = ("k0", "k3")
    erase_keys(_checkpoint("heap-timers", "second"), str(tmp_path / "out"), "incr", erased)
    rows = restore(tmp_path / "out", {**_spec("rocksdb", "HEAP"), "max_parallelism": 128})
    _assert_restored_as_the_model(rows, erased)

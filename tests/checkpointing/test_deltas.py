"""Per-entry delta runs (format version 4) against the dict model and hand-computed cases.

The random rounds drive every kind of change (values, namespaces, list appends
and replacements, map puts and removes, clears, TTL expiry) through
incremental, full and failing checkpoints and restores, with a small run
bound so that compactions happen; every checkpoint must restore to the model,
every change feed must be the model's difference, and ``retain`` must keep
what the kept checkpoints need.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pyarrow as pa
import pytest
from format.test_change_feed import feed_changes, model_changes

import statesource.checkpointing.writer as writer_module
import statesource.format.commit as commit_module
import statesource.format.datafile as datafile_module
import statesource.format.reader as reader_module
from checkpointing.model import Job
from checkpointing.rounds import check_restores, run_rounds
from rewritten_files import rewrite_data_file, with_column
from sample_state import dump, merged
from statesource.checkpointing import CheckpointWriter, restore_keyed_backend
from statesource.cli import main
from statesource.errors import CorruptCheckpointError
from statesource.format import Checkpoint, retain
from statesource.format.changefeed import ChangeFeed
from statesource.format.deltas import (
    BASE_ROW,
    DELTA_KIND,
    PRIOR,
    TOMBSTONE,
    UPSERT,
    delta_schema,
    merge_runs,
)
from statesource.keygroups import assign_to_key_group
from statesource.rescale import rescale_parallelism
from statesource.state.changes import TRACKED_ENTRIES_FLOOR, KeyGroupChanges
from statesource.state.descriptors import ValueStateDescriptor
from statesource.state.keyed_backend import KeyedStateBackend
from statesource.types import LONG

MAX_RUNS = 2


def _runs_per_key_group(checkpoint: Checkpoint) -> list[int]:
    return [len(runs) for state in checkpoint.operator().keyed_states
            for runs in state.runs_of().values()]


@pytest.mark.parametrize("seed", range(3))
def test_rounds_with_compactions_restore_and_feed_as_the_model(tmp_path, monkeypatch, seed):
    root = str(tmp_path / "root")
    committed = run_rounds(root, 100 + seed, monkeypatch, rounds=24, keys=400, warmup=2500,
                           max_delta_runs=MAX_RUNS)
    checkpoints = {i: Checkpoint.open(root, checkpoint_id=i) for i in committed}
    runs = [n for c in checkpoints.values() for n in _runs_per_key_group(c)]
    assert runs and max(runs) <= MAX_RUNS  # deltas were written, and never past the bound
    assert any(c.metadata.format_version == 5 for c in checkpoints.values())
    for start, end in itertools.combinations(sorted(committed), 2):
        for state in checkpoints[end].operator().keyed_states:
            feed = ChangeFeed(checkpoints[start], checkpoints[end], state=state.name)
            assert feed_changes(feed) == model_changes(
                state.name, committed[start][state.name], committed[end][state.name]), (
                start, end, state.name)
    plan = retain(root, 3)
    for checkpoint_id in plan.kept:
        assert Checkpoint.open(root, checkpoint_id=checkpoint_id).verify() > 0
        check_restores(root, checkpoint_id, committed[checkpoint_id])


def _job(entries: int) -> tuple[KeyedStateBackend, object, dict[int, int]]:
    backend = KeyedStateBackend("long", 16)
    state = backend.get_state(ValueStateDescriptor("counts", "long"))
    model = {}
    for key in range(entries):
        backend.set_current_key(key)
        state.update(key)
        model[key] = key
    return backend, state, model


def _set(backend, state, model, key: int, value: int | None) -> None:
    backend.set_current_key(key)
    state.update(value)
    if value is None:
        model.pop(key, None)
    else:
        model[key] = value


def test_a_feed_between_consecutive_checkpoints_reads_only_their_runs(tmp_path, monkeypatch):
    backend, state, model = _job(2000)
    root = str(tmp_path / "root")
    with CheckpointWriter(root, incremental=True) as writer:
        writer.write(1, {"op": [backend]})
        _set(backend, state, model, 5, 500)       # update
        _set(backend, state, model, 7, None)      # delete
        _set(backend, state, model, 9000, 1)      # insert
        _set(backend, state, model, 9001, 2)      # inserted and removed again: no change
        _set(backend, state, model, 9001, None)
        _set(backend, state, model, 11, 11)       # written, but to the same value
        info = writer.write(2, {"op": [backend]})
    assert info.metadata.format_version == 5
    state_meta = info.metadata.operator().keyed_state("counts")
    assert {loc.key_group for d in state_meta.delta_files for loc in d.file.locations} == {
        assign_to_key_group(k, LONG, 16) for k in (5, 7, 9000, 11)}

    def no_whole_reads(*args, **kwargs):
        raise AssertionError("a key group was read whole")

    feed = ChangeFeed.open(root, 1, 2)
    monkeypatch.setattr(Checkpoint, "read_keyed_state", no_whole_reads)
    assert feed_changes(feed) == {("update", 5, None, None, 5, 500),
                                  ("delete", 7, None, None, 7, None),
                                  ("insert", 9000, None, None, None, 1)}


def test_the_write_side_falls_back_to_the_whole_key_group_when_it_changes_mostly(tmp_path):
    backend, state, model = _job(4000)
    root = str(tmp_path / "root")
    key_group = assign_to_key_group(0, LONG, 16)
    same_group = [k for k in range(4000) if assign_to_key_group(k, LONG, 16) == key_group]
    with CheckpointWriter(root, incremental=True) as writer:
        writer.write(1, {"op": [backend]})
        for key in same_group:
            _set(backend, state, model, key, -key)
        _set(backend, state, model, 1 if key_group != assign_to_key_group(1, LONG, 16) else 2, 0)
        info = writer.write(2, {"op": [backend]})
    meta = info.metadata.operator().keyed_state("counts")
    assert key_group not in meta.runs_of()  # rewritten whole, into chk-2's base file
    assert any(f.path.startswith("chk-2/") and key_group in {loc.key_group for loc in f.locations}
               for f in meta.files)
    assert len(meta.runs_of()) == 1
    assert {k: v for t in Checkpoint.open(root).read_keyed_state()
            for k, v in zip(t.column("key").to_pylist(), t.column("value").to_pylist())} == model


def test_tracking_holds_at_most_half_a_key_groups_entries():
    class Map:
        def __init__(self, size: int) -> None:
            self.size = size

        def peek(self, key, namespace):
            return key

        def record_writes(self):
            self.recording = True
            return {}

        def stop_recording(self):
            self.recording = False

        def __len__(self) -> int:
            return self.size

    changes = KeyGroupChanges(1)
    big = Map(1000)
    for key in range(500):
        changes.note(0, key, None, big)
    assert len(changes.live_entries[0]) == 500
    changes.note(0, 500, None, big)
    assert changes.live_entries[0] is None and changes.live[0]  # changed whole from now on
    assert not big.recording  # nor are its writes recorded
    flags, entries, written = changes.capture(1)
    assert flags == b"\x01" and entries == {} and written == {}
    small = Map(3)
    for key in range(TRACKED_ENTRIES_FLOOR):
        changes.note(0, key, None, small)
    assert len(changes.live_entries[0]) == TRACKED_ENTRIES_FLOOR


def test_a_failed_checkpoint_keeps_its_entries_and_their_first_priors():
    changes = KeyGroupChanges(2)

    class Map(dict):
        def peek(self, key, namespace):
            return self.get((key, namespace))

        def record_writes(self):
            return {}

        def stop_recording(self):
            pass

    live = Map({("a", None): 1})
    changes.note(0, "a", None, live)
    live[("a", None)] = 2
    changes.capture(1)  # its checkpoint fails: nothing completes
    changes.note(0, "a", None, live)
    changes.note(1, "b", None, live)
    _, entries, _ = changes.capture(2)
    assert entries == {0: {("a", None): 1}, 1: {("b", None): None}}


def test_merging_runs_newest_wins_and_tombstones_hide():
    schema = pa.schema([("key_group", pa.int32()), ("key", pa.int64()),
                        ("namespace", pa.null()), ("value", pa.int64())])
    base = pa.Table.from_pylist([{"key_group": 0, "key": k, "value": k} for k in (1, 2, 3)],
                                schema=schema)

    def run(*rows):
        return pa.Table.from_pylist(
            [{"key_group": 0, "key": k, "value": v, DELTA_KIND: kind, BASE_ROW: -1}
             for k, v, kind in rows], schema=delta_schema(schema))

    runs = [run((2, 20, UPSERT), (3, None, TOMBSTONE), (2, 2, PRIOR), (3, 3, PRIOR)),
            run((2, 200, UPSERT), (4, 4, UPSERT), (2, 20, PRIOR)),
            run((4, None, TOMBSTONE), (3, 33, UPSERT), (4, 4, PRIOR))]
    merged = merge_runs(base, runs)
    assert sorted(zip(merged.column("key").to_pylist(), merged.column("value").to_pylist())) \
        == [(1, 1), (2, 200), (3, 33)]
    assert merge_runs(None, [run((5, None, TOMBSTONE), (5, 5, PRIOR))]) is None


def _crash_at(patch, module, name: str, calls: list[int], at: int) -> None:
    real = getattr(module, name)

    def crashing(*args, **kwargs):
        calls[0] += 1
        if calls[0] == at:
            raise OSError("crash (injected)")
        return real(*args, **kwargs)

    patch.setattr(module, name, crashing)


@pytest.mark.parametrize("module, where", [(datafile_module, "_write_groups"),
                                           (commit_module, "_check_referenced_files"),
                                           (commit_module, "_publish_local")])
def test_a_crash_at_any_point_of_an_incremental_write_leaves_the_previous_newest(
        tmp_path, monkeypatch, module, where):
    """The crash strikes the n-th call of ``where``, for every n until a write has no n-th
    call; like a killed process, the attempt leaves its files behind."""
    job = Job(5, keys=400)
    root = tmp_path / "root"
    job.mutate(2500)
    with CheckpointWriter(str(root), incremental=True, max_delta_runs=MAX_RUNS) as writer:
        writer.write(1, {"op": job.backends})
        newest, expected = 1, job.expected()
        for at in itertools.count(1):
            job.mutate(6, hot_keys=3)
            calls = [0]
            now = job.expected()
            with monkeypatch.context() as patch:
                patch.setattr(writer_module, "remove_attempt", lambda written: None)
                _crash_at(patch, module, where, calls, at)
                try:
                    writer.write(newest + 1, {"op": job.backends})
                except OSError as error:
                    assert "injected" in str(error)
                else:  # no n-th call: this write committed, every crash point was tried
                    assert calls[0] < at
                    check_restores(str(root), newest + 1, now)
                    break
            checkpoint = Checkpoint.open(str(root))
            assert checkpoint.checkpoint_id == newest
            assert checkpoint.verify() > 0
            check_restores(str(root), newest, expected)
            assert not (root / f"chk-{newest + 1}" / "_metadata.json").exists()
            expected = job.expected()
            writer.write(newest + 1, {"op": job.backends})  # the program carries on
            newest += 1
            check_restores(str(root), newest, expected)
        assert at > 1
    assert any(s.delta_files for s in Checkpoint.open(str(root)).operator().keyed_states)


def _delta_checkpoint(tmp_path) -> tuple[str, dict]:
    backend, state, model = _job(3000)
    root = str(tmp_path / "root")
    with CheckpointWriter(root, incremental=True) as writer:
        writer.write(1, {"op": [backend]})
        for key in range(0, 3000, 31):
            _set(backend, state, model, key, -key)
        writer.write(2, {"op": [backend]})
        for key in range(0, 3000, 37):
            _set(backend, state, model, key, None)
        writer.write(3, {"op": [backend]})
    return root, model


def _rewrite_metadata(root: str, checkpoint_id: int, change) -> None:
    path = f"{root}/chk-{checkpoint_id}/_metadata.json"
    with open(path) as handle:
        document = json.load(handle)
    change(document, document["operators"][0]["keyedStates"][0])
    with open(path, "w") as handle:
        json.dump(document, handle)


def test_a_chain_of_runs_reads_as_the_model_and_records_version_5(tmp_path):
    root, model = _delta_checkpoint(tmp_path)
    checkpoint = Checkpoint.open(root)
    assert checkpoint.metadata.format_version == 5
    assert max(len(r) for r in checkpoint.operator().keyed_state().runs_of().values()) == 2
    assert checkpoint.summaries()[0].entries is None  # known only by merging the runs
    assert {k: v for t in checkpoint.read_keyed_state()
            for k, v in zip(t.column("key").to_pylist(), t.column("value").to_pylist())} == model


@pytest.mark.parametrize("chunk_rows", [1, 100, 1 << 20])
@pytest.mark.parametrize("wanted", [None, range(3, 9), (0, 2, 5, 15)])
def test_reads_of_some_key_groups_in_chunks_of_any_size_read_as_the_model(
        tmp_path, monkeypatch, chunk_rows, wanted):
    """Runs are kept per delta file and cut to each chunk of key groups the read merges."""
    root, model = _delta_checkpoint(tmp_path)
    monkeypatch.setattr(reader_module, "_CHUNK_BASE_ROWS", chunk_rows)
    tables = list(Checkpoint.open(root).read_keyed_state(key_groups=wanted))
    assert [t.column("key_group")[0].as_py() for t in tables] == sorted(
        kg for kg in range(16) if wanted is None or kg in wanted)
    assert {k: v for t in tables for k, v in zip(t.column("key").to_pylist(),
                                                 t.column("value").to_pylist())} == {
        k: v for k, v in model.items()
        if wanted is None or assign_to_key_group(k, LONG, 16) in wanted}


def _prior_rows_without_a_run(delta: dict) -> None:
    """Drops the run of the first key group with prior rows, keeping those rows listed."""
    runs = delta["keyGroups"]
    index = runs["keyGroup"].index(delta["priorKeyGroups"]["keyGroup"][0])
    for column in runs.values():
        del column[index]


@pytest.mark.parametrize("change, message", [
    (lambda doc, state: state["deltaFiles"].reverse(), "comes after sequence"),
    (lambda doc, state: state["deltaFiles"][1].update(sequence=2), "two delta runs of sequence"),
    (lambda doc, state: state["deltaFiles"][1].update(path=state["files"][0]["path"],
                                                      sizeBytes=state["files"][0]["sizeBytes"]),
     "more than once"),
    (lambda doc, state: state["deltaFiles"][0].update(sequence=-1), "negative"),
    (lambda doc, state: doc.update(formatVersion=4),
     "row-addressed .allowed from format version 5"),
    (lambda doc, state: _prior_rows_without_a_run(state["deltaFiles"][0]),
     "prior rows of key group [0-9]+, which has no run"),
])
def test_malformed_delta_files_are_refused_naming_them(tmp_path, change, message):
    root, _ = _delta_checkpoint(tmp_path)
    _rewrite_metadata(root, 3, change)
    with pytest.raises(CorruptCheckpointError, match=message):
        Checkpoint.open(root, checkpoint_id=3)


def _run_at_prior_rows(doc: dict, state: dict) -> None:
    """Points the last run's byte range at prior rows (a CRC that holds, wrong rows)."""
    delta = state["deltaFiles"][0]
    for column in ("batchStart", "batchCount", "offset", "length", "crc32"):
        delta["keyGroups"][column][-1] = delta["priorKeyGroups"][column][-1]
    delta["keyGroups"]["rowOffset"][-1] = 0


def _miscounted(part: str, front: bool):
    """One row fewer for the first run of ``part`` of the newest delta file with two rows or
    more: its last row, or (``front``) its first, then lies outside every run listed."""
    def change(doc: dict, state: dict) -> None:
        runs = state["deltaFiles"][-1][part]
        index = next(i for i, rows in enumerate(runs["rows"]) if rows >= 2)
        runs["rows"][index] -= 1
        runs["entries"][index] = min(runs["entries"][index], runs["rows"][index])
        runs["rowOffset"][index] += front
    return change


_MISCOUNTED = "rows of its key group lie next to them: the metadata miscounts the run"


@pytest.mark.parametrize("change, message", [
    (_miscounted("keyGroups", front=False), _MISCOUNTED),
    (_miscounted("keyGroups", front=True), _MISCOUNTED),
    (lambda doc, state: state["deltaFiles"][0]["keyGroups"]["rowOffset"].__setitem__(0, 10**6),
     "run is rows 1000000.* which hold"),
    (lambda doc, state: state["deltaFiles"][0]["keyGroups"]["rows"].__setitem__(0, 2**64),
     r"run is rows [0-9]+\.\.[0-9]{20} of bytes"),
    (_run_at_prior_rows, "prior rows among the state rows"),
])
def test_row_addressed_runs_that_misdescribe_their_rows_are_refused(tmp_path, change, message):
    root, _ = _delta_checkpoint(tmp_path)
    _rewrite_metadata(root, 3, change)
    with pytest.raises(CorruptCheckpointError, match=message):
        list(Checkpoint.open(root, checkpoint_id=3).read_keyed_state())


@pytest.mark.parametrize("front", [False, True])
def test_prior_rows_miscounted_are_refused_by_the_change_feed(tmp_path, front):
    root, _ = _delta_checkpoint(tmp_path)
    _rewrite_metadata(root, 3, _miscounted("priorKeyGroups", front))
    with pytest.raises(CorruptCheckpointError, match=_MISCOUNTED):
        list(ChangeFeed.open(root, 2, 3).read())


def test_a_run_row_of_no_kind_is_refused_not_taken_for_a_tombstone(tmp_path):
    root, _ = _delta_checkpoint(tmp_path)
    path = Checkpoint.open(root).operator().keyed_state().delta_files[-1].path

    def first_kind_null(index, batches):
        if index:
            return batches
        kinds = batches[0].column(DELTA_KIND).to_pylist()
        assert kinds[0] == TOMBSTONE
        return [with_column(batches[0], DELTA_KIND, [None, *kinds[1:]]), *batches[1:]]

    rewrite_data_file(root, 3, path, first_kind_null)
    with pytest.raises(CorruptCheckpointError, match="rows of no known delta_kind"):
        list(Checkpoint.open(root).read_keyed_state())


@pytest.mark.parametrize("checkpoint_id", [1, 3])
def test_a_base_row_of_no_key_group_is_refused(tmp_path, checkpoint_id):
    """A full checkpoint's ranges and an incremental one's bases alike."""
    root, _ = _delta_checkpoint(tmp_path)
    path = Checkpoint.open(root).operator().keyed_state().files[0].path

    def second_range_row_null(index, batches):
        if index != 1:
            return batches
        groups = batches[0].column("key_group").to_pylist()
        return [with_column(batches[0], "key_group", [groups[0], None, *groups[2:]]),
                *batches[1:]]

    rewrite_data_file(root, checkpoint_id, path, second_range_row_null)
    with pytest.raises(CorruptCheckpointError,
                       match="hold rows of key groups 1..1 and 1 of none"):
        list(Checkpoint.open(root, checkpoint_id=checkpoint_id).read_keyed_state())


def test_a_range_listed_as_state_and_prior_rows_is_refused_by_the_change_feed(tmp_path):
    """The feed reads a delta file's state and prior rows together: a range listed as
    both (one run's rows pointed at prior rows) is refused, not read as either."""
    root, _ = _delta_checkpoint(tmp_path)
    _rewrite_metadata(root, 3, _run_at_prior_rows)
    with pytest.raises(CorruptCheckpointError, match="both state rows and prior rows"):
        list(ChangeFeed.open(root, 1, 3).read())


def test_version_3_metadata_ignores_a_delta_files_field(tmp_path):
    root, _ = _delta_checkpoint(tmp_path)
    _rewrite_metadata(root, 3, lambda doc, state: doc.update(formatVersion=3))
    checkpoint = Checkpoint.open(root, checkpoint_id=3)
    assert checkpoint.operator().keyed_state().delta_files == ()


def test_a_run_holding_rows_of_another_key_group_is_refused(tmp_path):
    backend, state, model = _job(3000)
    root = str(tmp_path / "root")
    with CheckpointWriter(root, incremental=True) as writer:
        writer.write(1, {"op": [backend]})
        _set(backend, state, model, next(k for k in range(3000)
                                         if assign_to_key_group(k, LONG, 16) == 5), 0)
        writer.write(2, {"op": [backend]})

    def misplace(doc, state):
        assert state["deltaFiles"][0]["keyGroups"]["keyGroup"] == [5]
        state["deltaFiles"][0]["keyGroups"]["keyGroup"] = [4]  # the metadata alone looks right
        state["deltaFiles"][0]["priorKeyGroups"]["keyGroup"] = [4]

    _rewrite_metadata(root, 2, misplace)
    with pytest.raises(CorruptCheckpointError, match="holds rows of another key group"):
        list(Checkpoint.open(root, checkpoint_id=2).read_keyed_state())


def test_rescale_shares_delta_files_by_reference_and_restores_as_the_model(tmp_path):
    root, model = _delta_checkpoint(tmp_path)
    source = Checkpoint.open(root)
    info = rescale_parallelism(root, 3)
    rescaled = Checkpoint.open(root, checkpoint_id=info.checkpoint_id)
    assert rescaled.operator().parallelism == 3
    assert rescaled.metadata.referenced_files() == source.metadata.referenced_files()
    assert rescaled.operator().keyed_state() == source.operator().keyed_state()
    restored = merged([dump(restore_keyed_backend(rescaled, subtask, 3))
                       for subtask in range(3)])
    assert restored == {"counts": {(key, None): value for key, value in model.items()}}


def test_inspect_verify_reads_every_run_and_diff_counts_from_runs(tmp_path, capsys):
    root, _ = _delta_checkpoint(tmp_path)
    assert main(["inspect", root, "--verify"]) == 0
    assert main(["diff", f"{root}/chk-2", f"{root}/chk-3"]) == 1  # changes
    out = capsys.readouterr().out
    deleted = len(range(0, 3000, 37))
    assert f"{deleted}" in out
    state = Checkpoint.open(root).operator().keyed_state()
    delta = Path(root) / state.delta_files[-1].path
    location = state.delta_files[-1].file.locations[0]
    payload = bytearray(delta.read_bytes())
    payload[location.offset + location.length // 2] ^= 0x01
    delta.write_bytes(bytes(payload))
    capsys.readouterr()
    assert main(["inspect", root, "--verify"]) == 1
    assert f"{delta}: checksum mismatch" in capsys.readouterr().err

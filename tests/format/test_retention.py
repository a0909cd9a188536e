"""Retention against a plain model: random checkpoints sharing files, retain, injected crashes."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statesource.cli import main
from statesource.cli.retain import duration
from statesource.errors import (
    CheckpointNotFoundError,
    CheckpointRetiredError,
    CorruptCheckpointError,
    InvalidArgumentError,
)
from statesource.format import Checkpoint, commit_checkpoint, retain, write_operator_state_file
from statesource.format import commit as commit_module
from statesource.format import retention as retention_module
from statesource.format.metadata import CheckpointMeta, OperatorMeta
from statesource.format.metadata_file import read_metadata
from statesource.format.operator_columns import operator_state_schema
from statesource.format.operator_state_meta import OperatorStateMeta
from statesource.format.pins import pin_files
from statesource.format.storage import new_data_file, resolve
from statesource.model import DistributionMode
from statesource.schema import ValueSchema

SCHEMAS = {"element": ValueSchema.parse("long")}
SCHEMA = operator_state_schema(DistributionMode.SPLIT_DISTRIBUTE, SCHEMAS)


class Crash(Exception):
    """Stands for a kill -9 between two file-system mutations."""


class Store:
    """Real checkpoints under a temporary root, and the model of what they hold.

    Each data file holds one element, a number unique to the file, so reading
    a checkpoint back tells exactly which files it saw.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.location = resolve(str(root))
        self.model: dict[int, dict[str, int]] = {}  # id -> {state name: file number}
        self.states: dict[int, OperatorStateMeta] = {}  # file number -> its entry
        self.next_id = 1

    def write_file(self, checkpoint_id: int, number: int) -> OperatorStateMeta:
        target, relative = new_data_file(self.location, checkpoint_id, f"f{number}")
        batch = pa.record_batch([pa.array([number], pa.int64())], schema=SCHEMA)
        size, partitions = write_operator_state_file(target, SCHEMA, [(0, [batch])])
        entry = OperatorStateMeta(f"s{number}", DistributionMode.SPLIT_DISTRIBUTE, SCHEMAS,
                                  relative, size, partitions)
        self.states[number] = entry
        return entry

    def commit(self, new_files: int, carried: list[int]) -> None:
        checkpoint_id = self.next_id
        self.next_id += 1
        numbers = [*carried, *(len(self.states) + i for i in range(new_files))]
        entries = [self.states[n] if n in self.states else self.write_file(checkpoint_id, n)
                   for n in numbers]
        operator = OperatorMeta("op", 1, 1, None, (), tuple(entries))
        commit_checkpoint(self.location, CheckpointMeta(checkpoint_id, 0, (operator,)))
        self.model[checkpoint_id] = {e.name: n for e, n in zip(entries, numbers)}

    def live_numbers(self) -> list[int]:
        return sorted({n for files in self.model.values() for n in files.values()})

    def check_checkpoints_read(self, ids: list[int]) -> None:
        for checkpoint_id in ids:
            files = self.model[checkpoint_id]
            checkpoint = Checkpoint.open(str(self.root), checkpoint_id=checkpoint_id)
            for name, number in files.items():
                assert checkpoint.read_operator_state(name) == [[number]]

    def files_on_disk(self) -> set[str]:
        return {str(p.relative_to(self.root)) for p in self.root.rglob("*") if p.is_file()}


def crashing_after(mutations: int):
    """Patch retention's two kinds of mutation to die after ``mutations`` of them."""
    count = {"n": 0}

    def wrap(original):
        def mutation(*args, **kwargs):
            if count["n"] >= mutations:
                raise Crash
            count["n"] += 1
            return original(*args, **kwargs)
        return mutation

    return mock.patch.multiple(retention_module,
                               _retire=wrap(retention_module._retire),
                               _remove=wrap(retention_module._remove))


operations = st.lists(
    st.one_of(
        st.tuples(st.just("commit"), st.integers(0, 3), st.lists(st.integers(0, 50), max_size=3)),
        st.tuples(st.just("retain"), st.integers(1, 3), st.one_of(st.none(), st.integers(0, 8))),
    ),
    min_size=1, max_size=14,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations)
def test_retention_never_loses_a_kept_file_and_a_rerun_finishes(ops):
    store = Store(Path(tempfile.mkdtemp(prefix="statesource-retention-")))
    try:
        for op in ops:
            if op[0] == "commit":
                _, new_files, picks = op
                live = store.live_numbers()
                carried = sorted({live[p % len(live)] for p in picks}) if live else []
                store.commit(new_files, carried)
                continue
            _, keep, crash_after = op
            kept = sorted(store.model)[-keep:]
            if crash_after is not None:
                with crashing_after(crash_after), contextlib.suppress(Crash):
                    retain(str(store.root), keep)
                store.check_checkpoints_read(kept)  # even mid-deletion
            retain(str(store.root), keep)
            store.model = {i: store.model[i] for i in kept}
            store.check_checkpoints_read(kept)
            referenced = {store.states[n].path for n in store.live_numbers()}
            metadata = {f"chk-{i}/_metadata.json" for i in kept}
            assert store.files_on_disk() == referenced | metadata
    finally:
        shutil.rmtree(store.root, ignore_errors=True)


def test_retain_leaves_files_of_a_checkpoint_being_written(tmp_path):
    store = Store(tmp_path)
    for _ in range(3):
        store.commit(1, [])
    in_flight = store.write_file(4, 99)  # written, not yet committed
    plan = retain(str(tmp_path), 1)
    assert plan.retired == (1, 2) and plan.kept == (3,)
    assert (tmp_path / in_flight.path).exists()
    operator = OperatorMeta("op", 1, 1, None, (), (in_flight,))
    commit_checkpoint(store.location, CheckpointMeta(4, 0, (operator,)))
    assert Checkpoint.open(str(tmp_path)).read_operator_state("s99") == [[99]]


def test_dry_run_deletes_nothing_and_reports_the_plan(tmp_path, capsys):
    store = Store(tmp_path)
    store.commit(2, [])
    store.commit(1, [0])
    store.commit(1, [])
    before = store.files_on_disk()
    assert main(["retain", str(tmp_path), "--keep", "2", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert store.files_on_disk() == before
    assert "would delete checkpoints: 1" in out
    assert "would delete 1 data files; 1 files of deleted checkpoints stay" in out
    assert store.states[1].path in out
    assert main(["retain", str(tmp_path), "--keep", "2"]) == 0
    assert "deleted checkpoints: 1" in capsys.readouterr().out
    assert not (tmp_path / store.states[1].path).exists()
    assert (tmp_path / store.states[0].path).exists()  # chk-2 still references it


def test_bad_arguments_and_unreadable_checkpoints_change_nothing(tmp_path, capsys):
    store = Store(tmp_path)
    store.commit(1, [])
    store.commit(1, [])
    with pytest.raises(InvalidArgumentError, match="keep 0"):
        retain(str(tmp_path), 0)
    (tmp_path / "chk-1" / "_metadata.json").write_text("{not json")
    before = store.files_on_disk()
    with pytest.raises(CorruptCheckpointError, match="chk-1"):
        retain(str(tmp_path), 1)
    assert store.files_on_disk() == before
    assert main(["retain", str(tmp_path / "nowhere"), "--keep", "1"]) == 1
    assert "nowhere does not exist" in capsys.readouterr().err


def _leftover(root: Path, checkpoint_id: int, name: str, age_seconds: float) -> Path:
    """A file a crashed attempt left in chk-<id>/data, last modified ``age_seconds`` ago."""
    path = root / f"chk-{checkpoint_id}" / "data" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"partial")
    stamp = time.time() - age_seconds
    os.utime(path, (stamp, stamp))
    return path


def test_retain_removes_files_of_failed_attempts_older_than_the_commit(tmp_path, capsys):
    store = Store(tmp_path)
    for _ in range(3):
        store.commit(1, [])
    for checkpoint_id in (1, 2, 3):  # metadata published "now"; attempts crashed before
        metadata = tmp_path / f"chk-{checkpoint_id}" / "_metadata.json"
        os.utime(metadata, (time.time() - 100, time.time() - 100))
    crashed_in_kept = _leftover(tmp_path, 3, "crashed-kept.arrow", 3600)
    crashed_in_doomed = _leftover(tmp_path, 1, "crashed-doomed.arrow", 3600)
    still_running = _leftover(tmp_path, 3, "loser-still-writing.arrow", 0)  # after the commit
    never_committed = _leftover(tmp_path, 4, "in-flight.arrow", 3600)  # id 4 has no metadata
    before = store.files_on_disk()
    assert main(["retain", str(tmp_path), "--keep", "2", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would delete 2 files of failed write attempts that no checkpoint lists" in out
    assert "chk-3/data/crashed-kept.arrow" in out and "chk-1/data/crashed-doomed.arrow" in out
    assert store.files_on_disk() == before
    plan = retain(str(tmp_path), 2)
    assert plan.orphans == ("chk-1/data/crashed-doomed.arrow", "chk-3/data/crashed-kept.arrow")
    assert not crashed_in_kept.exists() and not crashed_in_doomed.exists()
    assert not (tmp_path / "chk-1").exists()  # the retired checkpoint is gone entirely
    assert still_running.exists() and never_committed.exists()
    store.model.pop(1)
    store.check_checkpoints_read([2, 3])
    referenced = {p for i in (2, 3) for p in Checkpoint.open(
        str(tmp_path), checkpoint_id=i).metadata.referenced_files()}
    assert {p for p in store.files_on_disk() if "/data/" in p} == referenced | {
        "chk-3/data/loser-still-writing.arrow", "chk-4/data/in-flight.arrow"}


def test_orphans_of_a_retired_checkpoint_left_by_an_interrupted_run_are_removed(tmp_path):
    store = Store(tmp_path)
    store.commit(1, [])
    store.commit(1, [])
    metadata = tmp_path / "chk-1" / "_metadata.json"
    os.utime(metadata, (time.time() - 100, time.time() - 100))
    leftover = _leftover(tmp_path, 1, "crashed.arrow", 3600)
    os.rename(metadata, tmp_path / "chk-1" / "_retired.json")  # a run killed after retiring
    assert retain(str(tmp_path), 1).orphans == ("chk-1/data/crashed.arrow",)
    assert not leftover.exists() and not (tmp_path / "chk-1").exists()


def test_retain_never_deletes_what_is_not_a_data_file(tmp_path):
    """Metadata is untrusted: a retired checkpoint naming another checkpoint's metadata
    as a data file must not make ``retain`` delete it."""
    store = Store(tmp_path)
    store.commit(1, [])
    store.commit(1, [])
    metadata = tmp_path / "chk-1" / "_metadata.json"
    document = json.loads(metadata.read_text())
    victim = tmp_path / "chk-2" / "_metadata.json"
    document["operators"][0]["operatorStates"][0].update(
        path="chk-2/_metadata.json", sizeBytes=victim.stat().st_size)
    metadata.write_text(json.dumps(document))
    plan = retain(str(tmp_path), 1)
    assert "chk-2/_metadata.json" not in plan.deleted_files
    assert victim.exists()
    assert Checkpoint.open(str(tmp_path)).checkpoint_id == 2


def _store_at(tmp_path: Path) -> Store:
    store = Store(tmp_path)
    return store


def test_directories_emptied_by_a_later_retirement_are_removed(tmp_path):
    store = Store(tmp_path)
    store.commit(1, [])  # chk-1 writes file 0
    store.commit(1, [0])  # chk-2 carries it over
    retain(str(tmp_path), 1)
    assert (tmp_path / "chk-1" / "data").is_dir()  # file 0 stays, chk-2 lists it
    store.commit(1, [])
    retain(str(tmp_path), 1)  # retiring chk-2 deletes file 0: chk-1 holds nothing now
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chk-3"]


def test_a_pinned_file_of_a_retired_checkpoint_stays_until_the_pin_goes(tmp_path):
    store = Store(tmp_path)
    store.commit(2, [])
    store.commit(1, [])
    pin = pin_files(store.location, 9, [store.states[0].path])
    plan = retain(str(tmp_path), 1)
    assert plan.pinned_files == (store.states[0].path,)
    assert plan.deleted_files == (store.states[1].path,)
    assert (tmp_path / store.states[0].path).exists()
    assert (tmp_path / "chk-1" / "_retired.json").exists()
    pin.release()
    assert retain(str(tmp_path), 1).retired == (1,)
    assert not (tmp_path / "chk-1").exists()


def test_expired_pins_and_their_temporaries_are_removed(tmp_path):
    store = Store(tmp_path)
    store.commit(1, [])
    store.commit(1, [])
    pin = pin_files(store.location, 9, [store.states[0].path])
    temporary = tmp_path / "_pins" / "chk-9-x.json.tmp-y"
    temporary.write_text("{")
    for path in (Path(pin.location.path), temporary):
        os.utime(path, (time.time() - 7200, time.time() - 7200))
    plan = retain(str(tmp_path), 1, dry_run=True, older_than=timedelta(hours=1))
    assert set(plan.expired_pins) == {"_pins/chk-9-x.json.tmp-y",
                                      f"_pins/{Path(pin.location.path).name}"}
    assert plan.pinned_files == ()
    retain(str(tmp_path), 1, older_than=timedelta(hours=1))
    assert not list((tmp_path / "_pins").glob("*"))
    assert not (tmp_path / store.states[0].path).exists()


def test_an_unreadable_pin_stops_retain_before_anything_is_deleted(tmp_path):
    store = Store(tmp_path)
    store.commit(1, [])
    store.commit(1, [])
    (tmp_path / "_pins").mkdir()
    (tmp_path / "_pins" / "chk-5-bad.json").write_text('{"checkpointId": 5, "files": ["/etc"]}')
    before = store.files_on_disk()
    with pytest.raises(CorruptCheckpointError, match="chk-5-bad.json"):
        retain(str(tmp_path), 1)
    assert store.files_on_disk() == before


def test_durations_of_the_command_line():
    assert [duration(text) for text in ("90s", "15m", "12h", "3d")] == [
        timedelta(seconds=90), timedelta(minutes=15), timedelta(hours=12), timedelta(days=3)]


def test_older_than_must_be_a_duration(tmp_path, capsys):
    with pytest.raises(InvalidArgumentError, match="older_than"):
        retain(str(tmp_path), 1, older_than=3600)  # type: ignore[arg-type]
    assert main(["retain", str(tmp_path), "--keep", "1", "--older-than", "3 days"]) == 1
    assert "'3 days' is no duration" in capsys.readouterr().err


@pytest.mark.parametrize("older_than", [timedelta(seconds=-1), timedelta(0),
                                        timedelta(minutes=59, seconds=59)])
def test_an_older_than_under_an_hour_is_refused_before_anything_is_deleted(tmp_path, capsys,
                                                                           older_than):
    """A threshold shorter than a write would expire the pins of writers still running:
    refused, naming the value, with nothing deleted."""
    store = Store(tmp_path)
    store.commit(1, [])
    store.commit(1, [])
    pin_files(store.location, 9, [store.states[0].path])
    before = store.files_on_disk()
    with pytest.raises(InvalidArgumentError, match=f"older_than {older_than} is under 1h"):
        retain(str(tmp_path), 1, older_than=older_than)
    text = f"{int(older_than.total_seconds())}s"
    if older_than >= timedelta(0):
        assert main(["retain", str(tmp_path), "--keep", "1", "--older-than", text]) == 1
        assert f"--older-than {text} is under 1h" in capsys.readouterr().err
    assert store.files_on_disk() == before
    assert retain(str(tmp_path), 1, older_than=timedelta(hours=1)).retired == (1,)


def test_abandoned_attempts_go_only_once_older_than_the_threshold(tmp_path):
    store = Store(tmp_path)
    store.commit(1, [])
    old = _leftover(tmp_path, 7, "old.arrow", 7200)
    young = _leftover(tmp_path, 8, "young.arrow", 60)
    temporary = tmp_path / "chk-1" / "_metadata.json.tmp-abc"
    temporary.write_text("{")
    os.utime(temporary, (time.time() - 7200, time.time() - 7200))
    plan = retain(str(tmp_path), 1, older_than=timedelta(hours=1))
    assert plan.abandoned == ("chk-1/_metadata.json.tmp-abc", "chk-7/data/old.arrow")
    assert not old.exists() and not temporary.exists() and young.exists()
    assert not (tmp_path / "chk-7").exists()


def test_an_old_shared_file_in_a_directory_without_metadata_is_no_abandoned_file(tmp_path):
    store = Store(tmp_path)
    store.commit(1, [])
    store.commit(1, [0])  # chk-2 carries chk-1's file over
    retain(str(tmp_path), 1)  # chk-1 is gone but for its file, which chk-2 lists
    shared = tmp_path / store.states[0].path
    os.utime(shared, (time.time() - 7200, time.time() - 7200))
    plan = retain(str(tmp_path), 1, older_than=timedelta(hours=1))
    assert plan.abandoned == () and shared.exists()
    store.check_checkpoints_read([2])


def test_a_commit_pins_what_it_carries_over_while_retain_runs_at_its_publish(tmp_path,
                                                                              monkeypatch):
    """The commit's own pin, for writers that took none earlier (an incremental checkpoint):
    a retain at the very moment of publishing leaves the carried files alone."""
    store = Store(tmp_path)
    store.commit(1, [])
    store.commit(1, [])
    publish = commit_module._publish

    def retain_then_publish(*args, **kwargs):
        retain(str(tmp_path), 1)
        return publish(*args, **kwargs)

    monkeypatch.setattr(commit_module, "_publish", retain_then_publish)
    operator = OperatorMeta("op", 1, 1, None, (), (store.states[0],))  # chk-1's file
    commit_checkpoint(store.location, CheckpointMeta(3, 0, (operator,)))
    assert Checkpoint.open(str(tmp_path), checkpoint_id=3).read_operator_state("s0") == [[0]]


def test_metadata_gone_without_retirement_is_corruption_not_retention(tmp_path):
    store = Store(tmp_path)
    store.commit(1, [])
    store.commit(1, [])
    checkpoint = Checkpoint.open(str(tmp_path), checkpoint_id=1)
    (tmp_path / "chk-1" / "_metadata.json").unlink()  # deleted by hand, not retired
    with pytest.raises(CorruptCheckpointError, match="_metadata.json is missing"):
        read_metadata(resolve(str(tmp_path / "chk-1")))
    (tmp_path / store.states[0].path).unlink()
    with pytest.raises(CorruptCheckpointError, match="is missing") as error:
        checkpoint.read_operator_state("s0")
    assert not isinstance(error.value, CheckpointRetiredError)
    retain(str(tmp_path), 1)  # chk-2 is kept; nothing of chk-1 is listed any more
    (tmp_path / "chk-1").mkdir(exist_ok=True)
    (tmp_path / "chk-1" / "_retired.json").write_text("{}")
    with pytest.raises(CheckpointRetiredError, match="checkpoint 1 was removed by retention"):
        read_metadata(resolve(str(tmp_path / "chk-1")))


def test_files_of_an_id_a_running_writer_pinned_are_not_abandoned(tmp_path):
    store = Store(tmp_path)
    store.commit(1, [])
    slow = _leftover(tmp_path, 7, "slow.arrow", 7200)  # a long write, still running
    pin = pin_files(store.location, 7, [store.states[0].path])
    assert retain(str(tmp_path), 1, older_than=timedelta(hours=1)).abandoned == ()
    assert slow.exists()
    pin.release()
    assert retain(str(tmp_path), 1, older_than=timedelta(hours=1)).abandoned == (
        "chk-7/data/slow.arrow",)


@pytest.mark.parametrize("keep", [1, 3])
def test_a_retirement_killed_between_its_copy_and_its_delete_loses_nothing(tmp_path, keep):
    """On an object store a retirement copies ``_metadata.json`` to ``_retired.json``, then
    deletes the first: a kill between leaves both. The checkpoint is still complete: a rerun
    that keeps it keeps it whole (and drops the stray copy), one that does not retires it."""
    store = Store(tmp_path)
    store.commit(1, [])
    store.commit(1, [0])
    store.commit(1, [1])
    shutil.copy(tmp_path / "chk-1" / "_metadata.json", tmp_path / "chk-1" / "_retired.json")
    messages: list[str] = []
    plan = retain(str(tmp_path), keep, progress=messages.append)
    kept = [1, 2, 3][-keep:]
    assert any(m.startswith("deleted checkpoint 1") for m in messages) is (1 not in kept)
    assert plan.kept == tuple(kept)
    assert plan.retired == tuple(i for i in (1, 2, 3) if i not in kept)
    store.check_checkpoints_read(kept)
    assert not list(tmp_path.glob("chk-*/_retired.json"))
    assert store.files_on_disk() == {
        path for checkpoint_id in kept
        for path in (f"chk-{checkpoint_id}/_metadata.json",
                     *Checkpoint.open(str(tmp_path), checkpoint_id=checkpoint_id)
                     .metadata.referenced_files())}


def test_opening_a_checkpoint_retain_retired_says_so(tmp_path):
    """A checkpoint retired (``_retired.json`` in place of its metadata, until retain deletes
    its files) is opened by id or by path: the error names the retirement, not a checkpoint
    that never was."""
    store = Store(tmp_path)
    store.commit(1, [])
    store.commit(1, [])
    os.rename(tmp_path / "chk-1" / "_metadata.json", tmp_path / "chk-1" / "_retired.json")
    for path, checkpoint_id in ((tmp_path, 1), (tmp_path / "chk-1", None)):
        with pytest.raises(CheckpointRetiredError, match="checkpoint 1 was removed by retention"):
            Checkpoint.open(str(path), checkpoint_id=checkpoint_id)
    with pytest.raises(CheckpointNotFoundError, match="no complete checkpoint 3") as raised:
        Checkpoint.open(str(tmp_path), checkpoint_id=3)
    assert not isinstance(raised.value, CheckpointRetiredError)

"""``migrate``'s scan in worker processes (runs of key groups scanned on every core).

An operator's keyed state below ``WORKER_BYTES`` is scanned in one process, so the fixture's
are; here the threshold is lowered to 0: the savepoint written must still be, state by
state, what Flink 2.3 writes itself (test_migrate_kryo.py's comparison), also where a
worker dies mid-scan (the parent scans its run), and a corrupt value must still refuse
the migration naming the state, with nothing written.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import shutil
from collections import deque

import pytest
from kryo_fixture import KRYO
from test_migrate_kryo import assert_as_flink_2_3_writes, uids

from statesource.errors import CorruptCheckpointError
from statesource.flink.layouts.base import KeyGroupData
from statesource.flink.layouts.dispatch import layout_of
from statesource.flink.operations import reencode_workers
from statesource.flink.operations.migrate import migrate
from statesource.flink.operations.reencode import KeptValues, StateRecoder, _merge
from statesource.flink.operations.reencode_pairs import _key_groups, _pairs
from statesource.flink.serializers import kryo_columns
from statesource.flink.snapshot.directory import FlinkSnapshot

UUID_VALUE = bytes.fromhex("5401e3bece9d80889fe00d89eda281ee8d8792fc")
"""A ``last_uuid`` value of the canonical 1.20 savepoint, as Kryo 2 wrote it."""


@pytest.fixture
def submitted(monkeypatch):
    """Workers for every operator (at least two), and the runs handed to them."""
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(reencode_workers, "WORKER_BYTES", 0)
    monkeypatch.setattr(reencode_workers.os, "sched_getaffinity", lambda _: {0, 1},
                        raising=False)
    monkeypatch.setattr(reencode_workers.threading, "active_count", lambda: 1)

    class Counted(reencode_workers.ProcessPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):
            calls.append(args)
            return super().submit(fn, *args, **kwargs)
    monkeypatch.setattr(reencode_workers, "ProcessPoolExecutor", Counted)
    return calls


@pytest.mark.parametrize("backend", ["canonical", "rocksdb"])
def test_a_scan_in_workers_writes_what_flink_2_3_writes(backend, submitted, tmp_path):
    migrate(str(KRYO / "flink-1.20" / backend), str(tmp_path / "out"), uids=uids(),
            skip_unmigratable=True)
    assert len(submitted) >= 2 * 2  # two runs of each of the operators re-encoded
    assert_as_flink_2_3_writes(str(tmp_path / "out"), backend)


def _dying(first, end):
    os._exit(3)


def test_what_a_dead_worker_left_is_scanned_by_the_parent(submitted, monkeypatch, tmp_path):
    monkeypatch.setattr(reencode_workers, "_scan", _dying)  # forked: the workers' too
    migrate(str(KRYO / "flink-1.20" / "canonical"), str(tmp_path / "out"), uids=uids(),
            skip_unmigratable=True)
    assert submitted
    assert_as_flink_2_3_writes(str(tmp_path / "out"), "canonical")


def test_a_corrupt_value_refuses_the_migration_naming_the_state(submitted, tmp_path):
    """One ``UUID``'s reference marker made a null: the workers leave it, the parent's exact
    path refuses it; nothing is written."""
    copy = tmp_path / "canonical"
    shutil.copytree(KRYO / "flink-1.20" / "canonical", copy)
    (held,) = [f for f in copy.iterdir() if UUID_VALUE in f.read_bytes()]
    held.write_bytes(held.read_bytes().replace(UUID_VALUE, UUID_VALUE[:1] + b"\x00"
                                               + UUID_VALUE[2:]))
    with pytest.raises(CorruptCheckpointError,
                       match="state 'last_uuid'.*a null reference after a class"):
        migrate(str(copy), str(tmp_path / "out"), uids=uids(), skip_unmigratable=True)
    assert submitted and not (tmp_path / "out").exists()


def test_a_small_operator_or_a_threaded_process_scans_in_one_process(monkeypatch):
    assert reencode_workers.worker_count(reencode_workers.WORKER_BYTES - 1) == 0
    monkeypatch.setattr(reencode_workers.threading, "active_count", lambda: 2)
    assert reencode_workers.worker_count(1 << 40) == 0


@pytest.mark.parametrize("sizes, count", [
    ([5] * 10, 2), ([1, 100, 1, 1], 2), ([0, 0, 0], 3), ([7], 4), ([], 2), ([3, 3, 3], 1),
    ([1] * 7, 3)])
def test_runs_cover_every_key_group_once_in_order(sizes, count):
    parts = reencode_workers.runs(sizes, count)
    assert [i for first, end in parts for i in range(first, end)] == list(range(len(sizes)))
    assert len(parts) <= max(count, 1) and all(end > first for first, end in parts)
    if count > 1 and len(sizes) >= count and all(s == sizes[0] for s in sizes) and sizes[0]:
        assert len(parts) == count  # equal key groups: equal runs


def test_runs_merge_as_one_scan_reads_them():
    """What workers' runs hand back, in their order: a state refused in a run stays refused
    whatever a later run read of it; kept key groups follow each other within the budget,
    a run that kept nothing leaves nothing kept; collection fields' classes add up."""
    snapshot = FlinkSnapshot.open(str(KRYO / "flink-1.20" / "canonical"))
    infos = {info.name: info for op in snapshot.operators if snapshot.header(op) is not None
             for info in snapshot.header(op).states}
    budget = KeptValues(100)
    recoders = {name: StateRecoder(infos[name], name, budget, 128)
                for name in ("profile", "last_uuid", "bag")}
    classes = [{role: set() for role in node.classes} for node in recoders["profile"].collections]
    first, second = [copy.deepcopy(classes) for _ in "ab"]
    first[0]["element"].add("java.lang.String")
    second[0]["element"].add("java.lang.Long")
    refused: dict[str, str] = {}
    _merge(recoders, refused, {
        "profile": (None, deque([(1, b"p1", 1)]), 10, first),
        "last_uuid": (None, None, 0, []),
        "bag": ("a Double in it", None, 0, [])})
    _merge(recoders, refused, {
        "profile": (None, deque([(2, b"p2", 1)]), 10, second),
        "last_uuid": (None, deque([(2, b"u2", 1)]), 10, []),
        "bag": (None, deque([(2, b"b2", 1)]), 10, [])})
    assert refused == {"bag": "a Double in it"}
    assert list(recoders["profile"].kept.groups) == [(1, b"p1", 1), (2, b"p2", 1)]
    assert recoders["last_uuid"].kept.groups is None and recoders["bag"].kept.groups is None
    assert budget.left == 80
    assert recoders["profile"].collections[0].classes["element"] == {
        "java.lang.String", "java.lang.Long"}
    _merge(recoders, refused, {"profile": (None, deque([(3, b"p3", 1)]), 81, second)})
    assert recoders["profile"].kept.groups is None and budget.left == 100  # past the budget


@pytest.mark.parametrize("backend", ["canonical", "rocksdb"])
def test_key_groups_read_column_wise_write_what_flink_2_3_writes(backend, monkeypatch, tmp_path):
    """The fixture's key groups hold a value or two of a state, which go value by value;
    with every chunk read column-wise (a canonical key group framed as the values are
    written), the savepoint is still, state by state, what Flink 2.3 writes."""
    monkeypatch.setattr(kryo_columns, "COLUMNS", 1)
    migrate(str(KRYO / "flink-1.20" / backend), str(tmp_path / "out"), uids=uids(),
            skip_unmigratable=True)
    assert_as_flink_2_3_writes(str(tmp_path / "out"), backend)


@pytest.mark.parametrize("end", [b"\x00\x01", b"\x00\x07"])
def test_a_scan_of_every_state_of_a_file_checks_its_key_groups_to_the_end(end):
    """Where the scan reads every state of a file (an operator without timers whose states
    are all re-encoded), the rewrite does not read the file again: a key group's end, a
    state's section again or an unknown state id instead of its end mark, is refused by the
    scan itself."""
    snapshot = FlinkSnapshot.open(str(KRYO / "flink-1.20" / "canonical"))
    (op,) = [op for op in snapshot.operators if op.label.startswith("1d6d4f2c")]
    handle = snapshot.keyed_handles(op)[0]
    full = snapshot.handle_header(op, handle)
    header = dataclasses.replace(full, states=full.states[:2])  # last_uuid and bag only
    data = snapshot.read_bytes(handle.stream, 0, handle.stream.size)
    key_group, begin, stop = _key_groups(snapshot, op, handle)[0]
    piece = KeyGroupData(key_group, data[begin:stop], "f", begin)
    assert {state for state, *_ in _pairs(layout_of(handle), piece, header, 1, {0, 1})} == {0, 1}
    corrupt = KeyGroupData(key_group, data[begin:stop - 2] + end, "f", begin)
    with pytest.raises(CorruptCheckpointError):
        _pairs(layout_of(handle), corrupt, header, 1, {0, 1})

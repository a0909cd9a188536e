"""Heap timers of a RocksDB checkpoint: raw keyed state in Flink's legacy timer format.

Truth: the real Flink 2.3 and Flink 1.20 runs of IncrementalJob.java
(tests/fixtures/flink/incremental and incremental-1.20: ``heap-timers``, a RocksDB job with
``timer-service.factory: HEAP``), whose timers the job's model lists (expected.json), and each
Flink's own canonical savepoint of the same state; hostile bytes are the 2.3 run's raw keyed
state truncated and bit-flipped.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flink_fixture_checks import INCREMENTAL, INCREMENTAL_RUNS
from statesource.errors import (
    CorruptCheckpointError,
    IncompatibleCheckpointError,
    StateSourceError,
)
from statesource.flink.handles import KeyedHandle
from statesource.flink.layouts.canonical import canonical_pairs
from statesource.flink.layouts.legacy_timers import read_legacy_timers
from statesource.flink.operations.rescale import rescale_max_parallelism
from statesource.flink.reader import FlinkCheckpoint

TRUTHS = {version: json.loads((path / "expected.json").read_text())
          for version, path in INCREMENTAL.items()}
RUN = INCREMENTAL["2.3"] / "heap-timers"
TRUTH = TRUTHS["2.3"]
SECOND = TRUTH["checkpoints"]["heap-timers"][1]
EVENT, PROCESSING = "_timer_state/event_user-timers", "_timer_state/processing_user-timers"


def _raw(subtask: int = 0, version: str = "2.3") -> tuple[KeyedHandle, bytes]:
    """A subtask's raw keyed state (its heap timers) in the second checkpoint of ``version``."""
    second = INCREMENTAL[version] / "heap-timers" / TRUTHS[version]["checkpoints"]["heap-timers"][1]
    op = FlinkCheckpoint.open(str(second)).snapshot.operator("incr")
    handle = op.subtasks[subtask].raw_keyed[0]
    return handle, (second / handle.stream.path).read_bytes()


HANDLE, DATA = _raw()
EVERY = range(HANDLE.start, HANDLE.start + len(HANDLE.offsets))
DECODED = read_legacy_timers(HANDLE, DATA, "raw", EVERY)


def _timestamps(timers) -> dict[str, list[int]]:
    """key -> sorted event-time timestamps, from ``TimerSerializer`` bytes (String keys)."""
    found: dict[str, list[int]] = {}
    for held in timers.timers.values():
        assert held[PROCESSING] == []
        for timer in held[EVENT]:
            flipped = int.from_bytes(timer[:8], "big", signed=True)
            key = timer[9:9 + timer[8] - 1].decode()  # Flink's string: length + 1, then chars
            assert timer[9 + timer[8] - 1:] == b"\x00"  # the void namespace's byte
            found.setdefault(key, []).append(flipped ^ -(1 << 63) if flipped >= 0
                                             else flipped + (1 << 63))
    return {key: sorted(t) for key, t in found.items()}


@pytest.mark.parametrize("version", list(INCREMENTAL))
def test_the_decoder_gives_the_models_timers_of_the_subtasks_key_groups(version):
    both = {}
    for subtask in (0, 1):
        handle, data = _raw(subtask, version)
        decoded = read_legacy_timers(handle, data, "raw",
                                     range(handle.start, handle.start + len(handle.offsets)))
        both.update(_timestamps(decoded))
        assert [s.name for s in decoded.states] == [PROCESSING, EVENT]
        assert all(s.is_timer and s.timer.key.data_type().name == "string"
                   for s in decoded.states)
    assert both == {key: s["timers"] for key, s in TRUTHS[version]["second"].items()}


def test_only_wanted_key_groups_keep_their_timers():
    some = read_legacy_timers(HANDLE, DATA, "raw", {HANDLE.start + 3})
    assert set(some.timers) == {HANDLE.start + 3}
    assert some.timers[HANDLE.start + 3] == DECODED.timers[HANDLE.start + 3]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_truncated_raw_keyed_file_is_refused_naming_it_and_the_offset(data):
    cut = data.draw(st.integers(0, len(DATA) - 1))
    with pytest.raises(CorruptCheckpointError, match=r"raw-file.*byte offset \d+"):
        read_legacy_timers(HANDLE, DATA[:cut], "raw-file", EVERY)


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_a_flipped_byte_is_refused_naming_the_file_or_changes_only_timer_values(data):
    """Raw keyed state has no checksum: a flip inside a key's characters or a timestamp
    reads as another timer. Everything else (identifier, version, counts, names, snapshots,
    lengths) is refused, naming the file and the offset."""
    at = data.draw(st.integers(0, len(DATA) - 1))
    bit = data.draw(st.integers(0, 7))
    hostile = bytearray(DATA)
    hostile[at] ^= 1 << bit
    try:
        found = read_legacy_timers(HANDLE, bytes(hostile), "raw-file", EVERY)
    except StateSourceError as error:
        assert "raw-file" in str(error) and "byte offset" in str(error)
        return
    assert [s.name for s in found.states] == [s.name for s in DECODED.states]
    assert {kg: {n: len(t) for n, t in held.items()} for kg, held in found.timers.items()} \
        == {kg: {n: len(t) for n, t in held.items()} for kg, held in DECODED.timers.items()}


def _copy(tmp_path: Path) -> Path:
    run = tmp_path / "heap-timers"
    shutil.copytree(RUN, run)
    return run


def test_a_corrupt_key_group_of_a_checkpoint_is_refused_naming_the_file(tmp_path):
    run = _copy(tmp_path)
    path = run / SECOND / HANDLE.stream.path
    hostile = bytearray(path.read_bytes())
    hostile[HANDLE.offsets[5] + 9] ^= 0x40  # the count of timer services
    path.write_bytes(bytes(hostile))
    source = FlinkCheckpoint.open(str(run / SECOND))
    with pytest.raises(CorruptCheckpointError,
                       match=rf"{HANDLE.stream.path}.*key group {HANDLE.start + 5}.*byte offset"):
        source.timer_states("incr")


def test_a_users_own_raw_keyed_state_is_not_read_as_timers_and_a_rescale_refuses_it(tmp_path):
    run = _copy(tmp_path)
    for subtask in (0, 1):
        handle, data = _raw(subtask)
        mine = bytearray(data)
        for offset in handle.offsets:
            mine[offset:offset + 4] = b"mine"
        (run / SECOND / handle.stream.path).write_bytes(bytes(mine))
    source = FlinkCheckpoint.open(str(run / SECOND))
    assert source.timer_states("incr") == []
    counts = {r["key"]: r["value"] for t in source.read_keyed_state("count", operator="incr")
              for r in t.to_pylist()}
    assert counts == {key: s["count"] for key, s in TRUTH["second"].items() if "count" in s}
    with pytest.raises(IncompatibleCheckpointError, match="raw keyed state .*operator's own"):
        rescale_max_parallelism(str(run / SECOND), str(tmp_path / "out"), 256)
    assert not (tmp_path / "out").exists()


def _key_groups(handle: KeyedHandle, data: bytes, header) -> dict[int, dict[str, list]]:
    """Each non-empty key group's pairs per state name, sorted (Flink writes a heap queue's
    timers in its heap's order)."""
    starts = sorted(o for o in handle.offsets if o)
    found = {}
    for index, offset in enumerate(handle.offsets):
        if not offset:
            continue
        end = next((o for o in starts if o > offset), len(data))
        sections = canonical_pairs(data[offset:end], "file", offset, handle.start + index,
                                   header, 1)
        found[handle.start + index] = {header.states[state_id].name: sorted(map(tuple, pairs))
                                       for state_id, pairs in sections}
    return found


@pytest.mark.parametrize(("version", "run"), INCREMENTAL_RUNS)
def test_the_canonical_file_of_each_subtask_is_flinks_own_canonical_savepoint(run, version):
    """Flink's canonical savepoint of the second checkpoint's state (the same run, after its
    last event; Flink 2.3's of its run, Flink 1.20's of its own): the same header (the heap
    timers' queues after the RocksDB states) and the same pairs in every key group; for
    RocksDB timers (incremental checkpoints or not) the same bytes."""
    base = INCREMENTAL[version] / run
    checkpoint = FlinkCheckpoint.open(str(base / TRUTHS[version]["checkpoints"][run][1]))
    savepoint = FlinkCheckpoint.open(str(base / "savepoint"))
    ours_op = checkpoint.snapshot.operator("incr")
    theirs_op = savepoint.snapshot.operator("incr")
    for ours_subtask, theirs_subtask in zip(ours_op.subtasks, theirs_op.subtasks, strict=True):
        ours = checkpoint.snapshot.canonical_handle(ours_op, ours_subtask.keyed[0])
        (theirs,) = theirs_subtask.keyed
        assert not theirs_subtask.raw_keyed
        data = (base / "savepoint" / theirs.stream.path).read_bytes()
        assert ours.stream.inline is not None
        header = savepoint.snapshot.handle_header(theirs_op, theirs)
        assert ours.stream.inline[:header.data_start] == data[:header.data_start]
        assert [bool(o) for o in ours.offsets] == [bool(o) for o in theirs.offsets]
        assert _key_groups(ours, ours.stream.inline, header) == _key_groups(theirs, data, header)
        if run != "heap-timers":
            assert ours.stream.inline == data


def test_bytes_after_a_key_groups_timers_are_refused():
    """A section longer than its timers (here the last, which ends with the file) is not
    Flink's: refused, not read as the timers before them."""
    with pytest.raises(CorruptCheckpointError,
                       match=rf"key group {EVERY[-1]}\): 3 bytes after the timers .*offset"):
        read_legacy_timers(HANDLE, DATA + b"\x00\x00\x00", "raw-file", EVERY)

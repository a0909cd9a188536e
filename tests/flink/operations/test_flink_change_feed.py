"""The change feed between retained checkpoints of a real Flink 2.3 job equals the model's
difference.

``tests/fixtures/flink/changes`` (made by generate.py with ChangesJob.java) holds one
checkpoint after each phase of known events, and ``expected.json`` the state after each
phase, computed from the events in plain Python. The expected change rows are computed
here from those states alone, never through the reader.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from flink_changes import (
    ALL_STATES,
    IDS,
    PHASES,
    ROOT,
    STATES,
    feed_changes,
    model_changes,
    operator_of,
)
from statesource.cli import main
from statesource.errors import (
    CheckpointNotFoundError,
    CorruptCheckpointError,
    IncompatibleCheckpointError,
    InvalidArgumentError,
    StateNotFoundError,
)
from statesource.flink.operations.changefeed import FlinkChangeFeed
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.snapshot.directory import FlinkSnapshot

PAIRS = [(0, 1), (1, 2), (0, 2)]


@pytest.mark.parametrize("state", ALL_STATES)
@pytest.mark.parametrize("first, second", PAIRS)
def test_the_feed_between_two_flink_checkpoints_is_the_model_difference(state, first, second):
    feed = FlinkChangeFeed.open(str(ROOT), IDS[first], IDS[second], operator=operator_of(state),
                                state=state)
    expected = model_changes(state, PHASES[first], PHASES[second])
    assert expected, "each pair of phases changes every state"
    assert feed_changes(feed) == expected
    counts = feed.counts()
    by_type = {t: sum(1 for row in expected if row[1] == t)
               for t in ("insert", "update", "delete")}
    assert (counts.inserts, counts.updates, counts.deletes) == (
        by_type["insert"], by_type["update"], by_type["delete"])
    assert counts.key_groups == tuple(sorted({row[0] for row in expected}))


def test_every_kind_of_change_is_covered():
    """The fixture exercises what the feed distinguishes (so the test above can fail)."""
    tags = model_changes("tags", PHASES[0], PHASES[1])
    assert {row[1] for row in tags} == {"insert", "update", "delete"}
    per_tag = model_changes("per_tag", PHASES[0], PHASES[1])
    assert {row[1] for row in per_tag} == {"insert", "update", "delete"}
    ttl = model_changes("last_ttl", PHASES[0], PHASES[1])
    assert any(row[1] == "update" and row[4] == row[5] for row in ttl), "a TTL-only refresh"
    ratio = model_changes("ratio", PHASES[1], PHASES[2])
    assert any(row[4:] == (("double", "0.0"), ("double", "-0.0")) for row in ratio), \
        "0.0 to -0.0: equal in Python, an update in Java"
    pairs = model_changes("pairs", PHASES[0], PHASES[1])
    assert {row[1] for row in pairs} == {"insert", "update", "delete"}
    windows = model_changes("window-contents", PHASES[0], PHASES[2])
    assert {row[1] for row in windows} == {"insert", "update"}, "windows never fire"


def test_ttl_timestamps_old_and_new():
    feed = FlinkChangeFeed.open(str(ROOT), IDS[0], IDS[1], operator="tracker", state="last_ttl")
    rows = [row for table in feed.read() for row in table.to_pylist()]
    for row in rows:
        assert (row["old_ttl_timestamp"] is None) == (row["change_type"] == "insert")
        assert (row["new_ttl_timestamp"] is None) == (row["change_type"] == "delete")
        if row["change_type"] == "update":
            assert row["new_ttl_timestamp"] > row["old_ttl_timestamp"]


def _changed_key_groups(first: int, second: int) -> set[int]:
    """Key groups holding a key any state of which changed (from the model)."""
    return {row[0] for state in STATES
            for row in model_changes(state, PHASES[first], PHASES[second])}


def test_only_key_groups_whose_bytes_differ_are_decoded(monkeypatch):
    decoded: list[tuple[int, int]] = []
    original = FlinkSnapshot.decode_piece

    def recording(self, op, piece, data, state_ids=None):
        decoded.append((self.checkpoint_id, piece.key_group))
        return original(self, op, piece, data, state_ids)

    monkeypatch.setattr(FlinkSnapshot, "decode_piece", recording)
    feed = FlinkChangeFeed.open(str(ROOT), IDS[0], IDS[1], operator="tracker", state="count")
    assert len(feed.changed_key_groups()) == 128  # heap checkpoints share no file
    list(feed.read())
    changed = _changed_key_groups(0, 1)
    assert 0 < len(changed) < 64
    assert {kg for _, kg in decoded} == changed
    assert sorted(decoded) == sorted((i, kg) for i in IDS[:2] for kg in changed)


def test_the_same_file_range_at_both_ends_is_not_read(monkeypatch):
    """Two ends in one snapshot directory: every key group is the same file range."""
    same = FlinkChangeFeed(FlinkCheckpoint.open(str(ROOT), checkpoint_id=IDS[1]),
                           FlinkCheckpoint.open(str(ROOT), checkpoint_id=IDS[1]),
                           operator="tracker", state="tags")
    assert same.changed_key_groups() == []
    reads: list = []
    monkeypatch.setattr(FlinkSnapshot, "read_bytes", lambda self, *args: reads.append(args))
    assert list(same.read()) == []
    assert reads == []


def test_default_end_is_the_newest_and_a_chk_directory_names_its_root():
    feed = FlinkChangeFeed.open(str(ROOT / f"chk-{IDS[0]}"), IDS[0], operator="tracker",
                                state="count")
    assert (feed.start_id, feed.end_id) == (IDS[0], IDS[-1])


# -- refusals ------------------------------------------------------------------------------


def test_a_feed_runs_forward():
    with pytest.raises(InvalidArgumentError, match=f"start checkpoint {IDS[2]} is after end"):
        FlinkChangeFeed.open(str(ROOT), IDS[2], IDS[0], state="count")


def test_unknown_ids_list_the_available_ones():
    with pytest.raises(CheckpointNotFoundError, match=r"no Flink checkpoint 99 .*\[1, 2, 3\]"):
        FlinkChangeFeed.open(str(ROOT), 99, state="count")


def test_a_state_missing_at_the_end_is_refused_with_the_states_listed():
    with pytest.raises(StateNotFoundError, match="'count', 'last_ttl', 'max_seq'"):
        FlinkChangeFeed.open(str(ROOT), IDS[0], IDS[1], operator="tracker", state="nope")
    with pytest.raises(StateNotFoundError, match="no keyed state"):
        FlinkChangeFeed.open(str(ROOT), IDS[0], IDS[1], operator="tracker",
                             state="_timer_state/event_user-timers")


def _without_state(checkpoint: FlinkCheckpoint, name: str) -> None:
    snapshot = checkpoint.snapshot
    op = snapshot.operator("tracker")
    _set_header(snapshot, op, lambda header: replace(
        header, states=tuple(s for s in header.states if s.name != name)))


def _set_header(snapshot, op, change) -> None:
    """The operator's states as ``change`` makes them, for what reads the merged header."""
    merged = snapshot._merged(op)
    snapshot._merges[op.operator_id] = replace(merged, header=change(merged.header))


def test_a_state_missing_at_the_start_is_all_inserts():
    start = FlinkCheckpoint.open(str(ROOT), checkpoint_id=IDS[0])
    end = FlinkCheckpoint.open(str(ROOT), checkpoint_id=IDS[1])
    _without_state(start, "per_tag")
    feed = FlinkChangeFeed(start, end, operator="tracker", state="per_tag")
    empty = {"state": {"per_tag": {}}}
    assert feed_changes(feed) == model_changes("per_tag", empty, PHASES[1])


def test_a_state_of_other_serializers_is_refused():
    start = FlinkCheckpoint.open(str(ROOT), checkpoint_id=IDS[0])
    end = FlinkCheckpoint.open(str(ROOT), checkpoint_id=IDS[1])
    snapshot = start.snapshot
    op = snapshot.operator("tracker")
    header = snapshot.header(op)
    tags = next(s for s in header.states if s.name == "tags")
    count = next(s for s in header.states if s.name == "count")
    _set_header(snapshot, op, lambda header: replace(header, states=tuple(
        replace(s, options=count.options, serializers=count.serializers) if s is tags else s
        for s in header.states)))
    with pytest.raises(IncompatibleCheckpointError,
                       match=r"state 'tags' of operator 'tracker' is value state .* in Flink"
                             r" checkpoint 1 but list state"):
        FlinkChangeFeed(start, end, operator="tracker", state="tags")


def _copy(tmp_path: Path, ids=IDS) -> Path:
    root = tmp_path / "root"
    for checkpoint_id in ids:
        shutil.copytree(ROOT / f"chk-{checkpoint_id}", root / f"chk-{checkpoint_id}")
    return root


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_a_damaged_metadata_is_an_error(tmp_path, damage):
    root = _copy(tmp_path)
    metadata = root / f"chk-{IDS[0]}" / "_metadata"
    data = metadata.read_bytes()
    metadata.write_bytes(data[:len(data) // 2] if damage == "truncated"
                         else data[:8] + bytes(b ^ 0x5A for b in data[8:40]) + data[40:])
    with pytest.raises(CorruptCheckpointError, match="_metadata"):
        list(FlinkChangeFeed.open(str(root), IDS[0], IDS[1], state="count").read())


def test_a_directory_naming_another_checkpoint_is_refused(tmp_path):
    root = _copy(tmp_path, IDS[1:])
    shutil.copytree(ROOT / f"chk-{IDS[0]}", root / "chk-9")
    with pytest.raises(CheckpointNotFoundError, match=f"holds checkpoint {IDS[0]}, not 9"):
        FlinkChangeFeed.open(str(root), IDS[1], 9, state="count")


def test_a_checkpoint_symlinked_outside_the_root_is_refused(tmp_path):
    root = _copy(tmp_path, IDS[1:])
    outside = tmp_path / "elsewhere"
    shutil.copytree(ROOT / f"chk-{IDS[0]}", outside)
    (root / f"chk-{IDS[0]}").symlink_to(outside, target_is_directory=True)
    with pytest.raises(CorruptCheckpointError, match="leads outside"):
        FlinkChangeFeed.open(str(root), IDS[0], IDS[1], state="count")


# -- statesource diff ----------------------------------------------------------------------


def test_statesource_diff_of_two_flink_checkpoints(capsys):
    assert main(["diff", str(ROOT / f"chk-{IDS[0]}"), str(ROOT / f"chk-{IDS[2]}")]) == 1  # changes
    out = capsys.readouterr().out
    assert f"from Flink checkpoint {IDS[0]}" in out and f"to Flink checkpoint {IDS[2]}" in out
    lines = {line.split()[0]: line.split() for line in out.splitlines()
             if line.startswith("  ") and not line.strip().startswith("state")}
    for state in ALL_STATES:
        expected = model_changes(state, PHASES[0], PHASES[2])
        counts = [sum(1 for row in expected if row[1] == t) for t in ("insert", "update",
                                                                       "delete")]
        assert [int(v.replace(",", "")) for v in lines[state][1:4]] == counts
        assert int(lines[state][4]) == len({row[0] for row in expected})


def test_statesource_diff_refuses_a_flink_snapshot_against_a_statesource_checkpoint(
        tmp_path, capsys):
    statesource_root = tmp_path / "statesource"
    statesource_root.mkdir()
    assert main(["diff", str(ROOT / f"chk-{IDS[0]}"), str(statesource_root)]) != 0
    assert "is a Flink snapshot but" in capsys.readouterr().err


# -- two savepoints of one job -------------------------------------------------------------

GENERATED = ROOT.parents[1]


@pytest.mark.parametrize("variant", ["mp256", "mp128-snappy"])
def test_a_canonical_and_a_native_savepoint_of_the_same_state_differ_in_nothing(variant):
    """FixtureJob takes both savepoints after its last event (nothing changes in between), so
    every state, decoded once from each layout, must compare equal: every key group is read
    and decoded at both ends (the layouts differ), double, tuple and POJO values and window
    namespaces included."""
    canonical = FlinkCheckpoint.open(str(GENERATED / variant / "canonical"))
    native = FlinkCheckpoint.open(str(GENERATED / variant / "native"))
    assert canonical.checkpoint_id < native.checkpoint_id
    for operator in ("stateful", "windows"):
        for state in canonical.operator(operator).keyed_states:
            feed = FlinkChangeFeed(canonical, native, operator=operator, state=state.name)
            assert feed.changed_key_groups(), "no key group is the same file range"
            assert [t for t in feed.read() if t.num_rows] == []


def test_statesource_diff_of_two_savepoints(capsys):
    canonical, native = (GENERATED / "mp256" / kind for kind in ("canonical", "native"))
    assert main(["diff", str(canonical), str(native), "--operator", "stateful"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines()[4:] if line.strip()]
    assert sorted(row[0] for row in rows) == ["avg", "events", "last", "max_id", "per_user",
                                               "total"]
    assert all(row[1:5] == ["0", "0", "0", "0"] for row in rows)


def test_statesource_diff_reports_an_unreadable_state_and_compares_the_others(capsys):
    """Kryo values of a native savepoint cannot be decoded: that state fails, in its place,
    and every other state is still compared; the command fails."""
    canonical, native = (GENERATED / "mp128-snappy" / kind for kind in ("canonical", "native"))
    assert main(["diff", str(canonical), str(native)]) == 2  # a failure
    captured = capsys.readouterr()
    assert "last_uuid            not compared" in captured.out
    assert "window-contents              0         0         0" in captured.out
    assert "state 'last_uuid' of operator 'opaque'" in captured.err
    assert "KryoSerializerSnapshot" in captured.err


def test_a_feed_by_ids_needs_a_directory_of_checkpoints():
    with pytest.raises(InvalidArgumentError, match="is one Flink snapshot, not a directory"):
        FlinkChangeFeed.open(str(GENERATED / "mp256" / "canonical"), 1, state="total")
    with pytest.raises(CheckpointNotFoundError, match="no Flink checkpoint"):
        FlinkChangeFeed.open(str(GENERATED), 1, state="total")


def test_a_truncated_data_file_is_an_error(tmp_path):
    root = _copy(tmp_path)
    data = max((root / f"chk-{IDS[1]}").iterdir(), key=lambda f: f.stat().st_size)
    data.write_bytes(data.read_bytes()[:-100])
    with pytest.raises(CorruptCheckpointError, match=data.name):  # at the latest when read
        list(FlinkChangeFeed.open(str(root), IDS[0], IDS[1], operator="tracker",
                                  state="count").read())


def test_an_unknown_operator_is_refused_with_the_operators_listed():
    with pytest.raises(StateNotFoundError, match="no operator 'nope'.*'tracker'"):
        FlinkChangeFeed.open(str(ROOT), IDS[0], IDS[1], operator="nope", state="count")

"""Real Flink 2.3 savepoints and checkpoints decode exactly to their expected state."""

from __future__ import annotations

import json

import pytest

from flink_snapshots import JAVA_SNAPSHOTS, expected, only, shared_path
from statesource.flink.handles import operator_id_of
from statesource.flink.operations.changefeed import FlinkChangeFeed
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.snapshot.metadata import parse_metadata
from statesource.keygroups import assign_to_key_group, operator_index_for_key_group
from statesource.types import STRING, RowType

DUMPS = {
    "java_savepoint_canonical_savepoint-13d514-14bdf3c01d40.json": "java/canonical/savepoint-*",
    "java_savepoint_native_savepoint-13d514-8136cf18df60.json": "java/native/savepoint-*",
    "java_checkpoints_13d5147560dc72b13ec11469985b65d2_chk-7.json": "java/checkpoints/chk-7",
    "savepoint_savepoint-d87671-734c90d1d1d4.json": "pyflink/savepoint-*",
}


def _rows_by_key(checkpoint, state):
    """key -> (key group, [rows]) from reading through the Arrow tables."""
    found = {}
    for table in checkpoint.read_keyed_state(state, operator="stateful"):
        for row in table.to_pylist():
            key = row["key"] if isinstance(row["key"], str) else row["key"]["f0"]
            group, rows = found.setdefault(key, (row["key_group"], []))
            assert group == row["key_group"]
            rows.append(row)
    return found


@pytest.mark.parametrize("dump, pattern", sorted(DUMPS.items()))
def test_metadata_parser_agrees_with_flinks_own_decoding(dump, pattern):
    truth = json.loads(shared_path("metadata-dumps", dump).read_text())
    path = only(pattern) / "_metadata"
    parsed = parse_metadata(path.read_bytes(), str(path))
    assert parsed.checkpoint_id == truth["checkpoint_id"]
    assert len(parsed.operators) == len(truth["operators"])
    for op, want in zip(parsed.operators, truth["operators"]):
        assert (op.name, op.uid, op.operator_id, op.parallelism, op.max_parallelism) == (
            want["name"], want["uid"], want["operator_id"], want["parallelism"],
            want["max_parallelism"])
        assert op.operator_id == operator_id_of(op.uid)
        assert sorted(s.index for s in op.subtasks) == sorted(map(int, want["subtasks"]))
        for subtask in op.subtasks:
            want_sub = want["subtasks"][str(subtask.index)]
            assert len(subtask.keyed) == len(want_sub["managed_keyed"])
            for handle, want_handle in zip(subtask.keyed, want_sub["managed_keyed"]):
                assert [handle.start, handle.end] == want_handle["key_group_range"]
                assert list(handle.offsets) == want_handle["offsets"]
                assert handle.savepoint == (want_handle["class"] == "KeyGroupsSavepointStateHandle")
                delegate = want_handle["delegate"]
                assert handle.stream.size == delegate["size"]
                assert handle.stream.path == delegate["relative_path"]
            assert len(subtask.operator) == len(want_sub["managed_operator"])
            for handle, want_handle in zip(subtask.operator, want_sub["managed_operator"]):
                described = ", ".join(
                    f"{s.name}=StateMetaInfo{{offsets={list(s.offsets)},"
                    f" distributionMode={s.mode.name}}}" for s in handle.states)
                assert "{" + described + "}" == want_handle["state_name_to_partition_offsets"]
                assert handle.stream.size == want_handle["delegate"]["size"]


@pytest.mark.parametrize("name", sorted(JAVA_SNAPSHOTS))
def test_java_snapshot_decodes_to_the_expected_state(name):
    truth = expected("java")
    checkpoint = FlinkCheckpoint.open(str(only(JAVA_SNAPSHOTS[name])))
    op = checkpoint.operator("stateful")
    assert op.key_type == STRING and op.max_parallelism == truth["max_parallelism"]
    assert sorted(s.name for s in op.keyed_states) == sorted(truth["states"])
    states = {name: _rows_by_key(checkpoint, name) for name in truth["states"]}
    for state_rows in states.values():
        assert set(state_rows) == set(truth["state"])
    for key, want in truth["state"].items():
        group = want["key_group_if_plain_string_key"]
        assert group == assign_to_key_group(key, STRING, 128)
        for state_rows in states.values():
            assert state_rows[key][0] == group
        assert [r["value"] for r in states["count"][key][1]] == [want["count"]]
        assert [r["list_element"] for r in states["tags"][key][1]] == want["tags"]
        assert {r["user_key"]: r["user_value"] for r in states["sum_by_tag"][key][1]} == \
            want["sum_by_tag"]
        (ttl_row,) = states["last_seq_ttl"][key][1]
        assert ttl_row["value"] == want["last_seq_ttl"]
        assert ttl_row["ttl_timestamp"].year >= 2020  # the run's clock: only its presence is known


def test_earlier_checkpoint_is_a_prefix_of_the_final_state():
    truth = expected("java")
    checkpoint = FlinkCheckpoint.open(str(only("java/checkpoints/chk-4")))
    assert checkpoint.checkpoint_id == 4
    counts = _rows_by_key(checkpoint, "count")
    tags = _rows_by_key(checkpoint, "tags")
    assert counts and set(counts) <= set(truth["state"])
    for key, (group, rows) in counts.items():
        want = truth["state"][key]
        assert group == want["key_group_if_plain_string_key"]
        (row,) = rows
        assert 0 < row["value"] <= want["count"]
        assert [r["list_element"] for r in tags[key][1]] == want["tags"][:row["value"]]


def _plain_state(checkpoint, truth) -> dict:
    """Each state of the checkpoint as truth's shape: key -> value, list or dict."""
    states = {name: _rows_by_key(checkpoint, name) for name in truth["states"]}
    return {
        "count": {k: rows[0]["value"] for k, (_, rows) in states["count"].items()},
        "tags": {k: [r["list_element"] for r in rows] for k, (_, rows) in states["tags"].items()},
        "sum_by_tag": {k: {r["user_key"]: r["user_value"] for r in rows}
                       for k, (_, rows) in states["sum_by_tag"].items()},
        "last_seq_ttl": {k: (rows[0]["value"], rows[0]["ttl_timestamp"])
                         for k, (_, rows) in states["last_seq_ttl"].items()},
    }


def test_change_feed_from_checkpoint_4_to_7_is_the_difference_of_their_states():
    """Both retained checkpoints hold the job's final state: checkpoint 4 was taken after
    the job had consumed all its events, as its decoding shows (every key, every state equals
    expected_state.json, TTL timestamps equal checkpoint 7's). The difference of the two
    states is therefore empty, and so must the feed be, although no key group is the same
    file range (each checkpoint wrote its own files): every key group is compared."""
    truth = expected("java")
    root = str(shared_path("java", "checkpoints"))
    four = _plain_state(FlinkCheckpoint.open(root, checkpoint_id=4), truth)
    seven = _plain_state(FlinkCheckpoint.open(root, checkpoint_id=7), truth)
    final = {name: {key: want[name] for key, want in truth["state"].items()}
             for name in ("count", "tags", "sum_by_tag")}
    for state in final:
        assert four[state] == final[state]
    assert {k: v for k, (v, _) in four["last_seq_ttl"].items()} == {
        key: want["last_seq_ttl"] for key, want in truth["state"].items()}
    assert four == seven
    for state in truth["states"]:
        feed = FlinkChangeFeed.open(root, 4, 7, operator="stateful", state=state)
        assert len(feed.changed_key_groups()) == 128
        assert [t for t in feed.read() if t.num_rows] == []
        assert feed.counts().inserts + feed.counts().updates + feed.counts().deletes == 0


def test_directory_of_checkpoints_opens_the_newest_or_the_one_asked_for():
    root = str(shared_path("java", "checkpoints"))
    assert FlinkCheckpoint.open(root).checkpoint_id == 7
    assert FlinkCheckpoint.open(root, checkpoint_id=4).checkpoint_id == 4


def _pyflink_string(data: bytes, pos: int) -> tuple[str, int]:
    """PyFlink's string coder: a 4-byte big-endian length, then UTF-8."""
    length = int.from_bytes(data[pos:pos + 4], "big")
    return data[pos + 4:pos + 4 + length].decode(), pos + 4 + length


def _pyflink_strings(data: bytes) -> list[str]:
    found, pos = [], 0
    while pos < len(data):
        text, pos = _pyflink_string(data, pos)
        found.append(text)
    return found


def test_pyflink_savepoint_decodes_to_the_expected_state():
    truth = expected("pyflink")
    checkpoint = FlinkCheckpoint.open(str(only("pyflink/savepoint-*")))
    op = checkpoint.operator("stateful")
    assert op.key_type == RowType((STRING,))
    count = _rows_by_key(checkpoint, "python-state-count")
    tags = _rows_by_key(checkpoint, "python-state-tags")
    sums = _rows_by_key(checkpoint, "python-state-sum_by_tag")
    ttl = _rows_by_key(checkpoint, "python-state-last_seq_ttl")
    assert set(count) == set(tags) == set(sums) == set(ttl) == set(truth["state"])
    for key, want in truth["state"].items():
        group = want["key_group_row_key"]
        assert group == assign_to_key_group((key,), RowType((STRING,)), 128)
        assert operator_index_for_key_group(128, 2, group) == want["operator_index_row_key"]
        assert {count[key][0], tags[key][0], sums[key][0], ttl[key][0]} == {group}
        assert [r["key"] for r in count[key][1]] == [{"row_kind": "+I", "f0": key}]
        (value,) = [r["list_element"] for r in count[key][1]]
        assert int.from_bytes(value, "big", signed=True) == want["count"]
        flat = [t for r in tags[key][1] for t in _pyflink_strings(r["list_element"])]
        assert flat == want["tags"]
        decoded = {_pyflink_string(r["user_key"], 0)[0]: int.from_bytes(r["user_value"], "big")
                   for r in sums[key][1]}
        assert decoded == want["sum_by_tag"]
        (ttl_row,) = ttl[key][1]
        assert int.from_bytes(ttl_row["list_element"], "big") == want["last_seq_ttl"]


def test_operator_state_of_the_source_is_read_per_subtask():
    checkpoint = FlinkCheckpoint.open(str(only("java/canonical/savepoint-*")))
    assert checkpoint.read_operator_state("SourceReaderState", operator="src") == [[]]
    (summary,) = [s for s in checkpoint.summaries() if s.operator_uid == "src"]
    assert (summary.kind, summary.rows, summary.size_bytes) == ("operator-split", 0, 234)


def test_operator_chosen_by_uid_or_hex_id():
    checkpoint = FlinkCheckpoint.open(str(only("java/canonical/savepoint-*")))
    by_id = checkpoint.operator("2bf2326fd66dcbd2442fd50df173e152")
    assert by_id.uid == "stateful" == checkpoint.operator("stateful").uid

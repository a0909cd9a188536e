"""The change feed between any two checkpoints equals the dict model's difference.

The model's difference is computed here from the expected contents alone:
per (key, namespace) for scalar states, per element position for lists and
per user key for maps, with TTL timestamps as part of the value.
"""

from __future__ import annotations

import itertools

import pyarrow as pa
import pytest

from checkpointing.model import DESCRIPTORS, Job
from checkpointing.rounds import run_rounds
from statesource.checkpointing import CheckpointWriter
from statesource.errors import CorruptCheckpointError, InvalidArgumentError
from statesource.format import Checkpoint, changefeed
from statesource.format.changefeed import ChangeFeed


def model_changes(name: str, before: dict, after: dict) -> set:
    kind = DESCRIPTORS[name].kind.value
    changes = set()

    def row(key, namespace, position, old, new):
        if old == new:
            return
        change = "insert" if old is None else "delete" if new is None else "update"
        changes.add((change, key, namespace, position, _hashable(old), _hashable(new)))

    for key, namespace in before.keys() | after.keys():
        old, new = before.get((key, namespace)), after.get((key, namespace))
        if kind == "list":
            old, new = old or [], new or []
            for index in range(max(len(old), len(new))):
                row(key, namespace, index, old[index] if index < len(old) else None,
                    new[index] if index < len(new) else None)
        elif kind == "map":
            old, new = old or {}, new or {}
            for user_key in old.keys() | new.keys():
                row(key, namespace, user_key, old.get(user_key), new.get(user_key))
        else:
            row(key, namespace, None, old, new)
    return changes


def _hashable(value):
    return tuple(value) if isinstance(value, list) else value


def feed_changes(feed: ChangeFeed) -> set:
    changes = set()
    for table in feed.read():
        columns = {name: _python(table.column(name)) for name in table.column_names}
        position = columns.get("element_index", columns.get("user_key"))
        ttl = "old_ttl_timestamp" in columns
        for i in range(table.num_rows):
            old, new = columns["old_value"][i], columns["new_value"][i]
            if ttl:
                old = None if old is None else (old, columns["old_ttl_timestamp"][i])
                new = None if new is None else (new, columns["new_ttl_timestamp"][i])
            changes.add((columns["change_type"][i], columns["key"][i], columns["namespace"][i],
                         None if position is None else position[i], old, new))
    return changes


def _python(column: pa.ChunkedArray) -> list:
    if pa.types.is_timestamp(column.type):
        column = column.cast(pa.int64())
    return column.to_pylist()


@pytest.mark.parametrize("vectorised", [True, False])
@pytest.mark.parametrize("seed", range(3))
def test_the_feed_between_any_two_checkpoints_is_the_model_difference(tmp_path, monkeypatch,
                                                                      seed, vectorised):
    if not vectorised:  # every state of the model is Arrow-diffable: force the Python diff
        monkeypatch.setattr(changefeed, "arrow_diffable", lambda *_: False)
    root = str(tmp_path / "root")
    committed = run_rounds(root, 20 + seed, monkeypatch, rounds=10, keys=12)
    seen = set()
    for start, end in itertools.combinations_with_replacement(sorted(committed), 2):
        for name in DESCRIPTORS:
            feed = ChangeFeed.open(root, start, end, state=name)
            expected = model_changes(name, committed[start][name], committed[end][name])
            assert feed_changes(feed) == expected, (start, end, name)
            seen.update((name, change[0]) for change in expected)
    assert {change for _, change in seen} == {"insert", "update", "delete"}
    assert {name for name, _ in seen} == set(DESCRIPTORS)


def test_unchanged_key_groups_are_never_read(tmp_path, monkeypatch):
    """Corrupting the bytes of a key group both checkpoints share does not disturb the feed."""
    root = tmp_path / "root"
    job = Job(3)
    job.mutate(200)
    committed = {}
    with CheckpointWriter(str(root), incremental=True) as writer:
        for checkpoint_id in (1, 2):
            committed[checkpoint_id] = job.expected()
            writer.write(checkpoint_id, {"op": job.backends})
            job.mutate(6, hot_keys=2)
    start, end = 1, 2
    corrupted = 0
    for name in DESCRIPTORS:
        feed = ChangeFeed.open(str(root), start, end, state=name)
        shared = _shared_locations(feed)
        corrupted += len(shared)
        for data_file, location in shared:
            path = root / data_file.path
            payload = bytearray(path.read_bytes())
            payload[location.offset] ^= 0xFF
            path.write_bytes(bytes(payload))
        expected = model_changes(name, committed[start][name], committed[end][name])
        assert feed_changes(feed) == expected
        if shared:
            data_file, location = shared[0]
            with pytest.raises(CorruptCheckpointError, match="(?i)crc|checksum"):
                list(Checkpoint.open(str(root), checkpoint_id=end).read_keyed_state(
                    name, key_groups=[location.key_group]))
    assert corrupted


def _shared_locations(feed: ChangeFeed) -> list:
    changed = set(feed.changed_key_groups())
    return [(f, loc) for f, loc in feed.end_state.key_group_locations()
            if loc.key_group not in changed]


def test_a_feed_runs_forward_within_one_root(tmp_path, monkeypatch):
    root = str(tmp_path / "root")
    committed = sorted(run_rounds(root, 5, monkeypatch, rounds=4))
    with pytest.raises(InvalidArgumentError, match="runs forward"):
        ChangeFeed.open(root, committed[-1], committed[0], state="value")
    counts = ChangeFeed.open(root, committed[0], committed[-1], state="map").counts()
    feed = ChangeFeed.open(root, committed[0], committed[-1], state="map")
    rows = [r["change_type"] for t in feed.read() for r in t.to_pylist()]
    assert (counts.inserts, counts.updates, counts.deletes) == (
        rows.count("insert"), rows.count("update"), rows.count("delete"))
    assert counts.read_key_groups == len(feed.changed_key_groups())


def test_float_keys_and_values_compare_as_java_does(tmp_path):
    """0.0 and -0.0 are different keys and values in Java; NaN equals NaN."""
    from statesource.state.descriptors import ValueStateDescriptor
    from statesource.state.keyed_backend import KeyedStateBackend

    backend = KeyedStateBackend("double", 128)
    value = backend.get_state(ValueStateDescriptor("v", "double"))
    for key, stored in ((0.0, 1.0), (-0.0, 2.0), (float("nan"), float("nan")), (1.0, 0.0)):
        backend.set_current_key(key)
        value.update(stored)
    with CheckpointWriter(str(tmp_path)) as writer:
        writer.write(1, {"op": [backend]})
        backend.set_current_key(1.0)
        value.update(-0.0)
        backend.set_current_key(-0.0)
        value.clear()
        writer.write(2, {"op": [backend]})
    feed = ChangeFeed.open(str(tmp_path), 1, 2)
    assert not changefeed.arrow_diffable(feed.key_type, feed.declaration)
    rows = sorted((r["change_type"], str(r["key"]), str(r["old_value"]), str(r["new_value"]))
                  for t in feed.read() for r in t.to_pylist())
    assert rows == [("delete", "-0.0", "2.0", "None"), ("update", "1.0", "0.0", "-0.0")]


@pytest.mark.parametrize(("second", "message"), [
    (("string", 128, "string"), "needs the same types"),
    (("string", 64, "long"), "needs the same key groups"),
])
def test_a_feed_refuses_checkpoints_that_disagree_on_a_state(tmp_path, second, message):
    from statesource.errors import IncompatibleCheckpointError
    from statesource.state.descriptors import ValueStateDescriptor
    from statesource.state.keyed_backend import KeyedStateBackend

    with CheckpointWriter(str(tmp_path)) as writer:
        for checkpoint_id, (key_type, max_parallelism, value_type) in enumerate(
                [("string", 128, "long"), second], start=1):
            backend = KeyedStateBackend(key_type, max_parallelism)
            backend.get_state(ValueStateDescriptor("v", value_type))
            writer.write(checkpoint_id, {"op": [backend]})
    with pytest.raises(IncompatibleCheckpointError, match=message):
        ChangeFeed.open(str(tmp_path), 1, 2)

"""A checkpoint with delta runs (format version 4) through Spark: both read paths serve the
merged state (the JVM reader declines the state and the Python source merges it), and the
change feed read from the runs equals the model's difference."""

from __future__ import annotations

import pytest

from statesource import CheckpointWriter
from statesource.state.descriptors import MapStateDescriptor, ValueStateDescriptor
from statesource.state.keyed_backend import KeyedStateBackend


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """Checkpoint 1 full, 2 and 3 incremental with runs; the model of each."""
    root = tmp_path_factory.mktemp("deltas")
    backend = KeyedStateBackend("long", 32)
    counts = backend.get_state(ValueStateDescriptor("counts", "long"))
    tags = backend.get_state(MapStateDescriptor("tags", "string", "long"))
    models = {}
    model: dict[int, int] = {}
    tag_model: dict[int, dict[str, int]] = {}
    with CheckpointWriter(str(root), incremental=True) as writer:
        for checkpoint_id, keys in ((1, range(2000)), (2, range(0, 2000, 53)),
                                    (3, range(7, 2000, 61))):
            for key in keys:
                backend.set_current_key(key)
                if checkpoint_id == 3 and key % 2:
                    counts.clear()
                    model.pop(key, None)
                    tags.remove("a")
                    tag_model.get(key, {}).pop("a", None)
                    if not tag_model.get(key, True):
                        del tag_model[key]
                else:
                    counts.update(key * checkpoint_id)
                    model[key] = key * checkpoint_id
                    tags.put("a" if checkpoint_id < 3 else "b", checkpoint_id)
                    tag_model.setdefault(key, {})["a" if checkpoint_id < 3 else "b"] = \
                        checkpoint_id
            writer.write(checkpoint_id, {"op": [backend]})
            models[checkpoint_id] = (dict(model), {k: dict(v) for k, v in tag_model.items()})
    return str(root), models


def test_both_read_paths_serve_the_merged_state(spark, chain, source_format):
    root, models = chain
    counts, tags = models[3]
    rows = spark.read.format(source_format).options(state="counts").load(root).collect()
    assert {r.key: r.value for r in rows} == counts
    rows = spark.read.format(source_format).options(state="tags").load(root).collect()
    assert {(r.key, r.user_key): r.user_value for r in rows} == {
        (k, u): v for k, entries in tags.items() for u, v in entries.items()}


def test_the_change_feed_from_runs_equals_the_model(spark, chain):
    root, models = chain
    rows = spark.read.format("flinkstate").options(
        state="counts", readChangeFeed="true", changeStartCheckpointId="2").load(root).collect()
    before, after = models[2][0], models[3][0]
    expected = {(k, "insert" if k not in before else "delete" if k not in after else "update",
                 before.get(k), after.get(k))
                for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert {(r.key, r.change_type, r.old_value, r.new_value) for r in rows} == expected

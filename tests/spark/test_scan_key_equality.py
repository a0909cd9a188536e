"""The scan's key handling (no SparkSession): entries regroup and keys push down by Java
equality, and a pushed value no stored key can equal matches nothing instead of failing."""

from __future__ import annotations

import math
import struct

from statesource.checkpointing import CheckpointWriter, SubtaskBackends
from statesource.format.reader import Checkpoint
from statesource.spark.options import parse_read_options
from statesource.spark.read.keyed import open_target, read_slice
from statesource.spark.read.pushdown import Pushdown, accept_key_filter
from statesource.spark.read.slices import plan_slices
from statesource.state import ManualClock
from statesource.state.descriptors import ListStateDescriptor, ValueStateDescriptor
from statesource.state.keyed_backend import KeyedStateBackend

OTHER_NAN = struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000001))[0]


def scan(path: str, state: str, keys=None, **options) -> list[dict]:
    target = open_target(parse_read_options({"path": path, "state": state, **options}))
    op = Checkpoint.open(path).operator()
    rows = []
    rows_per_group = {loc.key_group: loc.rows
                      for _, loc in op.keyed_state(state).key_group_locations()}
    for part in plan_slices(rows_per_group, target.max_parallelism, target.parallelism, None):
        for batch in read_slice(target, part, keys):
            rows.extend(batch.to_pylist())
    return rows


def test_nested_rows_group_entries_by_java_key_equality(tmp_path):
    backend = KeyedStateBackend("double", 1, clock=ManualClock(0))  # one key group
    events = backend.get_state(ListStateDescriptor("events", "long"))
    for key, elements in [(math.nan, [1, 2]), (0.0, [3]), (-0.0, [4, 5]), (OTHER_NAN, [6])]:
        backend.set_current_key(key)
        events.add_all(elements)
    CheckpointWriter(str(tmp_path)).write(1, {"op": [SubtaskBackends(keyed=backend)]})
    rows = scan(str(tmp_path), "events", flattenCollections="false")
    def label(key: float) -> str:
        return "nan" if math.isnan(key) else "-0" if math.copysign(1, key) < 0 else "+0"

    assert {label(r["key"]): r["list_value"] for r in rows} == {
        "nan": [1, 2, 6], "+0": [3], "-0": [4, 5]}
    assert len(rows) == 3


def test_pushed_key_that_no_stored_key_can_equal_matches_nothing(tmp_path):
    backend = KeyedStateBackend("string", 128, clock=ManualClock(0))
    value = backend.get_state(ValueStateDescriptor("v", "long"))
    for i, key in enumerate(["a", "b"]):
        backend.set_current_key(key)
        value.update(i)
    CheckpointWriter(str(tmp_path)).write(1, {"op": [SubtaskBackends(keyed=backend)]})
    pushdown = Pushdown()
    assert accept_key_filter(Checkpoint.open(str(tmp_path)).operator(), ("\ud800", "b"),
                             pushdown)
    assert pushdown.keys == ["b"]
    rows = scan(str(tmp_path), "v", pushdown.keys)
    assert [(r["key"], r["value"]) for r in rows] == [("b", 1)]

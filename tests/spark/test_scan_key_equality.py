"""The scan's key handling (no SparkSession): entries regroup and keys push down by Java
equality, and a pushed value no stored key can equal matches nothing instead of failing."""

from __future__ import annotations

import math
import struct

import pytest
from pyspark.sql.datasource import EqualTo

from statesource.checkpointing import CheckpointWriter, SubtaskBackends
from statesource.format.reader import Checkpoint
from statesource.keygroups import assign_to_key_group
from statesource.spark.options import parse_read_options
from statesource.spark.read.keyed import open_target, read_slice
from statesource.spark.read.pushdown import Pushdown, accept_filter, accept_key_filter
from statesource.spark.read.slices import plan_slices
from statesource.state import ManualClock
from statesource.state.descriptors import ListStateDescriptor, ValueStateDescriptor
from statesource.state.keyed_backend import KeyedStateBackend
from statesource.types import DOUBLE

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


def _spark_equal(stored: float, wanted: float) -> bool:
    """Spark SQL's ``=`` on doubles: NaN equals NaN and -0.0 equals 0.0 (unlike Java's
    ``Double.equals``, which tells the zeros apart and has every NaN equal)."""
    return (math.isnan(stored) and math.isnan(wanted)) or stored == wanted


@pytest.mark.parametrize("wanted", [0.0, -0.0, math.nan, OTHER_NAN, 1.5])
def test_a_double_key_filter_returns_what_spark_equality_matches(tmp_path, wanted):
    """0.0 and -0.0 are two Flink keys, in two key groups (Java's hashCode differs): a
    ``key = 0.0`` that Spark means to match both must not be pushed as an exact key."""
    backend = KeyedStateBackend("double", 128, clock=ManualClock(0))
    value = backend.get_state(ValueStateDescriptor("v", "long"))
    stored = [0.0, -0.0, math.nan, 1.5]
    for i, key in enumerate(stored):
        backend.set_current_key(key)
        value.update(i)
    assert assign_to_key_group(0.0, DOUBLE, 128) != assign_to_key_group(-0.0, DOUBLE, 128)
    CheckpointWriter(str(tmp_path)).write(1, {"op": [SubtaskBackends(keyed=backend)]})
    pushdown = Pushdown()
    accepted = accept_key_filter(Checkpoint.open(str(tmp_path)).operator(), (wanted,), pushdown)
    rows = scan(str(tmp_path), "v", pushdown.keys)
    if not accepted:  # Spark applies the filter itself
        rows = [r for r in rows if _spark_equal(r["key"], wanted)]
    assert sorted(r["value"] for r in rows) == [
        i for i, key in enumerate(stored) if _spark_equal(key, wanted)]


@pytest.mark.parametrize("attribute, value", [
    (("value", "key"), "a"), (("value", "key_group"), 3), (("key", "f0"), "a"),
    (("value", "operator_index"), 0)])
def test_a_filter_on_a_nested_field_is_not_taken_for_a_top_level_column(tmp_path, attribute,
                                                                         value):
    """``value.key = 'a'`` filters a field of the value record, not the key (nor
    ``value.key_group`` the key group): Spark must keep applying it."""
    backend = KeyedStateBackend("string", 8, clock=ManualClock(0))
    record = {"type": "record", "name": "R", "fields": [
        {"name": "key", "type": "string"}, {"name": "key_group", "type": "int"},
        {"name": "operator_index", "type": "int"}]}
    state = backend.get_state(ValueStateDescriptor("v", record))
    backend.set_current_key("a")
    state.update({"key": "b", "key_group": 3, "operator_index": 0})
    CheckpointWriter(str(tmp_path)).write(1, {"op": [SubtaskBackends(keyed=backend)]})
    pushdown = Pushdown()
    op = Checkpoint.open(str(tmp_path)).operator()
    assert not accept_filter(EqualTo(attribute, value), op, 2, pushdown,
                             ("key_group", "operator_index"))
    assert pushdown == Pushdown()

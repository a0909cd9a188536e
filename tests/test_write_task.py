"""The Spark writer's task (``write_partition``), run without Spark: its refusals and its
layout checked against hand-computed truth (Flink's subtask ranges, entry counts)."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pyarrow as pa
import pytest

from statesource.errors import InvalidArgumentError
from statesource.format.entries import row_changes
from statesource.format.locations import DataFile
from statesource.format.storage import resolve
from statesource.format.target import CheckpointStateSink
from statesource.keygroups import KeyGroupRange
from statesource.model import StateDeclaration, StateKind
from statesource.schema import ValueSchema
from statesource.spark.write.plan import StateWrite
from statesource.spark.write.rewrite import state_meta
from statesource.spark.write.task import write_partition
from statesource.types import STRING, VOID

MAX_PARALLELISM = 128


def map_write(tmp_path, parallelism: int = 2) -> StateWrite:
    declaration = StateDeclaration("m", StateKind.MAP, VOID,
                                   {"user_key": ValueSchema.parse("string"),
                                    "user_value": ValueSchema.parse("long")})
    sink = CheckpointStateSink(resolve(str(tmp_path)), 1, "op", "m")
    return StateWrite(sink, "op", declaration, STRING, MAX_PARALLELISM, parallelism, 0, None)


def test_map_entries_count_keys_not_user_keys(tmp_path):
    rows = pa.record_batch({"key": ["a", "a", "a", "b"], "user_key": ["x", "y", "z", "x"],
                            "user_value": [1, 2, 3, 4]})
    files = write_partition(map_write(tmp_path, parallelism=1), [rows])
    locations = [loc for f in files for loc in f.locations]
    assert sorted(loc.rows for loc in locations) == [1, 3]
    assert [loc.entries for loc in locations] == [1, 1]  # one map per key


def test_a_repeated_user_key_of_one_map_is_refused(tmp_path):
    rows = pa.record_batch({"key": ["a", "b", "a"], "user_key": ["x", "x", "x"],
                            "user_value": [1, 2, 3]})
    with pytest.raises(InvalidArgumentError, match="user key appears more than once.*'a'"):
        write_partition(map_write(tmp_path), [rows])
    assert not list(tmp_path.rglob("*.arrow"))


def test_rows_go_to_flinks_subtask_ranges(tmp_path):
    keys = [f"key-{i}" for i in range(200)]
    rows = pa.record_batch({"key": keys, "user_key": ["u"] * len(keys),
                            "user_value": list(range(len(keys)))})
    for parallelism in (2, 3, 7):
        files = write_partition(map_write(tmp_path / str(parallelism), parallelism), [rows])
        for data_file in files:
            subtask = int(re.search(r"\.sub(\d+)\.", data_file.path).group(1))
            for loc in data_file.locations:
                # Flink's KeyGroupRangeAssignment: operator index = kg * parallelism / max
                assert subtask == loc.key_group * parallelism // MAX_PARALLELISM
        assert sum(loc.rows for f in files for loc in f.locations) == len(keys)


def test_nulls_are_equal_when_rows_are_compared():
    assert row_changes([pa.array([None, None, 1, 1, None])]).tolist() == \
        [False, True, False, True]
    assert row_changes([pa.array(["a", "a"]), pa.array([None, 1])]).tolist() == [True]


def _file(start: int, end: int) -> DataFile:
    return DataFile(f"chk-1/data/f{start}.arrow", KeyGroupRange(start, end), 10, ())


def test_two_tasks_sharing_a_boundary_key_group_are_refused_at_commit():
    write = SimpleNamespace(declaration=SimpleNamespace(name="m"))
    with pytest.raises(InvalidArgumentError, match="key groups 3-7|more than one Spark task"):
        state_meta(write, [_file(3, 7), _file(0, 3)])

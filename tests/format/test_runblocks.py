"""Runs kept as blocks (one per delta file) against the runs per key group they stand for."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statesource.errors import CorruptCheckpointError
from statesource.format.runblocks import RunBlocks

SCHEMA = pa.schema([("key_group", pa.int32()), ("key", pa.int64())])

per_key_group_runs = st.dictionaries(
    st.integers(0, 20), st.lists(st.lists(st.integers(0, 99), max_size=4), min_size=1,
                                 max_size=4), max_size=6)


def _runs(keys_of: dict[int, list[list[int]]]) -> dict[int, list[pa.Table]]:
    return {kg: [pa.table({"key_group": pa.array([kg] * len(keys), pa.int32()),
                           "key": pa.array(keys, pa.int64())}) for keys in runs]
            for kg, runs in keys_of.items()}


def _lists(runs: dict[int, list[pa.Table]]) -> dict[int, list[list[int]]]:
    return {kg: [table.column("key").to_pylist() for table in tables]
            for kg, tables in runs.items()}


@settings(max_examples=200, deadline=None)
@given(keys_of=per_key_group_runs, bounds=st.tuples(st.integers(0, 20), st.integers(0, 20)))
def test_blocks_hold_the_runs_of_each_key_group_in_their_order(keys_of, bounds):
    blocks = RunBlocks.from_key_groups(_runs(keys_of))
    assert _lists(blocks.by_key_group()) == keys_of
    first, last = min(bounds), max(bounds)
    assert _lists(blocks.keeping(first, last).by_key_group()) == {
        kg: runs for kg, runs in keys_of.items() if first <= kg <= last}
    order, ranks = blocks.key_group_order()
    if not blocks.blocks:
        assert not keys_of and not len(order) and not len(ranks)
        return
    table = blocks.table()
    in_order = [(kg, rank, key) for kg in sorted(keys_of)
                for rank, keys in enumerate(keys_of[kg]) for key in keys]
    assert list(zip(table.column("key_group").to_numpy()[order].tolist(), ranks.tolist(),
                    table.column("key").to_numpy()[order].tolist())) == in_order
    blocks.check_key_groups(table.column("key_group").to_numpy())
    starts, ends, row = [], [], 0
    for rank in range(max(len(runs) for runs in keys_of.values())):  # block n: n-th runs
        for kg in sorted(keys_of):
            if len(keys_of[kg]) > rank:
                starts.append(row)
                row += len(keys_of[kg][rank])
        ends.append(row)
    assert blocks.run_starts().tolist() == starts
    assert blocks.block_ends().tolist() == ends


def test_a_block_holding_rows_of_another_key_group_is_refused():
    blocks = RunBlocks.from_key_groups(_runs({1: [[1, 2]], 2: [[3]]}))
    groups = blocks.table().column("key_group").to_numpy().copy()
    groups[-1] = 1
    with pytest.raises(CorruptCheckpointError, match="holds rows of another key group"):
        blocks.check_key_groups(groups)

"""Upserts written into the bases' read buffers, against the dict model.

The search merge with bases of its own (``own_bases``, as the reader's fresh
reads are) must give what it gives without (and what the general merge gives)
on every input, writing in place only the key groups where that is exact; a
base whose buffers a hostile file made overlap must be merged by copying.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from format.test_keyorder import (
    SCHEMA,
    _as_model,
    _chain,
    _hinted,
    chains,
    hint_kinds,
    hinted_chain,
    merge_searched,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from statesource.format.columns import UPSERT


def own_buffer(table: pa.Table) -> pa.Table:
    """``table`` decoded from IPC bytes in a mutable buffer nothing else holds, as a reader
    reads a base."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    written = sink.getvalue()
    data = pa.allocate_buffer(written.size)
    pa.BufferReader(written).readinto(data)
    return pa.ipc.open_stream(data).read_all()


def _values(table: pa.Table) -> tuple[int, int] | None:
    """Where ``table``'s values lie: one chunk's data buffer (address, size)."""
    column = table.column("value")
    if column.num_chunks != 1:
        return None
    data = column.chunk(0).buffers()[1]
    return data.address, data.size


@settings(max_examples=300, deadline=None)
@given(chain=chains, hints=hint_kinds, rng=st.randoms(use_true_random=False))
def test_upserts_written_in_place_give_the_merge_the_model_gives(chain, hints, rng):
    bases, runs, model = hinted_chain(chain, hints, rng)
    owned = {kg: own_buffer(base) for kg, base in bases.items()}
    where = {kg: _values(base) for kg, base in owned.items()}
    merged = merge_searched(owned, runs, SCHEMA, own_bases=True)
    assert merged is not None
    assert _as_model(merged) == model
    for kg, table in merged.items():
        only_upserts = all(pa.compute.all(pa.compute.equal(run.column("delta_kind"), UPSERT))
                           .as_py() is not False for run in runs.get(kg, []))
        base_keys = set(bases[kg].column("key").to_pylist()) if kg in bases else set()
        if hints == "exact" and only_upserts and base_keys >= _run_keys(runs, kg):
            assert _values(table) == where[kg]  # written where the base was read


def _run_keys(runs, kg) -> set[int]:
    return {key for run in runs.get(kg, []) for key in run.column("key").to_pylist()}


def test_bases_the_caller_shares_are_never_written():
    bases, runs, model = _chain({0: {1: 1, 2: 2}}, {0: [{2: 5}]}, ordered=True)
    runs = {0: [_hinted(runs[0][0], bases[0], "exact", None)]}
    merged = merge_searched(bases, runs, SCHEMA)
    assert _as_model(merged) == model
    assert bases[0].column("value").to_pylist() == [1, 2]


def test_a_base_whose_value_buffer_overlaps_its_keys_is_merged_by_copying():
    """A hostile batch may point two columns at the same bytes: a write into one would
    change the other, so such a base is left to the merge that copies."""
    keys = pa.array([1, 2, 3], pa.int64())
    shared = keys.buffers()[1]
    values = pa.Array.from_buffers(pa.int64(), 3, [None, shared])
    table = pa.table({"key_group": pa.array([0, 0, 0], pa.int32()), "key": keys,
                      "namespace": pa.nulls(3), "value": values}, schema=SCHEMA)
    base = own_buffer(table)  # now one mutable buffer, columns apart: alias them again
    key_column = base.column("key").chunk(0)
    aliased = pa.table({"key_group": base.column("key_group"), "key": key_column,
                        "namespace": base.column("namespace"),
                        "value": pa.Array.from_buffers(pa.int64(), 3,
                                                       [None, key_column.buffers()[1]])},
                       schema=SCHEMA)
    _, runs, _ = _chain({0: {1: 1, 2: 2, 3: 3}}, {0: [{2: 7}]}, ordered=True)
    runs = {0: [_hinted(runs[0][0], aliased, "exact", None)]}
    merged = merge_searched({0: aliased}, runs, SCHEMA, own_bases=True)
    assert merged[0].column("key").to_pylist() == [1, 2, 3]
    assert merged[0].column("value").to_pylist() == [1, 7, 3]
    assert np.array_equal(aliased.column("key").to_numpy(), [1, 2, 3])


def test_the_newest_of_several_runs_is_the_value_written():
    """Two runs upsert one entry in place: the later run's value is what is left, and it is
    written where the base was read."""
    bases, runs, model = _chain({0: {1: 1, 2: 2}, 1: {3: 3}},
                                {0: [{2: 5}, {2: 7}, {1: 4}], 1: [{3: 6}, {3: 8}]},
                                ordered=True)
    runs = {kg: [_hinted(run, bases[kg], "exact", None) for run in kg_runs]
            for kg, kg_runs in runs.items()}
    owned = {kg: own_buffer(base) for kg, base in bases.items()}
    where = {kg: _values(base) for kg, base in owned.items()}
    merged = merge_searched(owned, runs, SCHEMA, own_bases=True)
    assert _as_model(merged) == model
    assert merged[0].column("value").to_pylist() == [4, 7]
    assert {kg: _values(table) for kg, table in merged.items()} == where


def test_a_run_whose_value_buffer_is_longer_than_its_values_is_read():
    """Arrow accepts a data buffer longer than its values need (IPC from another writer, or
    a hostile one): the values are its first bytes, whatever its length."""
    bases, runs, model = _chain({0: {1: 1, 2: 2}}, {0: [{2: 5}]}, ordered=True)
    run = _hinted(runs[0][0], bases[0], "exact", None)
    values = run.column("value").chunk(0)
    padded = pa.py_buffer(values.buffers()[1].to_pybytes() + b"\0")
    run = run.set_column(run.schema.get_field_index("value"), run.schema.field("value"),
                         pa.Array.from_buffers(values.type, len(values),
                                               [values.buffers()[0], padded]))
    run.validate(full=True)
    merged = merge_searched({0: own_buffer(bases[0])}, {0: [run]}, SCHEMA, own_bases=True)
    assert _as_model(merged) == model

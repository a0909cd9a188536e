"""Rows in key order and the binary-search merge of delta runs, against a dict model.

The search merge must give what the general merge gives (entry by entry) on
every input it accepts, and must decline, never guess, where the order it
relies on does not hold: runs or bases written by an older v4 writer (any
order) or by a hostile one (repeated keys, unsorted rows).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkpointing.test_deltas import _set
from statesource.checkpointing import CheckpointWriter, restore_keyed_backend
from statesource.errors import CorruptCheckpointError
from statesource.format import Checkpoint
from statesource.format.columns import (
    BASE_ROW,
    DELTA_KIND,
    PRIOR,
    TOMBSTONE,
    UPSERT,
    in_key_order,
)
from statesource.format.deltas import SortedRuns, delta_schema
from statesource.format.keyorder import merge_blocks
from statesource.format.runblocks import RunBlocks
from statesource.state.descriptors import ValueStateDescriptor
from statesource.state.keyed_backend import KeyedStateBackend

SCHEMA = pa.schema([("key_group", pa.int32()), ("key", pa.int64()),
                    ("namespace", pa.null()), ("value", pa.int64())])
DELTA = delta_schema(SCHEMA)

keys = st.integers(-50, 50)
entry_changes = st.dictionaries(keys, st.one_of(st.none(), st.integers(-9, 9)), max_size=12)
"""One run: key -> new value (None: removed)."""


def merge_searched(bases, runs, schema, **options):
    """The search merge of ``runs`` given per key group (oldest first), as the tests write
    them."""
    return merge_blocks(bases, RunBlocks.from_key_groups(runs), schema, **options)


def _base(key_group: int, entries: dict[int, int], ordered: bool) -> pa.Table:
    items = sorted(entries.items()) if ordered else list(entries.items())
    return pa.Table.from_pylist([{"key_group": key_group, "key": k, "value": v}
                                 for k, v in items], schema=SCHEMA)


def _run(key_group: int, before: dict[int, int], changes: dict[int, int | None],
         ordered: bool) -> pa.Table:
    """A run as the writer makes it: upserts and tombstones, then the priors."""
    items = sorted(changes.items()) if ordered else list(changes.items())
    rows = [{"key_group": key_group, "key": k, "value": v,
             DELTA_KIND: TOMBSTONE if v is None else UPSERT} for k, v in items]
    rows += [{"key_group": key_group, "key": k, "value": before[k], DELTA_KIND: PRIOR}
             for k, _ in items if k in before]
    return pa.Table.from_pylist(rows, schema=DELTA)


def _chain(base_entries: dict[int, dict[int, int]], changes: dict[int, list[dict]],
           ordered: bool) -> tuple[dict[int, pa.Table], dict[int, list[pa.Table]], dict]:
    """Bases, runs and the model's end state, per key group."""
    bases = {kg: _base(kg, entries, ordered) for kg, entries in base_entries.items()}
    runs: dict[int, list[pa.Table]] = {}
    model = {}
    for kg in sorted(base_entries.keys() | changes.keys()):
        state = dict(base_entries.get(kg, {}))
        for change in changes.get(kg, []):
            runs.setdefault(kg, []).append(_run(kg, state, change, ordered))
            for key, value in change.items():
                if value is None:
                    state.pop(key, None)
                else:
                    state[key] = value
        if state:
            model[kg] = state
    return bases, runs, model


def _as_model(merged: dict[int, pa.Table]) -> dict[int, dict[int, int]]:
    model = {}
    for kg, table in merged.items():
        pairs = list(zip(table.column("key").to_pylist(), table.column("value").to_pylist()))
        assert len({k for k, _ in pairs}) == len(pairs)  # one row per entry
        assert set(table.column("key_group").to_pylist()) == {kg}
        model[kg] = dict(pairs)
    return model


chains = st.tuples(st.dictionaries(st.integers(0, 3), st.dictionaries(keys, st.integers(-9, 9)),
                                   max_size=4),
                   st.dictionaries(st.integers(0, 3), st.lists(entry_changes, max_size=4),
                                   max_size=4))


@settings(max_examples=300, deadline=None)
@given(chain=chains)
def test_the_search_merge_applies_runs_in_key_order_as_the_model(chain):
    bases, runs, model = _chain(*chain, ordered=True)
    merged = merge_searched(bases, runs, SCHEMA)
    assert merged is not None
    assert _as_model(merged) == model
    assert _as_model(SortedRuns(runs).merged(
        {kg: bases.get(kg, SCHEMA.empty_table()) for kg in bases.keys() | runs.keys()})) == model


def _hinted(run: pa.Table, base: pa.Table | None, hints: str, rng) -> pa.Table:
    """``run`` with ``base_row`` hints: where its rows' keys lie in ``base`` (``exact``), the
    next base row, always in range and wrong (``shifted``), or anything (``random``)."""
    keys = [] if base is None else base.column("key").to_pylist()
    if hints in ("exact", "shifted"):
        shift = int(hints == "shifted")
        rows = [(keys.index(k) + shift) % len(keys) if k in keys and kind != PRIOR else
                shift - 1 for k, kind in
                zip(run.column("key").to_pylist(), run.column(DELTA_KIND).to_pylist())]
    else:
        rows = [rng.randint(-3, len(keys) + 3) for _ in range(run.num_rows)]
    return run.set_column(run.schema.get_field_index(BASE_ROW), BASE_ROW,
                          pa.array(rows, pa.int32()))


def hinted_chain(chain: tuple, hints: str, rng) -> tuple[dict, dict, dict]:
    """:func:`_chain`'s bases, runs and model, the runs' hints drawn as ``hints`` says."""
    bases, runs, model = _chain(*chain, ordered=True)
    return bases, {kg: [_hinted(run, bases.get(kg), hints, rng) for run in kg_runs]
                   for kg, kg_runs in runs.items()}, model


hint_kinds = st.sampled_from(["exact", "shifted", "random"])


@settings(max_examples=300, deadline=None)
@given(chain=chains, hints=hint_kinds, rng=st.randoms(use_true_random=False))
def test_base_row_hints_right_or_wrong_never_change_the_merge(chain, hints, rng):
    bases, runs, model = hinted_chain(chain, hints, rng)
    merged = merge_searched(bases, runs, SCHEMA)
    assert merged is not None
    assert _as_model(merged) == model


@settings(max_examples=300, deadline=None)
@given(chain=chains)
def test_the_search_merge_declines_rows_out_of_order_and_the_general_one_reads_them(chain):
    bases, runs, model = _chain(*chain, ordered=False)
    merged = merge_searched(bases, runs, SCHEMA)
    if merged is not None:  # the random order happened to be ascending everywhere
        assert all(np.all(np.diff(t.column("key").to_numpy()) > 0)
                   for kg, t in bases.items() if runs.get(kg))
        assert _as_model(merged) == model
    general = SortedRuns(runs).merged(
        {kg: bases.get(kg, SCHEMA.empty_table()) for kg in bases.keys() | runs.keys()})
    assert _as_model(general) == model


def test_repeated_keys_are_declined_not_merged():
    """A base or run naming one key twice (no writer does) is left to the general merge."""
    bases = {0: pa.Table.from_pylist([{"key_group": 0, "key": k, "value": k}
                                      for k in (1, 2, 2, 3)], schema=SCHEMA)}
    run = _run(0, {}, {5: 5}, ordered=True)
    assert merge_searched(bases, {0: [run]}, SCHEMA) is None
    twice = pa.concat_tables([run, run])
    ordered_base = {0: _base(0, {1: 1}, ordered=True)}
    assert merge_searched(ordered_base, {0: [twice]}, SCHEMA) is None


def test_a_run_of_another_key_group_is_refused_by_both_merges():
    runs = {1: [_run(0, {}, {2: 2}, True)]}
    with pytest.raises(CorruptCheckpointError, match="holds rows of another key group"):
        merge_searched({1: _base(1, {1: 1}, True)}, runs, SCHEMA)
    with pytest.raises(CorruptCheckpointError, match="holds rows of another key group"):
        SortedRuns(runs)


def test_other_key_types_and_namespaces_are_left_to_the_general_merge():
    strings = pa.schema([("key_group", pa.int32()), ("key", pa.string()),
                         ("namespace", pa.null()), ("value", pa.int64())])
    assert merge_searched({}, {}, strings) is None
    spaced = SCHEMA.set(2, pa.field("namespace", pa.int64()))
    assert merge_searched({}, {}, spaced) is None


def test_values_of_other_types_are_replaced_bit_for_bit():
    """Nullable and variable-width value columns go through Arrow's take; NaN payloads,
    nulls and strings survive it."""
    schema = pa.schema([("key_group", pa.int32()), ("key", pa.int64()),
                        ("namespace", pa.null()), ("value", pa.string()),
                        ("ttl_timestamp", pa.timestamp("ms", tz="UTC"))])
    base = pa.Table.from_pylist([{"key_group": 2, "key": k, "value": f"v{k}",
                                  "ttl_timestamp": k} for k in range(4)], schema=schema)
    run = pa.Table.from_pylist(
        [{"key_group": 2, "key": 1, "value": None, "ttl_timestamp": 10, DELTA_KIND: UPSERT},
         {"key_group": 2, "key": 3, "value": "new", "ttl_timestamp": 30, DELTA_KIND: UPSERT},
         {"key_group": 2, "key": 1, "value": "v1", "ttl_timestamp": 1, DELTA_KIND: PRIOR}],
        schema=delta_schema(schema))
    merged = merge_searched({2: base}, {2: [run]}, schema)
    assert merged is not None
    assert merged[2].to_pylist() == SortedRuns({2: [run]}).merged({2: base})[2].sort_by(
        "key").to_pylist()


def test_in_key_order_sorts_within_key_groups_priors_last_and_keeps_entries_in_order():
    table = pa.Table.from_pylist(
        [{"key_group": 0, "key": 3, "value": 1, DELTA_KIND: PRIOR},
         {"key_group": 0, "key": 2, "value": 2, DELTA_KIND: UPSERT},
         {"key_group": 0, "key": 1, "value": 3, DELTA_KIND: TOMBSTONE},
         {"key_group": 1, "key": 0, "value": 4, DELTA_KIND: UPSERT},
         {"key_group": 1, "key": 0, "value": 5, DELTA_KIND: UPSERT}], schema=DELTA)
    assert in_key_order(table).column("value").to_pylist() == [3, 2, 1, 4, 5]


def test_the_writer_puts_bases_and_runs_in_key_order(tmp_path):
    """Keys reach the state in descending order; the files hold them ascending, priors last."""
    backend = KeyedStateBackend("long", 4)
    state = backend.get_state(ValueStateDescriptor("counts", "long"))
    for key in range(999, -1, -1):
        backend.set_current_key(key)
        state.update(key)
    root = str(tmp_path / "root")
    with CheckpointWriter(root, incremental=True) as writer:
        writer.write(1, {"op": [backend]})
        for key in range(990, 0, -7):
            backend.set_current_key(key)
            state.update(None if key % 2 else -key)
        writer.write(2, {"op": [backend]})
    checkpoint = Checkpoint.open(root, checkpoint_id=2)
    meta = checkpoint.operator().keyed_state("counts")
    for table in Checkpoint.open(root, checkpoint_id=1).read_keyed_state():
        assert np.all(np.diff(table.column("key").to_numpy()) > 0)
    for runs in checkpoint.read_runs("counts", runs=meta.runs_of()).values():
        for run in runs:
            kinds = run.column(DELTA_KIND).to_numpy()
            state_keys = run.column("key").to_numpy()[kinds != PRIOR]
            assert np.all(np.diff(state_keys) > 0)
            assert np.all(np.diff(kinds == PRIOR) >= 0)  # priors last
            assert np.all(np.diff(run.column("key").to_numpy()[kinds == PRIOR]) > 0)


def _long_job_checkpoints(root: str) -> dict[int, int]:
    """Three checkpoints (full, then two incremental) of long keys written in descending
    order; returns the model."""
    backend = KeyedStateBackend("long", 8)
    state = backend.get_state(ValueStateDescriptor("counts", "long"))
    model: dict[int, int] = {}
    order = range(1999, -1, -1)
    for key in order:
        _set(backend, state, model, key, key)
    with CheckpointWriter(root, incremental=True) as writer:
        writer.write(1, {"op": [backend]})
        for key in (k for k in order if k % 13 == 0):
            _set(backend, state, model, key, None if key % 2 else -key)
        _set(backend, state, model, 5000, 5)
        writer.write(2, {"op": [backend]})
        for key in (k for k in order if k % 17 == 0):
            _set(backend, state, model, key, 7 * key)
        _set(backend, state, model, 5000, None)
        writer.write(3, {"op": [backend]})
    return model


def _read_model(root: str) -> dict[int, int]:
    rows = [row for table in Checkpoint.open(root).read_keyed_state() for row in
            zip(table.column("key").to_pylist(), table.column("value").to_pylist())]
    assert len(rows) == len(dict(rows))
    return dict(rows)


def test_files_of_an_older_v4_writer_in_any_order_read_as_the_model(tmp_path, monkeypatch):
    """Bases and runs in the order the state map held them (as v4 writers before key
    order wrote them) are read by the general merge, to the same state."""
    import statesource.format.columns as columns_module
    import statesource.format.deltas as deltas_module

    monkeypatch.setattr(columns_module, "in_key_order", lambda table: table)
    monkeypatch.setattr(deltas_module, "in_key_order", lambda table: table)
    root = str(tmp_path / "old")
    model = _long_job_checkpoints(root)
    monkeypatch.undo()
    first = next(Checkpoint.open(root, checkpoint_id=1).read_keyed_state())
    assert np.any(np.diff(first.column("key").to_numpy()) < 0)  # really out of order
    assert _read_model(root) == model
    assert _read_model(_written_in_key_order(tmp_path, model)) == model


def _written_in_key_order(tmp_path, model: dict[int, int]) -> str:
    root = str(tmp_path / "new")
    assert _long_job_checkpoints(root) == model
    return root


def test_a_tombstone_hides_rows_of_its_own_key_group_only():
    """The general merge matched run rows to base rows by key alone: a (hostile) run
    naming a key that another key group's base holds hid that row."""
    strings = pa.schema([("key_group", pa.int32()), ("key", pa.string()),
                         ("namespace", pa.null()), ("value", pa.int64())])
    bases = {0: strings.empty_table(),
             1: pa.Table.from_pylist([{"key_group": 1, "key": "a", "value": 1}], schema=strings)}
    run = pa.Table.from_pylist([{"key_group": 0, "key": "a", "value": None,
                                 DELTA_KIND: TOMBSTONE}], schema=delta_schema(strings))
    merged = SortedRuns({0: [run]}).merged(bases)
    assert merged[1].to_pylist() == bases[1].to_pylist() and 0 not in merged


def test_a_run_without_rows_changes_nothing():
    bases = {0: _base(0, {1: 1}, ordered=False)}
    empty = DELTA.empty_table()
    assert SortedRuns({0: [empty]}).merged(bases)[0].to_pylist() == bases[0].to_pylist()
    assert merge_searched(bases, {0: [empty]}, SCHEMA)[0].to_pylist() == bases[0].to_pylist()


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 32767), st.integers(-2**63, 2**63 - 1),
                               st.sampled_from([UPSERT, TOMBSTONE, PRIOR])), max_size=40),
       with_kinds=st.booleans())
def test_in_key_order_is_the_stable_sort_by_key_group_kind_and_key(rows, with_kinds):
    rows.sort(key=lambda row: row[0])  # tables come grouped by key group
    table = pa.Table.from_pylist(
        [{"key_group": kg, "key": key, "value": index, DELTA_KIND: kind}
         for index, (kg, key, kind) in enumerate(rows)], schema=DELTA)
    if not with_kinds:
        table = table.drop_columns([DELTA_KIND])
    expected = sorted(range(len(rows)), key=lambda i: (
        rows[i][0], with_kinds and rows[i][2] == PRIOR, rows[i][1], i))
    assert in_key_order(table).column("value").to_pylist() == expected


def test_a_writer_continuing_from_a_restored_backend_hints_its_runs(tmp_path):
    """A restore notes the base ranges' keys it reads, so the runs of a new writer's first
    incremental checkpoint say where each entry lies in the base, as the base's own
    writer's would (restored from a full checkpoint and from one with runs)."""
    root = str(tmp_path / "root")
    model = _long_job_checkpoints(root)  # 1 full, 2 and 3 incremental
    for checkpoint_id, next_id in ((1, 4), (3, 5)):
        restored = restore_keyed_backend(Checkpoint.open(root, checkpoint_id=checkpoint_id),
                                         0, 1)
        state = restored.get_state(ValueStateDescriptor("counts", "long"))
        expected = _read_model_at(root, checkpoint_id)
        for key in range(0, 2000, 11):
            _set(restored, state, expected, key, 3 * key)
        with CheckpointWriter(root, incremental=True) as writer:
            writer.write(next_id, {"op": [restored]})
        checkpoint = Checkpoint.open(root, checkpoint_id=next_id)
        meta = checkpoint.operator().keyed_state("counts")
        newest = {kg: [runs[-1]] for kg, runs in meta.runs_of().items()
                  if runs[-1][0].sequence == next_id}
        assert newest
        bases = _base_range_keys(checkpoint)
        hinted = 0
        for kg, (run,) in checkpoint.read_runs("counts", runs=newest).items():
            base_keys = bases[kg]
            for key, kind, row in zip(run.column("key").to_pylist(),
                                      run.column(DELTA_KIND).to_pylist(),
                                      run.column(BASE_ROW).to_pylist()):
                if kind == UPSERT and key in base_keys:
                    assert row == base_keys.index(key)
                    hinted += 1
        assert hinted
        assert _read_model(root) == expected
    assert model


def _base_range_keys(checkpoint: Checkpoint) -> dict[int, list[int]]:
    """Each key group's base range's keys, as a read sees them before applying runs."""
    bases = {}

    def note(path: str, key_group: int, rows: pa.Table) -> None:
        bases[key_group] = rows.column("key").to_pylist()

    for _ in checkpoint.read_keyed_state(base_listener=note):
        pass
    return bases


def _read_model_at(root: str, checkpoint_id: int) -> dict[int, int]:
    rows = [row for table in Checkpoint.open(root, checkpoint_id=checkpoint_id)
            .read_keyed_state() for row in
            zip(table.column("key").to_pylist(), table.column("value").to_pylist())]
    return dict(rows)

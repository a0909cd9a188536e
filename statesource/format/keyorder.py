"""Rows in key order, and merging delta runs over them by binary search.

The general merge of delta runs (:class:`~statesource.format.deltas.SortedRuns`)
sorts every run row and looks every base row up among them: its cost grows
with the base, which a read of a full checkpoint only copies. When the key is
one integer column and the namespace is void, each entry is one key, and a
base whose keys ascend can instead be searched: each run row finds its entry's
base row (at its ``base_row`` hint, else by binary search), and the merged key
group is the base with those rows' values replaced (its key columns are shared,
not copied; its value columns are copied, unless the read owns the base's buffer
and :mod:`statesource.format.inplace` writes into it), removed where a tombstone
won, plus the entries no base row holds.

This implementation's writers put such rows in key order
(:func:`in_key_order`); nothing in the format promises it (docs/FORMAT.md
section 13), so the merge checks the order it relies on, cheaply and always,
and declines (returns None) where it does not hold, leaving the general merge
to read the key groups. A file can therefore never make it return other data
than the general merge.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

from statesource.format.columns import (
    BASE_ROW,
    DELTA_COLUMNS,
    DELTA_KIND,
    KEY,
    KEY_GROUP,
    PRIOR,
    UPSERT,
    searchable,
)
from statesource.format.inplace import ENTRY_COLUMNS, RunRows, UpsertRows, write_upserts
from statesource.format.runblocks import RunBlocks, check_rows_of_runs


def check_run_key_groups(runs: Mapping[int, Sequence[pa.Table]], combined: pa.Table
                         ) -> np.ndarray:
    """Every row of each key group's runs (``combined``: all of them, ascending by key group,
    then oldest first) must carry that key group; returns each row's run (numbered in
    that order)."""
    sizes = [len(run) for kg in sorted(runs) for run in runs[kg]]
    check_rows_of_runs(combined.column(KEY_GROUP).to_numpy(),
                       [kg for kg in sorted(runs) for _ in runs[kg]], sizes)
    return np.repeat(np.arange(len(sizes)), sizes)


def merge_blocks(bases: Mapping[int, pa.Table], runs: RunBlocks, schema: pa.Schema, *,
                 own_bases: bool = False) -> dict[int, pa.Table] | None:
    """Each key group's rows, ``bases`` (data ``schema``) with ``runs`` applied as
    :meth:`SortedRuns.merged` applies them; key groups left without rows are left out.
    None where the order this merge needs does not hold (see the module). With
    ``own_bases`` (fresh reads that nothing else holds), upserts may be written into the
    bases' buffers (:mod:`statesource.format.inplace`)."""
    if not searchable(schema):
        return None
    if not runs.blocks:
        return {kg: table for kg, table in sorted(bases.items()) if table.num_rows}
    combined = runs.table()  # one copy, then numpy views
    groups = combined.column(KEY_GROUP).to_numpy()
    runs.check_key_groups(groups)
    if combined.column(KEY).null_count:
        return None
    kinds = combined.column(DELTA_KIND).to_numpy()
    keys = combined.column(KEY).to_numpy()
    hints = combined.column(BASE_ROW)
    hints = (hints.fill_null(-1) if hints.null_count else hints).to_numpy().astype(np.intp)
    state = np.flatnonzero(kinds != PRIOR) if (kinds == PRIOR).any() else None
    if not _runs_ascend(keys, runs.run_starts(), state):
        return None  # a run whose entries do not ascend (or repeat)
    base_keys = {}
    for kg, base in bases.items():
        if not base.num_rows:
            continue
        column = base.column(KEY)
        if column.null_count:
            return None
        base_keys[kg] = column.to_numpy()
        if not np.all(base_keys[kg][1:] > base_keys[kg][:-1]):
            return None
    with_runs = sorted(runs.key_groups())
    written: list[int] = []
    if own_bases:
        ends = runs.block_ends()
        upserts = UpsertRows(groups, keys, hints, kinds, ends, None) if state is None \
            else UpsertRows(groups[state], keys[state], hints[state], kinds[state],
                            np.searchsorted(state, ends), state)
        written = write_upserts(bases, with_runs, upserts, combined, schema)
    merged = {kg: bases[kg] for kg in written}
    key_groups = sorted((bases.keys() | set(with_runs)) - set(written))
    if key_groups:
        order, ranks = runs.key_group_order()
        if state is not None:
            kept = kinds[order] != PRIOR
            order, ranks = order[kept], ranks[kept]
        rows = RunRows(groups[order], keys[order], hints[order], ranks, kinds[order], order)
        if written:
            rows = rows.without(written)
            bases = {kg: base for kg, base in bases.items() if kg not in merged}
        merged.update(_Merge(bases, base_keys, key_groups, combined, rows, schema).tables())
    return merged


def _runs_ascend(keys: np.ndarray, run_starts: np.ndarray, state: np.ndarray | None) -> bool:
    """Whether the state rows' ``keys`` ascend strictly within each run (runs begin at rows
    ``run_starts``; ``state``: the state rows, None for all)."""
    if state is not None:
        keys = keys[state]
        run_starts = np.searchsorted(state, run_starts)  # in state rows
    ascending = keys[1:] > keys[:-1]
    joints = run_starts[(run_starts > 0) & (run_starts < len(keys))] - 1
    ascending[joints] = True  # a run's first row may be below the previous run's last
    return bool(ascending.all())


class _Merge:
    """One merge whose order checks held. Positions count over the bases concatenated in
    key group order; ``rows`` are the runs' state rows. A hint is taken where the base row
    it names holds the key, which, the base keys ascending strictly, is the one row a
    search would find; any other row is searched."""

    def __init__(self, bases: Mapping[int, pa.Table], base_keys: dict[int, np.ndarray],
                 key_groups: list[int], runs: pa.Table, rows: RunRows,
                 schema: pa.Schema) -> None:
        self.bases, self.key_groups, self.runs, self.kinds = bases, key_groups, runs, rows.kinds
        self.ranks = rows.ranks
        self.state, self.schema = rows.rows, schema
        base_keys = {kg: base_keys[kg] for kg in key_groups if kg in base_keys}
        sizes = [len(base_keys.get(kg, ())) for kg in key_groups]
        self.offsets = dict(zip(key_groups, np.concatenate([[0], np.cumsum(sizes)]).tolist()))
        self.total = int(sum(sizes))
        keys, hints = rows.keys, rows.hints
        position = np.full(len(keys), -1, dtype=np.int64)
        bounds = dict(zip(key_groups, rows.bounds(key_groups)))
        for kg, keys_of_kg in base_keys.items():
            start, end = bounds[kg]
            if start < end:
                position[start:end] = _found(keys_of_kg, keys[start:end], hints[start:end],
                                             self.offsets[kg])
        self.groups, self.keys, self.position = rows.groups, keys, position

    def tables(self) -> dict[int, pa.Table]:
        in_base = np.flatnonzero(self.position >= 0)
        positions = self.position[in_base]
        newest = self._newest(positions, in_base)
        positions, rows = positions[newest], in_base[newest]
        upserted = self.kinds[rows] == UPSERT
        replaced = _ByKeyGroup(self.groups[rows[upserted]], positions[upserted],
                               self.state[rows[upserted]])
        removed = _ByKeyGroup(self.groups[rows[~upserted]], positions[~upserted], None)
        absent = np.ones(len(self.position), dtype=bool)
        absent[in_base] = False
        inserted = self._inserted(absent)
        new_values = {name: _plain_values(self.runs.column(name)) for name in self.schema.names
                      if name not in ENTRY_COLUMNS}
        merged = {}
        for kg in self.key_groups:
            pieces = []
            base = self.bases.get(kg)
            if base is not None and base.num_rows:
                start = self.offsets[kg]
                at, sources = replaced.of(kg)
                table = base if not len(at) else pa.Table.from_arrays(
                    [base.column(name) if name in ENTRY_COLUMNS
                     else self._replaced(name, base.column(name), new_values[name],
                                         at - start, sources)
                     for name in self.schema.names], schema=self.schema)
                gone, _ = removed.of(kg)
                if len(gone):
                    kept = np.ones(base.num_rows, dtype=bool)
                    kept[gone - start] = False
                    table = table.filter(pa.array(kept))
                pieces.append(table)
            if kg in inserted:
                pieces.append(inserted[kg])
            pieces = [piece for piece in pieces if piece.num_rows]
            if pieces:
                merged[kg] = pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces)
        return merged

    def _newest(self, positions: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Whether each run row (at base ``positions``) is the newest naming its base row:
        whether its rank (a key group's n-th run) is the highest among the rows naming it."""
        ranks = self.ranks[rows]
        if not len(ranks) or not ranks.any():
            return np.ones(len(rows), dtype=bool)
        top = int(ranks.max())
        newest = np.zeros(self.total, dtype=np.uint8 if top < 256 else np.int64)
        for rank in range(1, top + 1):  # the newest rank naming each base row
            newest[positions[ranks == rank]] = rank  # one value per assignment: no order
        return newest[positions] == ranks

    def _replaced(self, name: str, column: pa.ChunkedArray,
                  new_values: tuple[np.ndarray, np.ndarray] | None, at: np.ndarray,
                  sources: np.ndarray) -> pa.Array | pa.ChunkedArray:
        """``column`` (one base's ``name``) with the rows ``at`` taken from run rows
        ``sources``."""
        if new_values is not None and not column.null_count \
                and not new_values[1][sources].any():
            values = column.to_numpy()
            if not values.flags.writeable:  # a view of the base's buffer
                values = values.copy()
            values[at] = new_values[0][sources]
            return pa.array(values, column.type)
        index = np.arange(len(column), dtype=np.int64)
        index[at] = len(column) + np.arange(len(at))
        picked = self.runs.column(name).take(pa.array(sources))
        return pa.chunked_array([*column.chunks, *picked.chunks], column.type).take(
            pa.array(index))

    def _inserted(self, absent: np.ndarray) -> dict[int, pa.Table]:
        """Per key group, the entries no base row holds, as the newest run naming each left
        them (none where that was a tombstone)."""
        rows = np.flatnonzero(absent)
        if not len(rows):
            return {}
        order = rows[np.lexsort((rows, self.keys[rows], self.groups[rows]))]
        groups, keys = self.groups[order], self.keys[order]
        last = np.ones(len(order), dtype=bool)
        last[:-1] = (groups[1:] != groups[:-1]) | (keys[1:] != keys[:-1])
        newest = order[last]
        newest = newest[self.kinds[newest] == UPSERT]
        picked = self.runs.take(pa.array(self.state[newest])).drop_columns(DELTA_COLUMNS)
        groups = picked.column(KEY_GROUP).to_numpy()
        if not len(groups):
            return {}
        bounds = np.concatenate([[0], np.flatnonzero(groups[1:] != groups[:-1]) + 1,
                                 [len(groups)]])
        return {int(groups[start]): picked.slice(start, end - start)
                for start, end in zip(bounds[:-1].tolist(), bounds[1:].tolist())}


def _found(base_keys: np.ndarray, wanted: np.ndarray, hints: np.ndarray, offset: int
           ) -> np.ndarray:
    """``offset`` plus the row of ``base_keys`` (ascending strictly) holding each ``wanted``
    key, -1 where none does: the hinted row where it holds the key, else the searched one."""
    if hints.min() >= 0 and hints.max() < len(base_keys) \
            and np.array_equal(base_keys[hints], wanted):  # every hint holds: the usual case
        return hints + offset
    found = hints.copy()
    hinted = (found >= 0) & (found < len(base_keys))
    found[~hinted] = 0
    hinted &= base_keys[found] == wanted
    missed = ~hinted
    found[missed] = np.minimum(np.searchsorted(base_keys, wanted[missed]), len(base_keys) - 1)
    return np.where(base_keys[found] == wanted, found + offset, -1)


class _ByKeyGroup:
    """Base positions (and run rows) of some run rows, found per key group; ``groups`` (the
    rows' key groups) ascend."""

    def __init__(self, groups: np.ndarray, positions: np.ndarray,
                 sources: np.ndarray | None) -> None:
        self.groups, self.positions = groups, positions
        self.sources = np.empty(0, np.int64) if sources is None else sources

    def of(self, key_group: int) -> tuple[np.ndarray, np.ndarray]:
        start, end = np.searchsorted(self.groups, [key_group, key_group + 1]).tolist()
        return self.positions[start:end], self.sources[start:end]


def _plain_values(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray] | None:
    """``column``'s values as numpy holds them bit for bit (nulls as 0) and where it is null;
    None for other types."""
    if not _plain(column.type):
        return None
    return (column.fill_null(0).to_numpy() if column.null_count else column.to_numpy(),
            column.is_null().to_numpy(zero_copy_only=False))


def _plain(data_type: pa.DataType) -> bool:
    """Numbers numpy holds bit for bit as Arrow does (booleans are bit-packed in Arrow)."""
    return pa.types.is_integer(data_type) or pa.types.is_floating(data_type)

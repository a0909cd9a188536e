"""Rows in key order, and merging delta runs over them by binary search.

The general merge of delta runs (:class:`~statesource.format.deltas.SortedRuns`)
sorts every run row and looks every base row up among them: its cost grows
with the base, which a read of a full checkpoint only copies. When the key is
one integer column and the namespace is void, each entry is one key, and a
base whose keys ascend can instead be searched: each run row finds its entry's
base row by binary search, and the merged key group is the base with those
rows' value columns replaced in place (its key columns are shared, not
copied), removed where a tombstone won, plus the entries no base row holds.

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

from statesource.errors import CorruptCheckpointError
from statesource.format.columns import (
    DELTA_KIND,
    KEY,
    KEY_GROUP,
    NAMESPACE,
    PRIOR,
    UPSERT,
    searchable,
)

_ENTRY_COLUMNS = (KEY_GROUP, KEY, NAMESPACE)


def check_run_key_groups(runs: Mapping[int, Sequence[pa.Table]], combined: pa.Table
                         ) -> np.ndarray:
    """Every row of each key group's runs (``combined``: all of them, ascending by key group,
    then oldest first) must carry that key group; returns each row's run (numbered in
    that order)."""
    sizes = [len(run) for kg in sorted(runs) for run in runs[kg]]
    expected = np.repeat([kg for kg in sorted(runs) for _ in runs[kg]], sizes)
    if not np.array_equal(combined.column(KEY_GROUP).to_numpy(), expected):
        raise CorruptCheckpointError(
            f"a delta run of key groups {sorted(runs)} holds rows of another key group")
    return np.repeat(np.arange(len(sizes)), sizes)


def merge_searched(bases: Mapping[int, pa.Table], runs: Mapping[int, Sequence[pa.Table]],
                   schema: pa.Schema) -> dict[int, pa.Table] | None:
    """Each key group's rows, ``bases`` (data ``schema``) with ``runs`` (oldest first)
    applied as :meth:`SortedRuns.merged` applies them; key groups left without rows are
    left out. None where the order this merge needs does not hold (see the module)."""
    if not searchable(schema):
        return None
    tables = [run for kg in sorted(runs) for run in runs[kg]]
    if not tables:
        return {kg: table for kg, table in sorted(bases.items()) if table.num_rows}
    combined = pa.concat_tables(tables)
    run_ids = check_run_key_groups(runs, combined)
    if combined.column(KEY).null_count:
        return None
    kinds = combined.column(DELTA_KIND).to_numpy()
    state = np.flatnonzero(kinds != PRIOR)  # the rows that are state (priors never are)
    run_ids = run_ids[state]
    keys = combined.column(KEY).to_numpy()[state]
    if not np.all((keys[1:] > keys[:-1]) | (run_ids[1:] != run_ids[:-1])):
        return None  # a run whose entries do not ascend (or repeat)
    key_groups = sorted(bases.keys() | runs.keys())
    base_keys = {}
    for kg in key_groups:
        base = bases.get(kg)
        if base is None or not base.num_rows:
            continue
        column = base.column(KEY)
        if column.null_count:
            return None
        base_keys[kg] = column.to_numpy()
        if not np.all(base_keys[kg][1:] > base_keys[kg][:-1]):
            return None
    return _Merge(bases, base_keys, key_groups, combined, state, keys, kinds[state],
                  schema).tables()


class _Merge:
    """One merge whose order checks held. Positions count over the bases concatenated in
    key group order; run rows are numbered among ``state``, the rows of ``runs`` (all runs
    concatenated) that are state, whose ``keys`` and ``kinds`` are given."""

    def __init__(self, bases: Mapping[int, pa.Table], base_keys: dict[int, np.ndarray],
                 key_groups: list[int], runs: pa.Table, state: np.ndarray, keys: np.ndarray,
                 kinds: np.ndarray, schema: pa.Schema) -> None:
        self.bases, self.key_groups, self.runs, self.kinds = bases, key_groups, runs, kinds
        self.state, self.schema = state, schema
        sizes = [len(base_keys.get(kg, ())) for kg in key_groups]
        self.offsets = dict(zip(key_groups, np.concatenate([[0], np.cumsum(sizes)]).tolist()))
        self.total = int(sum(sizes))
        groups = runs.column(KEY_GROUP).to_numpy()[state]
        position = np.full(len(keys), -1, dtype=np.int64)
        # Bounds of every key group's run rows at once, searched in the column's own type (a
        # search in another converts the whole column, per call).
        searched = np.array(list(base_keys), dtype=groups.dtype)
        bounds = zip(np.searchsorted(groups, searched).tolist(),
                     np.searchsorted(groups, searched + 1).tolist())
        for (kg, keys_of_kg), (start, end) in zip(base_keys.items(), bounds):
            wanted = keys[start:end]
            found = np.minimum(np.searchsorted(keys_of_kg, wanted), len(keys_of_kg) - 1)
            hit = keys_of_kg[found] == wanted
            position[start:end][hit] = self.offsets[kg] + found[hit]
        self.groups, self.keys, self.position = groups, keys, position

    def tables(self) -> dict[int, pa.Table]:
        in_base = np.flatnonzero(self.position >= 0)
        positions = self.position[in_base]
        winner = np.full(self.total, -1, dtype=np.int64)
        np.maximum.at(winner, positions, in_base)  # rows ascend with their run's sequence
        newest = winner[positions] == in_base
        positions, newest = positions[newest], in_base[newest]
        upserted = self.kinds[newest] == UPSERT
        columns = self._replaced_columns(positions[upserted], newest[upserted])
        removed = positions[~upserted]
        kept = None
        if len(removed):
            kept = np.ones(self.total, dtype=bool)
            kept[removed] = False
        absent = np.ones(len(self.position), dtype=bool)
        absent[in_base] = False
        inserted = self._inserted(absent)
        merged = {}
        for kg in self.key_groups:
            pieces = []
            base = self.bases.get(kg)
            if base is not None and base.num_rows:
                start = self.offsets[kg]
                table = pa.Table.from_arrays(
                    [base.column(name) if name in _ENTRY_COLUMNS
                     else columns[name].slice(start, base.num_rows)
                     if name in columns else base.column(name) for name in self.schema.names],
                    schema=self.schema)
                if kept is not None:
                    table = table.filter(pa.array(kept[start:start + base.num_rows]))
                pieces.append(table)
            if kg in inserted:
                pieces.append(inserted[kg])
            pieces = [piece for piece in pieces if piece.num_rows]
            if pieces:
                merged[kg] = pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces)
        return merged

    def _replaced_columns(self, positions: np.ndarray, run_rows: np.ndarray
                          ) -> dict[str, pa.Array]:
        """The value columns of all bases, with the rows at ``positions`` taken from
        ``run_rows``; none when nothing is replaced."""
        if not len(positions):
            return {}
        replaced = {}
        for name in self.schema.names:
            if name in _ENTRY_COLUMNS:
                continue
            base = pa.chunked_array(
                [chunk for kg in self.key_groups if kg in self.bases
                 for chunk in self.bases[kg].column(name).chunks], self.schema.field(name).type)
            new = self.runs.column(name)
            if _plain(base.type) and not base.null_count and not new.null_count:
                values = base.to_numpy()
                if not values.flags.writeable:  # a view of the base's buffer
                    values = values.copy()
                values[positions] = new.to_numpy()[self.state[run_rows]]
                replaced[name] = pa.array(values, self.schema.field(name).type)
            else:
                index = np.arange(self.total, dtype=np.int64)
                index[positions] = self.total + self.state[run_rows]
                replaced[name] = pa.chunked_array([*base.chunks, *new.chunks],
                                                  base.type).take(pa.array(index))
        return replaced

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
        picked = self.runs.take(pa.array(self.state[newest])).drop_columns([DELTA_KIND])
        groups = picked.column(KEY_GROUP).to_numpy()
        if not len(groups):
            return {}
        bounds = np.concatenate([[0], np.flatnonzero(groups[1:] != groups[:-1]) + 1,
                                 [len(groups)]])
        return {int(groups[start]): picked.slice(start, end - start)
                for start, end in zip(bounds[:-1].tolist(), bounds[1:].tolist())}


def _plain(data_type: pa.DataType) -> bool:
    """Numbers numpy holds bit for bit as Arrow does (booleans are bit-packed in Arrow)."""
    return pa.types.is_integer(data_type) or pa.types.is_floating(data_type)

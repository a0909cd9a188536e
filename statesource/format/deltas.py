"""Delta runs (format version 4): the entries of a key group that changed, and merging them.

An incremental checkpoint of a key group where few entries changed writes one
*run* holding just those entries, instead of rewriting the key group. A run's
rows are a data file's rows plus a ``delta_kind`` column:

- ``upsert`` rows are an entry's whole new content (its value, list elements or
  map entries), replacing whatever older runs or the base held for it;
- one ``tombstone`` row says the entry no longer exists (its value columns null);
- ``prior`` rows are the entry as the checkpoint the run was written on top of
  held it. Readers of the state skip them; the change feed takes an entry's old
  value from them instead of looking it up in the base, which is what makes a
  feed cost what changed.

Entries are matched as Java's ``equals`` matches keys and namespaces
(:func:`~statesource.format.entries.java_equality_columns`), so a merge can
neither split nor join an entry that the state map would not.

Row-addressed delta files (format version 5) keep the state rows of all runs
apart from their prior rows, so that a read never reads priors, and give each
state row a ``base_row``: where its entry lies in the base rows, when the
writer knows it. A reader takes it only as a hint it checks
(:mod:`statesource.format.keyorder`), so that a merge locates what changed
without searching the base.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from statesource.format.columns import (
    BASE_ROW,
    DELTA_COLUMNS,
    DELTA_KIND,
    KEY,
    KEY_GROUP,
    NAMESPACE,
    PRIOR,
    TOMBSTONE,
    TTL_TIMESTAMP,
    UPSERT,
    RowEncoder,
    Rows,
    in_key_order,
    key_order,
    searchable,
)
from statesource.format.entries import java_equality_columns, row_changes
from statesource.format.keyorder import check_run_key_groups
from statesource.model import StateDeclaration
from statesource.types import DataType

__all__ = ["BASE_ROW", "DELTA_KIND", "PRIOR", "TOMBSTONE", "UPSERT", "DeltaEncoder",
           "EncodedRun", "SortedRuns", "delta_schema", "merge_runs", "oldest_upsert_access"]

class ChangedEntries(Protocol):
    """A key group's changed entries as columns: ``(key, namespace)``, stored state now and
    stored state at the base (None for a state that does not exist), as the write side's
    change tracking hands them over."""

    @property
    def entries(self) -> Collection[tuple[Any, Any]]: ...

    @property
    def states(self) -> Collection[Any]: ...

    @property
    def priors(self) -> Collection[Any]: ...


def delta_schema(data_schema: pa.Schema, row_addressed: bool = True) -> pa.Schema:
    """The schema of a state's delta files: its data files' schema, ``delta_kind`` and, in
    a row-addressed file, ``base_row``."""
    schema = data_schema.append(pa.field(DELTA_KIND, pa.int8()))
    return schema.append(pa.field(BASE_ROW, pa.int32())) if row_addressed else schema


@dataclass(frozen=True)
class EncodedRun:
    """One key group's run: its state rows (upserts and tombstones) and its prior rows."""

    key_group: int
    rows: pa.Table
    priors: pa.Table
    entries: int
    """The entries it upserts or removes."""
    prior_entries: int
    """The entries among them that the base held."""


class DeltaEncoder:
    """Turns one key group's changed entries into a run of ``delta_kind``-tagged rows.

    Current states are filtered by full-snapshot TTL cleanup at the new
    checkpoint's time, prior ones at the base's, so that each side is exactly
    what the checkpoint at that time holds.
    """

    def __init__(self, key_type: DataType, declaration: StateDeclaration, now_ms: int,
                 base_ms: int | None) -> None:
        self.key_type = key_type
        self.declaration = declaration
        self._current = RowEncoder(key_type, declaration, expire_at_ms=now_ms)
        self._prior = RowEncoder(key_type, declaration, expire_at_ms=base_ms)
        self.schema = delta_schema(self._current.schema)

    def encode(self, key_groups: Iterable[tuple[int, ChangedEntries]],
               base_keys: Mapping[int, np.ndarray] | None = None) -> Iterator[EncodedRun]:
        """The run of each key group that has one, in the order given.

        ``base_keys`` holds, per key group, the keys of its base rows in their order
        (where the base's keys ascend and the writer knows them), from which each state
        row's ``base_row`` is found; elsewhere it is -1. All key groups are converted to
        Arrow together (a run is often a few rows, and each conversion has a fixed cost).
        """
        state_rows: list[Rows] = []
        prior_rows: list[Rows] = []
        tombstones: list[tuple[int, Any, Any]] = []
        runs: list[tuple[int, int, int]] = []  # key group, entries, prior entries
        for key_group, changed in key_groups:
            upserts, removed, priors = self._classify(changed)
            if not upserts[0] and not removed:
                continue
            state_rows.append(self._current.rows_of(key_group, *upserts))
            prior_rows.append(self._prior.rows_of(key_group, *priors))
            tombstones += [(key_group, key, namespace) for key, namespace in removed]
            runs.append((key_group, len(upserts[0]) + len(removed), len(priors[0])))
        if not runs:
            return
        states = self._tagged(state_rows, UPSERT)
        if tombstones:
            states = pa.concat_tables([states, self._tombstones(tombstones)])
            states = states.take(pa.array(np.argsort(states.column(KEY_GROUP).to_numpy(),
                                                     kind="stable")))
        states, priors = _in_key_order(states, self._tagged(prior_rows, PRIOR))
        states = states.append_column(BASE_ROW, pa.array(_base_rows(states, base_keys or {}),
                                                         pa.int32()))
        priors = priors.append_column(BASE_ROW, pa.array(np.full(priors.num_rows, -1, np.int32)))
        by_key_group = _by_key_group(states)
        priors_by_key_group = _by_key_group(priors)
        empty = states.schema.empty_table()
        for key_group, entries, prior_entries in runs:
            yield EncodedRun(key_group, by_key_group[key_group],
                             priors_by_key_group.get(key_group, empty), entries, prior_entries)

    def _tagged(self, rows: list[Rows], kind: int) -> pa.Table:
        """``rows`` as one table of the data schema with every ``delta_kind`` ``kind``."""
        table = self._current.table(rows)
        return table.append_column(DELTA_KIND, pa.array(np.full(table.num_rows, kind, np.int8)))

    def _classify(self, changed: ChangedEntries
                  ) -> tuple[tuple[list, list, list], list, tuple[list, list, list]]:
        """Upserts (keys, namespaces, states now), removals ((key, namespace) pairs) and
        priors (keys, namespaces, states at the base), each state as its checkpoint
        holds it. (Whole columns where every entry is an update, else one comprehension per
        column: a run's cost is these few passes.)"""
        if not changed.entries:
            return ([], [], []), [], ([], [], [])
        nows, befores = list(changed.states), list(changed.priors)
        if self._current.filters or self._prior.filters:
            current_live, prior_live = self._current.live, self._prior.live
            nows = [None if now is None else current_live(now) for now in nows]
            befores = [None if before is None else prior_live(before) for before in befores]
        keys, namespaces = (list(column) for column in zip(*changed.entries))
        if None not in nows and None not in befores:  # updates only, the usual case
            return (keys, namespaces, nows), [], (keys, namespaces, befores)
        rows = list(zip(keys, namespaces, nows, befores))
        upserts = ([key for key, _, now, _ in rows if now is not None],
                   [namespace for _, namespace, now, _ in rows if now is not None],
                   [now for _, _, now, _ in rows if now is not None])
        priors = ([key for key, _, _, before in rows if before is not None],
                  [namespace for _, namespace, _, before in rows if before is not None],
                  [before for _, _, _, before in rows if before is not None])
        removed = [(key, namespace) for key, namespace, now, before in rows
                   if now is None and before is not None]
        return upserts, removed, priors

    def _tombstones(self, entries: list[tuple[int, Any, Any]]) -> pa.Table:
        """One tombstone row per removed (key group, key, namespace), value columns null."""
        count = len(entries)
        columns: list[pa.Array] = [
            pa.array([kg for kg, _, _ in entries], pa.int32()),
            self.key_type.to_arrow([key for _, key, _ in entries]),
            self.declaration.namespace_type.to_arrow([ns for _, _, ns in entries])]
        columns += [pa.nulls(count, field.type) for field in self.schema
                    if field.name not in (KEY_GROUP, KEY, NAMESPACE, DELTA_KIND, BASE_ROW)]
        columns.append(pa.array(np.full(count, TOMBSTONE, np.int8)))
        return pa.Table.from_arrays(columns, schema=self.schema.remove(
            self.schema.get_field_index(BASE_ROW)))


def _in_key_order(states: pa.Table, priors: pa.Table) -> tuple[pa.Table, pa.Table]:
    """A run's state and prior rows each in key order (:func:`in_key_order`), sorted once
    where they name the same entries in the same order, as updates alone leave them."""
    order = key_order(states)
    if order is None:
        return states, in_key_order(priors)
    same = priors.column(KEY).equals(states.column(KEY)) \
        and priors.column(KEY_GROUP).equals(states.column(KEY_GROUP))
    taken = pa.array(order)
    return states.take(taken), priors.take(taken) if same else in_key_order(priors)


def _base_rows(table: pa.Table, base_keys: Mapping[int, np.ndarray]) -> np.ndarray:
    """Per row of ``table`` (state rows ascending by key group), the row of its entry among
    its key group's ``base_keys``; -1 where no base row holds the key."""
    rows = np.full(table.num_rows, -1, dtype=np.int32)
    if not base_keys or not searchable(table.schema) or table.column(KEY).null_count:
        return rows
    keys = table.column(KEY).to_numpy()
    groups = table.column(KEY_GROUP).to_numpy()
    bounds = np.flatnonzero(np.diff(groups)) + 1
    for start, end in zip([0, *bounds.tolist()], [*bounds.tolist(), len(groups)]):
        known = base_keys.get(int(groups[start]))
        if known is None or not len(known):
            continue
        wanted = keys[start:end]
        found = np.minimum(np.searchsorted(known, wanted), len(known) - 1)
        hit = known[found] == wanted
        rows[start:end][hit] = found[hit]
    return rows


class SortedRuns:
    """The delta runs of several key groups, sorted once so that every entry's rows are
    adjacent: ascending by key group, entry, then run (oldest first), rows of one run in
    their written order (the sort is stable). Where every key group has one run, no
    entry has rows in two runs, and the rows stay as written.

    Everything is computed for all the key groups together, since per key group the
    fixed cost of each Arrow call would dominate runs of a few rows.
    """

    def __init__(self, runs: Mapping[int, Sequence[pa.Table]], *, priors: bool = False
                 ) -> None:
        """``runs``: each key group's runs, oldest first. ``priors`` keeps the prior rows,
        which only :meth:`changes` needs (a read leaves them out before sorting)."""
        self.priors = priors
        tables = [run for key_group in sorted(runs) for run in runs[key_group]]
        self.empty = not tables
        if self.empty:
            return
        combined = pa.concat_tables(tables)
        sequence = check_run_key_groups(runs, combined)  # ascends with the runs of a key group
        if not priors:
            state_rows = combined.column(DELTA_KIND).to_numpy() != PRIOR
            combined, sequence = combined.filter(pa.array(state_rows)), sequence[state_rows]
        self.empty = not combined.num_rows
        if self.empty:
            return
        if all(len(runs[kg]) == 1 for kg in runs):
            # One run per key group (a feed between consecutive checkpoints): every row's
            # run is the first and the newest naming its entry, so nothing needs sorting
            # (the runs are ascending by key group as concatenated).
            combined = combined.combine_chunks()  # one filter per kind, not per run
            self.table, self.sequence, self.leaves = combined, sequence, _leaves(combined)
            self.kinds = combined.column(DELTA_KIND).to_numpy()
            self.starts = np.arange(combined.num_rows)
            self.first_sequence = self.last_sequence = sequence
            return
        leaves = _leaves(combined)
        order = _sort_order(combined.column(KEY_GROUP), leaves, sequence)
        self.table = combined.take(order)
        self.sequence = sequence[order]
        self.leaves = [leaf.take(pa.array(order)) for leaf in leaves]
        self.kinds = self.table.column(DELTA_KIND).to_numpy()
        changes = row_changes([self.table.column(KEY_GROUP), *self.leaves])
        self.starts = np.concatenate([[0], np.flatnonzero(changes) + 1])
        ends = np.concatenate([self.starts[1:], [self.table.num_rows]])
        marks = np.zeros(self.table.num_rows, dtype=np.int64)
        marks[self.starts] = 1
        group = np.cumsum(marks) - 1
        self.first_sequence = self.sequence[self.starts][group]
        self.last_sequence = self.sequence[ends - 1][group]

    def merged(self, bases: Mapping[int, pa.Table]) -> dict[int, pa.Table]:
        """Each key group's rows: its base (in the data schema) with its runs applied; key
        groups left without rows are left out. The newest run holding an entry decides
        it: its upserts are the entry's rows, its tombstone hides it."""
        key_groups = sorted(bases)
        if self.empty:
            return {kg: bases[kg] for kg in key_groups if bases[kg].num_rows}
        newest = self._rows((self.sequence == self.last_sequence) & (self.kinds == UPSERT))
        base_rows = self._unhidden(bases, key_groups)
        merged = {}
        for key_group in sorted(set(key_groups) | set(newest)):
            pieces = [t for t in (base_rows.get(key_group), newest.get(key_group))
                      if t is not None and t.num_rows]
            if pieces:
                merged[key_group] = pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces)
        return merged

    def changes(self) -> dict[int, tuple[pa.Table | None, pa.Table | None]]:
        """Per key group, the entries the runs change: their rows before the first run
        (the prior rows of the first run holding each; none: it did not exist) and after
        the last (the newest run's upserts; none: removed)."""
        if not self.priors:
            raise ValueError("SortedRuns(priors=False) cannot tell changes")
        if self.empty:
            return {}
        before = self._rows((self.sequence == self.first_sequence) & (self.kinds == PRIOR))
        after = self._rows((self.sequence == self.last_sequence) & (self.kinds == UPSERT))
        groups = self.table.column(KEY_GROUP).to_numpy()  # ascending
        key_groups = groups[np.concatenate([[0], np.flatnonzero(groups[1:] != groups[:-1]) + 1])]
        return {kg: (before.get(kg), after.get(kg)) for kg in key_groups.tolist()}

    def _rows(self, mask: np.ndarray) -> dict[int, pa.Table]:
        """The rows ``mask`` picks, per key group, without the ``delta_kind`` column: slices
        where they are one stretch of rows per key group (as a run's upserts and its prior
        rows are, for updates), else a filtered copy."""
        groups = self.table.column(KEY_GROUP).to_numpy()
        edges = np.flatnonzero((mask[1:] != mask[:-1]) | (groups[1:] != groups[:-1])) + 1
        starts, ends = np.concatenate([[0], edges]), np.concatenate([edges, [len(mask)]])
        picked = mask[starts]
        starts, ends = starts[picked], ends[picked]
        stretches = groups[starts]
        if np.all(stretches[1:] > stretches[:-1]):
            table = self.table.drop_columns(DELTA_COLUMNS)
            return {kg: table.slice(start, end - start) for kg, start, end
                    in zip(stretches.tolist(), starts.tolist(), ends.tolist())}
        return _by_key_group(self.table.filter(pa.array(mask)).drop_columns(DELTA_COLUMNS))

    def _unhidden(self, bases: Mapping[int, pa.Table], key_groups: list[int]
                  ) -> dict[int, pa.Table]:
        """The base rows of entries no run of their key group holds, per key group."""
        tables = [bases[kg] for kg in key_groups if bases[kg].num_rows]
        if not tables:
            return {}
        combined = pa.concat_tables(tables)
        leaves = _leaves(combined)
        first = leaves[0].combine_chunks() if isinstance(leaves[0], pa.ChunkedArray) \
            else leaves[0]
        groups = combined.column(KEY_GROUP).to_numpy()
        run_groups = self.table.column(KEY_GROUP).to_numpy()
        held = np.zeros(len(groups), dtype=bool)
        for key_group in np.unique(run_groups).tolist():
            start, end = np.searchsorted(groups, [key_group, key_group + 1])
            if start < end:
                run_start, run_end = np.searchsorted(run_groups, [key_group, key_group + 1])
                held[start:end] = _member(first.slice(start, end - start),
                                          self.leaves[0].slice(run_start, run_end - run_start))
        if len(leaves) > 1 and held.any():
            identities = set(zip(run_groups[self.starts].tolist(),
                                 *(leaf.take(pa.array(self.starts)).to_pylist()
                                   for leaf in self.leaves)))
            rows = np.flatnonzero(held)
            exact = zip(groups[rows].tolist(),
                        *(leaf.take(pa.array(rows)).to_pylist() for leaf in leaves))
            held[rows] = np.fromiter((identity in identities for identity in exact),
                                     dtype=bool, count=len(rows))
        if held.any():
            combined = combined.filter(pa.array(~held))
        return _by_key_group(combined)


def _sort_order(key_groups: pa.ChunkedArray, leaves: list[pa.Array],
                sequence: np.ndarray) -> np.ndarray:
    """The stable order by key group, entry (its leaves) and run: numpy's ``lexsort`` where
    every leaf is a null-free integer or boolean column, else Arrow's sort."""
    if all((pa.types.is_integer(leaf.type) or pa.types.is_boolean(leaf.type))
           and not leaf.null_count for leaf in leaves):
        columns = [sequence, *(leaf.to_numpy(zero_copy_only=False) for leaf in reversed(leaves)),
                   key_groups.to_numpy()]
        return np.lexsort(columns)
    return pc.sort_indices(pa.table(
        {"kg": key_groups, **{f"leaf{i}": leaf for i, leaf in enumerate(leaves)},
         "sequence": pa.array(sequence)}),
        sort_keys=[("kg", "ascending"),
                   *((f"leaf{i}", "ascending") for i in range(len(leaves))),
                   ("sequence", "ascending")]).to_numpy()


def _member(values: pa.Array, of: pa.Array) -> np.ndarray:
    """Per element of ``values``, whether ``of`` holds it (nulls equal).

    Integers spanning a range of at most ``max(8 * len(values), 2**24)`` are looked
    up in a table of one byte per value of that range (numpy's ``isin(kind="table")``),
    several times faster than a hash lookup; anything else is hashed.
    """
    if pa.types.is_integer(values.type) and not values.null_count and not of.null_count \
            and len(of):
        numbers, wanted = values.to_numpy(), of.to_numpy()
        low = min(int(numbers.min()), int(wanted.min()))
        high = max(int(numbers.max()), int(wanted.max()))
        if high - low <= max(8 * len(numbers), 1 << 24):
            return np.isin(numbers, wanted, kind="table")
    return pc.is_in(values, value_set=pc.unique(of),
                    skip_nulls=False).to_numpy(zero_copy_only=False)


def _by_key_group(table: pa.Table) -> dict[int, pa.Table]:
    """``table``'s rows (ascending by key group) as one zero-copy slice per key group."""
    groups = table.column(KEY_GROUP).to_numpy()
    if not len(groups):
        return {}
    bounds = np.concatenate([[0], np.flatnonzero(groups[1:] != groups[:-1]) + 1, [len(groups)]])
    return {int(groups[start]): table.slice(start, end - start)
            for start, end in zip(bounds[:-1].tolist(), bounds[1:].tolist())}


def merge_runs(base: pa.Table | None, runs: Sequence[pa.Table]) -> pa.Table | None:
    """One key group's rows: ``base`` (in the data schema) with ``runs`` (oldest first)
    applied (see :meth:`SortedRuns.merged`)."""
    tables = [t for t in (base, *runs) if t is not None and t.num_rows]
    if not tables:
        return None
    key_group = tables[0].column(KEY_GROUP)[0].as_py()
    merged = SortedRuns({key_group: runs} if runs else {}).merged(
        {key_group: base if base is not None else tables[0].schema.empty_table()})
    return merged.get(key_group)


def _leaves(table: pa.Table) -> list[pa.Array]:
    return [*java_equality_columns(KEY, table.column(KEY)).values(),
            *java_equality_columns(NAMESPACE, table.column(NAMESPACE)).values()]


def oldest_upsert_access(run: EncodedRun) -> int | None:
    """The oldest TTL timestamp among a run's upsert rows (None: it upserts nothing)."""
    upserts = run.rows.filter(pc.equal(run.rows.column(DELTA_KIND), UPSERT))
    if not upserts.num_rows:
        return None
    return pc.min(upserts.column(TTL_TIMESTAMP).cast(pa.int64())).as_py()


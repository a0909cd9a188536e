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
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from statesource.format.columns import (
    KEY,
    KEY_GROUP,
    NAMESPACE,
    TTL_TIMESTAMP,
    RowEncoder,
)
from statesource.format.entries import java_equality_columns
from statesource.format.ipc import split_batches
from statesource.model import StateDeclaration
from statesource.types import DataType

DELTA_KIND = "delta_kind"
UPSERT, TOMBSTONE, PRIOR = 0, 1, 2
"""Values of :data:`DELTA_KIND`."""

ChangedEntry = tuple[Any, Any, Any, Any]
"""(key, namespace, stored state now or None, stored state at the base or None)."""


def delta_schema(data_schema: pa.Schema) -> pa.Schema:
    """The schema of a state's delta files: its data files' schema and ``delta_kind``."""
    return data_schema.append(pa.field(DELTA_KIND, pa.int8()))


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

    def encode(self, key_groups: Iterable[tuple[int, Sequence[ChangedEntry]]]
               ) -> Iterator[tuple[int, list[pa.RecordBatch], int]]:
        """``(key group, batches, entries)`` of each key group whose run has rows."""
        for key_group, changed in key_groups:
            run = self.run(key_group, changed)
            if run is not None:
                yield key_group, split_batches(run[0], 0, run[0].num_rows), run[1]

    def run(self, key_group: int, changed: Sequence[ChangedEntry]) -> tuple[pa.Table, int] | None:
        """The run's rows and how many entries it upserts or removes (None: no change)."""
        upserts: list[tuple[Any, Any, Any]] = []
        tombstones: list[tuple[Any, Any]] = []
        priors: list[tuple[Any, Any, Any]] = []
        for key, namespace, current, prior in changed:
            now = None if current is None else self._current.live(current)
            before = None if prior is None else self._prior.live(prior)
            if before is not None:
                priors.append((key, namespace, before))
            if now is not None:
                upserts.append((key, namespace, now))
            elif before is not None:
                tombstones.append((key, namespace))
        if not upserts and not tombstones:
            return None
        parts = [self._tagged(self._current, key_group, upserts, UPSERT),
                 self._tombstones(key_group, tombstones),
                 self._tagged(self._prior, key_group, priors, PRIOR)]
        table = pa.concat_tables([p for p in parts if p.num_rows])
        return table, len(upserts) + len(tombstones)

    def _tagged(self, encoder: RowEncoder, key_group: int,
                entries: list[tuple[Any, Any, Any]], kind: int) -> pa.Table:
        keys, namespaces, states = ([list(c) for c in zip(*entries)] if entries
                                    else ([], [], []))
        table = encoder.table([encoder.rows_of(key_group, keys, namespaces, states)])
        return table.append_column(DELTA_KIND, pa.array(np.full(table.num_rows, kind, np.int8)))

    def _tombstones(self, key_group: int, entries: list[tuple[Any, Any]]) -> pa.Table:
        count = len(entries)
        keys = [key for key, _ in entries]
        namespaces = [namespace for _, namespace in entries]
        columns: list[pa.Array] = [pa.array(np.full(count, key_group, np.int32)),
                                   self.key_type.to_arrow(keys),
                                   self.declaration.namespace_type.to_arrow(namespaces)]
        columns += [pa.nulls(count, field.type) for field in self.schema
                    if field.name not in (KEY_GROUP, KEY, NAMESPACE, DELTA_KIND)]
        columns.append(pa.array(np.full(count, TOMBSTONE, np.int8)))
        return pa.Table.from_arrays(columns, schema=self.schema)


def merge_runs(base: pa.Table | None, runs: Sequence[pa.Table]) -> pa.Table | None:
    """A key group's rows: ``base`` (in the data schema) with ``runs`` (oldest first) applied.

    The newest run holding an entry decides it: its upsert rows are the
    entry's rows, its tombstone hides it. None when no row remains.
    """
    seen: set[tuple] = set()
    kept: list[pa.Table] = []
    for run in reversed(runs):
        kinds = run.column(DELTA_KIND)
        run = run.filter(pc.not_equal(kinds, PRIOR))
        identities = entry_identities(run)
        fresh = np.fromiter((identity not in seen for identity in identities), dtype=bool,
                            count=len(identities))
        upserts = pc.equal(run.column(DELTA_KIND), UPSERT).to_numpy(zero_copy_only=False)
        kept.append(run.filter(pa.array(fresh & upserts)).drop_columns([DELTA_KIND]))
        seen.update(identities)
    if base is not None and base.num_rows:
        kept.append(base.filter(pa.array(~_held_by(base, seen))) if seen else base)
    tables = [t for t in reversed(kept) if t.num_rows]
    return pa.concat_tables(tables) if tables else None


def run_changes(runs: Sequence[pa.Table]) -> tuple[pa.Table | None, pa.Table | None]:
    """The entries ``runs`` (oldest first, applied in a row) change: their rows before and
    after, in the data schema, for the change feed.

    Before: an entry's prior rows in the first run that holds it (none: it did
    not exist). After: its rows in the newest run that holds it.
    """
    first_seen: set[tuple] = set()
    before: list[pa.Table] = []
    for run in runs:
        identities = entry_identities(run)
        kinds = run.column(DELTA_KIND).to_numpy(zero_copy_only=False)
        first = np.fromiter((identity not in first_seen for identity in identities), dtype=bool,
                            count=len(identities))
        before.append(run.filter(pa.array(first & (kinds == PRIOR))).drop_columns([DELTA_KIND]))
        first_seen.update(identity for identity, kind in zip(identities, kinds)
                          if kind != PRIOR)
    after = merge_runs(None, runs)
    before_rows = [t for t in before if t.num_rows]
    return (pa.concat_tables(before_rows) if before_rows else None), after


def entry_identities(table: pa.Table) -> list[tuple]:
    """Per row, a hashable value equal for rows of Java-equal (key, namespace) entries."""
    leaves = _leaves(table)
    return list(zip(*(leaf.to_pylist() for leaf in leaves))) if leaves else []


def _leaves(table: pa.Table) -> list[pa.Array]:
    return [*java_equality_columns(KEY, table.column(KEY)).values(),
            *java_equality_columns(NAMESPACE, table.column(NAMESPACE)).values()]


def _held_by(table: pa.Table, identities: set[tuple]) -> np.ndarray:
    """Per row of ``table``, whether its entry is among ``identities``.

    A hash lookup of the first leaf column finds the candidates in one vectorised
    pass; only those are compared whole, in Python.
    """
    leaves = _leaves(table)
    first = leaves[0]
    candidates = pc.is_in(first, value_set=pa.array({i[0] for i in identities}, first.type),
                          skip_nulls=False).to_numpy(zero_copy_only=False)
    if len(leaves) == 1:
        return candidates
    rows = np.flatnonzero(candidates)
    picked = pa.array(rows)
    exact = zip(*(leaf.take(picked).to_pylist() for leaf in leaves))
    held = np.zeros(table.num_rows, dtype=bool)
    held[rows] = np.fromiter((identity in identities for identity in exact), dtype=bool,
                             count=len(rows))
    return held


def oldest_upsert_access(batches: Sequence[pa.RecordBatch]) -> int | None:
    """The oldest TTL timestamp among a run's upsert rows (None: it upserts nothing)."""
    oldest: int | None = None
    for batch in batches:
        upserts = batch.filter(pc.equal(batch.column(DELTA_KIND), UPSERT))
        if upserts.num_rows:
            value = pc.min(upserts.column(TTL_TIMESTAMP).cast(pa.int64())).as_py()
            oldest = value if oldest is None else min(oldest, value)
    return oldest


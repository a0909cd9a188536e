"""Incremental checkpoints: write what changed, entry by entry, and reference the rest.

A backend snapshot says, per state, which key groups changed since the
backend's *base*: the last checkpoint its writer confirmed committed (a
:class:`BaseCheckpoint` token, handed to the backend after each commit), and
for most of them which entries changed. An incremental checkpoint writes, per
state and subtask, a *delta file* with one run per such key group holding only
its changed entries (format version 5, :mod:`statesource.format.deltas`), and
records, for every other key group, the base range and runs the base recorded.

For states whose entries are one row each (an integer key, no namespace), the
writer keeps the keys of every base range it wrote, in their order, so that
each row of a later run can say where its entry lies in that base
(``base_row``): a read then locates changes without searching. That costs
8 bytes per entry of such states. A restore notes the keys of the bases it
reads into its token, so a writer continuing from a restored backend hints
its runs too, without reading the bases again.

A key group is instead rewritten whole, into a new base file (as format
version 3 does), when its entries are not known (it changed mostly, or was
restored), or when its chain of runs would pass a bound (*compaction*, as
RocksDB compacts and Flink's changelog backend materializes): more than
``max_delta_runs`` runs, or runs holding more than half as many rows as its
base. So reading any key group touches at most ``1 + max_delta_runs`` byte
ranges. A key group that became empty is simply in no file.

Full-snapshot TTL cleanup keeps its meaning exactly: a checkpoint holds no
row that expired by its own timestamp. The rows of an unchanged key group
were filtered when they were written, at an earlier time, so the writer
remembers the oldest last-access time among each written key group's rows
and rewrites an unchanged key group once that row has expired. When it does
not know that time (a base written by another process), it rewrites.

Whenever an incremental checkpoint cannot build on its base (none yet, a base
in another root, under another operator, or no longer readable), the state
is written in full: the result is always what a full checkpoint would hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from statesource.errors import StateSourceError
from statesource.format.columns import KEY, TTL_TIMESTAMP
from statesource.format.deltas import EncodedRun, oldest_upsert_access
from statesource.format.keyed_state_meta import DeltaFile, DeltaRun, KeyedStateMeta
from statesource.format.locations import DataFile, KeyGroupLocation
from statesource.format.metadata import CheckpointMeta
from statesource.format.metadata_file import read_metadata
from statesource.format.storage import Location, checkpoint_dir_name
from statesource.model import StateDeclaration
from statesource.state.keyed_backend import KeyedBackendSnapshot
from statesource.state.statemap import ChangedEntries
from statesource.state.statetable import StateTableSnapshot

EncodedKeyGroups = Iterable[tuple[int, Sequence[pa.RecordBatch], int]]
MAX_DELTA_RUNS = 12
"""Delta runs a key group may have before the next change rewrites it whole (the default)."""
DELTA_ROWS_RATIO = 0.5
"""A key group is rewritten whole once its runs would hold more rows than this share of its
base's."""
_NO_EXPIRY = 1 << 62
"""The oldest access recorded for a run that upserts nothing: nothing in it can expire."""


@dataclass(frozen=True)
class BaseCheckpoint:
    """The token a backend keeps for its base: a committed checkpoint of one writer's root."""

    root: Location
    checkpoint_id: int
    operator: str
    base_keys: Mapping[tuple[str, int], np.ndarray] = field(
        default_factory=dict, compare=False, repr=False)
    """What a restore noted of the base ranges it read (:func:`note_base_keys`)."""


@dataclass(frozen=True)
class StatePlan:
    """What to write for one state of one subtask.

    ``rewrite`` lists the key groups to write anew (None: all of them, a full
    write); ``deltas`` the key groups to write a run of, with their changed
    entries; ``carried`` and ``carried_deltas`` are the base's files and delta
    files, each with only the locations of key groups carried over (unchanged,
    or getting a new run). ``base_timestamp_ms`` is the base checkpoint's time,
    when prior states are filtered by full-snapshot TTL cleanup.
    """

    rewrite: frozenset[int] | None
    carried: tuple[DataFile, ...] = ()
    deltas: Mapping[int, ChangedEntries] = field(default_factory=dict)
    carried_deltas: tuple[DeltaFile, ...] = ()
    base_timestamp_ms: int | None = None
    base_keys: Mapping[int, np.ndarray] = field(default_factory=dict)
    """Per key group of ``deltas``, its base rows' keys where this writer knows them."""


FULL = StatePlan(None)


@dataclass
class BaseIndex:
    """What one writer knows of its committed checkpoints, to plan incremental ones.

    Used only on the writer's background thread. It keeps the newest
    committed metadata (older bases are read from disk) and, per data file
    and key group, the oldest last-access time among the rows written there
    (states with full-snapshot TTL cleanup) and the keys of its rows (states
    with one row per entry, see the module).
    """

    root: Location
    max_delta_runs: int = MAX_DELTA_RUNS
    keeps_base_keys: bool = True
    """Whether bases' keys are kept (by writers that write incremental checkpoints)."""
    _newest: CheckpointMeta | None = None
    _oldest_access: dict[tuple[str, int], int] = field(default_factory=dict)
    _base_keys: dict[tuple[str, int], np.ndarray] = field(default_factory=dict)

    def committed(self, metadata: CheckpointMeta, written: WrittenRows) -> None:
        """Record a committed checkpoint; forget what only older checkpoints reference."""
        self._newest = metadata
        live = metadata.referenced_files()
        self._oldest_access = {k: v for k, v in {**self._oldest_access,
                                                 **written.oldest_access}.items()
                               if k[0] in live}
        self._base_keys = {k: v for k, v in {**self._base_keys,
                                             **(written.base_keys or {})}.items()
                           if k[0] in live}

    def plan(self, backend: KeyedBackendSnapshot, uid: str, state: StateTableSnapshot
             ) -> StatePlan:
        """Which key groups of ``state`` to rewrite, to write a run of, and to reference."""
        found = self._base_state(backend, uid, state.descriptor.declaration)
        if found is None:
            return FULL
        base, base_timestamp = found
        if self.keeps_base_keys:
            for known, keys in backend.base.base_keys.items():  # a restored backend's base
                self._base_keys.setdefault(known, keys)
        cutoff = _expiry_cutoff(state.descriptor.declaration, backend.timestamp_ms)
        locations, runs = base.location_of(), base.runs_of()
        entries_now = {key_group: len(snapshot) for key_group, snapshot in state}
        rewrite: set[int] = set()
        deltas: dict[int, ChangedEntries] = {}
        for key_group in state.changed_key_groups():
            tracked = state.changed_entries.get(key_group)
            located = locations.get(key_group)
            if tracked is None or self._compacts(len(tracked), runs.get(key_group, []),
                                                 0 if located is None else located[1].rows,
                                                 entries_now[key_group]):
                rewrite.add(key_group)
            else:
                deltas[key_group] = tracked
        carried: dict[str, tuple[DataFile, list[KeyGroupLocation]]] = {}
        carried_runs: dict[str, tuple[DeltaFile, list[KeyGroupLocation]]] = {}
        for key_group in sorted(locations.keys() | runs.keys()):
            if key_group not in backend.key_group_range or key_group in rewrite:
                continue
            chain = runs.get(key_group, [])
            paths = [delta.path for delta, _ in chain]
            if key_group in locations:
                paths.append(locations[key_group][0].path)
            if cutoff is not None and any(self._oldest_access.get((path, key_group), cutoff)
                                          <= cutoff for path in paths):
                rewrite.add(key_group)  # a row expired since it was written, or unknown
                deltas.pop(key_group, None)
                continue
            if key_group in locations:
                data_file, location = locations[key_group]
                carried.setdefault(data_file.path, (data_file, []))[1].append(location)
            for delta, location in chain:
                carried_runs.setdefault(delta.path, (delta, []))[1].append(location)
        return StatePlan(
            frozenset(rewrite),
            tuple(data_file.with_locations(locs) for data_file, locs in carried.values()),
            deltas,
            tuple(delta.keeping(locs) for delta, locs in carried_runs.values()),
            base_timestamp,
            {kg: self._base_keys[(locations[kg][0].path, kg)] for kg in deltas
             if kg in locations and (locations[kg][0].path, kg) in self._base_keys})

    def _compacts(self, changed: int, chain: list[DeltaRun], base_rows: int,
                  entries_now: int) -> bool:
        """Whether a key group with ``changed`` known changed entries is rewritten whole:
        when it changed mostly, or a new run would pass the chain's bounds."""
        if 2 * changed > entries_now or len(chain) + 1 > self.max_delta_runs:
            return True
        chain_rows = sum(location.rows for _, location in chain)
        return chain_rows + 2 * changed > DELTA_ROWS_RATIO * base_rows

    def _base_state(self, backend: KeyedBackendSnapshot, uid: str,
                    declaration: StateDeclaration) -> tuple[KeyedStateMeta, int] | None:
        """The state as the backend's base recorded it, and the base's time; None when it
        cannot be built on.

        A state the base operator lacks was registered after the base: it had
        no rows then, so an empty base is exact.
        """
        token = backend.base
        if not isinstance(token, BaseCheckpoint) or token.root != self.root \
                or token.operator != uid:
            return None
        metadata = self._metadata(token.checkpoint_id)
        if metadata is None:
            return None
        try:
            op = metadata.operator(uid)
        except StateSourceError:
            return None
        if (op.key_type, op.max_parallelism) != (backend.key_type, backend.max_parallelism):
            return None
        for state in op.keyed_states:
            if state.name == declaration.name:
                if not state.declaration.same_types(declaration):
                    return None
                return state, metadata.timestamp_ms
        return KeyedStateMeta.of(declaration, ()), metadata.timestamp_ms

    def _metadata(self, checkpoint_id: int) -> CheckpointMeta | None:
        if self._newest is not None and self._newest.checkpoint_id == checkpoint_id:
            return self._newest
        try:
            return read_metadata(self.root.child(checkpoint_dir_name(checkpoint_id)))
        except StateSourceError:  # retired or unreadable: write in full instead
            return None


def merge_references(files: Iterable[DataFile]) -> tuple[DataFile, ...]:
    """One entry per file: subtasks of a rescaled job may each carry key groups of one file.

    A state lists each file once (format version 3), with the union of the
    key groups its subtasks took from it.
    """
    merged: dict[str, DataFile] = {}
    for data_file in files:
        known = merged.get(data_file.path)
        if known is not None:
            data_file = known.with_locations((*known.locations, *data_file.locations))
        merged[data_file.path] = data_file
    return tuple(merged.values())


def merge_delta_references(deltas: Iterable[DeltaFile]) -> tuple[DeltaFile, ...]:
    """:func:`merge_references` for delta files, in ascending sequence (format version 4)."""
    merged: dict[str, DeltaFile] = {}
    for delta in deltas:
        known = merged.get(delta.path)
        if known is not None:
            priors = None if delta.priors is None else (*(known.priors or ()), *delta.priors)
            delta = DeltaFile(delta.sequence, delta.file, priors).keeping(
                (*known.file.locations, *delta.file.locations))
        merged[delta.path] = delta
    return tuple(sorted(merged.values(), key=lambda delta: delta.sequence))


def _expiry_cutoff(declaration: StateDeclaration, timestamp_ms: int) -> int | None:
    """Rows last accessed at or before this instant are dropped by full-snapshot cleanup."""
    ttl = declaration.ttl
    if ttl is None or not ttl.cleanup_full_snapshot:
        return None
    return ttl.expiry_cutoff(timestamp_ms)


@dataclass
class WrittenRows:
    """What one checkpoint's writing noted of the rows it wrote, per (file, key group)."""

    oldest_access: dict[tuple[str, int], int] = field(default_factory=dict)
    """The oldest TTL timestamp, for states with full-snapshot cleanup."""
    base_keys: dict[tuple[str, int], np.ndarray] | None = None
    """A base range's keys, where they ascend (states with one row per entry); None: not
    kept."""


def observe_oldest_access(encoded: EncodedKeyGroups, path: str,
                          oldest_access: dict[tuple[str, int], int]) -> EncodedKeyGroups:
    """Pass ``encoded`` through, noting each key group's oldest TTL timestamp."""
    for key_group, batches, entries in encoded:
        oldest_access[(path, key_group)] = min(
            pc.min(batch.column(TTL_TIMESTAMP).cast(pa.int64())).as_py() for batch in batches)
        yield key_group, batches, entries


def observe_run_access(runs: Sequence[EncodedRun], path: str,
                       oldest_access: dict[tuple[str, int], int]) -> None:
    """Note each run's oldest TTL timestamp among its upserts, the rows that are state."""
    for run in runs:
        oldest = oldest_upsert_access(run)
        oldest_access[(path, run.key_group)] = _NO_EXPIRY if oldest is None else oldest


def observe_base_keys(encoded: EncodedKeyGroups, path: str,
                      base_keys: dict[tuple[str, int], np.ndarray]) -> EncodedKeyGroups:
    """Pass ``encoded`` through, noting each key group's keys where they ascend strictly."""
    for key_group, batches, entries in encoded:
        _keep_ascending(base_keys, (path, key_group),
                        np.concatenate([batch.column(KEY).to_numpy() for batch in batches]))
        yield key_group, batches, entries


def note_base_keys(base_keys: dict[tuple[str, int], np.ndarray], path: str, key_group: int,
                   rows: pa.Table) -> None:
    """Note the keys of ``rows``, key group ``key_group``'s base range in data file ``path``
    as a read decoded it, where they are all there and ascend strictly; a copy, so that
    nothing keeps the buffer they were read into."""
    column = rows.column(KEY)
    if not column.null_count and rows.num_rows:
        _keep_ascending(base_keys, (path, key_group), np.array(column.to_numpy()))


def _keep_ascending(base_keys: dict[tuple[str, int], np.ndarray], where: tuple[str, int],
                    keys: np.ndarray) -> None:
    if np.all(keys[1:] > keys[:-1]):
        base_keys[where] = keys

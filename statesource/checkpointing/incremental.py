"""Incremental checkpoints: rewrite the key groups that changed, reference the rest.

A backend snapshot says, per state, which key groups changed since the
backend's *base*: the last checkpoint its writer confirmed committed (a
:class:`BaseCheckpoint` token, handed to the backend after each commit). An
incremental checkpoint writes one new file per state and subtask holding only
those key groups, and records, for every unchanged key group, the file and
byte range the base recorded for it. A key group that became empty is simply
in neither. The files then cover overlapping key-group ranges while each key
group's rows lie in exactly one of them (format version 3, docs/FORMAT.md).

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

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from statesource.errors import StateSourceError
from statesource.format.columns import TTL_TIMESTAMP
from statesource.format.metadata import CheckpointMeta, DataFile, KeyedStateMeta
from statesource.format.reader import read_metadata
from statesource.format.storage import Location, checkpoint_dir_name
from statesource.model import StateDeclaration
from statesource.state.keyed_backend import KeyedBackendSnapshot
from statesource.state.statetable import StateTableSnapshot

EncodedKeyGroups = Iterable[tuple[int, Sequence[pa.RecordBatch], int]]


@dataclass(frozen=True)
class BaseCheckpoint:
    """The token a backend keeps for its base: a committed checkpoint of one writer's root."""

    root: Location
    checkpoint_id: int
    operator: str


@dataclass(frozen=True)
class StatePlan:
    """What to write for one state of one subtask.

    ``rewrite`` lists the key groups to write anew (None: all of them, a full
    write); ``carried`` are the base's files, each with only the locations of
    key groups carried over unchanged.
    """

    rewrite: frozenset[int] | None
    carried: tuple[DataFile, ...] = ()


FULL = StatePlan(None)


@dataclass
class BaseIndex:
    """What one writer knows of its committed checkpoints, to plan incremental ones.

    Used only on the writer's background thread. It keeps the newest
    committed metadata (older bases are read from disk) and, per data file
    and key group of a state with full-snapshot TTL cleanup, the oldest
    last-access time among the rows written there.
    """

    root: Location
    _newest: CheckpointMeta | None = None
    _oldest_access: dict[tuple[str, int], int] = field(default_factory=dict)

    def committed(self, metadata: CheckpointMeta, oldest_access: dict[tuple[str, int], int]
                  ) -> None:
        """Record a committed checkpoint; forget what only older checkpoints reference."""
        self._newest = metadata
        self._oldest_access.update(oldest_access)
        live = metadata.referenced_files()
        self._oldest_access = {k: v for k, v in self._oldest_access.items() if k[0] in live}

    def plan(self, backend: KeyedBackendSnapshot, uid: str, state: StateTableSnapshot
             ) -> StatePlan:
        """Which key groups of ``state`` to rewrite and which base files to reference."""
        base = self._base_state(backend, uid, state.descriptor.declaration)
        if base is None:
            return FULL
        cutoff = _expiry_cutoff(state.descriptor.declaration, backend.timestamp_ms)
        rewrite = set(state.changed_key_groups())
        carried: dict[str, tuple[DataFile, list]] = {}
        for key_group, (data_file, location) in base.location_of().items():
            if key_group not in backend.key_group_range or key_group in rewrite:
                continue
            if cutoff is not None and self._oldest_access.get(
                    (data_file.path, key_group), cutoff) <= cutoff:
                rewrite.add(key_group)  # a row expired since it was written, or unknown
                continue
            carried.setdefault(data_file.path, (data_file, []))[1].append(location)
        return StatePlan(frozenset(rewrite), tuple(
            DataFile(data_file.path, data_file.key_group_range, data_file.size_bytes,
                     tuple(locations))
            for data_file, locations in carried.values()))

    def _base_state(self, backend: KeyedBackendSnapshot, uid: str,
                    declaration: StateDeclaration) -> KeyedStateMeta | None:
        """The state as the backend's base recorded it; None when it cannot be built on.

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
                return state if state.declaration.same_types(declaration) else None
        return KeyedStateMeta.of(declaration, ())

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
            data_file = DataFile(known.path, known.key_group_range, known.size_bytes, tuple(
                sorted((*known.locations, *data_file.locations), key=lambda loc: loc.key_group)))
        merged[data_file.path] = data_file
    return tuple(merged.values())


def _expiry_cutoff(declaration: StateDeclaration, timestamp_ms: int) -> int | None:
    """Rows last accessed at or before this instant are dropped by full-snapshot cleanup."""
    ttl = declaration.ttl
    if ttl is None or not ttl.cleanup_full_snapshot:
        return None
    return ttl.expiry_cutoff(timestamp_ms)


def observe_oldest_access(encoded: EncodedKeyGroups, path: str,
                          oldest_access: dict[tuple[str, int], int]) -> Iterator[
                              tuple[int, Sequence[pa.RecordBatch], int]]:
    """Pass ``encoded`` through, noting each key group's oldest TTL timestamp."""
    for key_group, batches, entries in encoded:
        oldest = min(pc.min(batch.column(TTL_TIMESTAMP).cast(pa.int64())).as_py()
                     for batch in batches)
        oldest_access[(path, key_group)] = oldest
        yield key_group, batches, entries

"""Checkpointing live backends: synchronous snapshot, asynchronous write, atomic commit.

``CheckpointWriter.write_async`` takes every backend's snapshot on the calling
thread (the only pause the program sees), then writes data files on a
background thread while the program keeps changing its state. The metadata is
written last and atomically; until it exists the checkpoint does not, so a
crash at any point leaves earlier checkpoints untouched and no partial one
visible. Files of a failed attempt are deleted; any that survive a crash have
names no later attempt reuses, and readers never look at unlisted files.

Everything written goes through the format's one data-file writer and commit,
like every other producer's checkpoints. Once committed, every backend is told
(its snapshot's ``completed``), so that an incremental checkpoint
(:mod:`statesource.checkpointing.incremental`) can build on it; a failed
checkpoint tells nothing, so no change is ever forgotten.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow.fs as pafs

from statesource.checkpointing.incremental import (
    FULL,
    MAX_DELTA_RUNS,
    BaseCheckpoint,
    BaseIndex,
    EncodedKeyGroups,
    StatePlan,
    WrittenRows,
    merge_delta_references,
    merge_references,
    observe_base_keys,
    observe_oldest_access,
    observe_run_access,
)
from statesource.checks import check_checkpoint_id, check_int
from statesource.errors import CheckpointExistsError, CheckpointRetiredError, InvalidArgumentError
from statesource.format.columns import RowEncoder, searchable
from statesource.format.commit import CheckpointInfo, commit_checkpoint
from statesource.format.datafile import write_delta_file, write_keyed_file, write_operator_state
from statesource.format.deltas import DeltaEncoder
from statesource.format.keyed_state_meta import DeltaFile, KeyedStateMeta
from statesource.format.locations import DataFile
from statesource.format.metadata import CheckpointMeta, OperatorMeta
from statesource.format.operator_state_meta import OperatorStateMeta
from statesource.format.storage import (
    METADATA_FILE,
    Location,
    check_writable_root,
    checkpoint_dir_name,
    new_data_file,
    remove_attempt,
    resolve,
)
from statesource.keygroups import default_max_parallelism, key_group_range_for_operator
from statesource.state.keyed_backend import KeyedBackendSnapshot, KeyedStateBackend
from statesource.state.operator_backend import (
    OperatorStateBackend,
    OperatorStateSnapshot,
    OperatorStateSnapshotEntry,
)
from statesource.state.statetable import StateTableSnapshot


@dataclass(frozen=True)
class SubtaskBackends:
    """The state of one parallel subtask: keyed, operator, or both."""

    keyed: KeyedStateBackend | None = None
    operator: OperatorStateBackend | None = None


class PendingCheckpoint:
    """A checkpoint being written in the background."""

    def __init__(self, checkpoint_id: int, future: concurrent.futures.Future) -> None:
        self.checkpoint_id = checkpoint_id
        self._future = future

    def done(self) -> bool:
        return self._future.done()

    def result(self, timeout: float | None = None) -> CheckpointInfo:
        """Wait for the commit; re-raises the write's error if it failed."""
        return self._future.result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        return self._future.exception(timeout)


@dataclass
class _OperatorSnapshot:
    uid: str
    parallelism: int
    max_parallelism: int
    keyed: list[KeyedBackendSnapshot]
    operator: list[OperatorStateSnapshot | None]

    def close(self) -> None:
        for snapshot in [*self.keyed, *self.operator]:
            if snapshot is not None:
                snapshot.close()


class CheckpointWriter:
    """Writes checkpoints under one root directory, one at a time, in the background.

    With ``incremental`` (here as the default, or per checkpoint) a checkpoint
    writes only the entries changed since the previous committed one of the
    same backends, and references everything else. ``max_delta_runs`` bounds a
    key group's chain of delta runs: the change that would pass it rewrites
    the key group whole (:mod:`statesource.checkpointing.incremental`).
    """

    def __init__(self, root: str, filesystem: pafs.FileSystem | None = None, *,
                 incremental: bool = False, max_delta_runs: int = MAX_DELTA_RUNS) -> None:
        self.root = resolve(root, filesystem)
        check_writable_root(self.root)  # here, not in the background write that would fail
        self.incremental = incremental
        self._bases = BaseIndex(self.root, check_int(max_delta_runs, "max_delta_runs", 0),
                                keeps_base_keys=incremental)
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="statesource-checkpoint"
        )
        self._in_flight: set[int] = set()

    def write(self, checkpoint_id: int, operators: Mapping[str, Sequence[Any]], *,
              incremental: bool | None = None) -> CheckpointInfo:
        """Snapshot and write synchronously; returns once the checkpoint is committed."""
        return self.write_async(checkpoint_id, operators, incremental=incremental).result()

    def write_async(self, checkpoint_id: int, operators: Mapping[str, Sequence[Any]], *,
                    incremental: bool | None = None) -> PendingCheckpoint:
        """Snapshot every backend now; write and commit in the background.

        ``operators`` maps an operator uid to its subtasks in index order; a
        subtask is a :class:`SubtaskBackends`, a ``KeyedStateBackend`` or an
        ``OperatorStateBackend``. ``incremental`` overrides the writer's setting.
        """
        check_checkpoint_id(checkpoint_id)
        if not operators:
            raise InvalidArgumentError("nothing to checkpoint: no operators given")
        directory = self.root.child(checkpoint_dir_name(checkpoint_id))
        if checkpoint_id in self._in_flight or directory.child(METADATA_FILE).exists():
            raise CheckpointExistsError(
                f"checkpoint {checkpoint_id} already exists at {directory}; checkpoints are"
                " never overwritten: choose another id")
        subtasks = {uid: [_as_subtask(uid, s) for s in backends]
                    for uid, backends in operators.items()}
        for uid, backends in subtasks.items():
            _check_operator(uid, backends)
        snapshots: list[_OperatorSnapshot] = []
        try:
            for uid, backends in subtasks.items():
                snapshots.append(_snapshot_operator(uid, backends, checkpoint_id))
        except BaseException:
            for snapshot in snapshots:
                snapshot.close()  # a failed checkpoint must not pin map versions
            raise
        timestamp_ms = next((s.keyed[0].timestamp_ms for s in snapshots if s.keyed),
                            time.time_ns() // 1_000_000)
        self._in_flight.add(checkpoint_id)
        future = self._executor.submit(
            _write_checkpoint, self.root, checkpoint_id, timestamp_ms, snapshots, self._bases,
            self.incremental if incremental is None else incremental)
        future.add_done_callback(lambda _: self._in_flight.discard(checkpoint_id))
        return PendingCheckpoint(checkpoint_id, future)

    def close(self) -> None:
        """Wait for pending writes and stop the background thread."""
        self._executor.shutdown(wait=True)

    def __enter__(self) -> CheckpointWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _as_subtask(uid: str, backend: Any) -> SubtaskBackends:
    if isinstance(backend, SubtaskBackends):
        return backend
    if isinstance(backend, KeyedStateBackend):
        return SubtaskBackends(keyed=backend)
    if isinstance(backend, OperatorStateBackend):
        return SubtaskBackends(operator=backend)
    raise InvalidArgumentError(
        f"operator {uid!r}: {backend!r} is not a KeyedStateBackend, OperatorStateBackend or"
        " SubtaskBackends"
    )


def _check_operator(uid: str, subtasks: list[SubtaskBackends]) -> None:
    """Keyed backends must split key groups exactly as Flink would for their count."""
    if not subtasks:
        raise InvalidArgumentError(f"operator {uid!r} has no subtasks")
    keyed = [s.keyed for s in subtasks if s.keyed is not None]
    if not keyed:
        return
    if len(keyed) != len(subtasks):
        raise InvalidArgumentError(
            f"operator {uid!r}: either every subtask has keyed state or none"
        )
    first = keyed[0]
    for index, backend in enumerate(keyed):
        if (backend.key_type, backend.max_parallelism) != (first.key_type, first.max_parallelism):
            raise InvalidArgumentError(
                f"operator {uid!r}: subtask {index} has key type {backend.key_type} and max"
                f" parallelism {backend.max_parallelism}, subtask 0 has {first.key_type} and"
                f" {first.max_parallelism}"
            )
        expected = key_group_range_for_operator(first.max_parallelism, len(keyed), index)
        if backend.key_group_range != expected:
            raise InvalidArgumentError(
                f"operator {uid!r}: subtask {index} of {len(keyed)} owns key groups"
                f" {backend.key_group_range}, but Flink assigns it {expected}"
            )


def _snapshot_operator(uid: str, subtasks: list[SubtaskBackends],
                       checkpoint_id: int) -> _OperatorSnapshot:
    # An operator without keyed state has no key groups, but Flink still records its
    # vertex's max parallelism, by default this one; recording the parallelism itself
    # would forbid ever scaling the operator up.
    snapshot = _OperatorSnapshot(uid, len(subtasks), default_max_parallelism(len(subtasks)),
                                 [], [])
    try:
        for subtask in subtasks:
            if subtask.keyed is not None:
                snapshot.keyed.append(subtask.keyed.snapshot(checkpoint_id))
            snapshot.operator.append(
                None if subtask.operator is None else subtask.operator.snapshot(checkpoint_id))
    except BaseException:
        snapshot.close()
        raise
    if snapshot.keyed:
        snapshot.max_parallelism = snapshot.keyed[0].max_parallelism
    return snapshot


def _write_checkpoint(root: Location, checkpoint_id: int, timestamp_ms: int,
                      snapshots: list[_OperatorSnapshot], index: BaseIndex,
                      incremental: bool) -> CheckpointInfo:
    """Write, commit, then make this checkpoint the base of every backend in it.

    A base that ``retain`` removed while this checkpoint was written cannot be
    referenced (docs/FORMAT.md section 11): the checkpoint is then written in full.
    """
    try:
        try:
            info, rows = _commit_new(root, checkpoint_id, timestamp_ms, snapshots,
                                     index if incremental else None, index.keeps_base_keys)
        except CheckpointRetiredError:
            if not incremental:
                raise
            info, rows = _commit_new(root, checkpoint_id, timestamp_ms, snapshots, None,
                                     index.keeps_base_keys)
    finally:
        for snapshot in snapshots:
            snapshot.close()
    index.committed(info.metadata, rows)
    for snapshot in snapshots:
        for backend in snapshot.keyed:
            backend.completed(BaseCheckpoint(root, checkpoint_id, snapshot.uid))
    return info


def _commit_new(root: Location, checkpoint_id: int, timestamp_ms: int,
                snapshots: list[_OperatorSnapshot], bases: BaseIndex | None,
                keep_base_keys: bool) -> tuple[CheckpointInfo, WrittenRows]:
    """One attempt: write every file, then commit; on failure remove what it wrote."""
    written: list[Location] = []
    output = _Output(written, bases, WrittenRows(base_keys={} if keep_base_keys else None))
    try:
        operators = tuple(_write_operator(root, checkpoint_id, snapshot, output)
                          for snapshot in snapshots)
        return (commit_checkpoint(root, CheckpointMeta(checkpoint_id, timestamp_ms, operators)),
                output.rows)
    except BaseException:
        remove_attempt(written)
        raise


@dataclass
class _Output:
    """Where one checkpoint's writing records what it did."""

    written: list[Location]
    """Files created, deleted again if the checkpoint fails."""
    bases: BaseIndex | None
    """Plans incremental states; None writes every state in full."""
    rows: WrittenRows
    """What the base index keeps of the rows written."""


def _write_operator(root: Location, checkpoint_id: int, snapshot: _OperatorSnapshot,
                    output: _Output) -> OperatorMeta:
    """One file per keyed state per subtask that has it: subtasks register states lazily."""
    by_name: dict[str, list[tuple[KeyedBackendSnapshot, StateTableSnapshot]]] = {}
    for backend in snapshot.keyed:
        for state in backend.states:
            by_name.setdefault(state.descriptor.name, []).append((backend, state))
    keyed_states = []
    for name, holders in sorted(by_name.items()):
        declaration = holders[0][1].descriptor
        for _, state in holders:
            if not state.descriptor.same_declaration(declaration):
                raise InvalidArgumentError(
                    f"operator {snapshot.uid!r}: subtasks declare state {name!r} differently:"
                    f" {declaration.describe()} and {state.descriptor.describe()}"
                )
        written = [_write_keyed_state(root, checkpoint_id, snapshot.uid, backend, state, output)
                   for backend, state in holders]
        files = merge_references(f for subtask_files, _ in written for f in subtask_files)
        deltas = merge_delta_references(d for _, subtask_deltas in written
                                        for d in subtask_deltas)
        keyed_states.append(KeyedStateMeta.of(declaration.declaration, files, deltas))
    operator_states = _write_operator_states(root, checkpoint_id, snapshot, output.written)
    key_type = snapshot.keyed[0].key_type if snapshot.keyed else None
    return OperatorMeta(snapshot.uid, snapshot.parallelism, snapshot.max_parallelism, key_type,
                        tuple(keyed_states), operator_states)


def _write_keyed_state(root: Location, checkpoint_id: int, uid: str,
                       backend: KeyedBackendSnapshot, state: StateTableSnapshot,
                       output: _Output) -> tuple[tuple[DataFile, ...], tuple[DeltaFile, ...]]:
    """One subtask's files and delta files of one state: those it writes (a base file of
    the key groups rewritten whole, a delta file of the runs), and those it carries."""
    plan: StatePlan = FULL if output.bases is None else output.bases.plan(backend, uid, state)
    declaration = state.descriptor.declaration
    key_range = backend.key_group_range
    cleanup = declaration.ttl is not None and declaration.ttl.cleanup_full_snapshot
    files = plan.carried
    if plan.rewrite is None or plan.rewrite:
        encoder = RowEncoder(backend.key_type, declaration, expire_at_ms=backend.timestamp_ms,
                             key_order=True)
        target, relative = new_data_file(
            root, checkpoint_id, f"{uid}.{declaration.name}.kg{key_range.start}-{key_range.end}")
        output.written.append(target)
        rewrite = plan.rewrite
        columns = ((key_group, *map_snapshot.columns()) for key_group, map_snapshot in state
                   if rewrite is None or key_group in rewrite)
        encoded: EncodedKeyGroups = encoder.encode(columns)
        if cleanup:
            encoded = observe_oldest_access(encoded, relative, output.rows.oldest_access)
        if output.rows.base_keys is not None and searchable(encoder.schema):
            encoded = observe_base_keys(encoded, relative, output.rows.base_keys)
        files = (write_keyed_file(target, relative, encoder.schema, key_range, encoded), *files)
    deltas = plan.carried_deltas
    delta_encoder = DeltaEncoder(backend.key_type, declaration, backend.timestamp_ms,
                                 plan.base_timestamp_ms)
    runs = list(delta_encoder.encode(sorted(plan.deltas.items()), plan.base_keys))
    if runs:
        target, relative = new_data_file(
            root, checkpoint_id,
            f"{uid}.{declaration.name}.delta.kg{key_range.start}-{key_range.end}")
        output.written.append(target)
        if cleanup:
            observe_run_access(runs, relative, output.rows.oldest_access)
        deltas = (*deltas, write_delta_file(target, relative, delta_encoder.schema, key_range,
                                            checkpoint_id, runs))
    return files, deltas


def _write_operator_states(root: Location, checkpoint_id: int, snapshot: _OperatorSnapshot,
                           written: list[Location]) -> tuple[OperatorStateMeta, ...]:
    by_name: dict[str, list[tuple[int, OperatorStateSnapshotEntry]]] = {}
    for subtask, operator_snapshot in enumerate(snapshot.operator):
        for entry in operator_snapshot.states if operator_snapshot is not None else ():
            by_name.setdefault(entry.name, []).append((subtask, entry))
    metas = []
    for name, entries in sorted(by_name.items()):
        first = entries[0][1]
        for _, entry in entries:
            if (entry.mode, dict(entry.schemas)) != (first.mode, dict(first.schemas)):
                raise InvalidArgumentError(
                    f"operator {snapshot.uid!r}: subtasks declare operator state {name!r}"
                    f" differently: {first.mode.value} {dict(first.schemas)} and"
                    f" {entry.mode.value} {dict(entry.schemas)}"
                )
        target, relative = new_data_file(root, checkpoint_id, f"{snapshot.uid}.op.{name}")
        written.append(target)
        metas.append(write_operator_state(target, relative, name, first.mode, first.schemas,
                                          ((subtask, entry.values) for subtask, entry in entries)))
    return tuple(metas)

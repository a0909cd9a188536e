"""Writing checkpoints: synchronous snapshot, asynchronous write, atomic commit.

``CheckpointWriter.write_async`` takes every backend's snapshot on the calling
thread (the only pause the program sees), then writes data files on a
background thread while the program keeps changing its state. The metadata is
written last and atomically; until it exists the checkpoint does not, so a
crash at any point leaves earlier checkpoints untouched and no partial one
visible. Files of a failed attempt are deleted; any that survive a crash have
names no later attempt reuses, and readers never look at unlisted files.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from statesource.errors import InvalidArgumentError, StateSourceError
from statesource.format.columns import RowEncoder
from statesource.format.ipc import encode_file
from statesource.format.metadata import (
    CheckpointMeta,
    DataFile,
    KeyedStateMeta,
    KeyGroupLocation,
    OperatorMeta,
    OperatorStateMeta,
    SubtaskPartition,
)
from statesource.format.operator_columns import operator_state_table
from statesource.format.storage import (
    DATA_DIR,
    METADATA_FILE,
    Location,
    checkpoint_dir_name,
    resolve,
    unique_data_file_name,
    write_atomically,
)
from statesource.keygroups import key_group_range_for_operator
from statesource.state.keyed_backend import KeyedBackendSnapshot, KeyedStateBackend
from statesource.state.operator_backend import OperatorStateBackend, OperatorStateSnapshot
from statesource.state.statetable import StateTableSnapshot


@dataclass(frozen=True)
class SubtaskBackends:
    """The state of one parallel subtask: keyed, operator, or both."""

    keyed: KeyedStateBackend | None = None
    operator: OperatorStateBackend | None = None


@dataclass(frozen=True)
class CheckpointInfo:
    """A committed checkpoint: where it is and what its metadata says."""

    location: Location
    metadata: CheckpointMeta

    @property
    def checkpoint_id(self) -> int:
        return self.metadata.checkpoint_id

    @property
    def path(self) -> str:
        return self.location.path


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
    """Writes checkpoints under one root directory, one at a time, in the background."""

    def __init__(self, root: str, filesystem: pafs.FileSystem | None = None) -> None:
        self.root = resolve(root, filesystem)
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="statesource-checkpoint"
        )
        self._in_flight: set[int] = set()

    def write(self, checkpoint_id: int, operators: Mapping[str, Sequence[Any]]) -> CheckpointInfo:
        """Snapshot and write synchronously; returns once the checkpoint is committed."""
        return self.write_async(checkpoint_id, operators).result()

    def write_async(self, checkpoint_id: int,
                    operators: Mapping[str, Sequence[Any]]) -> PendingCheckpoint:
        """Snapshot every backend now; write and commit in the background.

        ``operators`` maps an operator uid to its subtasks in index order; a
        subtask is a :class:`SubtaskBackends`, a ``KeyedStateBackend`` or an
        ``OperatorStateBackend``.
        """
        if type(checkpoint_id) is not int or checkpoint_id < 0:
            raise InvalidArgumentError(f"checkpoint id {checkpoint_id!r} must be an int >= 0")
        if not operators:
            raise InvalidArgumentError("nothing to checkpoint: no operators given")
        directory = self.root.child(checkpoint_dir_name(checkpoint_id))
        if checkpoint_id in self._in_flight or directory.child(METADATA_FILE).exists():
            raise InvalidArgumentError(f"checkpoint {checkpoint_id} already exists at {directory}")
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
        future = self._executor.submit(_write_checkpoint, directory, checkpoint_id,
                                       timestamp_ms, snapshots)
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
    snapshot = _OperatorSnapshot(uid, len(subtasks), len(subtasks), [], [])
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


def _write_checkpoint(directory: Location, checkpoint_id: int, timestamp_ms: int,
                      snapshots: list[_OperatorSnapshot]) -> CheckpointInfo:
    written: list[Location] = []
    try:
        data_dir = directory.child(DATA_DIR)
        data_dir.filesystem.create_dir(data_dir.path, recursive=True)
        operators = tuple(_write_operator(data_dir, snapshot, written) for snapshot in snapshots)
        metadata = CheckpointMeta(checkpoint_id, timestamp_ms, operators)
        write_atomically(directory.child(METADATA_FILE), metadata.to_json_bytes())
        return CheckpointInfo(directory, metadata)
    except BaseException:
        for location in written:
            with contextlib.suppress(OSError):  # a leftover is harmless: never listed, never read
                location.filesystem.delete_file(location.path)
        raise
    finally:
        for snapshot in snapshots:
            snapshot.close()


def _write_operator(data_dir: Location, snapshot: _OperatorSnapshot,
                    written: list[Location]) -> OperatorMeta:
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
        files = tuple(_write_keyed_file(data_dir, snapshot.uid, backend, state, written)
                      for backend, state in holders)
        keyed_states.append(KeyedStateMeta(
            name, declaration.kind, declaration.namespace_type, declaration.schemas,
            declaration.ttl, files,
        ))
    operator_states = _write_operator_states(data_dir, snapshot, written)
    key_type = snapshot.keyed[0].key_type if snapshot.keyed else None
    return OperatorMeta(snapshot.uid, snapshot.parallelism, snapshot.max_parallelism, key_type,
                        tuple(keyed_states), operator_states)


def _write_keyed_file(data_dir: Location, uid: str, backend: KeyedBackendSnapshot,
                      state: StateTableSnapshot, written: list[Location]) -> DataFile:
    declaration = state.descriptor
    encoder = RowEncoder(backend.key_type, declaration, expire_at_ms=backend.timestamp_ms)
    groups: list[tuple[int, int, int]] = []  # key group, rows, entries

    def batches_per_key_group() -> Iterator[list[pa.RecordBatch]]:
        for key_group, batches, rows, entries in encoder.encode(state, declaration.name):
            groups.append((key_group, rows, entries))
            yield batches

    payload, ranges = encode_file(encoder.schema, batches_per_key_group())
    key_range = backend.key_group_range
    path = _write_file(data_dir, f"{uid}.{declaration.name}.kg{key_range.start}-{key_range.end}",
                       payload, written)
    locations = tuple(
        KeyGroupLocation(key_group, r.batch_start, r.batch_count, r.offset, r.length, rows,
                         entries, r.crc32)
        for (key_group, rows, entries), r in zip(groups, ranges)
    )
    return DataFile(path, key_range, payload.size, locations)


def _write_operator_states(data_dir: Location, snapshot: _OperatorSnapshot,
                           written: list[Location]) -> tuple[OperatorStateMeta, ...]:
    by_name: dict[str, list[tuple[int, Any]]] = {}
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
        tables = [(subtask, operator_state_table(entry)) for subtask, entry in entries]
        try:
            payload, ranges = encode_file(tables[0][1].schema,
                                          ([b for b in t.to_batches() if b.num_rows]
                                           for _, t in tables))
        except pa.ArrowException as error:
            raise StateSourceError(f"operator state {name!r}: cannot encode: {error}") from None
        path = _write_file(data_dir, f"{snapshot.uid}.op.{name}", payload, written)
        partitions = tuple(
            SubtaskPartition(subtask, r.batch_start, r.batch_count, r.offset, r.length,
                             table.num_rows, r.crc32)
            for (subtask, table), r in zip(tables, ranges)
        )
        metas.append(OperatorStateMeta(name, first.mode, first.schemas, path, payload.size,
                                       partitions))
    return tuple(metas)


def _write_file(data_dir: Location, stem: str, payload: pa.Buffer,
                written: list[Location]) -> str:
    """Write a data file under a fresh name; returns its path relative to the checkpoint."""
    name = unique_data_file_name(stem)
    target = data_dir.child(name)
    written.append(target)
    with target.filesystem.open_output_stream(target.path) as out:
        out.write(payload)
    return f"{DATA_DIR}/{name}"

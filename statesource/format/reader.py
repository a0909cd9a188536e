"""Reading checkpoints without Spark: metadata, key-group ranges, checks and restore.

A reader trusts the metadata and nothing else: it reads only the files and
byte ranges the metadata lists, checks each range's CRC-32 before decoding,
and derives every Arrow schema from the declared types.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from statesource.errors import (
    CorruptCheckpointError,
    IncompatibleCheckpointError,
    InvalidArgumentError,
)
from statesource.format.columns import KEY_GROUP, data_schema, decode_entries
from statesource.format.ipc import ReadListener, read_ranges
from statesource.format.metadata import CheckpointMeta, KeyedStateMeta, OperatorMeta
from statesource.format.operator_columns import decode_operator_state, operator_state_schema
from statesource.format.storage import METADATA_FILE, Location, find_checkpoint, resolve
from statesource.keygroups import KeyGroupRange, check_parallelism, key_group_range_for_operator
from statesource.state.keyed_backend import KeyedStateBackend
from statesource.state.operator_backend import OperatorStateBackend
from statesource.state.redistribution import redistribute
from statesource.state.ttl import Clock


@dataclass(frozen=True)
class StateSummary:
    """One state of one operator, as listings and the metadata view show it."""

    checkpoint_id: int
    operator_uid: str
    parallelism: int
    max_parallelism: int
    state_name: str
    kind: str
    key_type: str | None
    value_types: dict[str, Any]
    entries: int
    rows: int
    size_bytes: int


class Checkpoint:
    """One committed checkpoint, opened by reading its metadata."""

    def __init__(self, location: Location, metadata: CheckpointMeta) -> None:
        self.location = location
        self.metadata = metadata

    @classmethod
    def open(cls, path: str, *, checkpoint_id: int | None = None,
             filesystem: pafs.FileSystem | None = None) -> Checkpoint:
        """Open the checkpoint at ``path``, or the newest complete one under it."""
        location = find_checkpoint(resolve(path, filesystem), checkpoint_id)
        metadata_file = location.child(METADATA_FILE)
        try:
            with metadata_file.filesystem.open_input_stream(metadata_file.path) as stream:
                payload = stream.read()
        except OSError as error:
            raise CorruptCheckpointError(f"cannot read metadata {metadata_file}: {error}") \
                from None
        metadata = CheckpointMeta.from_json_bytes(payload, str(metadata_file))
        if checkpoint_id is not None and metadata.checkpoint_id != checkpoint_id:
            raise CorruptCheckpointError(
                f"metadata {metadata_file} holds checkpoint {metadata.checkpoint_id},"
                f" not {checkpoint_id}"
            )
        return cls(location, metadata)

    @property
    def checkpoint_id(self) -> int:
        return self.metadata.checkpoint_id

    def operator(self, uid: str | None = None) -> OperatorMeta:
        return self.metadata.operator(uid)

    def summaries(self) -> list[StateSummary]:
        """One summary per keyed and operator state, operators in metadata order."""
        rows = []
        for op in self.metadata.operators:
            key_type = None if op.key_type is None else op.key_type.name
            for state in op.keyed_states:
                rows.append(StateSummary(
                    self.checkpoint_id, op.uid, op.parallelism, op.max_parallelism, state.name,
                    state.kind.value, key_type, {r: s.avro for r, s in state.schemas.items()},
                    state.entries, state.rows, state.size_bytes))
            for op_state in op.operator_states:
                rows.append(StateSummary(
                    self.checkpoint_id, op.uid, op.parallelism, op.max_parallelism,
                    op_state.name, f"operator-{op_state.mode.value}", None,
                    {r: s.avro for r, s in op_state.schemas.items()},
                    op_state.rows, op_state.rows, op_state.size_bytes))
        return rows

    # -- keyed state -----------------------------------------------------------------------

    def read_keyed_state(self, state: str | None = None, *, operator: str | None = None,
                         key_groups: KeyGroupRange | Collection[int] | None = None,
                         verify: bool = True,
                         listener: ReadListener | None = None) -> Iterator[pa.Table]:
        """One table per non-empty key group in ``key_groups`` (default: all), in order.

        ``key_groups`` is a range or any collection of key groups; only their
        byte ranges are read, adjacent ones with one request.
        """
        op = self.operator(operator)
        meta = op.keyed_state(state)
        schema = data_schema(op.keyed_key_type, meta.declaration())
        wanted = self._checked_range(op, key_groups)
        for data_file in meta.files:
            locations = [loc for loc in data_file.locations if loc.key_group in wanted]
            file = self.location.child(*data_file.path.split("/"))
            for batches in read_ranges(file, schema, locations, data_file.size_bytes, verify,
                                       listener):
                yield pa.Table.from_batches(batches, schema=schema)

    def _checked_range(self, op: OperatorMeta, key_groups: KeyGroupRange | Collection[int] | None
                       ) -> KeyGroupRange | Collection[int]:
        full = KeyGroupRange(0, op.max_parallelism - 1)
        if key_groups is None:
            return full
        if isinstance(key_groups, KeyGroupRange):
            outside = key_groups.intersection(full) != key_groups
        else:
            outside = any(kg not in full for kg in key_groups)
        if outside:
            shown = key_groups if isinstance(key_groups, KeyGroupRange) else sorted(key_groups)
            raise IncompatibleCheckpointError(
                f"key groups {shown} are outside operator {op.uid!r}'s key groups {full}"
                f" (max parallelism {op.max_parallelism})"
            )
        return key_groups

    def verify(self) -> None:
        """Read every listed byte range and check its checksum; raises on the first fault."""
        for op in self.metadata.operators:
            for state in op.keyed_states:
                for _ in self.read_keyed_state(state.name, operator=op.uid):
                    pass
            for op_state in op.operator_states:
                self.read_operator_state(op_state.name, operator=op.uid)

    def restore_keyed_backend(self, subtask_index: int, parallelism: int, *,
                              operator: str | None = None,
                              clock: Clock | None = None) -> KeyedStateBackend:
        """The keyed backend subtask ``subtask_index`` of ``parallelism`` starts from.

        Parallelism may differ from the checkpoint's: each subtask gets exactly
        the key groups Flink would assign it, read by byte range.
        """
        op = self.operator(operator)
        check_parallelism(parallelism, op.max_parallelism)
        owned = key_group_range_for_operator(op.max_parallelism, parallelism, subtask_index)
        backend = KeyedStateBackend(op.keyed_key_type, op.max_parallelism, owned, clock=clock)
        for meta in op.keyed_states:
            self._restore_state(backend, op, meta, owned)
        return backend

    def _restore_state(self, backend: KeyedStateBackend, op: OperatorMeta,
                       meta: KeyedStateMeta, owned: KeyGroupRange) -> None:
        declaration, key_type = meta.declaration(), op.keyed_key_type
        backend.restore_state(declaration, (
            (table.column(KEY_GROUP)[0].as_py(), decode_entries(key_type, declaration, table))
            for table in self.read_keyed_state(meta.name, operator=op.uid, key_groups=owned)
        ))

    # -- operator state --------------------------------------------------------------------

    def read_operator_state(self, name: str, *, operator: str | None = None,
                            verify: bool = True) -> list[list | dict]:
        """Each old subtask's share of operator state ``name``, in subtask order."""
        op = self.operator(operator)
        meta = op.operator_state(name)
        schema = operator_state_schema(meta.mode, meta.schemas)
        file = self.location.child(*meta.path.split("/"))
        shares: list[list | dict] = [decode_operator_state(meta.mode, meta.schemas, [])
                                     for _ in range(op.parallelism)]
        partitions = [p for p in meta.partitions if p.batch_count]
        for partition, batches in zip(partitions,
                                      read_ranges(file, schema, partitions, meta.size_bytes,
                                                  verify)):
            shares[partition.subtask] = decode_operator_state(meta.mode, meta.schemas, batches)
        return shares

    def restore_operator_backend(self, subtask_index: int, parallelism: int, *,
                                 operator: str | None = None) -> OperatorStateBackend:
        """The operator-state backend of subtask ``subtask_index`` under a new parallelism."""
        op = self.operator(operator)
        if type(parallelism) is not int or not 0 <= subtask_index < parallelism:
            raise InvalidArgumentError(
                f"subtask {subtask_index!r} is not an index of parallelism {parallelism!r}"
            )
        backend = OperatorStateBackend()
        for meta in op.operator_states:
            shares = self.read_operator_state(meta.name, operator=op.uid)
            share = redistribute(meta.mode, shares, parallelism)[subtask_index]
            backend.restore_state(meta.name, meta.mode, meta.schemas, share)
        return backend

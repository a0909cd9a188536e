"""A statesource checkpoint's keyed and operator state as a canonical Flink savepoint.

:func:`export_flink` writes a new canonical savepoint directory that a Flink 2.x
job restores: every operator of the checkpoint with state becomes a Flink
operator with the same uid (its name and uid in ``_metadata``, its id Flink's
hash of the uid), parallelism and max parallelism, with one keyed-state file per
subtask holding the key groups Flink assigns that subtask. Each file starts with
the header Flink writes (the key serializer and each state's meta info, derived
from the checkpoint's declarations by :mod:`statesource.flink.statefiles.state_meta_writer`),
then the canonical key groups, their pairs encoded from the checkpoint's rows by
:mod:`statesource.flink.layouts.canonical_entries` (TTL states keep their last-access
timestamps). Entries stay in the key groups the checkpoint stored them in: the
format assigns keys to key groups as Flink does.

An operator's operator states (split and union list states, broadcast states)
go into one operator-state file per subtask
(:mod:`statesource.flink.statefiles.operator_state_writer`),
every state in every subtask's file, with the share that subtask held: Flink
redistributes them at restore as it does its own. Their serializers are derived
from the states' value schemas. ``keyed_only=True`` leaves operator state out and
lists what it left out.

Every refusal happens before anything is written (a state whose Flink serializer
cannot be derived is refused naming the operator and the state), and the output
is published whole (:mod:`statesource.flink.snapshot.publish`).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass

from statesource.errors import IncompatibleCheckpointError, TypeMismatchError
from statesource.flink.handles import (
    KeyedHandle,
    OperatorHandle,
    OperatorSnapshot,
    SnapshotMetadata,
    SubtaskState,
    operator_id_of,
)
from statesource.flink.layouts.canonical_entries import StateEntries
from statesource.flink.layouts.canonical_writer import KeyGroupFramer, prefix_bytes
from statesource.flink.operations.rescale import CANONICAL_SAVEPOINT_PROPERTIES
from statesource.flink.serializers.base import FlinkType
from statesource.flink.serializers.java_values import timestamp_class_serializer
from statesource.flink.serializers.mapping import PojoClass
from statesource.flink.snapshot.compression import Compression, output_compressed
from statesource.flink.snapshot.publish import SavepointWriter, check_output
from statesource.flink.snapshot.versions import release_layout
from statesource.flink.statefiles.keyed_header import SUPPORTED_VERSIONS as HEADER_VERSIONS
from statesource.flink.statefiles.keyed_header import KeyedHeader, StateInfo
from statesource.flink.statefiles.operator_state_writer import (
    operator_state_info,
    write_operator_file,
)
from statesource.flink.statefiles.state_meta_writer import key_serializer, state_info
from statesource.format.columns import KEY_GROUP, decode_entries
from statesource.format.metadata import OperatorMeta
from statesource.format.reader import Checkpoint
from statesource.model import DistributionMode, Progress


@dataclass(frozen=True)
class ExportedOperator:
    """What the export wrote for one operator."""

    uid: str
    operator_id: str
    parallelism: int
    max_parallelism: int
    states: tuple[str, ...]
    entries: int
    """Canonical pairs written (one per value, list, map entry)."""
    key_groups: int
    """Non-empty key groups written."""
    bytes: int
    """Bytes of the keyed-state and operator-state files written."""
    operator_states: tuple[str, ...] = ()
    operator_elements: int = 0
    """Operator state written: list elements and broadcast entries, over all subtasks."""


@dataclass(frozen=True)
class ExportedSavepoint:
    """The new savepoint: where it is, and what it holds."""

    source: str
    output: str
    checkpoint_id: int
    operators: tuple[ExportedOperator, ...]
    skipped_operator_states: tuple[tuple[str, str], ...]
    """``(operator uid, state name)`` of the operator states left out (``keyed_only``)."""
    seconds: float
    compressed: bool = False
    """Whether its state files are Snappy-compressed."""

    @property
    def entries(self) -> int:
        return sum(op.entries for op in self.operators)


@dataclass(frozen=True)
class _Plan:
    op: OperatorMeta
    key: FlinkType | None
    states: tuple[StateInfo, ...]
    operator_states: tuple[StateInfo, ...] = ()
    compressed: bool = False


def export_flink(checkpoint_path: str | os.PathLike[str], output: str | os.PathLike[str], *,
                 checkpoint_id: int | None = None,
                 pojos: Mapping[str, PojoClass] | None = None, keyed_only: bool = False,
                 flink_version: str | None = None, timestamp_class: str | None = None,
                 progress: Progress | None = None,
                 compression: Compression | None = None) -> ExportedSavepoint:
    """Write the keyed and operator state of the statesource checkpoint at
    ``checkpoint_path`` (the newest under it, or ``checkpoint_id``) as a new canonical Flink
    savepoint directory ``output``.

    ``pojos`` declares the Java classes of record value schemas that are POJOs (see
    :func:`~statesource.flink.statefiles.state_meta_writer.state_info`). The savepoint is
    for Flink ``flink_version`` (``"1.20"``, ``"2.3"``; default the newest): its
    ``_metadata`` version, and serializers as that release derives them. Its checkpoint id
    is the checkpoint's.

    Avro logical types are the Java classes Avro maps them to, with Flink's serializers of
    them (``date`` ``LocalDate``, ``time-*`` ``LocalTime``, ``decimal`` ``BigDecimal``);
    timestamps are ``Instant`` (``timestamp-*``) and ``LocalDateTime``
    (``local-timestamp-*``) unless ``timestamp_class`` is ``"LocalDateTime"``,
    ``"Instant"`` or ``"Timestamp"`` (``java.sql.Timestamp``) for all of them. ``uuid`` is
    refused: Flink writes ``java.util.UUID`` with Kryo.

    ``compression="snappy"`` compresses the keyed and operator state as a job with
    ``execution.checkpointing.snapshot-compression`` does (default ``"none"``: the
    checkpoint has no Flink compression to keep).

    Refused, with nothing written: an ``output`` that exists
    (:class:`~statesource.errors.CheckpointExistsError`); a key type or a state whose
    Flink serializer statesource cannot derive, keyed or operator state
    (:class:`TypeMismatchError` naming the operator and the state). ``keyed_only`` leaves
    the operator states out (listed in ``skipped_operator_states``).
    """
    started = time.perf_counter()
    report = progress or (lambda _: None)
    layout = release_layout(flink_version)
    timestamp_class_serializer(timestamp_class)  # a wrong name is refused before anything
    compressed = output_compressed(compression, False)
    check_output(output)  # refused before the checkpoint is even read
    checkpoint = Checkpoint.open(checkpoint_path, checkpoint_id=checkpoint_id)
    skipped: list[tuple[str, str]] = []
    plans = []
    for op in checkpoint.metadata.operators:
        if keyed_only:
            skipped += [(op.uid, s.name) for s in op.operator_states]
        if op.keyed_states or (op.operator_states and not keyed_only):
            plans.append(dataclasses.replace(
                _plan(op, pojos, not keyed_only, layout.flink_major, timestamp_class),
                compressed=compressed))
    exported = []
    with SavepointWriter(output) as writer:
        operators = []
        for plan in plans:
            report(f"operator {plan.op.uid}: {len(plan.states)} keyed states,"
                   f" {len(plan.operator_states)} operator states, parallelism"
                   f" {plan.op.parallelism}, max parallelism {plan.op.max_parallelism}")
            snapshot, done = _export_operator(checkpoint, writer, plan)
            recorded = layout.recorded_uid(plan.op.uid)
            operators.append(dataclasses.replace(snapshot, name=recorded, uid=recorded))
            exported.append(done)
        metadata = SnapshotMetadata(
            layout.version, checkpoint.checkpoint_id, tuple(operators), (),
            CANONICAL_SAVEPOINT_PROPERTIES if layout.properties else b"")
        published = writer.publish(metadata)
    return ExportedSavepoint(str(checkpoint.location), str(published), checkpoint.checkpoint_id,
                             tuple(exported), tuple(skipped), time.perf_counter() - started,
                             compressed)


def _plan(op: OperatorMeta, pojos: Mapping[str, PojoClass] | None,
          with_operator_state: bool, flink_major: int,
          timestamp_class: str | None = None) -> _Plan:
    where = f"operator {op.uid!r}"
    key = None
    if op.keyed_states:
        try:
            key = key_serializer(op.keyed_key_type)
        except TypeMismatchError as error:
            raise TypeMismatchError(f"{where}, key type {op.keyed_key_type}: {error}") from None
    states = []
    for state_id, meta in enumerate(op.keyed_states):
        try:
            states.append(state_info(meta.declaration, state_id, pojos=pojos,
                                     flink_major=flink_major,
                                     timestamp_class=timestamp_class))
        except TypeMismatchError as error:
            raise TypeMismatchError(
                f"{where}: {error}; Flink's serializer of this state cannot be derived, so it"
                " cannot be exported") from None
    operator_states = []
    for op_state in op.operator_states if with_operator_state else ():
        try:
            operator_states.append(operator_state_info(op_state.name, op_state.mode,
                                                       op_state.schemas, pojos,
                                                       flink_major, timestamp_class))
        except TypeMismatchError as error:
            raise TypeMismatchError(
                f"{where}: {error}; Flink's serializer of this operator state cannot be"
                " derived, so it cannot be exported") from None
    return _Plan(op, key, tuple(states), tuple(operator_states))


def _export_operator(checkpoint: Checkpoint, writer: SavepointWriter, plan: _Plan
                     ) -> tuple[OperatorSnapshot, ExportedOperator]:
    op = plan.op
    keyed: list[tuple[KeyedHandle, ...]] = [() for _ in range(op.parallelism)]
    entries = written_groups = written = 0
    if plan.key is not None:
        handles, entries, written_groups = _export_keyed(checkpoint, writer, plan, plan.key)
        keyed = [(handle,) for handle in handles]
        written += sum(handle.stream.size for handle in handles)
    operator: list[tuple[OperatorHandle, ...]] = [() for _ in range(op.parallelism)]
    elements = 0
    if plan.operator_states:
        handles_, elements = _export_operator_state(checkpoint, writer, plan)
        operator = [(handle,) for handle in handles_]
        written += sum(handle.stream.size for handle in handles_)
    subtasks = [SubtaskState(index, keyed[index], operator[index])
                for index in range(op.parallelism)]
    operator_id = operator_id_of(op.uid)
    snapshot = OperatorSnapshot(op.uid, op.uid, operator_id, op.parallelism, op.max_parallelism,
                                tuple(subtasks))
    return snapshot, ExportedOperator(op.uid, operator_id, op.parallelism, op.max_parallelism,
                                      tuple(s.name for s in plan.states), entries,
                                      written_groups, written,
                                      tuple(s.name for s in plan.operator_states), elements)


def _export_keyed(checkpoint: Checkpoint, writer: SavepointWriter, plan: _Plan, key: FlinkType
                  ) -> tuple[list[KeyedHandle], int, int]:
    op = plan.op
    max_parallelism = op.max_parallelism
    skip = prefix_bytes(max_parallelism)
    framers: dict[int, KeyGroupFramer] = {}
    entries = 0
    for info, meta in zip(plan.states, op.keyed_states):
        declaration = meta.declaration
        encoder = StateEntries(key, info, max_parallelism)
        for table in checkpoint.read_keyed_state(meta.name, operator=op.uid):
            key_group = table.column(KEY_GROUP)[0].as_py()
            framer = framers.get(key_group)
            for k, namespace, stored in decode_entries(op.keyed_key_type, declaration, table):
                for composite, value in encoder.pairs(k, namespace, stored, key_group):
                    if framer is None:  # created at its first pair: no empty key group
                        framer = framers[key_group] = KeyGroupFramer(key_group, max_parallelism)
                    framer.add(info.state_id, composite[skip:], value)
                    entries += 1
    header = KeyedHeader(HEADER_VERSIONS[-1], plan.compressed, key, plan.states, 0)
    written_groups = len(framers)
    handles = writer.write_keyed_files(header, framers, max_parallelism, op.parallelism)
    if framers:
        raise IncompatibleCheckpointError(
            f"operator {op.uid!r} holds key groups {sorted(framers)[:10]} outside 0 .."
            f" {max_parallelism - 1}")
    return handles, entries, written_groups


def _export_operator_state(checkpoint: Checkpoint, writer: SavepointWriter, plan: _Plan
                           ) -> tuple[list[OperatorHandle], int]:
    """One operator-state file per subtask, every state in it with the subtask's share."""
    op = plan.op
    shares = {info.name: checkpoint.read_operator_state(info.name, operator=op.uid)
              for info in plan.operator_states}
    handles = []
    elements = 0
    for index in range(op.parallelism):
        lists = []
        broadcasts = []
        for info, meta in zip(plan.operator_states, op.operator_states):
            share = shares[info.name][index]
            elements += len(share)
            if meta.mode is DistributionMode.BROADCAST:
                assert isinstance(share, dict)
                broadcasts.append((info, share))
            else:
                lists.append((info, share))
        data, offsets = write_operator_file(lists, broadcasts, plan.compressed)
        handles.append(OperatorHandle(offsets, writer.write_file(data)))
    return handles, elements

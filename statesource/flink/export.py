"""A statesource checkpoint's keyed state as a canonical Flink savepoint.

:func:`export_flink` writes a new canonical savepoint directory that a Flink 2.x
job restores: every operator of the checkpoint with keyed state becomes a Flink
operator with the same uid (its name and uid in ``_metadata``, its id Flink's
hash of the uid), parallelism and max parallelism, with one keyed-state file per
subtask holding the key groups Flink assigns that subtask. Each file starts with
the header Flink writes (the key serializer and each state's meta info, derived
from the checkpoint's declarations by :mod:`statesource.flink.state_meta_writer`),
then the canonical key groups, their pairs encoded from the checkpoint's rows by
:mod:`statesource.flink.canonical_entries` (TTL states keep their last-access
timestamps). Entries stay in the key groups the checkpoint stored them in: the
format assigns keys to key groups as Flink does.

Operator state is not written: an operator with operator state is refused,
naming it and its states, unless ``keyed_only=True``, which exports its keyed
state alone and lists what it left out.

Every refusal happens before anything is written (a state whose Flink serializer
cannot be derived is refused naming the operator and the state), and the output
is published whole (:mod:`statesource.flink.publish`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from statesource.errors import IncompatibleCheckpointError, TypeMismatchError
from statesource.flink.canonical_entries import StateEntries
from statesource.flink.canonical_writer import KeyGroupFramer, prefix_bytes
from statesource.flink.flink_type import FlinkType
from statesource.flink.header import SUPPORTED_VERSIONS as HEADER_VERSIONS
from statesource.flink.header import KeyedHeader, StateInfo
from statesource.flink.header_writer import write_keyed_header
from statesource.flink.metadata import SUPPORTED_VERSIONS as METADATA_VERSIONS
from statesource.flink.metadata import (
    OperatorSnapshot,
    SnapshotMetadata,
    SubtaskState,
    operator_id_of,
)
from statesource.flink.publish import SavepointWriter, check_output
from statesource.flink.rescale import CANONICAL_SAVEPOINT_PROPERTIES
from statesource.flink.serializer_mapping import PojoClass
from statesource.flink.state_meta_writer import key_serializer, state_info
from statesource.format.columns import KEY_GROUP, decode_entries
from statesource.format.metadata import OperatorMeta
from statesource.format.reader import Checkpoint

Progress = Callable[[str], None]


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
    """Bytes of the keyed-state files written."""


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

    @property
    def entries(self) -> int:
        return sum(op.entries for op in self.operators)


@dataclass(frozen=True)
class _Plan:
    op: OperatorMeta
    key: FlinkType
    states: tuple[StateInfo, ...]


def export_flink(checkpoint_path: str | os.PathLike[str], output: str | os.PathLike[str], *,
                 checkpoint_id: int | None = None,
                 pojos: Mapping[str, PojoClass] | None = None, keyed_only: bool = False,
                 progress: Progress | None = None) -> ExportedSavepoint:
    """Write the keyed state of the statesource checkpoint at ``checkpoint_path`` (the newest
    under it, or ``checkpoint_id``) as a new canonical Flink savepoint directory ``output``.

    ``pojos`` declares the Java classes of record value schemas that are POJOs (see
    :func:`~statesource.flink.state_meta_writer.state_info`). The savepoint's checkpoint id
    is the checkpoint's.

    Refused, with nothing written: an ``output`` that exists
    (:class:`~statesource.errors.CheckpointExistsError`); a key type or a state whose
    Flink serializer statesource cannot derive (:class:`TypeMismatchError` naming the
    operator and the state); operator state, unless ``keyed_only``
    (:class:`IncompatibleCheckpointError` naming the operator and its states).
    """
    started = time.perf_counter()
    report = progress or (lambda _: None)
    check_output(output)  # refused before the checkpoint is even read
    checkpoint = Checkpoint.open(checkpoint_path, checkpoint_id=checkpoint_id)
    skipped: list[tuple[str, str]] = []
    plans = []
    for op in checkpoint.metadata.operators:
        if op.operator_states:
            names = [s.name for s in op.operator_states]
            if not keyed_only:
                raise IncompatibleCheckpointError(
                    f"operator {op.uid!r} has operator state {names}, which statesource does"
                    " not write into Flink savepoints yet: export its keyed state alone with"
                    " keyed_only=True (--keyed-only), or drop the operator state first")
            skipped += [(op.uid, name) for name in names]
        if op.keyed_states:
            plans.append(_plan(op, pojos))
    exported = []
    with SavepointWriter(output) as writer:
        operators = []
        for plan in plans:
            report(f"operator {plan.op.uid}: {len(plan.states)} keyed states, parallelism"
                   f" {plan.op.parallelism}, max parallelism {plan.op.max_parallelism}")
            snapshot, done = _export_operator(checkpoint, writer, plan)
            operators.append(snapshot)
            exported.append(done)
        metadata = SnapshotMetadata(METADATA_VERSIONS[-1], checkpoint.checkpoint_id,
                                    tuple(operators), (), CANONICAL_SAVEPOINT_PROPERTIES)
        published = writer.publish(metadata)
    return ExportedSavepoint(str(checkpoint.location), str(published), checkpoint.checkpoint_id,
                             tuple(exported), tuple(skipped), time.perf_counter() - started)


def _plan(op: OperatorMeta, pojos: Mapping[str, PojoClass] | None) -> _Plan:
    where = f"operator {op.uid!r}"
    try:
        key = key_serializer(op.keyed_key_type)
    except TypeMismatchError as error:
        raise TypeMismatchError(f"{where}, key type {op.keyed_key_type}: {error}") from None
    states = []
    for state_id, meta in enumerate(op.keyed_states):
        try:
            states.append(state_info(meta.declaration, state_id, pojos=pojos))
        except TypeMismatchError as error:
            raise TypeMismatchError(
                f"{where}: {error}; Flink's serializer of this state cannot be derived, so it"
                " cannot be exported") from None
    return _Plan(op, key, tuple(states))


def _export_operator(checkpoint: Checkpoint, writer: SavepointWriter, plan: _Plan
                     ) -> tuple[OperatorSnapshot, ExportedOperator]:
    op = plan.op
    max_parallelism = op.max_parallelism
    skip = prefix_bytes(max_parallelism)
    framers: dict[int, KeyGroupFramer] = {}
    entries = 0
    for info, meta in zip(plan.states, op.keyed_states):
        declaration = meta.declaration
        encoder = StateEntries(plan.key, info, max_parallelism)
        for table in checkpoint.read_keyed_state(meta.name, operator=op.uid):
            key_group = table.column(KEY_GROUP)[0].as_py()
            framer = framers.get(key_group)
            for key, namespace, stored in decode_entries(op.keyed_key_type, declaration, table):
                for composite, value in encoder.pairs(key, namespace, stored, key_group):
                    if framer is None:  # created at its first pair: no empty key group
                        framer = framers[key_group] = KeyGroupFramer(key_group, max_parallelism)
                    framer.add(info.state_id, composite[skip:], value)
                    entries += 1
    header = write_keyed_header(KeyedHeader(HEADER_VERSIONS[-1], False, plan.key, plan.states, 0))
    written_groups = len(framers)
    handles = writer.write_keyed_files(header, framers, max_parallelism, op.parallelism)
    subtasks = [SubtaskState(index, (keyed,), ()) for index, keyed in enumerate(handles)]
    written = sum(keyed.stream.size for keyed in handles)
    if framers:
        raise IncompatibleCheckpointError(
            f"operator {op.uid!r} holds key groups {sorted(framers)[:10]} outside 0 .."
            f" {max_parallelism - 1}")
    operator_id = operator_id_of(op.uid)
    snapshot = OperatorSnapshot(op.uid, op.uid, operator_id, op.parallelism, max_parallelism,
                                tuple(subtasks))
    return snapshot, ExportedOperator(op.uid, operator_id, op.parallelism, max_parallelism,
                                      tuple(s.name for s in plan.states), entries,
                                      written_groups, written)

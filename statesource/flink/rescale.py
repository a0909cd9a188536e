"""A Flink savepoint under a new max parallelism: every key and timer re-keyed as Flink does.

Flink cannot change a job's max parallelism: it restores state only into a job
with the max parallelism the state was written with, because every key's key
group (murmur hash of the key's Java ``hashCode``, modulo the max parallelism)
is part of how the state is stored. :func:`rescale_max_parallelism` writes a
new canonical savepoint in which every entry of every keyed state, and every
timer, lies in the key group of its key under the new max parallelism, so a job
configured with ``pipeline.max-parallelism`` = the new value restores it.

Only keys are decoded. Each pair of a canonical key group is a composite key
(key-group prefix, key, namespace, map user key) and a value: the key is read
with the key serializer of the file's header (for timers, after the 8-byte
timestamp the timer's key starts with), its new key group computed with
:mod:`statesource.keygroups`, and the pair moved there with the new prefix (one
byte up to max parallelism 128, else two); the rest of the composite key and the
value are moved as bytes, so state with Kryo, Avro or unknown value serializers
rescales too. Every key is also checked against the key group it was read
from: a key whose hash does not give it back (statesource's hash of its type
would disagree with the job's) is refused rather than written where the job
would never find it.

Native savepoints and checkpoints of the heap backend are converted on the way:
their entries are delimited with the serializers of the header (values decoded
only to find where they end) and laid out as a canonical savepoint lays them
out; states with Kryo values cannot be delimited there, and are refused.

What is carried over: the serializer snapshots (each file's header is written
back byte for byte, uncompressed), operator state, raw operator state and
coordinator state (their files copied, Flink redistributes operator state at
restore), stateless operators, master states, the checkpoint id and, for a
canonical savepoint, its checkpoint properties. Each operator with keyed state
gets one keyed-state file per subtask, with the key-group ranges Flink assigns
at its (new) parallelism. Every refusal happens before anything is written, and
the output is published whole (:mod:`statesource.flink.publish`).
"""

from __future__ import annotations

import base64
import dataclasses
import os
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from statesource.errors import (
    CorruptCheckpointError,
    IncompatibleCheckpointError,
    InvalidArgumentError,
    TypeMismatchError,
)
from statesource.flink.binary import BinaryReader
from statesource.flink.canonical_writer import KeyGroupFramer, prefix_bytes
from statesource.flink.declarations import native_blockers
from statesource.flink.encoders import encode
from statesource.flink.flink_type import FlinkType
from statesource.flink.header import SUPPORTED_VERSIONS as HEADER_VERSIONS
from statesource.flink.header import KeyedHeader, StateInfo, same_state
from statesource.flink.header_writer import write_keyed_header
from statesource.flink.keyed import (
    END_OF_KEY_GROUP,
    META_DATA_FOLLOWS,
    check_key_group_range,
    native_key_group_reader,
    variable_int_bytes,
)
from statesource.flink.metadata import (
    KeyedHandle,
    OperatorHandle,
    OperatorSnapshot,
    SnapshotMetadata,
    StreamHandle,
    SubtaskState,
)
from statesource.flink.publish import SavepointWriter, check_output
from statesource.flink.regroup import Regrouper
from statesource.flink.serializers import ListType, MapType
from statesource.flink.snappy import unframe
from statesource.flink.snapshot import FlinkSnapshot
from statesource.flink.staged import StagedState
from statesource.flink.vectors import decoder_for
from statesource.keyequality import decoded_key_canonicalizer, key_canonicalizer
from statesource.keygroups import (
    check_max_parallelism,
    check_parallelism,
    murmur_hash,
)
from statesource.model import Progress, StateKind
from statesource.types import DataType

_INT_AT = struct.Struct(">i").unpack_from
_USHORT_AT = struct.Struct(">H").unpack_from

Pairs = list[tuple[bytes, bytes]]
"""``(composite key without its key-group prefix, value)`` pairs of one state."""

TIMER_KEY_OFFSET = 8
"""A timer's composite key holds the timer: its sign-flipped timestamp (a long), then the key."""

CANONICAL_SAVEPOINT_PROPERTIES = base64.b64decode(
    "rO0ABXNyADhvcmcuYXBhY2hlLmZsaW5rLnJ1bnRpbWUuY2hlY2twb2ludC5DaGVja3BvaW50UHJvcGVydGllcwAA"
    "AAAAAAACAgAIWgAQZGlzY2FyZENhbmNlbGxlZFoADWRpc2NhcmRGYWlsZWRaAA9kaXNjYXJkRmluaXNoZWRaAA9k"
    "aXNjYXJkU3Vic3VtZWRaABBkaXNjYXJkU3VzcGVuZGVkWgAGZm9yY2VkWgAJdW5jbGFpbWVkTAAOY2hlY2twb2lu"
    "dFR5cGV0ADJMb3JnL2FwYWNoZS9mbGluay9ydW50aW1lL2NoZWNrcG9pbnQvU25hcHNob3RUeXBlO3hwAAAAAAAB"
    "AHNyADFvcmcuYXBhY2hlLmZsaW5rLnJ1bnRpbWUuY2hlY2twb2ludC5TYXZlcG9pbnRUeXBloIfTCKRYFLgCAANM"
    "AApmb3JtYXRUeXBldAA1TG9yZy9hcGFjaGUvZmxpbmsvY29yZS9leGVjdXRpb24vU2F2ZXBvaW50Rm9ybWF0VHlw"
    "ZTtMAARuYW1ldAASTGphdmEvbGFuZy9TdHJpbmc7TAAUcG9zdENoZWNrcG9pbnRBY3Rpb250AEhMb3JnL2FwYWNo"
    "ZS9mbGluay9ydW50aW1lL2NoZWNrcG9pbnQvU2F2ZXBvaW50VHlwZSRQb3N0Q2hlY2twb2ludEFjdGlvbjt4cH5y"
    "ADNvcmcuYXBhY2hlLmZsaW5rLmNvcmUuZXhlY3V0aW9uLlNhdmVwb2ludEZvcm1hdFR5cGUAAAAAAAAAABIAAHhy"
    "AA5qYXZhLmxhbmcuRW51bQAAAAAAAAAAEgAAeHB0AAlDQU5PTklDQUx0AAlTYXZlcG9pbnR+cgBGb3JnLmFwYWNo"
    "ZS5mbGluay5ydW50aW1lLmNoZWNrcG9pbnQuU2F2ZXBvaW50VHlwZSRQb3N0Q2hlY2twb2ludEFjdGlvbgAAAAAA"
    "AAAAEgAAeHEAfgAJdAAETk9ORQ=="
)
"""Flink 2.x's ``CheckpointProperties`` of a canonical savepoint (Java serialization), as a
savepoint taken with ``flink savepoint`` records them: what a snapshot converted from the
native format says it is."""


def is_canonical_savepoint(properties: bytes) -> bool:
    """Whether serialized ``CheckpointProperties`` say: a savepoint, in the canonical format."""
    return (b"org.apache.flink.runtime.checkpoint.SavepointType" in properties
            and b"t\x00\tCANONICAL" in properties)


@dataclass(frozen=True)
class RescaledOperator:
    """What the rescale did to one operator with keyed state."""

    operator: str
    max_parallelism: int
    parallelism: int
    new_max_parallelism: int
    new_parallelism: int
    entries: int
    """Canonical pairs moved (one per value-state entry, list, map user key and timer)."""
    timers: int
    key_groups: int
    """Non-empty key groups written."""
    bytes: int
    """Bytes of the keyed-state files written."""
    removed: tuple[tuple[str, int], ...] = ()
    """Per state (header name), the pairs left out: of the erased keys, or of a dropped
    state (an edit, :mod:`statesource.flink.edit`)."""
    erased: tuple[int, ...] = ()
    """Which of the keys to erase (their positions) this operator's state held."""
    operator_id: str = ""


@dataclass(frozen=True)
class RescaledSavepoint:
    """The new savepoint: where it is, and what was re-keyed."""

    source: str
    output: str
    checkpoint_id: int
    max_parallelism: int | None
    """The new max parallelism; None for an edit (every operator keeps its own)."""
    operators: tuple[RescaledOperator, ...]
    """The operators with keyed state, in ``_metadata`` order."""
    converted: bool
    """Whether keyed state was converted from the native format."""
    seconds: float

    @property
    def entries(self) -> int:
        return sum(op.entries for op in self.operators)


def rescale_max_parallelism(source: str | os.PathLike[str], output: str | os.PathLike[str],
                            max_parallelism: int, *, parallelism: int | None = None,
                            checkpoint_id: int | None = None,
                            progress: Progress | None = None) -> RescaledSavepoint:
    """Write the Flink savepoint or checkpoint at ``source`` as a new canonical savepoint
    directory ``output`` with every operator's max parallelism ``max_parallelism``.

    ``parallelism`` (default: each operator's own) is the parallelism recorded for the
    operators with keyed state, whose key groups are split into that many files; Flink
    re-splits them for whatever parallelism the restoring job has. ``checkpoint_id`` picks
    a ``chk-<id>`` directory when ``source`` holds several.

    The output's checkpoint properties are the source's when it is a canonical savepoint,
    else those of one (a native savepoint or a checkpoint is converted).

    Refused, with nothing written: an ``output`` that exists
    (:class:`~statesource.errors.CheckpointExistsError`), a max parallelism outside
    1..32768 or below an operator's parallelism, a key type statesource cannot hash as
    Flink does, raw keyed state, Kryo values in a native snapshot.
    """
    check_max_parallelism(max_parallelism)
    if parallelism is not None:
        check_parallelism(parallelism, max_parallelism)
    return rewrite_savepoint(source, output, max_parallelism, parallelism=parallelism,
                             checkpoint_id=checkpoint_id, progress=progress)


@dataclass(frozen=True)
class Edit:
    """What an edit changes in one operator, every other operator carried over as it is."""

    operator: str
    """The operator's uid (or hex id)."""
    erase: tuple[Any, ...] = ()
    """Keys, as Python values of the operator's key type, whose every entry and timer go."""
    drops: tuple[str, ...] = ()
    """Keyed states, timer states or operator states that go."""
    staged: tuple[StagedState, ...] = ()
    """Keyed states whose pairs are replaced by (or, new, made of) staged sections."""
    key: FlinkType | None = None
    """The key serializer of an operator that gets its first keyed state (``staged``)."""


REPLACED = -2
"""Where a state's pairs go when the edit stages new ones for it: nowhere, uncounted."""


def rewrite_savepoint(source: str | os.PathLike[str], output: str | os.PathLike[str],
                      max_parallelism: int | None, *, parallelism: int | None = None,
                      checkpoint_id: int | None = None, progress: Progress | None = None,
                      edit: Edit | None = None) -> RescaledSavepoint:
    """The one pass behind a new max parallelism and an edit: every keyed operator's pairs
    walked into new canonical keyed-state files, published whole as ``output``.

    ``max_parallelism`` None keeps each operator's own; with an ``edit`` only its operator
    is walked (converted when native), the others' files copied byte for byte.
    """
    started = time.perf_counter()
    check_output(output)  # refused before the source is even read
    snapshot = FlinkSnapshot.open(os.fspath(source), checkpoint_id=checkpoint_id)
    rewrite = SavepointRewrite.plan(snapshot, max_parallelism, parallelism,
                                    () if edit is None else (edit,))
    with SavepointWriter(output) as writer:
        operators, rescaled = rewrite.write(writer, progress)
        published = writer.publish(rewrite.metadata(operators))
    return RescaledSavepoint(str(snapshot.location), str(published), snapshot.checkpoint_id,
                             max_parallelism, tuple(rescaled), rewrite.converted,
                             time.perf_counter() - started)


@dataclass(frozen=True)
class SavepointRewrite:
    """Every operator of a snapshot planned for a rewrite (all checks done), then written."""

    snapshot: FlinkSnapshot
    plans: tuple[_Plan, ...]

    @classmethod
    def plan(cls, snapshot: FlinkSnapshot, max_parallelism: int | None,
             parallelism: int | None = None, edits: Sequence[Edit] = (),
             dropped: Sequence[str] = ()) -> SavepointRewrite:
        """Plan each operator but the ``dropped`` ones (uids or hex ids); ``edits`` name
        operators of the snapshot, at most one edit each."""
        by_label: dict[str, Edit] = {}
        for edit in edits:
            by_label[find_operator(snapshot, edit.operator).label] = edit
        gone = {find_operator(snapshot, label).label for label in dropped}
        return cls(snapshot, tuple(
            _plan(snapshot, op, max_parallelism, parallelism, by_label.get(op.label))
            for op in snapshot.operators if op.label not in gone))

    @property
    def converted(self) -> bool:
        """Whether keyed state is converted from the native format."""
        return any(not h.savepoint for plan in self.plans for h in plan.handles)

    def write(self, writer: SavepointWriter, progress: Progress | None = None
              ) -> tuple[list[OperatorSnapshot], list[RescaledOperator]]:
        """Each operator's files into ``writer``: the new operators, and what was rewritten."""
        report = progress or (lambda _: None)
        copies = _FileCopies(self.snapshot, writer)
        operators, rescaled = [], []
        for plan in self.plans:
            if plan.header is None:
                operators.append(_carried(plan, copies))
                continue
            report(f"operator {plan.op.label}: max parallelism {plan.op.max_parallelism} ->"
                   f" {plan.max_parallelism}, parallelism {plan.op.parallelism} ->"
                   f" {plan.parallelism}")
            op, done = _rescaled(self.snapshot, writer, plan, copies)
            operators.append(op)
            rescaled.append(done)
        return operators, rescaled

    def metadata(self, operators: Sequence[OperatorSnapshot]) -> SnapshotMetadata:
        """The new ``_metadata``: the snapshot's, with ``operators``; the properties of a
        canonical savepoint unless the source is one and nothing was converted."""
        properties = self.snapshot.metadata.properties
        if self.converted or not is_canonical_savepoint(properties):
            properties = CANONICAL_SAVEPOINT_PROPERTIES
        return dataclasses.replace(self.snapshot.metadata, operators=tuple(operators),
                                   properties=properties)


def find_operator(snapshot: FlinkSnapshot, label: str) -> OperatorSnapshot:
    """The operator of uid or hex id ``label``; an error naming the others."""
    for op in snapshot.operators:
        if label in (op.label, op.operator_id):
            return op
    names = ", ".join(sorted(op.label for op in snapshot.operators))
    raise InvalidArgumentError(
        f"{snapshot.location} has no operator {label!r}; its operators are: {names}")


# -- planning: every check before anything is written ------------------------------------


@dataclass(frozen=True)
class _KeyedInput:
    """One keyed-state file of the source, and where its state ids go in the written header
    (-1: a dropped state, left out)."""

    handle: KeyedHandle
    header: KeyedHeader
    state_ids: tuple[int, ...]


@dataclass(frozen=True)
class _Plan:
    op: OperatorSnapshot
    max_parallelism: int
    parallelism: int
    header: KeyedHeader | None
    """The header every written keyed-state file gets; None for an operator whose files are
    carried over (no keyed state, or not the edited operator of a canonical savepoint)."""
    inputs: tuple[_KeyedInput, ...] = ()
    key_type: DataType | None = None
    """The type keys are hashed as, when they are (a new max parallelism, or checked while
    erasing keys); None: keys stay in their key group."""
    erase: tuple[Any, ...] = ()
    """The erased keys' Java-equality forms."""
    dropped_operator_states: tuple[str, ...] = ()
    staged: tuple[tuple[int, StagedState], ...] = ()
    """Staged states by their id in ``header``."""

    @property
    def handles(self) -> tuple[KeyedHandle, ...]:
        return tuple(i.handle for i in self.inputs)


def _plan(snapshot: FlinkSnapshot, op: OperatorSnapshot, max_parallelism: int | None,
          parallelism: int | None, edit: Edit | None = None) -> _Plan:
    where = f"operator {op.label!r}"
    handles = snapshot.keyed_handles(op)
    if max_parallelism is None:  # an edit: the max parallelism and parallelism stay
        if edit is None:  # its files copied: Flink picks how to restore per keyed handle
            return _Plan(op, op.max_parallelism, op.parallelism, None)
        return _edit_plan(snapshot, op, edit, where, handles)
    if any(s.raw_keyed for s in op.subtasks):
        raise IncompatibleCheckpointError(
            f"{where} has raw keyed state (written by the operator's own code, in its own"
            " format), which cannot be re-keyed: its max parallelism cannot change")
    new_parallelism = parallelism if parallelism is not None and handles else op.parallelism
    if new_parallelism > max_parallelism:
        raise InvalidArgumentError(
            f"{where} has parallelism {new_parallelism}, above the new max parallelism"
            f" {max_parallelism}: a max parallelism is at least the parallelism")
    if not handles:
        return _Plan(op, max_parallelism, new_parallelism, None)
    held = sorted(s.index for s in op.subtasks
                  if (s.operator or s.raw_operator) and s.index >= new_parallelism)
    if held:
        raise InvalidArgumentError(
            f"{where} holds operator state in subtasks {held}, which a parallelism of"
            f" {new_parallelism} does not have: keep its parallelism ({op.parallelism}); Flink"
            " redistributes keyed and operator state for the parallelism of the job that"
            " restores the savepoint")
    header, inputs = _merged_header(snapshot, where, handles)
    key_type = _key_type(where, header.key)
    _check_native(where, header, handles)
    return _Plan(op, max_parallelism, new_parallelism, header, inputs, key_type)


def _check_native(where: str, header: KeyedHeader, handles: Sequence[KeyedHandle]) -> None:
    if not all(h.savepoint for h in handles):
        for name, reason in native_blockers(header).items():
            raise IncompatibleCheckpointError(
                f"{where}, state {name!r} of a native snapshot: {reason}; take a canonical"
                " savepoint (flink savepoint --type canonical) to rewrite it")


def _edit_plan(snapshot: FlinkSnapshot, op: OperatorSnapshot, edit: Edit, where: str,
               handles: Sequence[KeyedHandle]) -> _Plan:
    """The edited operator: its keys checked against its key type, its dropped states found,
    its staged states placed in the header (a replaced one keeps its meta info)."""
    operator_states = sorted({s.name for sub in op.subtasks for h in sub.operator
                              for s in h.states})
    header: KeyedHeader | None = None
    inputs: tuple[_KeyedInput, ...] = ()
    if handles:
        header, inputs = _merged_header(snapshot, where, handles)
        _check_native(where, header, handles)
    elif edit.staged and edit.key is not None:
        header = KeyedHeader(HEADER_VERSIONS[-1], False, edit.key, (), 0)
    dropped_operator_states = []
    for name in edit.drops:
        names = [info.name for info in header.states] if header is not None else []
        if name in names:
            assert header is not None
            header, inputs = _without_state(header, inputs, names.index(name))
        elif name in operator_states:
            dropped_operator_states.append(name)
        elif header is None:
            raise InvalidArgumentError(
                f"{where} has no keyed state"
                + (f"; its operator states are: {', '.join(operator_states)}"
                   if operator_states else " and no operator state"))
        else:
            raise InvalidArgumentError(
                f"{where} has no state {name!r}; its keyed and timer states are:"
                f" {', '.join(names)}; its operator states:"
                f" {', '.join(operator_states) or 'none'}")
    if header is None or not (edit.erase or edit.staged or len(dropped_operator_states)
                              < len(edit.drops)):  # keyed state untouched: files copied
        if header is None and (edit.erase or edit.staged):
            raise InvalidArgumentError(f"{where} has no keyed state: no keys to edit")
        return _Plan(op, op.max_parallelism, op.parallelism, None,
                     dropped_operator_states=tuple(dropped_operator_states))
    staged = []
    for state in edit.staged:
        names = [info.name for info in header.states]
        if state.info.name in names:
            state_id = names.index(state.info.name)
            inputs = tuple(dataclasses.replace(i, state_ids=tuple(
                REPLACED if s == state_id else s for s in i.state_ids)) for i in inputs)
        else:
            state_id = len(names)
            header = dataclasses.replace(header, states=(
                *header.states, dataclasses.replace(state.info, state_id=state_id)))
        staged.append((state_id, state))
    key_type, erase = None, ()
    if edit.erase:
        key_type = erasable_key_type(where, header.key)
        erase = tuple(_erased_key(where, key_type, key) for key in edit.erase)
    return _Plan(op, op.max_parallelism, op.parallelism, header, inputs, key_type, erase,
                 tuple(dropped_operator_states), tuple(staged))


def _key_type(where: str, key: FlinkType) -> DataType:
    try:
        key_type = key.data_type()
    except IncompatibleCheckpointError:
        key_type = None
    if key_type is None or not key_type.usable_as_key:
        name = getattr(key, "java_class", None) or key.describe()
        raise IncompatibleCheckpointError(
            f"{where} is keyed by {name} ({key.serializer}): statesource cannot compute the"
            " key group of such keys as Flink does (their Java hashCode is not reproduced),"
            " and a new max parallelism moves every key by its key group")
    return key_type


def erasable_key_type(where: str, key: FlinkType) -> DataType:
    """The type of the keys of a header's key serializer, when statesource compares (and
    hashes) them as Java does."""
    try:
        return _key_type(where, key)
    except IncompatibleCheckpointError:
        name = getattr(key, "java_class", None) or key.describe()
        raise IncompatibleCheckpointError(
            f"{where} is keyed by {name} ({key.serializer}): statesource cannot compare such"
            " keys as Java's equals does, so it cannot erase keys from it") from None


def _erased_key(where: str, key_type: DataType, key: Any) -> Any:
    try:
        return key_canonicalizer(key_type)(key)
    except (TypeMismatchError, InvalidArgumentError) as error:
        raise InvalidArgumentError(
            f"key {key!r} is not a key of {where}, which is keyed by {key_type.name}: {error}"
        ) from None


def _without_state(header: KeyedHeader, inputs: Sequence[_KeyedInput], dropped: int
                   ) -> tuple[KeyedHeader, tuple[_KeyedInput, ...]]:
    """The header without state ``dropped``, the others renumbered (a state's id is its
    position in the header), and each input's ids mapped to them (-1 for the dropped one)."""
    states = tuple(dataclasses.replace(info, state_id=i) for i, info in enumerate(
        s for s in header.states if s.state_id != dropped))
    renumber = [i - (i > dropped) if i != dropped else -1 for i in range(len(header.states))]
    return (dataclasses.replace(header, states=states),
            tuple(dataclasses.replace(i, state_ids=tuple(renumber[s] for s in i.state_ids))
                  for i in inputs))


def _merged_header(snapshot: FlinkSnapshot, where: str, handles: Sequence[KeyedHandle]
                   ) -> tuple[KeyedHeader, tuple[_KeyedInput, ...]]:
    """One header for every written file of the operator: the states of all the source's
    files by name (a subtask registers only the states its code asked for), uncompressed."""
    states: list[StateInfo] = []
    by_name: dict[str, int] = {}
    inputs = []
    first: KeyedHeader | None = None
    for handle in handles:
        header = snapshot.read_header(handle)
        first = first or header
        if header.key.snapshot != first.key.snapshot or header.version != first.version:
            raise IncompatibleCheckpointError(
                f"{where}: {snapshot.describe(handle.stream)} has another key serializer than"
                " the operator's other keyed-state files")
        ids = []
        for info in header.states:
            at = by_name.get(info.name)
            if at is None:
                at = by_name[info.name] = len(states)
                states.append(dataclasses.replace(info, state_id=at))
            elif not same_state(states[at], info):
                raise IncompatibleCheckpointError(
                    f"{where}: state {info.name!r} has other serializers in"
                    f" {snapshot.describe(handle.stream)} than in the operator's other files")
            ids.append(at)
        inputs.append(_KeyedInput(handle, header, tuple(ids)))
    assert first is not None
    return KeyedHeader(first.version, False, first.key, tuple(states), 0), tuple(inputs)


# -- writing -------------------------------------------------------------------------------


class _FileCopies:
    """Files of the source that the new savepoint keeps (operator and coordinator state),
    copied into it once each, under their own names where free."""

    def __init__(self, snapshot: FlinkSnapshot, writer: SavepointWriter) -> None:
        self.snapshot = snapshot
        self.writer = writer
        self._copied: dict[tuple[str | None, bool], StreamHandle] = {}
        self._names: set[str] = set()

    def stream(self, stream: StreamHandle | None) -> StreamHandle | None:
        if stream is None or stream.inline is not None:
            return stream
        key = (stream.path, stream.relative)
        if key not in self._copied:
            data = self.snapshot.read_bytes(stream, 0, stream.size)
            name = self.snapshot.file_location(stream).name
            copied = self.writer.write_file(data, None if name in self._names else name)
            self._names.add(copied.path or "")
            self._copied[key] = copied
        return self._copied[key]

    def operator_handles(self, handles: tuple[OperatorHandle, ...], drop: tuple[str, ...] = ()
                         ) -> tuple[OperatorHandle, ...]:
        """The handles with their files copied; ``drop`` names operator states left out of
        them (their elements stay in the file, which no handle points at any more)."""
        copied = []
        for handle in handles:
            stream = self.stream(handle.stream)
            assert stream is not None
            states = tuple(s for s in handle.states if s.name not in drop)
            copied.append(dataclasses.replace(handle, stream=stream, states=states))
        return tuple(copied)

    def keyed_handles(self, handles: tuple[KeyedHandle, ...]) -> tuple[KeyedHandle, ...]:
        copied = []
        for handle in handles:
            stream = self.stream(handle.stream)
            assert stream is not None
            copied.append(dataclasses.replace(handle, stream=stream))
        return tuple(copied)

    def subtask(self, index: int, keyed: tuple[KeyedHandle, ...],
                old: SubtaskState | None, drop: tuple[str, ...] = ()) -> SubtaskState:
        if old is None:
            return SubtaskState(index, keyed, ())
        return SubtaskState(index, keyed, self.operator_handles(old.operator, drop), (),
                            self.operator_handles(old.raw_operator))


def _carried(plan: _Plan, copies: _FileCopies) -> OperatorSnapshot:
    """An operator whose keyed state is not rewritten: as it was, with its files copied
    (byte for byte), at the plan's max parallelism, without a dropped operator state."""
    op, drop = plan.op, plan.dropped_operator_states
    return dataclasses.replace(
        op, max_parallelism=plan.max_parallelism, coordinator=copies.stream(op.coordinator),
        subtasks=tuple(copies.subtask(s.index, copies.keyed_handles(s.keyed), s, drop)
                       for s in op.subtasks))


def _rescaled(snapshot: FlinkSnapshot, writer: SavepointWriter, plan: _Plan,
              copies: _FileCopies) -> tuple[OperatorSnapshot, RescaledOperator]:
    op, header, max_parallelism = plan.op, plan.header, plan.max_parallelism
    assert header is not None
    rekey = _Rekeyer(header.key, plan.key_type, op.max_parallelism, max_parallelism,
                     f"operator {op.label!r}", plan.erase)
    framers: dict[int, KeyGroupFramer] = {}
    """The new key groups, framed as their pairs arrive."""
    old_prefix = prefix_bytes(op.max_parallelism)
    entries = timers = 0
    removed: dict[str, int] = {}
    regrouper = _regrouper(plan, header.key)
    for source in plan.inputs:
        handle = source.handle
        name = snapshot.describe(handle.stream)
        data = snapshot.read_bytes(handle.stream, 0, handle.stream.size)
        states = source.header.states
        for key_group, begin, end in check_key_group_range(
                handle.offsets, handle.start, handle.stream.size, source.header.data_start,
                name):
            rekey.start_key_group(key_group, name)
            raw = data[begin:end]
            moved = None
            if regrouper is not None and handle.savepoint:
                plain = unframe(raw, name, begin) if source.header.compressed else raw
                moved = regrouper.regroup(plain, key_group, states)
            for part in moved or ():
                target = source.state_ids[part.state_id]
                if target == REPLACED:
                    continue
                if target < 0:  # a dropped state
                    name_of = states[part.state_id].name
                    removed[name_of] = removed.get(name_of, 0) + part.count
                    continue
                framer = framers.get(part.key_group)
                if framer is None:
                    framer = framers[part.key_group] = KeyGroupFramer(part.key_group,
                                                                      max_parallelism)
                framer.add_framed(target, part.pairs, part.last_key)
                entries += part.count
                if states[part.state_id].is_timer:
                    timers += part.count
            if moved is not None:
                continue
            sections = (_canonical_pairs(raw, name, begin, key_group, source.header, old_prefix)
                        if handle.savepoint else
                        _native_pairs(raw, name, begin, key_group, source.header))
            for state_id, pairs in sections:
                info = states[state_id]
                target = source.state_ids[state_id]
                if target == REPLACED:
                    continue
                if target < 0:  # a dropped state
                    removed[info.name] = removed.get(info.name, 0) + len(pairs)
                    continue
                offset = TIMER_KEY_OFFSET if info.is_timer else 0
                kept = 0
                if rekey.same and pairs:  # no key is decoded: every pair stays in its key group
                    framer = framers.get(key_group)
                    if framer is None:
                        framer = framers[key_group] = KeyGroupFramer(key_group, max_parallelism)
                    for body, value in pairs:
                        framer.add(target, body, value)
                    kept = len(pairs)
                known, length = rekey.cache, rekey.length  # the hash cache, looked up inline
                for body, value in (() if rekey.same else pairs):
                    new_group = known.get(body[offset:offset + length]) if length >= 0 else None
                    if new_group is None:
                        new_group = rekey(body, offset, info.name)
                    if new_group < 0:  # an erased key
                        continue
                    framer = framers.get(new_group)
                    if framer is None:
                        framer = framers[new_group] = KeyGroupFramer(new_group, max_parallelism)
                    framer.add(target, body, value)
                    kept += 1
                if kept < len(pairs):
                    removed[info.name] = removed.get(info.name, 0) + len(pairs) - kept
                entries += kept
                if info.is_timer:
                    timers += kept
    for state_id, staged in plan.staged:
        for key_group, body, count in staged.sections():
            framer = framers.get(key_group)
            if framer is None:
                framer = framers[key_group] = KeyGroupFramer(key_group, max_parallelism)
            framer.add_section(state_id, body)
            entries += count
    header_bytes = write_keyed_header(header)
    old_subtasks = {s.index: s for s in op.subtasks}
    written_groups = len(framers)
    handles = writer.write_keyed_files(header_bytes, framers, max_parallelism, plan.parallelism)
    written = sum(keyed.stream.size for keyed in handles)
    subtasks = [copies.subtask(index, (keyed,), old_subtasks.get(index),
                               plan.dropped_operator_states)
                for index, keyed in enumerate(handles)]
    assert not framers, "every key group lies in one subtask's range"
    new = dataclasses.replace(op, parallelism=plan.parallelism, max_parallelism=max_parallelism,
                              coordinator=copies.stream(op.coordinator),
                              subtasks=tuple(subtasks))
    return new, RescaledOperator(op.label, op.max_parallelism, op.parallelism,
                                 max_parallelism, plan.parallelism, entries, timers,
                                 written_groups, written, tuple(sorted(removed.items())),
                                 tuple(i for i, k in enumerate(plan.erase)
                                       if k in rekey.found), op.operator_id)


def _regrouper(plan: _Plan, key: FlinkType) -> Regrouper | None:
    """The column-wise mover of whole key groups, where keys are re-keyed (a new max
    parallelism, nothing to erase) and can be decoded column-wise; else None."""
    if plan.key_type is None or plan.erase:
        return None
    decoder = decoder_for(key, plan.key_type.arrow_type)
    if decoder is None:
        return None
    return Regrouper(decoder, plan.key_type, plan.op.max_parallelism, plan.max_parallelism,
                     TIMER_KEY_OFFSET)


class _Rekeyer:
    """The new key group of each composite key, from its key alone; -1 for an erased key.

    The key is decoded (only the key), hashed as Flink hashes it, and checked to give back
    the key group it was read from. Hashes are remembered per key bytes within one source
    key group: every state of a key, and every user key of a map, shares them. With neither
    a new max parallelism nor keys to erase (``same``), no key is decoded at all.
    """

    def __init__(self, key: FlinkType, key_type: DataType | None, old_max: int, new_max: int,
                 where: str, erase: tuple[Any, ...] = ()) -> None:
        self.read = key.read
        self.length = key.length
        self.key = key
        self.key_type = key_type
        self.old_max = old_max
        self.new_max = new_max
        self.where = where
        self.erase = frozenset(erase)
        self.found: set[Any] = set()
        """The erased keys met, in their Java-equality form."""
        self.canonical = (decoded_key_canonicalizer(key_type)
                          if erase and key_type is not None else None)
        self.same = key_type is None
        self.reader = BinaryReader(b"", where)
        self.key_group = -1
        self.cache: dict[bytes, int] = {}

    def start_key_group(self, key_group: int, source: str) -> None:
        self.key_group = key_group
        self.cache.clear()
        self.reader.source = f"{source} (key group {key_group})"

    def __call__(self, body: bytes, offset: int, state: str) -> int:
        length = self.length
        if length >= 0:
            found = self.cache.get(body[offset:offset + length])
            if found is not None:
                return found
        r = self.reader
        r.data, r.pos, r.end = body, offset, len(body)
        key = self.read(r)
        key_bytes = body[offset:r.pos]
        found = self.cache.get(key_bytes)
        if found is None:
            found = self.cache[key_bytes] = self._new_key_group(key, state)
        return found

    def _new_key_group(self, key: Any, state: str) -> int:
        assert self.key_type is not None
        hashed = murmur_hash(self.key_type.java_hash(key))
        if hashed % self.old_max != self.key_group:
            raise IncompatibleCheckpointError(
                f"{self.where}, state {state!r}: key {key!r} is stored in key group"
                f" {self.key_group}, but its hash ({self.key_type} keys) gives key group"
                f" {hashed % self.old_max} of {self.old_max}: statesource would not hash it as"
                " the job did, so it cannot be moved to its key group of another max"
                " parallelism, nor compared with the keys to erase")
        if self.erase:
            canonical = key if self.canonical is None else self.canonical(key)
            if canonical in self.erase:
                self.found.add(canonical)
                return -1
        return hashed % self.new_max


# -- the pairs of one source key group -----------------------------------------------------


def _canonical_pairs(raw: bytes, source: str, base: int, key_group: int, header: KeyedHeader,
                     old_prefix: int) -> list[tuple[int, Pairs]]:
    """A canonical key group's pairs per state id, composite keys without their prefix.

    The walk of :func:`keyed.canonical_sections`, with the same checks (every length
    within the key group, every key's prefix its key group, nothing after the end), in
    one pass that slices each key after its prefix: this loop runs once per pair.
    """
    if header.compressed:
        data = unframe(raw, source, base)
        source = f"{source} (key group {key_group}, decompressed)"
    else:
        data = raw
    end, states = len(data), len(header.states)

    def corrupt(what: str, at: int) -> CorruptCheckpointError:
        return CorruptCheckpointError(f"{source}: {what} at byte offset {base + at}")

    sections: list[tuple[int, Pairs]] = []
    if end < 2:
        raise corrupt("truncated key group", 0)
    state_id, pos = _USHORT_AT(data, 0)[0], 2
    while state_id != END_OF_KEY_GROUP:
        if state_id >= states:
            raise corrupt(f"state id {state_id} of a header with {states} states", pos - 2)
        pairs: Pairs = []
        append = pairs.append
        while True:
            key_start = pos + 4
            if key_start > end:
                raise corrupt("truncated: no room for a key length", pos)
            value_at = key_start + _INT_AT(data, pos)[0]
            if value_at < key_start + old_prefix or value_at + 4 > end:
                raise corrupt(f"invalid key length {value_at - key_start}", pos)
            value_start = value_at + 4
            pos = value_start + _INT_AT(data, value_at)[0]
            if pos < value_start or pos > end:
                raise corrupt(f"invalid value length {pos - value_start}", value_at)
            first = data[key_start]
            found = first & 0x7F
            if old_prefix == 2:
                found = (found << 8) | data[key_start + 1]
            if found != key_group:
                raise corrupt(f"entry of key group {found} in key group {key_group}",
                              key_start)
            append((data[key_start + old_prefix:value_at], data[value_start:pos]))
            if first & META_DATA_FOLLOWS:
                break
        sections.append((state_id, pairs))
        if pos + 2 > end:
            raise corrupt("truncated: no room for a state id", pos)
        state_id, pos = _USHORT_AT(data, pos)[0], pos + 2
    if pos != end:
        raise corrupt("bytes after the end of the key group", pos)
    return sections


def _native_pairs(raw: bytes, source: str, base: int, key_group: int, header: KeyedHeader
                  ) -> list[tuple[int, Pairs]]:
    """A native key group's entries as the pairs a canonical savepoint holds, per state id.

    A native key group is its id, then per state its id, a count and ``(namespace, key,
    value)`` entries in the state's serializers (timers: the timer elements). Each
    becomes the composite key a canonical savepoint writes (key, namespace, each with its
    length after it when both vary in size, then a map's user key) and the value: a list's
    elements joined by ``,``, a map entry's null flag and value, one pair per map entry.
    An empty list or map has no pair, as in a canonical savepoint.
    """
    r = native_key_group_reader(raw, source, base, key_group, header)
    sections = []
    while not r.at_end():
        at = r.pos
        state_id = r.i16()
        if not 0 <= state_id < len(header.states):
            raise r.error(f"unknown state id {state_id}", at)
        sections.append((state_id, _native_section(r, header, header.states[state_id])))
    return sections


def _null_value(value: FlinkType) -> bytes:
    """What follows the null flag of a map value in a canonical savepoint: the null, as the
    value's serializer writes one, as Flink writes it (a native snapshot has the flag alone).
    A serializer that writes no null (``Long``) keeps the flag alone: Flink cannot write such
    a canonical savepoint itself, but its restore reads a null value's flag and nothing
    after it (``HeapSavepointRestoreOperation``; RocksDB's map state alike)."""
    try:
        return encode(value, None)
    except TypeMismatchError:
        return b""


def _native_section(r: BinaryReader, header: KeyedHeader, info: StateInfo) -> Pairs:
    data = r.data
    count = r.count("entry count")
    pairs: Pairs = []
    if info.is_timer:
        read_timer = info.timer.read
        for _ in range(count):
            start = r.pos
            read_timer(r)
            pairs.append((bytes(data[start:r.pos]), b""))
        return pairs
    read_namespace, read_key = info.namespace.read, header.key.read
    ambiguous = header.key.length < 0 and info.namespace.length < 0
    kind, value = info.kind, info.value
    for _ in range(count):
        start = r.pos
        read_namespace(r)
        namespace = bytes(data[start:r.pos])
        start = r.pos
        read_key(r)
        key = bytes(data[start:r.pos])
        if ambiguous:
            body = key + variable_int_bytes(len(key)) + namespace + variable_int_bytes(
                len(namespace))
        else:
            body = key + namespace
        if kind is StateKind.LIST:
            assert isinstance(value, ListType)
            read_element = value.element.read
            elements = []
            for _ in range(r.count("list length")):
                start = r.pos
                read_element(r)
                elements.append(bytes(data[start:r.pos]))
            if elements:
                pairs.append((body, b",".join(elements)))
        elif kind is StateKind.MAP:
            assert isinstance(value, MapType)
            read_user_key, read_user_value = value.key.read, value.value.read
            null_bytes: bytes | None = None  # what Flink writes after a null, made once a map
            for _ in range(r.count("map size")):
                start = r.pos
                read_user_key(r)
                user_key = bytes(data[start:r.pos])
                start = r.pos
                if r.boolean():
                    if null_bytes is None:
                        null_bytes = _null_value(value.value)
                    null = null_bytes
                else:
                    read_user_value(r)
                    null = b""
                pairs.append((body + user_key, bytes(data[start:r.pos]) + null))
        else:
            start = r.pos
            value.read(r)
            pairs.append((body, bytes(data[start:r.pos])))
    return pairs

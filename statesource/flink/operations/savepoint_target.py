"""A new canonical Flink savepoint as the target of a write: the second :class:`SnapshotTarget`.

The Spark writer, ``write_state`` and ``rewrite`` plan every write against a
:class:`~statesource.format.edit.CheckpointEdit` and hand each state's rows to a
:class:`~statesource.format.target.KeyedStateSink`; this module makes both speak
Flink:

- the edit starts from the base savepoint's operators as statesource sees them
  (:func:`~statesource.flink.declarations.operator_meta`: uids, key types, max
  parallelism, keyed states declared from their serializers), or from nothing;
- a state's sink encodes its rows as canonical pairs with the serializers the
  restoring job will check: the base's own meta info, byte for byte, when the state
  exists there, else meta info derived from its declaration
  (:func:`~statesource.flink.statefiles.state_meta_writer.state_info`), and frames them per key
  group (:mod:`~statesource.flink.operations.staged`);
- :meth:`FlinkSavepointTarget.publish` writes the new savepoint through the one pass
  of :mod:`statesource.flink.operations.rescale`: operators left alone are copied byte for
  byte, an edited operator keeps every other state's pairs and timers, drops what the
  edit dropped and takes the staged sections; new operators get a file per subtask.
  It is published whole (:mod:`statesource.flink.snapshot.publish`) and the work directory of
  the tasks is removed.

A Flink savepoint is never written in place: the output is a new directory the
user names, and an existing one is refused before anything runs.

The target is opened where Spark commits (the driver, or the Spark Connect
server) and travels to the caller pickled, without the open base: what planning
needs of the base (its operators, their key and state serializers) is read at
opening and travels with it, so the caller plans sinks without the storage and
only :meth:`FlinkSavepointTarget.publish`, back on the driver, opens the base again.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from statesource.checks import check_checkpoint_id
from statesource.errors import (
    IncompatibleCheckpointError,
    InvalidArgumentError,
    StateSourceError,
    TypeMismatchError,
)
from statesource.flink.declarations import declaration as declared
from statesource.flink.declarations import operator_meta
from statesource.flink.handles import (
    OperatorSnapshot,
    SnapshotMetadata,
    SubtaskState,
    operator_id_of,
    pick_operator,
)
from statesource.flink.layouts.canonical_entries import StateEntries
from statesource.flink.layouts.canonical_writer import KeyGroupFramer, prefix_bytes, section_body
from statesource.flink.operations.rescale import CANONICAL_SAVEPOINT_PROPERTIES, SavepointRewrite
from statesource.flink.operations.savepoint_plan import Edit
from statesource.flink.operations.staged import (
    StagedState,
    missing_parents,
    missing_sections,
    remove_sections,
    write_sections,
)
from statesource.flink.serializers.base import FlinkType
from statesource.flink.serializers.mapping import PojoClass
from statesource.flink.snapshot.compression import (
    Compression,
    check_compression,
    output_compressed,
)
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.flink.snapshot.publish import SavepointWriter, check_output, staging_name
from statesource.flink.snapshot.versions import MetadataLayout, metadata_layout, release_layout
from statesource.flink.statefiles.keyed_header import SUPPORTED_VERSIONS as HEADER_VERSIONS
from statesource.flink.statefiles.keyed_header import KeyedHeader, StateInfo
from statesource.flink.statefiles.state_meta_writer import key_serializer, state_info
from statesource.format.columns import decode_entries
from statesource.format.commit import CheckpointInfo
from statesource.format.edit import CheckpointEdit
from statesource.format.locations import DataFile
from statesource.format.metadata import CheckpointMeta, OperatorMeta
from statesource.format.operator_state_meta import OperatorStateMeta
from statesource.format.source import FLINK
from statesource.format.storage import Location
from statesource.format.target import KeyGroupBatches
from statesource.keygroups import KeyGroupRange
from statesource.model import StateDeclaration
from statesource.types import DataType


@dataclass(frozen=True)
class FlinkStateSink:
    """The task side: one keyed state's rows as canonical section bodies, per Flink subtask."""

    work: str
    key: FlinkType
    info: StateInfo
    key_type: DataType
    declaration: StateDeclaration
    max_parallelism: int

    def write_subtask(self, subtask: int, key_groups: KeyGroupRange, schema: pa.Schema,
                      batches: KeyGroupBatches) -> DataFile:
        entries = StateEntries(self.key, self.info, self.max_parallelism)
        skip = prefix_bytes(self.max_parallelism)

        def sections() -> Iterable[tuple[int, bytes, int]]:
            for key_group, rows, _ in batches:
                pairs = [(composite[skip:], value)
                         for key, namespace, stored in decode_entries(
                             self.key_type, self.declaration, pa.Table.from_batches(rows))
                         for composite, value in entries.pairs(key, namespace, stored,
                                                               key_group)]
                if pairs:  # null values, empty lists and maps have no pair
                    yield key_group, section_body(key_group, self.max_parallelism, pairs), \
                        len(pairs)

        return write_sections(self.work, key_groups, sections())

    def remove(self, files: Iterable[DataFile]) -> None:
        remove_sections(self.work, files)


@dataclass(frozen=True)
class _Staged:
    """What a sink was opened for: the meta info its pairs are encoded with, and the key."""

    info: StateInfo
    key: FlinkType


class FlinkSavepointTarget:
    """A new canonical savepoint directory ``output``, derived from the Flink snapshot at
    ``base_path`` (None: from nothing, a bootstrap)."""

    kind = FLINK

    def __init__(self, base_path: str | None, base_checkpoint_id: int | None, output: Location,
                 checkpoint_id: int, timestamp_ms: int,
                 pojos: Mapping[str, PojoClass] | None = None,
                 base: FlinkSnapshot | None = None, flink_version: str | None = None,
                 compression: Compression | None = None) -> None:
        self.base_path = base_path
        self.compression = compression
        self.base_checkpoint_id = base_checkpoint_id
        self.output = output
        self.checkpoint_id = checkpoint_id
        self.timestamp_ms = timestamp_ms
        self.pojos = dict(pojos or {})
        self.work = output.parent.child(staging_name(output.name)).uri  # on the output's
        # store, where every task can write
        self._new_parents = missing_parents(self.work)
        self._snapshot = base
        opened = self._base()  # the _metadata version written is the base's: 1.x stays 1.x
        self._layout = _layout(opened, flink_version, base_path)
        self._base_snapshots = () if opened is None else opened.operators
        self._undecodable = self._read_undecodable()
        self._headers = self._read_headers()
        self._base_operators = {op.uid: op for op in self._operators()}
        self._edit = CheckpointEdit(CheckpointMeta(checkpoint_id, timestamp_ms,
                                                   tuple(self._base_operators.values())))
        self._staged: dict[tuple[str, str], _Staged] = {}

    @classmethod
    def open(cls, path: str | None, output: str, base_checkpoint_id: int | None = None,
             checkpoint_id: int | None = None,
             pojos: Mapping[str, PojoClass] | None = None,
             flink_version: str | None = None,
             compression: str | None = None) -> FlinkSavepointTarget:
        """The target, every check done: ``output`` free, the base readable. The savepoint's
        checkpoint id is ``checkpoint_id``, else the base's (1 from nothing); it is for the
        base's Flink version, or from nothing for ``flink_version`` (default the newest).
        Its keyed-state files are Snappy-compressed as ``compression`` asks, else as the
        base's are (not, from nothing)."""
        asked = check_compression(compression)
        checked = check_output(output)
        base = (None if path is None
                else FlinkSnapshot.open(path, checkpoint_id=base_checkpoint_id))
        if base is not None:
            base.check_output_outside(checked)
        if checkpoint_id is None:
            checkpoint_id = 1 if base is None else base.checkpoint_id
        check_checkpoint_id(checkpoint_id)
        return cls(path, base_checkpoint_id, checked, checkpoint_id,
                   time.time_ns() // 1_000_000, pojos, base, flink_version, asked)

    def _base(self) -> FlinkSnapshot | None:
        """The base snapshot, opened once per process: the target travels to Spark's commit
        pickled, without it, and opens it again there (only :meth:`publish` needs it)."""
        if self.base_path is None:
            return None
        if self._snapshot is None:
            self._snapshot = FlinkSnapshot.open(self.base_path,
                                                checkpoint_id=self.base_checkpoint_id)
        return self._snapshot

    def __getstate__(self) -> dict[str, Any]:
        """Without the open base: a copy (the caller's, from the driver that opened it) plans
        from what was read at opening, so a Spark Connect client never touches the storage."""
        return {**self.__dict__, "_snapshot": None}

    def _read_undecodable(self) -> dict[str, str]:
        """Why a base operator's keyed state does not decode, by label and operator id: such
        an operator is carried over byte for byte, and a write into it refused."""
        base = self._base()
        undecodable: dict[str, str] = {}
        if base is not None:
            for op in base.operators:
                reason = base.undecodable(op)
                if reason is not None:
                    undecodable.setdefault(op.label, reason)
                    undecodable.setdefault(op.operator_id, reason)
        return undecodable

    def _read_headers(self) -> dict[str, KeyedHeader | None]:
        """The base operators' keyed headers (key serializer, states' meta info) by label and
        operator id: everything :meth:`sink` needs of the base, read once where it opens."""
        base = self._base()
        headers: dict[str, KeyedHeader | None] = {}
        if base is not None:
            for op in base.operators:
                if op.operator_id not in self._undecodable:
                    for name in (op.label, op.operator_id):
                        headers.setdefault(name, base.header(op))
        return headers

    def _operators(self) -> list[OperatorMeta]:
        base = self._base()
        return [] if base is None else [
            _operator_view(op, None if op.operator_id in self._undecodable else base.header(op))
            for op in base.operators]

    @property
    def edit(self) -> CheckpointEdit:
        return self._edit

    def operator_uid(self, name: str) -> str:
        """A base operator's label (a Flink 1.x base knows operators by id only: a uid is
        found by Flink's hash of it; a Flink 2.x one also by the name Flink gave it, where
        unique); any other name as it is (a new operator). Answered from what was read at
        opening, as a Spark Connect client's copy must."""
        found = pick_operator(self._base_snapshots, name)
        return name if found is None else found.label

    def sink(self, operator: str, state: StateDeclaration, key_type: DataType,
             max_parallelism: int) -> FlinkStateSink:
        """Where the pairs of ``state`` go; refused when Flink's serializers of it cannot
        be had: a timer or operator state of that name, a type with no derivable
        serializer, another key type than the operator's."""
        where = f"operator {operator!r}, state {state.name!r}"
        if operator in self._undecodable:
            raise IncompatibleCheckpointError(
                f"{where}: the operator's keyed state does not decode, so it can only be"
                f" carried over as it is: {self._undecodable[operator]}")
        header = self._headers.get(operator)
        if header is not None:
            key, keys = header.key, _key_type(header.key)
            if keys is None:
                name = getattr(key, "java_class", None) or key.describe()
                raise IncompatibleCheckpointError(
                    f"{where}: the operator is keyed by {name} ({key.serializer}),"
                    " whose Java hashCode statesource does not reproduce: it cannot put"
                    " rows in the key groups Flink looks them up in")
            if keys != key_type:
                raise IncompatibleCheckpointError(
                    f"{where}: the operator is keyed by {keys}, the rows by"
                    f" {key_type}")
            info = next((i for i in header.states if i.name == state.name), None)
            if info is not None:
                _check_replaceable(where, info, state)
        else:
            key, info = _derived_key(where, key_type), None
        if info is None:
            info = _derived(where, state, self.pojos, self._layout.flink_major)
        self._staged[(operator, state.name)] = _Staged(info, key)
        return FlinkStateSink(self.work, key, info, key_type, state, max_parallelism)

    def publish(self) -> CheckpointInfo:
        edits, new = self._changes()
        base = self._base()
        dropped = [uid for uid in self._base_operators if self._edit.operator(uid) is None]
        rewrite = (SavepointRewrite.plan(base, None, None, edits, dropped,
                                         compression=self.compression)
                   if base is not None else None)
        compressed = (rewrite.compressed if rewrite is not None
                      else output_compressed(self.compression, False))
        with SavepointWriter(self.output) as writer:
            operators = rewrite.write(writer)[0] if rewrite is not None else []
            operators += [_new_operator(writer, op, states, self._layout, compressed)
                          for op, states in new]
            if rewrite is not None:
                metadata = dataclasses.replace(rewrite.metadata(operators),
                                               checkpoint_id=self.checkpoint_id)
            else:
                metadata = SnapshotMetadata(
                    self._layout.version, self.checkpoint_id, tuple(operators), (),
                    CANONICAL_SAVEPOINT_PROPERTIES if self._layout.properties else b"")
            published = writer.publish(metadata)
        self.remove([f for op in self._edit.operators for s in op.keyed_states
                     for f in s.files])
        return CheckpointInfo(published,
                              self._edit.build(self.checkpoint_id, self.timestamp_ms))

    def _changes(self) -> tuple[list[Edit], list[tuple[OperatorMeta, list[StagedState]]]]:
        """Edits of the base's operators, and the new operators with their staged states."""
        edits, new = [], []
        for op in self._edit.operators:
            states = []
            for meta in op.keyed_states:
                staged = self._staged.get((op.uid, meta.name))
                if staged is not None:
                    states.append(StagedState(staged.info, self.work, meta.files))
            keys = [self._staged[(op.uid, s.info.name)].key for s in states]
            before = self._base_operators.get(op.uid)
            if before is None:
                new.append((op, states))
                continue
            kept = op.state_names()
            drops = tuple(name for name in before.state_names() if name not in kept)
            if states or drops:
                edits.append(Edit(op.uid, drops=drops, staged=tuple(states),
                                  key=keys[0] if keys else None))
        return edits, new

    def remove(self, files: Iterable[DataFile]) -> None:
        remove_sections(self.work, files, self._new_parents)

    def missing(self, files: Iterable[DataFile]) -> list[str]:
        return missing_sections(self.work, files)


def _operator_view(op: OperatorSnapshot, header: KeyedHeader | None) -> OperatorMeta:
    """The operator as the edit sees it: the keyed states statesource can declare (the
    others are carried over untouched, and cannot be replaced), and its operator states by
    name and mode (carried over, or dropped; their elements are not read)."""
    if header is not None and _key_type(header.key) is None:
        header = None  # keys statesource cannot type: its states are only carried over
    if header is not None:
        readable = []
        for info in header.states:
            try:
                if not info.is_timer:
                    declared(info)
                readable.append(info)
            except StateSourceError:
                continue
        header = dataclasses.replace(header, states=tuple(readable))
    modes = {s.name: s.mode for sub in op.subtasks for h in sub.operator for s in h.states}
    return dataclasses.replace(
        operator_meta(op.label, op.parallelism, op.max_parallelism, header),
        operator_states=tuple(OperatorStateMeta(name, mode, {}, "", 0, ())
                              for name, mode in sorted(modes.items())))


def _key_type(key: FlinkType) -> DataType | None:
    try:
        return key.data_type()
    except StateSourceError:
        return None


def _check_replaceable(where: str, info: StateInfo, state: StateDeclaration) -> None:
    if info.is_timer:
        raise IncompatibleCheckpointError(f"{where} is a timer state; the writer writes keyed"
                                          " state")
    try:
        existing = declared(info)
    except StateSourceError as error:
        raise IncompatibleCheckpointError(
            f"{where}: its serializers cannot be written by statesource ({error}); it can be"
            " carried over or dropped, not replaced") from None
    if existing != state:
        raise IncompatibleCheckpointError(
            f"{where} is {existing.describe()} in the savepoint, the write declares"
            f" {state.describe()}: a write replaces a state's rows, not its serializers")


def _derived_key(where: str, key_type: DataType) -> FlinkType:
    try:
        return key_serializer(key_type)
    except TypeMismatchError as error:
        raise TypeMismatchError(f"{where}, key type {key_type}: {error}") from None


def _layout(base: FlinkSnapshot | None, flink_version: str | None, base_path: str | None
            ) -> MetadataLayout:
    """What the savepoint is written as: its base's version (1.x stays 1.x), or from nothing
    for ``flink_version``; a version asked of a base written by another Flink is refused."""
    if base is None:
        return release_layout(flink_version)
    layout = metadata_layout(base.metadata.version, str(base_path))
    if flink_version is not None and release_layout(flink_version).version != layout.version:
        raise InvalidArgumentError(
            f"Flink version {flink_version}: {base_path} was written by {layout.written_by}"
            f" (metadata version {layout.version}), and a savepoint derived from it is for"
            " the same Flink: give no Flink version, or one of those releases")
    return layout


def _derived(where: str, state: StateDeclaration, pojos: Mapping[str, PojoClass],
             flink_major: int) -> StateInfo:
    try:
        return state_info(state, 0, pojos=pojos, flink_major=flink_major)
    except TypeMismatchError as error:
        raise TypeMismatchError(
            f"{where}: {error}; Flink's serializer of this state cannot be derived") from None


def _new_operator(writer: SavepointWriter, op: OperatorMeta, states: list[StagedState],
                  layout: MetadataLayout, compressed: bool = False) -> OperatorSnapshot:
    """A keyed operator the base does not have: its uid, one file per subtask."""
    key = _derived_key(f"operator {op.uid!r}", op.keyed_key_type)
    infos = tuple(dataclasses.replace(s.info, state_id=i) for i, s in enumerate(states))
    framers: dict[int, KeyGroupFramer] = {}
    for state_id, state in enumerate(states):
        for key_group, body, _ in state.sections():
            framer = framers.get(key_group)
            if framer is None:
                framer = framers[key_group] = KeyGroupFramer(key_group, op.max_parallelism)
            framer.add_section(state_id, body)
    header = KeyedHeader(HEADER_VERSIONS[-1], compressed, key, infos, 0)
    handles = writer.write_keyed_files(header, framers, op.max_parallelism, op.parallelism)
    subtasks = tuple(SubtaskState(index, (handle,), ()) for index, handle in enumerate(handles))
    recorded = layout.recorded_uid(op.uid)
    return OperatorSnapshot(recorded, recorded, operator_id_of(op.uid), op.parallelism,
                            op.max_parallelism, subtasks)

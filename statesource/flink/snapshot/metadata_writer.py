"""Writing Flink's ``_metadata`` file, version 6 (Flink 2.x): the counterpart of :mod:`metadata`.

The layout is the one :mod:`metadata` parses: magic and version, checkpoint
id, master states, then per operator its name and uid, id, parallelism, max
parallelism, coordinator state and per subtask its handles, and at the end the
checkpoint properties. A :class:`~metadata.SnapshotMetadata` parsed from a
real file writes back to the same bytes, which is how this writer is checked.

Flink reads every handle slot as "one or none", so a subtask with two managed
(or raw) keyed or operator handles cannot be written: it is refused rather
than written as a file Flink would misread. Channel state of unaligned
checkpoints is never written (the parser refuses it too).
"""

from __future__ import annotations

from statesource.errors import InvalidArgumentError
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.handles import (
    KeyedStateHandle,
    OperatorHandle,
    OperatorSnapshot,
    RocksDBFile,
    RocksDBHandle,
    SnapshotMetadata,
    StreamHandle,
    SubtaskState,
)
from statesource.flink.snapshot.metadata import (
    BYTE_STREAM,
    DISTRIBUTION_MODES,
    FILE_STREAM,
    KEY_GROUPS,
    KEY_GROUPS_V2,
    MAGIC,
    NULL_HANDLE,
    OPERATOR_STATE,
    RELATIVE_STREAM,
    ROCKSDB,
    ROCKSDB_V2,
    SAVEPOINT_KEY_GROUPS,
)
from statesource.flink.snapshot.versions import LAYOUTS, MetadataLayout

MASTER_STATE_MAGIC = 0xC96B1696 - (1 << 32)  # Flink's 0xc96b1696, as a Java int


def write_metadata(metadata: SnapshotMetadata) -> bytes:
    """The bytes of a ``_metadata`` file holding ``metadata``."""
    layout = LAYOUTS.get(metadata.version)
    if layout is None:
        raise InvalidArgumentError(
            f"metadata version {metadata.version} cannot be written; statesource writes version"
            f" {', '.join(map(str, sorted(LAYOUTS)))} (Flink 2.x)")
    if metadata.checkpoint_id < 0:
        raise InvalidArgumentError(f"invalid checkpoint id {metadata.checkpoint_id}")
    w = BinaryWriter()
    w.i32(MAGIC)
    w.i32(metadata.version)
    w.i64(metadata.checkpoint_id)
    w.i32(len(metadata.master_states))
    for state in metadata.master_states:
        w.i32(MASTER_STATE_MAGIC)
        w.length_prefixed(state)
    w.i32(len(metadata.operators))
    for op in metadata.operators:
        _operator(w, op, layout)
    if metadata.properties and not layout.properties:
        raise InvalidArgumentError(
            f"metadata version {layout.version} holds no checkpoint properties")
    w.raw(metadata.properties)
    return w.getvalue()


def _operator(w: BinaryWriter, op: OperatorSnapshot, layout: MetadataLayout) -> None:
    if op.name == "" or op.uid == "":
        raise InvalidArgumentError(
            f"operator {op.operator_id}: an empty name or uid is written as absent (None)")
    if layout.operator_names:
        w.utf(op.name or "")
        w.utf(op.uid or "")
    elif op.name is not None or op.uid is not None:
        raise InvalidArgumentError(
            f"operator {op.label}: metadata version {layout.version} records no operator name"
            " or uid")
    w.raw(_operator_id(op.operator_id))
    w.i32(op.parallelism)
    w.i32(op.max_parallelism)
    _stream_handle(w, op.coordinator)
    if op.finished:
        if op.subtasks or op.coordinator is not None:
            raise InvalidArgumentError(
                f"operator {op.label} is finished: it has no subtask or coordinator state")
        w.i32(-1)
        return
    w.i32(len(op.subtasks))
    for subtask in op.subtasks:
        if not 0 <= subtask.index < op.parallelism:
            raise InvalidArgumentError(
                f"subtask index {subtask.index} of operator {op.label} (parallelism"
                f" {op.parallelism})")
        w.i32(subtask.index)
        _subtask(w, op, subtask)


def _operator_id(operator_id: str) -> bytes:
    try:
        raw = bytes.fromhex(operator_id)
    except ValueError:
        raw = b""
    if len(raw) != 16:
        raise InvalidArgumentError(f"operator id {operator_id!r} is not 32 hex digits")
    return raw


def _one(handles: tuple[KeyedStateHandle, ...] | tuple[OperatorHandle, ...], what: str,
         op: OperatorSnapshot, index: int) -> None:
    if len(handles) > 1:
        raise InvalidArgumentError(
            f"subtask {index} of operator {op.label} has {len(handles)} {what} handles;"
            " Flink records one or none")


def _subtask(w: BinaryWriter, op: OperatorSnapshot, subtask: SubtaskState) -> None:
    for handles, what in ((subtask.operator, "operator state"),
                          (subtask.raw_operator, "raw operator state")):
        _one(handles, what, op, subtask.index)
        w.i32(len(handles))
        for handle in handles:
            _operator_handle(w, handle)
    for keyed, what in ((subtask.keyed, "keyed state"), (subtask.raw_keyed, "raw keyed state")):
        _one(keyed, what, op, subtask.index)
        if keyed:
            _keyed_handle(w, keyed[0])
        else:
            w.u8(NULL_HANDLE)
    w.i32(0)  # input channel state
    w.i32(0)  # result subpartition state


def _keyed_handle(w: BinaryWriter, handle: KeyedStateHandle) -> None:
    if isinstance(handle, RocksDBHandle):
        _rocksdb_handle(w, handle)
        return
    if handle.savepoint and handle.handle_id is not None:
        raise InvalidArgumentError(
            f"a savepoint's keyed state handle has no state handle id ({handle.handle_id!r})")
    if handle.savepoint:
        w.u8(SAVEPOINT_KEY_GROUPS)
    else:
        w.u8(KEY_GROUPS if handle.handle_id is None else KEY_GROUPS_V2)
    w.i32(handle.start)
    w.i32(len(handle.offsets))
    for offset in handle.offsets:
        w.i64(offset)
    _stream_handle(w, handle.stream)
    if handle.handle_id is not None:
        w.utf(handle.handle_id)


def _rocksdb_handle(w: BinaryWriter, handle: RocksDBHandle) -> None:
    """Version 2 (type 11) where the handle has its checkpointed size and state handle id,
    else version 1 (type 5), as :mod:`metadata` read it."""
    v2 = handle.handle_id is not None
    if v2 != (handle.checkpointed_size is not None):
        raise InvalidArgumentError(
            f"a RocksDB state handle of key groups {handle.start}..{handle.end} has"
            " a checkpointed size or a state handle id without the other: version 2 of the"
            " handle has both, version 1 neither")
    w.u8(ROCKSDB_V2 if v2 else ROCKSDB)
    w.i64(handle.checkpoint_id)
    w.utf(handle.backend_id)
    w.i32(handle.start)
    w.i32(handle.count)
    if handle.checkpointed_size is not None:
        w.i64(handle.checkpointed_size)
    _stream_handle(w, handle.meta)
    for files in (handle.shared, handle.private):
        _rocksdb_files(w, files)
    if handle.handle_id is not None:
        w.utf(handle.handle_id)


def _rocksdb_files(w: BinaryWriter, files: tuple[RocksDBFile, ...]) -> None:
    w.i32(len(files))
    for file in files:
        w.utf(file.name)
        _stream_handle(w, file.stream)


def _operator_handle(w: BinaryWriter, handle: OperatorHandle) -> None:
    w.u8(OPERATOR_STATE)
    w.i32(len(handle.states))
    for state in handle.states:
        w.utf(state.name)
        w.u8(DISTRIBUTION_MODES.index(state.mode))
        w.i32(len(state.offsets))
        for offset in state.offsets:
            w.i64(offset)
    _stream_handle(w, handle.stream)


def _stream_handle(w: BinaryWriter, stream: StreamHandle | None) -> None:
    if stream is None:
        w.u8(NULL_HANDLE)
    elif stream.inline is not None:
        if stream.handle_name is None:
            raise InvalidArgumentError(
                f"inline state of {len(stream.inline)} bytes has no handle name")
        w.u8(BYTE_STREAM)
        w.utf(stream.handle_name)
        w.length_prefixed(stream.inline)
    elif stream.path is None:
        raise InvalidArgumentError(f"a stream handle of {stream.size} bytes has no path")
    elif stream.relative:
        w.u8(RELATIVE_STREAM)
        w.utf(stream.path)
        w.i64(stream.size)
    else:
        w.u8(FILE_STREAM)
        w.i64(stream.size)
        w.utf(stream.path)

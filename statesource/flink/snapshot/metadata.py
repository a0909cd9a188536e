"""Flink's ``_metadata`` file: operators, their subtasks and the handles of their state files.

Parsed from the bytes with the layout of Flink's metadata serializer, version 6
(Flink 2.x): per operator its name and uid, its 16-byte id, parallelism, max
parallelism, coordinator state and per subtask the handles of managed and raw
operator and keyed state; at the end, the checkpoint's properties as a Java
serialized object. A reader needs where each subtask's keyed state lies (a
file and one offset per key group) and where its operator state lies (a file
and the offsets of each named state); the rest (master and coordinator
states, raw state, handle names and ids, the properties) is kept too, so that
:mod:`metadata_writer` writes a parsed file back byte for byte.

A RocksDB handle (a native savepoint's or a checkpoint's of the RocksDB backend:
its database's files by their RocksDB names, and the meta data stream of its
states) is parsed as :class:`~statesource.flink.handles.RocksDBHandle`, both
versions of it; handles of the changelog backend are refused with the advice to
take a canonical savepoint.
"""

from __future__ import annotations

from collections import Counter

from statesource.errors import (
    CorruptCheckpointError,
    IncompatibleCheckpointError,
)
from statesource.flink.binary.java_objects import read_java_object
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.handles import (
    KeyedHandle,
    KeyedStateHandle,
    OperatorHandle,
    OperatorSnapshot,
    OperatorStateOffsets,
    RocksDBFile,
    RocksDBHandle,
    SnapshotMetadata,
    StreamHandle,
    SubtaskState,
)
from statesource.flink.snapshot.versions import MetadataLayout, metadata_layout
from statesource.model import DistributionMode

MAGIC = 0x4960672D

NULL_HANDLE, BYTE_STREAM, FILE_STREAM, RELATIVE_STREAM = 0, 1, 2, 6
KEY_GROUPS, OPERATOR_STATE, SAVEPOINT_KEY_GROUPS, KEY_GROUPS_V2 = 3, 4, 7, 12
ROCKSDB, ROCKSDB_V2 = 5, 11
_MAX_KEY_GROUPS = 32768
_CHANGELOG = {8, 9, 10, 13, 14}
# Flink's OperatorStateHandle.Mode, by ordinal.
DISTRIBUTION_MODES = (DistributionMode.SPLIT_DISTRIBUTE, DistributionMode.UNION,
                      DistributionMode.BROADCAST)
_CANONICAL_ADVICE = (
    "; statesource reads canonical savepoints and the heap and RocksDB backends' snapshots:"
    " take a canonical savepoint instead (flink savepoint --type canonical, the default type)"
)


def parse_metadata(data: bytes, source: str) -> SnapshotMetadata:
    """Parse a whole ``_metadata`` file (``source`` names it in errors)."""
    reader = BinaryReader(data, source)
    if len(data) < 8 or reader.i32() != MAGIC:
        raise CorruptCheckpointError(f"{source} is not a Flink _metadata file (bad magic number)")
    layout = metadata_layout(reader.i32(), source)
    checkpoint_id = reader.i64()
    if checkpoint_id < 0:
        raise reader.error(f"invalid checkpoint id {checkpoint_id}", reader.pos - 8)
    master_states = []
    for _ in range(reader.count("number of master states")):
        reader.i32()  # magic
        master_states.append(reader.take(reader.count("master state length")))
    operators = []
    seen: set[str] = set()
    for _ in range(reader.count("number of operators")):
        at = reader.pos
        op = _operator(reader, layout)
        if op.operator_id in seen:  # Flink keys operators by id: a second one is not Flink's
            raise reader.error(f"operator {op.operator_id} is listed twice", at)
        seen.add(op.operator_id)
        operators.append(op)
    properties = b""
    if layout.properties:  # one Java object, to the end of the file
        start = reader.pos
        read_java_object(reader, "the checkpoint properties")
        properties = bytes(reader.data[start:reader.pos])
    if reader.remaining():
        last = "the checkpoint properties" if layout.properties else "the last operator"
        raise reader.error(f"{reader.remaining()} bytes after {last}")
    return SnapshotMetadata(layout.version, checkpoint_id, tuple(operators),
                            tuple(master_states), properties)


def _operator(reader: BinaryReader, layout: MetadataLayout) -> OperatorSnapshot:
    name, uid = (reader.utf(), reader.utf()) if layout.operator_names else ("", "")
    operator_id = reader.take(16).hex()
    parallelism = reader.i32()
    max_parallelism = reader.i32()
    if not 1 <= max_parallelism <= _MAX_KEY_GROUPS or not 1 <= parallelism <= max_parallelism:
        raise reader.error(f"invalid parallelism {parallelism} / max parallelism"
                           f" {max_parallelism} of operator {uid or operator_id}")
    coordinator = _stream_handle(reader)
    count = reader.i32()
    subtasks: list[SubtaskState] = []
    indexes: set[int] = set()
    for _ in range(max(count, 0)):  # a negative count marks a fully finished operator
        index = reader.i32()
        if not 0 <= index < parallelism or index in indexes:
            raise reader.error(f"subtask index {index} of operator {uid or operator_id}"
                               f" (parallelism {parallelism}; each index at most once)",
                               reader.pos - 4)
        indexes.add(index)
        subtasks.append(_subtask(reader, index))
    covered: set[int] = set()
    for handle in (h for subtask in subtasks for h in subtask.keyed):
        groups = set(range(handle.start, handle.end + 1))
        if handle.end >= max_parallelism or covered & groups:
            raise CorruptCheckpointError(
                f"{reader.source}: operator {uid or operator_id} has keyed state for key groups"
                f" {handle.start}..{handle.end}, overlapping another subtask's or beyond its"
                f" {max_parallelism} key groups")
        covered |= groups
    return OperatorSnapshot(name or None, uid or None, operator_id, parallelism,
                            max_parallelism, tuple(subtasks), coordinator, count < 0)


def _subtask(reader: BinaryReader, index: int) -> SubtaskState:
    managed_operator = [_operator_handle(reader)
                        for _ in range(reader.count("number of operator state handles"))]
    raw_operator = [_operator_handle(reader)
                    for _ in range(reader.count("number of raw operator state handles"))]
    keyed = _keyed_handle(reader)
    at = reader.pos
    raw_keyed = _keyed_handle(reader)  # written by user code in its own format
    if isinstance(raw_keyed, RocksDBHandle):
        raise reader.error("raw keyed state held in RocksDB files (Flink writes raw keyed state"
                           " as key groups of one file)", at)
    for _ in range(2):  # input channel and result subpartition (unaligned checkpoints)
        if reader.count("number of channel state handles"):
            raise reader.error("channel state of an unaligned checkpoint is not supported")
    return SubtaskState(index, () if keyed is None else (keyed,),
                        tuple(h for h in managed_operator if h is not None),
                        () if raw_keyed is None else (raw_keyed,),
                        tuple(h for h in raw_operator if h is not None))


def _keyed_handle(reader: BinaryReader) -> KeyedStateHandle | None:
    at = reader.pos
    kind = reader.u8()
    if kind == NULL_HANDLE:
        return None
    if kind in _CHANGELOG:
        raise IncompatibleCheckpointError(
            f"{reader.source} holds state of the changelog backend (handle type {kind} at byte"
            f" offset {at})" + _CANONICAL_ADVICE)
    if kind in (ROCKSDB, ROCKSDB_V2):
        return _rocksdb_handle(reader, kind == ROCKSDB_V2, at)
    if kind not in (KEY_GROUPS, SAVEPOINT_KEY_GROUPS, KEY_GROUPS_V2):
        raise IncompatibleCheckpointError(
            f"{reader.source}: unsupported keyed state handle type {kind} at byte offset {at}"
            + _CANONICAL_ADVICE)
    start = reader.i32()
    count = _key_group_count(reader, start, at)
    offsets = tuple(reader.i64() for _ in range(count))
    stream = _stream_handle(reader)
    handle_id = reader.utf() if kind == KEY_GROUPS_V2 else None
    if stream is None:
        raise reader.error("keyed state handle without a file", at)
    if any(not 0 <= offset <= stream.size for offset in offsets):
        raise reader.error(f"key-group offsets beyond the file's {stream.size} bytes", at)
    return KeyedHandle(start, offsets, stream, kind == SAVEPOINT_KEY_GROUPS, handle_id)


def _key_group_count(reader: BinaryReader, start: int, at: int, offsets: bool = True) -> int:
    """The number of key groups of a handle whose first is ``start``: a range inside Flink's
    largest max parallelism (and, where an offset per key group follows, inside the bytes
    left)."""
    count = reader.count("number of key groups", None if offsets else _MAX_KEY_GROUPS)
    if start < 0 or start + count > _MAX_KEY_GROUPS:
        raise reader.error(f"invalid key-group range {start}+{count}", at)
    return count


def _rocksdb_handle(reader: BinaryReader, v2: bool, at: int) -> RocksDBHandle:
    """An ``IncrementalRemoteKeyedStateHandle``: checkpoint id, backend id, key-group range,
    (version 2: checkpointed size), the meta data stream, the shared and the private files
    (each its RocksDB name and stream), (version 2: the state handle id)."""
    checkpoint_id = reader.i64()
    backend_id = reader.utf()
    start = reader.i32()
    count = _key_group_count(reader, start, at, offsets=False)
    checkpointed_size = reader.i64() if v2 else None
    meta = _stream_handle(reader)
    if meta is None:
        raise reader.error("RocksDB state handle without its meta data", at)
    shared = _rocksdb_files(reader)
    private = _rocksdb_files(reader)
    handle_id = reader.utf() if v2 else None
    twice = sorted(name for name, times in Counter(f.name for f in (*shared, *private)).items()
                   if times > 1)
    if twice:
        raise reader.error(f"RocksDB state handle names {', '.join(twice)} more than once", at)
    return RocksDBHandle(start, count, checkpoint_id, backend_id, meta, shared, private,
                         checkpointed_size, handle_id)


def _rocksdb_files(reader: BinaryReader) -> tuple[RocksDBFile, ...]:
    """A list of (RocksDB file name, stream): a database directory's files, by bare name."""
    files = []
    for _ in range(reader.count("number of RocksDB files")):
        at = reader.pos
        name = reader.utf()
        if not name or "/" in name or "\\" in name or name in (".", ".."):
            raise reader.error(f"RocksDB file name {name!r} is not a bare file name", at)
        stream = _stream_handle(reader)
        if stream is None:
            raise reader.error(f"RocksDB file {name} without its stream", at)
        files.append(RocksDBFile(name, stream))
    return tuple(files)


def _operator_handle(reader: BinaryReader) -> OperatorHandle | None:
    at = reader.pos
    kind = reader.u8()
    if kind == NULL_HANDLE:
        return None
    if kind != OPERATOR_STATE:
        raise IncompatibleCheckpointError(
            f"{reader.source}: unsupported operator state handle type {kind} at byte offset {at}")
    states = []
    for _ in range(reader.count("number of operator states")):
        name = reader.utf()
        mode = reader.u8()
        if mode >= len(DISTRIBUTION_MODES):
            raise reader.error(f"unknown distribution mode {mode} of operator state {name!r}")
        offsets = tuple(reader.i64() for _ in range(reader.count("number of offsets")))
        states.append(OperatorStateOffsets(name, DISTRIBUTION_MODES[mode], offsets))
    stream = _stream_handle(reader)
    if stream is None:
        raise reader.error("operator state handle without a file", at)
    return OperatorHandle(tuple(states), stream)


def _stream_handle(reader: BinaryReader) -> StreamHandle | None:
    at = reader.pos
    kind = reader.u8()
    if kind == NULL_HANDLE:
        return None
    if kind == BYTE_STREAM:
        name = reader.utf()
        data = reader.take(reader.count("inline state length"))
        return StreamHandle(None, False, len(data), data, name)
    if kind == FILE_STREAM:
        size = reader.i64()
        return StreamHandle(reader.utf(), False, size)
    if kind == RELATIVE_STREAM:
        path = reader.utf()
        return StreamHandle(path, True, reader.i64())
    raise IncompatibleCheckpointError(
        f"{reader.source}: unsupported stream handle type {kind} at byte offset {at}"
        " (file-merging or segment handles are not supported)")

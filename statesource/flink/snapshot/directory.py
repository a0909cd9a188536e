"""Opening a Flink savepoint or checkpoint directory and reading its key groups.

A snapshot directory holds ``_metadata`` and the state files it names;
a directory of ``chk-<id>`` checkpoints is opened at its newest checkpoint
(or the one asked for). Recorded paths are resolved inside the snapshot
directory: relative ones as they are, absolute ones (checkpoints written on
another machine) by their file name, as Flink does for relocated savepoints;
a checkpoint's files that Flink keeps beside it, in its job's ``shared/``
(incremental checkpoints' SST files) and ``taskowned/`` directories, are
looked for there first. Nothing outside the snapshot directory (a checkpoint's:
its job's directory) is ever opened.

A subtask's RocksDB state (its database's files) is read as a canonical
savepoint's keyed-state file, made on first use and kept
(:mod:`~statesource.flink.layouts.rocksdb_canonical`): :meth:`FlinkSnapshot.keyed_handles`
gives every reader the same kind of handle whatever the backend wrote.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator
from dataclasses import dataclass

import pyarrow.fs as pafs

from statesource.errors import (
    CheckpointNotFoundError,
    CorruptCheckpointError,
    IncompatibleCheckpointError,
    InvalidArgumentError,
    StateNotFoundError,
)
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.handles import (
    KeyedHandle,
    OperatorSnapshot,
    RocksDBHandle,
    SnapshotMetadata,
    StreamHandle,
    pick_operator,
)
from statesource.flink.layouts.base import KeyGroupData
from statesource.flink.layouts.dispatch import layout_of
from statesource.flink.layouts.keyed import KeyGroupState, check_key_group_range
from statesource.flink.layouts.rocksdb_canonical import Selection, holds_any
from statesource.flink.serializers.kryo2_framing import kryo2_framed
from statesource.flink.snapshot.metadata import parse_metadata
from statesource.flink.snapshot.publish import is_staging_name
from statesource.flink.snapshot.rocksdb_conversions import RocksDBConversions
from statesource.flink.snapshot.versions import metadata_layout
from statesource.flink.statefiles.keyed_header import (
    KeyedHeader,
    StateInfo,
    read_keyed_header,
)
from statesource.flink.statefiles.merged_header import MergedHeader, merge_headers
from statesource.format.ipc import ReadListener
from statesource.format.storage import (
    FLINK_METADATA_FILE,
    Location,
    PathOrLocation,
    checkpoint_dirs,
    checkpoint_id_of,
    confined,
    is_within,
    open_regular_file,
    resolve,
    snapshot_directory,
)

FLINK_METADATA = FLINK_METADATA_FILE
_HEADER_PROBE = 1 << 16
BESIDE_CHECKPOINTS = ("shared", "taskowned")
"""The directories of a job's checkpoints (beside its ``chk-<id>``) holding files several
checkpoints use: the SST files of incremental checkpoints, and the files of state that the
task managers own."""


def find_flink_snapshot(location: Location, checkpoint_id: int | None = None) -> Location | None:
    """The Flink snapshot directory at ``location`` (or of its ``_metadata``, or the newest
    ``chk-*`` under it), or None."""
    location = snapshot_directory(location, FLINK_METADATA)
    if location.child(FLINK_METADATA).exists():
        return location
    found = checkpoint_dirs(location, FLINK_METADATA)
    if not found:
        return None
    if checkpoint_id is None:
        return found[max(found)]
    if checkpoint_id not in found:
        raise CheckpointNotFoundError(f"no Flink checkpoint {checkpoint_id} under {location};"
                                      f" checkpoints: {sorted(found)}")
    return found[checkpoint_id]


@dataclass(frozen=True)
class KeyGroupBytes:
    """Where one key group's bytes are: a file (or inline bytes) and a byte range."""

    key_group: int
    handle: KeyedHandle
    begin: int
    end: int


class FlinkSnapshot(RocksDBConversions):
    """One Flink savepoint or checkpoint, opened by parsing its ``_metadata``."""

    def __init__(self, location: Location, metadata: SnapshotMetadata) -> None:
        self.location = location
        self.metadata = metadata
        self._merges: dict[str, MergedHeader | None] = {}
        self._handle_headers: dict[StreamHandle, KeyedHeader] = {}
        self._state_ids: dict[StreamHandle, tuple[int, ...]] = {}
        self._regular_files: set[StreamHandle] = set()
        self._header_bytes: dict[str, bytes] = {}
        self._undecodable: dict[str, str | None] = {}
        self._sources: dict[StreamHandle, str] = {}
        self._canonical: dict[RocksDBHandle, KeyedHandle] = {}
        self._header_only: dict[RocksDBHandle, KeyedHandle] = {}
        self._located: dict[StreamHandle, Location] = {}
        self._flink_1x = metadata_layout(metadata.version, str(location)).flink_major == 1
        """Written by Flink 1.x, whose Kryo values are Kryo 2's: delimited by parsing them
        where nothing frames them (:mod:`~statesource.flink.serializers.kryo2_framing`)."""

    @classmethod
    def open(cls, path: PathOrLocation, *, checkpoint_id: int | None = None,
             filesystem: pafs.FileSystem | None = None) -> FlinkSnapshot:
        requested = resolve(path, filesystem)
        location = find_flink_snapshot(requested, checkpoint_id)
        if location is not None and is_staging_name(location.name):
            raise CheckpointNotFoundError(
                f"{location} is an unfinished savepoint write (a temporary directory a failed"
                " or killed write left behind), not a savepoint: remove it")
        if location is None:
            raise CheckpointNotFoundError(
                f"{requested} is not a Flink snapshot: no {FLINK_METADATA} in it or in a chk-<id>"
                " directory under it")
        source = location.child(FLINK_METADATA)
        try:
            with open_regular_file(source, "Flink snapshot metadata",
                                   confine_to=location) as handle:
                data = handle.read()
        except OSError as error:
            raise CorruptCheckpointError(f"cannot read {source}: {error}") from None
        metadata = parse_metadata(data, str(source))
        if checkpoint_id is not None and metadata.checkpoint_id != checkpoint_id:
            raise CheckpointNotFoundError(
                f"{source} holds checkpoint {metadata.checkpoint_id}, not {checkpoint_id}")
        return cls(location, metadata)

    @property
    def checkpoint_id(self) -> int:
        return self.metadata.checkpoint_id

    @property
    def operators(self) -> tuple[OperatorSnapshot, ...]:
        return self.metadata.operators

    def operator(self, name: str | None = None) -> OperatorSnapshot:
        """An operator by uid, hex id, the id a uid hashes to, or the name Flink gave it where
        that is unique (:func:`~statesource.flink.handles.pick_operator`); optional if only
        one has state."""
        if name is None:
            stateful = [op for op in self.operators
                        if any(s.keyed or s.operator for s in op.subtasks)]
            if len(stateful) == 1:
                return stateful[0]
            raise StateNotFoundError(
                f"choose an operator: there are {len(stateful)} with state: {self._listing()}")
        found = pick_operator(self.operators, name)
        if found is not None:
            return found
        raise StateNotFoundError(f"no operator {name!r} in {self.location}; available:"
                                 f" {self._listing()}")

    def _listing(self) -> str:
        return ", ".join(
            f"{op.label!r}" + (f" ({op.name})" if op.name and op.name != op.uid else "")
            for op in self.operators) or "none"

    # -- keyed state -----------------------------------------------------------------------

    def keyed_handles(self, op: OperatorSnapshot) -> list[KeyedHandle]:
        """Every subtask's keyed handle, a RocksDB one as a canonical file
        (:meth:`canonical_handle`)."""
        return [self.canonical_handle(op, h) for s in op.subtasks for h in s.keyed]

    def header(self, op: OperatorSnapshot) -> KeyedHeader | None:
        """The operator's keyed states, by name across its files, in one numbering
        (:mod:`~statesource.flink.statefiles.merged_header`): what a reader lists and asks
        for; each file is decoded with its own header (:meth:`handle_header`)."""
        merged = self._merged(op)
        return None if merged is None else merged.header

    def _merged(self, op: OperatorSnapshot) -> MergedHeader | None:
        """Every keyed-state file's header read once (a file that begins with the first
        one's header bytes has that header), and merged."""
        if op.operator_id not in self._merges:
            handles = list({h.stream: h for h in (self.header_handle(op, h) for s in op.subtasks
                                                  for h in s.keyed)}.values())
            if not handles:
                self._merges[op.operator_id] = None
                return None
            first = self.read_header(handles[0])
            expected = self.read_bytes(handles[0].stream, 0, first.data_start)
            files = []
            for handle in handles:
                own = first
                if handle is not handles[0] and (
                        handle.stream.size < len(expected)
                        or self.read_bytes(handle.stream, 0, len(expected)) != expected):
                    own = self.read_header(handle)
                files.append((self.describe(handle.stream), own))
            merged = merge_headers(files, f"operator {op.label!r}")
            for index, (handle, (_, own)) in enumerate(zip(handles, files)):
                self._handle_headers[handle.stream] = own
                if merged.renumbers(index):
                    self._state_ids[handle.stream] = merged.state_ids[index]
            self._header_bytes[op.operator_id] = expected
            self._merges[op.operator_id] = merged
        return self._merges[op.operator_id]

    def undecodable(self, op: OperatorSnapshot) -> str | None:
        """Why the operator's keyed state cannot be decoded (a header names a serializer
        statesource does not support, or two files declare a state differently), or None.
        Such an operator fails alone: listings name it with this reason, edits of other
        operators carry its files over, and only what must decode it (reading it, re-keying
        it) refuses. A corrupt header is not a reason here: it raises, as everywhere."""
        if op.operator_id not in self._undecodable:
            reason = None
            try:
                self._merged(op)
            except IncompatibleCheckpointError as error:
                reason = str(error)
            self._undecodable[op.operator_id] = reason
        return self._undecodable[op.operator_id]

    def read_header(self, handle: KeyedHandle) -> KeyedHeader:
        """The header of one keyed-state file (a subtask's states; usually every subtask's)."""
        probe = min([o for o in handle.offsets if o] or [handle.stream.size])
        while True:
            length = min(max(probe, 1), handle.stream.size)
            data = self.read_bytes(handle.stream, 0, length)
            try:
                header = read_keyed_header(BinaryReader(data, self.describe(handle.stream)))
                return header.retyped(kryo2_framed) if self._flink_1x else header
            except CorruptCheckpointError:
                if length >= handle.stream.size:  # the whole stream: the header is bad
                    raise
                probe = max(probe * 4, _HEADER_PROBE)

    def handle_header(self, op: OperatorSnapshot, handle: KeyedHandle) -> KeyedHeader:
        """The header of ``handle``'s file, which its key groups are decoded with: the same
        object for every file that begins with the same header bytes."""
        self._merged(op)
        return self._handle_headers[handle.stream]

    def state_ids(self, op: OperatorSnapshot, handle: KeyedHandle) -> tuple[int, ...] | None:
        """The ids of :meth:`header` of the states of ``handle``'s file, by the file's own
        ids; None where they are the same (every subtask registered the same states)."""
        self._merged(op)
        return self._state_ids.get(handle.stream)

    def keyed_state_info(self, op: OperatorSnapshot, name: str | None) -> StateInfo:
        header = self.header(op)
        states = header.states if header else ()
        if name is None and len(states) == 1:
            return states[0]
        for info in states:
            if info.name == name:
                return info
        listing = ", ".join(repr(s.name) for s in states) or "none"
        if name is None:
            raise StateNotFoundError(f"choose a state of operator {op.label!r}: there are"
                                     f" {len(states)}: {listing}")
        raise StateNotFoundError(f"no keyed state named {name!r} in operator {op.label!r};"
                                 f" available: {listing}")

    def key_group_bytes(self, op: OperatorSnapshot, lookup: Selection | None = None
                        ) -> list[KeyGroupBytes]:
        """The byte range of every non-empty key group of the operator, by key group; with
        ``lookup``, of its key groups, a RocksDB handle's as :meth:`selected_handle` reads
        them (only ``lookup.keys``' entries where it names keys)."""
        self._merged(op)
        ranges = []
        handles = (self.keyed_handles(op) if lookup is None else
                   [self.selected_handle(op, h, lookup) if isinstance(h, RocksDBHandle) else h
                    for s in op.subtasks for h in s.keyed if holds_any(h, lookup.key_groups)])
        for handle in handles:
            for key_group, begin, end in check_key_group_range(
                    handle.offsets, handle.start, handle.stream.size,
                    self.handle_header(op, handle).data_start, self.describe(handle.stream)):
                ranges.append(KeyGroupBytes(key_group, handle, begin, end))
        return sorted(ranges, key=lambda r: r.key_group)

    def read_key_groups(self, op: OperatorSnapshot, state_ids: Collection[int] | None = None,
                        key_groups: Collection[int] | None = None,
                        listener: ReadListener | None = None
                        ) -> Iterator[tuple[int, dict[int, KeyGroupState]]]:
        """``(key group, entries per state id)`` for the wanted key groups, ascending."""
        if self.header(op) is None:
            return
        wanted = None if key_groups is None else set(key_groups)
        for piece in self.key_group_bytes(op):
            if wanted is not None and piece.key_group not in wanted:
                continue
            data = self.piece_bytes(piece, listener)
            yield piece.key_group, self.decode_piece(op, piece, data, state_ids)

    def piece_bytes(self, piece: KeyGroupBytes, listener: ReadListener | None = None) -> bytes:
        """The raw bytes of one key group (all states of the operator)."""
        length = piece.end - piece.begin
        if listener is not None:
            listener(self.describe(piece.handle.stream), piece.begin, length)
        return self.read_bytes(piece.handle.stream, piece.begin, length)

    def decode_piece(self, op: OperatorSnapshot, piece: KeyGroupBytes, data: bytes,
                     state_ids: Collection[int] | None = None,
                     stop_at: Collection[int] = ()) -> dict[int, KeyGroupState]:
        """Entries per state id of one key group whose bytes (:meth:`piece_bytes`) are ``data``
        (a native key group up to the first state in ``stop_at``)."""
        own = self.handle_header(op, piece.handle)
        prefix_bytes = 1 if op.max_parallelism <= 128 else 2
        decode = layout_of(piece.handle).decode
        ids = self.state_ids(op, piece.handle)
        if ids is None:
            return decode(self.key_group_data(piece, data), own, prefix_bytes, state_ids,
                          stop_at)
        to_own = {merged: index for index, merged in enumerate(ids)}
        wanted = None if state_ids is None else {to_own[s] for s in state_ids if s in to_own}
        if wanted is not None and not wanted:
            return {}  # the file has none of the states asked for
        decoded = decode(self.key_group_data(piece, data), own, prefix_bytes, wanted,
                         {to_own[s] for s in stop_at if s in to_own})
        return {ids[state_id]: entries for state_id, entries in decoded.items()}

    def key_group_data(self, piece: KeyGroupBytes, data: bytes) -> KeyGroupData:
        """``data``, the bytes of ``piece`` (:meth:`piece_bytes`), as its layout reads them
        (the file named once per file: a batch holds many key groups of few files)."""
        stream = piece.handle.stream
        source = self._sources.get(stream)
        if source is None:
            source = self._sources[stream] = self.describe(stream)
        return KeyGroupData(piece.key_group, data, source, piece.begin)

    def header_bytes(self, op: OperatorSnapshot, handle: KeyedHandle) -> bytes:
        """The bytes of the header ``handle``'s key groups are decoded with."""
        own = self.handle_header(op, handle)
        if own is self._handle_headers[self.keyed_handles(op)[0].stream]:
            return self._header_bytes[op.operator_id]  # read when the headers were merged
        return self.read_bytes(handle.stream, 0, own.data_start)

    # -- files -----------------------------------------------------------------------------

    def check_output_outside(self, output: PathOrLocation) -> None:
        """Refuse a new savepoint ``output`` inside this snapshot, or inside the job
        directory of a ``chk-<id>`` (whose ``shared/`` files it reads): writing there would
        change what is being read, and a snapshot is never changed. On an object store,
        an output of the same kind of store whose key is under theirs."""
        target = resolve(output)
        if target.is_local != self.location.is_local:
            return
        roots = [self.location.path]
        if self.location.name.startswith("chk-"):
            roots.append(os.path.dirname(self.location.path.rstrip("/")))
        if not target.is_local and target.filesystem.type_name != \
                self.location.filesystem.type_name:
            return
        for root in roots:
            inside = (is_within(root, target.path) if target.is_local else
                      (target.path.rstrip("/") + "/").startswith(root.rstrip("/") + "/"))
            if inside:
                raise InvalidArgumentError(
                    f"output {target} is inside {root}, which the new savepoint is read from:"
                    " write it outside the snapshot (and its job's checkpoint directory)")

    def check_files(self) -> int:
        """Check that every file ``_metadata`` names exists with its recorded size; their number.

        Nothing is read: the key groups' own framing is checked only by decoding them.
        """
        streams: dict[str, StreamHandle] = {}
        for op in self.operators:
            for subtask in op.subtasks:
                named = [s for h in subtask.keyed for s in h.streams]
                named += [h.stream for h in subtask.operator]
                for stream in named:
                    if stream.inline is None:
                        streams[self.file_location(stream).path] = stream
        for stream in streams.values():
            location = self.file_location(stream)
            try:
                info = location.filesystem.get_file_info(location.path)
            except OSError as error:
                raise CorruptCheckpointError(f"cannot read {location}: {error}") from None
            if info.type != pafs.FileType.File:
                raise CorruptCheckpointError(
                    f"{location}, named by {self.location.child(FLINK_METADATA)}, does not exist")
            if info.size != stream.size:
                raise CorruptCheckpointError(
                    f"{location} has {info.size} bytes; {FLINK_METADATA} records {stream.size}")
        return len(streams)

    def file_location(self, stream: StreamHandle) -> Location:
        """A recorded file, inside the snapshot directory (absolute paths by file name, and a
        checkpoint's from its job's ``shared/`` or ``taskowned/`` where Flink put them)."""
        assert stream.path is not None
        if stream.relative:
            return confined(self.location, stream.path)
        found = self._located.get(stream)
        if found is None:
            found = self._located[stream] = self._absolute(stream.path)
        return found

    def _absolute(self, path: str) -> Location:
        """Where an absolute path of a checkpoint written elsewhere is here: by its file name
        in the snapshot directory, or, for a file Flink keeps beside a ``chk-<id>`` (its
        recorded directory is ``shared`` or ``taskowned``), in that directory of the job,
        where it is looked for first."""
        parts = path.rstrip("/").rsplit("/", 2)
        name = parts[-1]
        inside = confined(self.location, name)
        beside = parts[-2] if len(parts) > 1 else ""
        if beside in BESIDE_CHECKPOINTS and checkpoint_id_of(self.location) is not None:
            kept = confined(self.location.parent, f"{beside}/{name}")
            if kept.exists() or not inside.exists():
                return kept
        return inside

    def describe(self, stream: StreamHandle) -> str:
        if stream.inline is not None:
            return self._sources.get(
                stream, f"{self.location.child(FLINK_METADATA)} (state stored inline)")
        return str(self.file_location(stream))

    def read_bytes(self, stream: StreamHandle, offset: int, length: int) -> bytes:
        """Exactly ``length`` bytes at ``offset``, or an error (a short read is never data)."""
        if stream.inline is not None:
            data = stream.inline[offset:offset + length]
        else:
            data = self._read_file(stream, offset, length)
        if len(data) != length:
            raise CorruptCheckpointError(
                f"{self.describe(stream)}: {length} bytes at offset {offset} were asked for,"
                f" {len(data)} could be read: the file is truncated or changed while read")
        return data

    def _read_file(self, stream: StreamHandle, offset: int, length: int) -> bytes:
        location = self.file_location(stream)  # confined to the snapshot
        try:
            if stream in self._regular_files:
                opened = location.filesystem.open_input_file(location.path)
            else:  # once per file: a FIFO would block every read
                opened = open_regular_file(location, f"state file named by {FLINK_METADATA}")
                self._regular_files.add(stream)
            with opened as handle:
                size = handle.size()
                if size != stream.size:
                    raise CorruptCheckpointError(
                        f"{location} has {size} bytes; {FLINK_METADATA} records {stream.size}")
                return handle.read_at(length, offset)
        except FileNotFoundError:
            raise CorruptCheckpointError(f"state file named by {FLINK_METADATA} {location} is"
                                         " missing") from None
        except OSError as error:
            raise CorruptCheckpointError(f"cannot read {location}: {error}") from None

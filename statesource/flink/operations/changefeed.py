"""The change feed between two Flink snapshots of one job: retained checkpoints or savepoints.

The diff is the format's (:class:`KeyGroupChangeFeed`): same rows, same
change semantics as between two statesource checkpoints. What differs is
where a key group's rows come from. A Flink keyed-state file interleaves
every state of the operator by key group, and a heap backend writes each
checkpoint in full, to new files. So, per key group that may have changed:

- if it is the same byte range of the same file at both ends, it is skipped
  unread (planning sees this from ``_metadata`` alone);
- otherwise both sides' raw bytes are read; if they are equal, and both ends
  decode them with the same header (same serializers, state ids and
  compression) in the same key-group layout, the key group did not change
  and is not decoded;
- otherwise both sides are decoded and diffed.

The second rule is what saves time between two heap checkpoints: no file is
ever shared, but most key groups of a job that touched few keys are byte for
byte the same, and comparing bytes costs nothing next to decoding them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.fs as pafs

from statesource.errors import (
    CheckpointNotFoundError,
    CorruptCheckpointError,
    IncompatibleCheckpointError,
    InvalidArgumentError,
)
from statesource.flink.declarations import declaration
from statesource.flink.handles import OperatorSnapshot, StreamHandle
from statesource.flink.layouts.dispatch import layout_of
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.snapshot.directory import FLINK_METADATA, FlinkSnapshot, KeyGroupBytes
from statesource.flink.statefiles.keyed_header import StateInfo
from statesource.format.changefeed import KeyGroupChangeFeed, check_forward
from statesource.format.changefeed_arrow import KeyGroupPair
from statesource.format.storage import (
    Location,
    PathOrLocation,
    checkpoint_dirs,
    checkpoint_id_of,
    is_within,
    resolve,
    snapshot_directory,
)


class FlinkChangeFeed(KeyGroupChangeFeed):
    """The changes of one keyed state from Flink snapshot ``start`` to snapshot ``end``."""

    def __init__(self, start: FlinkCheckpoint, end: FlinkCheckpoint, *,
                 operator: str | None = None, state: str | None = None) -> None:
        check_forward(start.checkpoint_id, end.checkpoint_id)
        self.start, self.end = start, end
        end_op = end.snapshot.operator(operator)
        end_meta = end.operator(end_op.operator_id)
        end_state = end_meta.keyed_state(state)  # refuses timers, lists the keyed states
        end_info = end.snapshot.keyed_state_info(end_op, end_state.name)
        start_op, start_info = _same_state(start, end, end_op, end_info)
        sides = _FlinkSides(start.snapshot, start_op, start_info, end.snapshot, end_op, end_info)
        super().__init__(end_meta, end_state.declaration, sides, state=end_state.name,
                         start_id=start.checkpoint_id, end_id=end.checkpoint_id)

    @classmethod
    def open(cls, path: PathOrLocation, start_id: int, end_id: int | None = None, *,
             operator: str | None = None, state: str | None = None,
             filesystem: pafs.FileSystem | None = None) -> FlinkChangeFeed:
        """The feed between retained checkpoints ``start_id`` and ``end_id`` (default: the
        newest) of the directory of Flink ``chk-<id>`` checkpoints at ``path``."""
        root = flink_checkpoint_root(resolve(path, filesystem))
        available = checkpoint_dirs(root, FLINK_METADATA)
        if end_id is None:
            end_id = max(available)
        start, end = (FlinkCheckpoint(_open_retained(root, available, checkpoint_id))
                      for checkpoint_id in (start_id, end_id))
        return cls(start, end, operator=operator, state=state)


def flink_checkpoint_root(location: Location) -> Location:
    """The directory of Flink ``chk-<id>`` checkpoints at ``location`` (or holding it)."""
    location = snapshot_directory(location, FLINK_METADATA)
    if location.child(FLINK_METADATA).exists():
        if checkpoint_id_of(location) is not None:
            return location.parent
        raise InvalidArgumentError(
            f"{location} is one Flink snapshot, not a directory of chk-<id> checkpoints: a change"
            " feed by checkpoint ids needs the directory; compare two snapshots with"
            " `statesource diff A B`")
    if not checkpoint_dirs(location, FLINK_METADATA):
        raise CheckpointNotFoundError(f"no Flink checkpoint (chk-<id> with {FLINK_METADATA})"
                                      f" under {location}")
    return location


def open_flink_snapshot(path: PathOrLocation, filesystem: pafs.FileSystem | None = None
                        ) -> FlinkSnapshot:
    """One Flink snapshot directory (holding ``_metadata``) for a diff; a ``chk-<id>``
    directory must hold checkpoint ``<id>`` (its ``_metadata`` is refused otherwise); the
    path of a ``_metadata`` file means its directory."""
    location = snapshot_directory(resolve(path, filesystem), FLINK_METADATA)
    if not location.child(FLINK_METADATA).exists():
        raise CheckpointNotFoundError(
            f"{location} is not a Flink snapshot: no {FLINK_METADATA} in it (give a chk-<id>"
            " or savepoint directory)")
    return FlinkSnapshot.open(location, checkpoint_id=checkpoint_id_of(location))


def _open_retained(root: Location, available: dict[int, Location], checkpoint_id: int
                   ) -> FlinkSnapshot:
    """Checkpoint ``checkpoint_id`` of the root: its directory must stay inside the root, and
    its ``_metadata`` must name the same id as the directory (else it is refused)."""
    if checkpoint_id not in available:
        raise CheckpointNotFoundError(f"no Flink checkpoint {checkpoint_id} under {root};"
                                      f" checkpoints: {sorted(available)}")
    directory = available[checkpoint_id]
    if directory.is_local and not is_within(root.path, directory.path):
        raise CorruptCheckpointError(
            f"Flink checkpoint directory {directory} leads outside {root} (a symlink)")
    return FlinkSnapshot.open(directory, checkpoint_id=checkpoint_id)


def _same_state(start: FlinkCheckpoint, end: FlinkCheckpoint, end_op: OperatorSnapshot,
                end_info: StateInfo) -> tuple[OperatorSnapshot | None, StateInfo | None]:
    """The operator and state in the start snapshot (None: it had no such state), refusing
    a different max parallelism, key type, kind or serializer."""
    op = next((o for o in start.snapshot.operators if o.operator_id == end_op.operator_id), None)
    header = None if op is None else start.snapshot.header(op)
    info = None if header is None else next(
        (s for s in header.states if s.name == end_info.name), None)
    if op is None or info is None:
        return None, None
    end_header = end.snapshot.header(end_op)
    assert header is not None and end_header is not None
    label = end_op.label
    start_key, end_key = header.key.data_type(), end_header.key.data_type()
    if op.max_parallelism != end_op.max_parallelism or start_key != end_key:
        raise IncompatibleCheckpointError(
            f"operator {label!r} has key type {start_key} and max parallelism"
            f" {op.max_parallelism} in Flink checkpoint {start.checkpoint_id} but {end_key} and"
            f" {end_op.max_parallelism} in checkpoint {end.checkpoint_id}: a change feed needs"
            " the same key groups")
    if info.is_timer or _serializers(info) != _serializers(end_info):
        raise IncompatibleCheckpointError(
            f"state {end_info.name!r} of operator {label!r} is {_describe(info)} in Flink"
            f" checkpoint {start.checkpoint_id} but {_describe(end_info)} in checkpoint"
            f" {end.checkpoint_id}: a change feed needs the same types")
    return op, info


def _serializers(info: StateInfo) -> tuple:
    """What must agree for two states' values to compare: kind, serializers, value types."""
    return (info.kind, sorted((role, s.describe()) for role, s in info.serializers.items()),
            declaration(info).schemas, declaration(info).namespace_type)


def _describe(info: StateInfo) -> str:
    if info.is_timer:
        return "a timer state"
    serializers = ", ".join(f"{role} {s.describe()}" for role, s in info.serializers.items())
    return f"{info.kind.value} state ({serializers})"


class _FlinkSides:
    """One keyed state's key groups at both ends, as raw bytes first, decoded if they differ."""

    def __init__(self, start: FlinkSnapshot, start_op: OperatorSnapshot | None,
                 start_info: StateInfo | None, end: FlinkSnapshot, end_op: OperatorSnapshot,
                 end_info: StateInfo) -> None:
        self.start, self.start_op, self.start_info = start, start_op, start_info
        self.end, self.end_op, self.end_info = end, end_op, end_info
        self._pieces: tuple[dict[int, KeyGroupBytes], dict[int, KeyGroupBytes]] | None = None
        self._same_headers: dict[tuple[StreamHandle, StreamHandle], bool] = {}
        # Readers of each end, which keep their column decoders from key group to key group.
        self._readers = (FlinkCheckpoint(start), FlinkCheckpoint(end))

    def _by_key_group(self) -> tuple[dict[int, KeyGroupBytes], dict[int, KeyGroupBytes]]:
        if self._pieces is None:
            before = ({} if self.start_op is None else
                      {p.key_group: p for p in self.start.key_group_bytes(self.start_op)})
            after = {p.key_group: p for p in self.end.key_group_bytes(self.end_op)}
            self._pieces = before, after
        return self._pieces

    def changed_key_groups(self) -> list[int]:
        """Key groups that are not the same byte range of the same file at both ends."""
        before, after = self._by_key_group()
        return sorted(kg for kg in before.keys() | after.keys()
                      if _where(self.start, before.get(kg)) is None
                      or _where(self.start, before.get(kg)) != _where(self.end, after.get(kg)))

    def pairs(self, key_groups: list[int]) -> Iterator[KeyGroupPair]:
        """Both sides of each key group, one key group at a time; those whose bytes are
        equal at both ends (decoded by equal headers in one layout) are left out."""
        before, after = self._by_key_group()
        for key_group in key_groups:
            old, new = before.get(key_group), after.get(key_group)
            old_bytes = None if old is None else self.start.piece_bytes(old)
            new_bytes = None if new is None else self.end.piece_bytes(new)
            if (old is not None and new is not None and old_bytes == new_bytes
                    and layout_of(old.handle) is layout_of(new.handle)
                    and self._headers_equal(old, new)):
                continue
            yield (key_group,
                   _table(self._readers[0], self.start_op, self.start_info, old, old_bytes),
                   _table(self._readers[1], self.end_op, self.end_info, new, new_bytes))

    def _headers_equal(self, old: KeyGroupBytes, new: KeyGroupBytes) -> bool:
        """Whether both ends decode a key group with byte-identical headers (each file
        with its own), compared once per pair of files."""
        files = (old.handle.stream, new.handle.stream)
        if files not in self._same_headers:
            assert self.start_op is not None
            self._same_headers[files] = (self.start.header_bytes(self.start_op, old.handle)
                                         == self.end.header_bytes(self.end_op, new.handle))
        return self._same_headers[files]


def _table(reader: FlinkCheckpoint, op: OperatorSnapshot | None, info: StateInfo | None,
           piece: KeyGroupBytes | None, data: bytes | None) -> pa.Table | None:
    """One side's rows of one key group in the format's data schema (None: no rows), decoded
    as the reader decodes it: column-wise where it can."""
    if op is None or info is None or piece is None or data is None:
        return None
    tables = list(reader.piece_tables(op, info, piece, data))
    return tables[0] if tables else None


def _where(snapshot: FlinkSnapshot, piece: KeyGroupBytes | None
           ) -> tuple[str, int, int] | None:
    """The file and byte range of a key group; None for none, or for bytes stored inline in
    ``_metadata`` (never taken for the same range: they are compared byte by byte)."""
    if piece is None or piece.handle.stream.inline is not None:
        return None
    return snapshot.file_location(piece.handle.stream).uri, piece.begin, piece.end

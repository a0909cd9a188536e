"""What a Flink ``_metadata`` file records: operators, their subtasks and their state handles.

The vocabulary every part of the flink package shares: :mod:`snapshot.metadata
<statesource.flink.snapshot.metadata>` parses it from a file and writes it back,
the state-file readers follow its handles to their bytes, and the operations build
new ones. Nothing here reads or writes bytes, so it sits below all of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import mmh3

from statesource.errors import InvalidArgumentError
from statesource.model import DistributionMode


@dataclass(frozen=True)
class StreamHandle:
    """Where a state file's bytes are: a path (relative to the snapshot or absolute) or inline.

    Inline bytes come with the name Flink gave their handle (``handle_name``).
    """

    path: str | None
    relative: bool
    size: int
    inline: bytes | None = None
    handle_name: str | None = None


@dataclass(frozen=True)
class KeyedHandle:
    """One subtask's keyed state: key groups ``start .. start+len(offsets)-1`` in ``stream``.

    A checkpoint's handle carries a state handle id (``handle_id``, Flink's
    ``KEY_GROUPS_HANDLE_V2``); a savepoint's has none, nor has the older
    ``KEY_GROUPS_HANDLE``.
    """

    start: int
    offsets: tuple[int, ...]
    stream: StreamHandle
    savepoint: bool
    handle_id: str | None = None

    @property
    def end(self) -> int:
        return self.start + len(self.offsets) - 1

    @property
    def streams(self) -> tuple[StreamHandle, ...]:
        """Every stream the handle names."""
        return (self.stream,)


@dataclass(frozen=True)
class RocksDBFile:
    """One file of a RocksDB database in a snapshot: its name in the database's directory
    (``000123.sst``, ``MANIFEST-000004``, ``CURRENT``), which is what the MANIFEST names it
    by, and where the snapshot keeps its bytes (under another name: Flink uploads each file
    as a UUID)."""

    name: str
    stream: StreamHandle


@dataclass(frozen=True)
class RocksDBHandle:
    """One subtask's keyed state as the files of its RocksDB database (Flink's
    ``IncrementalRemoteKeyedStateHandle``): what a native savepoint and every RocksDB
    checkpoint of Flink 2.x (1.x: incremental or not) record, in place of key-group offsets
    into one file.

    ``meta`` holds the keyed-state header of the states, whose column families the
    database's tables hold; ``shared`` the files later checkpoints may reuse (SST files),
    ``private`` this snapshot's own (``CURRENT``, the MANIFEST, ``OPTIONS``, and all of them
    in a non-incremental checkpoint). Version 2 of the handle (type 11, what Flink 1.20 and
    2.x write) adds the checkpointed size and the state handle id; version 1 (type 5, older
    releases) has neither.
    """

    start: int
    count: int
    """The number of key groups, ``start .. start+count-1``."""
    checkpoint_id: int
    backend_id: str
    meta: StreamHandle
    shared: tuple[RocksDBFile, ...]
    private: tuple[RocksDBFile, ...]
    checkpointed_size: int | None = None
    handle_id: str | None = None

    @property
    def end(self) -> int:
        return self.start + self.count - 1

    @property
    def files(self) -> tuple[RocksDBFile, ...]:
        return self.shared + self.private

    @property
    def streams(self) -> tuple[StreamHandle, ...]:
        """Every stream the handle names: the meta data's, then its files'."""
        return (self.meta, *(f.stream for f in self.files))


KeyedStateHandle = KeyedHandle | RocksDBHandle
"""A subtask's managed keyed state as ``_metadata`` records it: key groups at offsets of one
file, or a RocksDB database's files."""


@dataclass(frozen=True)
class OperatorStateOffsets:
    name: str
    mode: DistributionMode
    offsets: tuple[int, ...]


@dataclass(frozen=True)
class OperatorHandle:
    """One subtask's operator state file and the element offsets of each state in it."""

    states: tuple[OperatorStateOffsets, ...]
    stream: StreamHandle


@dataclass(frozen=True)
class SubtaskState:
    """One subtask's managed keyed and operator state, and the raw state user code wrote.

    Each tuple holds at most one handle (Flink writes one or none of each).
    """

    index: int
    keyed: tuple[KeyedStateHandle, ...]
    operator: tuple[OperatorHandle, ...]
    raw_keyed: tuple[KeyedHandle, ...] = ()
    raw_operator: tuple[OperatorHandle, ...] = ()


@dataclass(frozen=True)
class OperatorSnapshot:
    name: str | None
    uid: str | None
    operator_id: str
    parallelism: int
    max_parallelism: int
    subtasks: tuple[SubtaskState, ...]
    coordinator: StreamHandle | None = None
    finished: bool = False
    """Whether every subtask had finished (Flink then records no subtask at all)."""

    @property
    def label(self) -> str:
        """How users name the operator: its uid, else its hex id."""
        return self.uid or self.operator_id

    def named(self, name: str) -> bool:
        """Whether ``name`` is this operator's identity: its uid, its hex id, or a uid whose hash
        is its id (a Flink 1.x ``_metadata`` records ids only). The name Flink gave it (what
        ``inspect`` shows, ``GroupAggregate[5]``) names it too, where no other operator has
        that name: :func:`pick_operator` decides that, among all of a snapshot's operators."""
        return name in (self.label, self.operator_id) or self.operator_id == operator_id_of(name)


@dataclass(frozen=True)
class SnapshotMetadata:
    """A whole ``_metadata`` file.

    ``master_states`` are the checkpoint hooks' states, each the block after
    its magic number and length (int version, UTF name, int length and
    payload); ``properties`` the trailing Java-serialized
    ``CheckpointProperties`` (the snapshot's type: checkpoint or savepoint,
    canonical or native), as bytes.
    """

    version: int
    checkpoint_id: int
    operators: tuple[OperatorSnapshot, ...]
    master_states: tuple[bytes, ...] = ()
    properties: bytes = b""


def pick_operator(operators: Iterable[OperatorSnapshot], name: str) -> OperatorSnapshot | None:
    """The operator ``name`` names, or None: the one whose identity it is
    (:meth:`OperatorSnapshot.named`), else the one Flink gave that name (Flink 2.x records
    names: ``GroupAggregate[5]`` is how a SQL user knows an operator whose uid the planner
    generated). A name several operators have is refused, listing them: which one is meant
    cannot be told, and reading or rewriting the wrong one must not happen quietly."""
    candidates = list(operators)
    for op in candidates:
        if op.named(name):
            return op
    called = [op for op in candidates if op.name == name]
    if len(called) > 1:
        raise InvalidArgumentError(
            f"{len(called)} operators are named {name!r}: "
            + ", ".join(repr(op.label) for op in called) + "; name one by its uid or hex id")
    return called[0] if called else None


def operator_id_of(uid: str) -> str:
    """Flink's operator id of a uid: MurmurHash3 x64 128 (seed 0) of its UTF-8 bytes, in hex."""
    return mmh3.hash_bytes(uid.encode("utf-8"), 0, x64arch=True).hex()

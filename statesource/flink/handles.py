"""What a Flink ``_metadata`` file records: operators, their subtasks and their state handles.

The vocabulary every part of the flink package shares: :mod:`snapshot.metadata
<statesource.flink.snapshot.metadata>` parses it from a file and writes it back,
the state-file readers follow its handles to their bytes, and the operations build
new ones. Nothing here reads or writes bytes, so it sits below all of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import mmh3

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
    keyed: tuple[KeyedHandle, ...]
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
        """Whether ``name`` names this operator: its uid, its hex id, or a uid whose hash is its
        id (a Flink 1.x ``_metadata`` records ids only)."""
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


def operator_id_of(uid: str) -> str:
    """Flink's operator id of a uid: MurmurHash3 x64 128 (seed 0) of its UTF-8 bytes, in hex."""
    return mmh3.hash_bytes(uid.encode("utf-8"), 0, x64arch=True).hex()

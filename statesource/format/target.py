"""Where a write goes: the one interface every producer of a new snapshot writes through.

A write has two halves that run in different places. Tasks (Spark executors,
or a loop on one machine) turn one Flink subtask's rows of one keyed state,
already typed, sorted and grouped by key group, into a file: that is a
:class:`KeyedStateSink`, small and picklable. The driver stages what the
tasks wrote as states of a :class:`~statesource.format.edit.CheckpointEdit`
of the base snapshot and publishes the result whole, or removes every
written file: that is a :class:`SnapshotTarget`.

statesource checkpoints are :class:`CheckpointTarget`; a Flink savepoint is
another implementation of the same two protocols, so the Spark writer, the
rewrite and the rescale jobs never ask where they write.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa

from statesource.checks import check_checkpoint_id
from statesource.errors import (
    CheckpointExistsError,
    CheckpointNotFoundError,
    InvalidArgumentError,
)
from statesource.format.commit import CheckpointInfo, commit_checkpoint
from statesource.format.datafile import write_keyed_file
from statesource.format.edit import CheckpointEdit
from statesource.format.locations import DataFile
from statesource.format.metadata import CheckpointMeta
from statesource.format.metadata_file import read_metadata
from statesource.format.pins import Pin, pin_listed
from statesource.format.source import STATESOURCE
from statesource.format.storage import (
    METADATA_FILE,
    Location,
    check_writable_root,
    complete_checkpoints,
    confined,
    new_data_file,
    remove_attempt,
    resolve,
)
from statesource.keygroups import KeyGroupRange
from statesource.model import StateDeclaration
from statesource.types import DataType

KeyGroupBatches = Iterator[tuple[int, Sequence[pa.RecordBatch], int]]
"""``(key group, batches, entries)`` in ascending key-group order, as
:func:`~statesource.format.datafile.write_keyed_file` takes them."""


class KeyedStateSink(Protocol):
    """The task side of a write: files of one keyed state. Picklable, as tasks receive it."""

    def write_subtask(self, subtask: int, key_groups: KeyGroupRange, schema: pa.Schema,
                      batches: KeyGroupBatches) -> DataFile:
        """Write the rows a task holds of ``subtask``, spanning ``key_groups``."""

    def remove(self, files: Iterable[DataFile]) -> None:
        """Remove files this sink wrote that will not be published."""


class SnapshotTarget(Protocol):
    """The driver side of a write: one new snapshot, staged and then published or discarded."""

    kind: str
    checkpoint_id: int
    timestamp_ms: int

    @property
    def edit(self) -> CheckpointEdit:
        """The new snapshot's content so far: the base's operators, then staged changes."""

    def operator_uid(self, name: str) -> str:
        """The uid :attr:`edit` knows the operator ``name`` (a uid, or another name of it) by."""

    def sink(self, operator: str, state: StateDeclaration, key_type: DataType,
             max_parallelism: int) -> KeyedStateSink:
        """Where the tasks of a write of keyed state ``state`` of ``operator`` (keyed by
        ``key_type``, under ``max_parallelism``) put its files; refused when this target
        cannot hold such a state."""

    def publish(self) -> CheckpointInfo:
        """Make the staged snapshot visible, atomically; raise with nothing visible."""

    def remove(self, files: Iterable[DataFile]) -> None:
        """Remove written files that will not be published."""

    def missing(self, files: Iterable[DataFile]) -> list[str]:
        """The written files this process cannot see (on a local path, tasks on other
        machines wrote them to their own disks)."""


@dataclass(frozen=True)
class CheckpointStateSink:
    """Data files of one keyed state of checkpoint ``checkpoint_id`` under ``root``."""

    root: Location
    checkpoint_id: int
    operator: str
    state: str

    def write_subtask(self, subtask: int, key_groups: KeyGroupRange, schema: pa.Schema,
                      batches: KeyGroupBatches) -> DataFile:
        location, relative = new_data_file(
            self.root, self.checkpoint_id,
            f"{self.operator}.{self.state}.sub{subtask}.kg{key_groups.start}-{key_groups.end}")
        return write_keyed_file(location, relative, schema, key_groups, batches)

    def remove(self, files: Iterable[DataFile]) -> None:
        remove_files(self.root, files)


class CheckpointTarget:
    """A new statesource checkpoint under ``root``, derived from ``base`` (None: from nothing).

    Carried-over states keep referencing the base's data files; the commit is
    :func:`~statesource.format.commit.commit_checkpoint`'s. The base's files
    are pinned from the start (docs/FORMAT.md section 11), so a ``retain``
    running while tasks write cannot delete them. The pin is a file, not a
    part of this object: Spark opens the target in one process and publishes
    or discards a pickled copy in another, so the pin goes only when a copy is
    published (:meth:`publish`) or discarded (:meth:`remove`), never with a
    copy garbage-collected. A writer that never gets there (killed) leaves a
    pin that ``retain --older-than`` expires.
    """

    kind = STATESOURCE

    def __init__(self, root: Location, base: CheckpointMeta | None, checkpoint_id: int,
                 timestamp_ms: int) -> None:
        self.root = root
        self.base = base
        self.checkpoint_id = checkpoint_id
        self.timestamp_ms = timestamp_ms
        self._edit = CheckpointEdit(base)
        self.pin: Pin | None = None
        if base is not None:
            self.pin = pin_listed(root, checkpoint_id, base.referenced_files())

    @classmethod
    def open(cls, path: str | None, base_checkpoint_id: int | None = None,
             checkpoint_id: int | None = None) -> CheckpointTarget:
        """Open the base (default: the newest complete checkpoint, or none in an empty root)
        and choose the new id (default: newest + 1; an existing id is refused)."""
        if not path:
            raise InvalidArgumentError(
                "write option path is required: the directory of checkpoints")
        root = resolve(path)
        if root.child(METADATA_FILE).exists():
            raise InvalidArgumentError(
                f"path {root} is one checkpoint; give the directory of checkpoints it belongs to")
        check_writable_root(root)
        complete = complete_checkpoints(root)
        base = _open_base(root, complete, base_checkpoint_id)
        if checkpoint_id is None:
            checkpoint_id = max(complete, default=0) + 1
        check_checkpoint_id(checkpoint_id)
        if checkpoint_id in complete:
            raise CheckpointExistsError(
                f"checkpoint {checkpoint_id} already exists under {root}; checkpoints are never"
                " overwritten: choose another checkpointId")
        return cls(root, base, checkpoint_id, time.time_ns() // 1_000_000)

    @property
    def edit(self) -> CheckpointEdit:
        return self._edit

    def operator_uid(self, name: str) -> str:
        return name

    def sink(self, operator: str, state: StateDeclaration, key_type: DataType,
             max_parallelism: int) -> CheckpointStateSink:
        return CheckpointStateSink(self.root, self.checkpoint_id, operator, state.name)

    def publish(self) -> CheckpointInfo:
        try:
            return commit_checkpoint(self.root, self._edit.build(self.checkpoint_id,
                                                                 self.timestamp_ms), self.pin)
        finally:
            if self.pin is not None:
                self.pin.release()

    def remove(self, files: Iterable[DataFile]) -> None:
        """Remove written files; a target that removes files is being discarded (a
        publish removes superseded files only after publishing), so the base's pin goes too."""
        remove_files(self.root, files)
        if self.pin is not None:
            self.pin.release()

    def missing(self, files: Iterable[DataFile]) -> list[str]:
        return missing_files(self.root, files)


def missing_files(root: Location, files: Iterable[DataFile]) -> list[str]:
    """The paths of ``files`` that do not exist under ``root``."""
    return [data_file.path for data_file in files
            if not confined(root, data_file.path).exists()]


def remove_files(root: Location, files: Iterable[DataFile]) -> None:
    """Remove data files a write produced but did not commit."""
    remove_attempt(confined(root, data_file.path) for data_file in files)


def _open_base(root: Location, complete: dict[int, Location],
               base_id: int | None) -> CheckpointMeta | None:
    if base_id is None:
        return read_metadata(complete[max(complete)]) if complete else None
    if base_id not in complete:
        raise CheckpointNotFoundError(
            f"base checkpoint {base_id} does not exist under {root}; complete checkpoints:"
            f" {sorted(complete) or 'none'}")
    return read_metadata(complete[base_id])

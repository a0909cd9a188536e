"""The one place that decides what kind of snapshot a path holds, and opens it.

A Flink savepoint or checkpoint has a ``_metadata`` file (in the directory, or
in its newest ``chk-<id>``); anything else is read as statesource checkpoints.
Callers get a :class:`~statesource.format.source.StateSource` (or a change
feed) and never ask which kind it is; a :class:`SourceRef` carries the
decision to the places that open the snapshot again, such as Spark tasks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pyarrow.fs as pafs

from statesource.errors import InvalidArgumentError
from statesource.flink.operations.changefeed import FlinkChangeFeed
from statesource.flink.operations.savepoint_target import FlinkSavepointTarget
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.serializers.mapping import PojoClass
from statesource.flink.snapshot.directory import find_flink_snapshot
from statesource.format.changefeed import ChangeFeed, KeyGroupChangeFeed
from statesource.format.reader import Checkpoint
from statesource.format.source import FLINK, STATESOURCE, SourceRef, StateSource
from statesource.format.storage import Location, PathOrLocation, resolve
from statesource.format.target import CheckpointTarget, SnapshotTarget

_OPENERS: dict[str, Callable[..., StateSource]] = {
    STATESOURCE: Checkpoint.open,
    FLINK: FlinkCheckpoint.open,
}
_FEEDS: dict[str, type[ChangeFeed] | type[FlinkChangeFeed]] = {
    STATESOURCE: ChangeFeed,
    FLINK: FlinkChangeFeed,
}


def kind_of(location: Location, checkpoint_id: int | None = None) -> str:
    """:data:`~statesource.format.source.FLINK` or
    :data:`~statesource.format.source.STATESOURCE`, judged from what lies at ``location``."""
    return FLINK if find_flink_snapshot(location, checkpoint_id) is not None else STATESOURCE


def open_source(path: PathOrLocation, checkpoint_id: int | None = None,
                filesystem: pafs.FileSystem | None = None) -> StateSource:
    """The snapshot at ``path``: a Flink savepoint or checkpoint, or a statesource checkpoint
    (``path`` may also be a directory of checkpoints; ``checkpoint_id`` picks one)."""
    kind = kind_of(resolve(path, filesystem), checkpoint_id)
    return _OPENERS[kind](path, checkpoint_id=checkpoint_id, filesystem=filesystem)


def reopen(ref: SourceRef) -> StateSource:
    """The snapshot ``ref`` names, opened as the kind it was found to be."""
    return _OPENERS[ref.kind](ref.location, checkpoint_id=ref.checkpoint_id)


def open_target(path: str | None, output: str | None = None, *,
                base_checkpoint_id: int | None = None,
                checkpoint_id: int | None = None,
                pojos: Mapping[str, PojoClass] | None = None,
                flink_version: str | None = None,
                compression: str | None = None) -> SnapshotTarget:
    """Where a write goes: a new Flink savepoint directory ``output`` derived from the Flink
    snapshot at ``path`` (or from nothing), else a new statesource checkpoint under ``path``.
    ``pojos`` declares the Java classes of records a new Flink state holds as POJOs (a
    statesource checkpoint has no Java classes: refused there); ``flink_version`` the Flink
    release a savepoint made from nothing is for (one derived from a snapshot is for that
    snapshot's); ``compression`` the savepoint's Snappy compression
    (:mod:`statesource.flink.snapshot.compression`).

    A Flink snapshot is never written in place, and a statesource checkpoint never becomes a
    savepoint by a write (``export-flink`` does that): both are refused, naming the cure.
    """
    flink = path is not None and resolve(path).exists() and kind_of(
        resolve(path), base_checkpoint_id) == FLINK
    if output is None:
        if flink:
            raise InvalidArgumentError(
                f"{path} is a Flink snapshot, which is never written in place: give output,"
                " the new savepoint directory to write")
        if pojos:
            raise InvalidArgumentError(
                f"POJO classes ({', '.join(sorted(pojos))}) are of a new Flink savepoint's"
                f" records; {path} gets a statesource checkpoint: give output, or no POJOs")
        if flink_version is not None:
            raise InvalidArgumentError(
                f"Flink version {flink_version} is of a new Flink savepoint; {path} gets a"
                " statesource checkpoint: give output, or no Flink version")
        if compression is not None:
            raise InvalidArgumentError(
                f"compression {compression} is of a new Flink savepoint; {path} gets a"
                " statesource checkpoint (Arrow IPC files): give output, or no compression")
        return CheckpointTarget.open(path, base_checkpoint_id, checkpoint_id)
    if path is not None and not flink:
        raise InvalidArgumentError(
            f"output {output} is a new Flink savepoint, but {path} is not a Flink snapshot:"
            " write a statesource checkpoint without output, or turn it into a savepoint"
            " with statesource export-flink")
    return FlinkSavepointTarget.open(path, output, base_checkpoint_id, checkpoint_id, pojos,
                                     flink_version, compression)


def open_change_feed(path: PathOrLocation, start_id: int, end_id: int | None, *,
                     operator: str | None, state: str | None,
                     filesystem: pafs.FileSystem | None = None,
                     kind: str | None = None) -> KeyGroupChangeFeed:
    """The change feed of one keyed state between two checkpoints of the root at ``path``:
    retained Flink ``chk-<id>`` checkpoints or statesource ones (``kind``, when known)."""
    if kind is None:
        kind = kind_of(resolve(path, filesystem))
    return _FEEDS[kind].open(path, start_id, end_id, operator=operator, state=state,
                             filesystem=filesystem)

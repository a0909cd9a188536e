"""Publishing a checkpoint: the one commit every producer ends with.

A checkpoint exists exactly when its ``_metadata.json`` does, so the commit
is the metadata appearing at once and only if no checkpoint of that id
exists. A producer that carries files of other checkpoints over (rescaling,
rewriting one state, an incremental checkpoint) must never publish a
checkpoint that a concurrent ``retain`` is emptying: the commit first pins
those files (:mod:`statesource.format.pins`), then checks that a complete
checkpoint still lists each of them, and only then publishes; the argument
why this suffices is docs/FORMAT.md section 11.
"""

from __future__ import annotations

import contextlib
import os
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace

from statesource.errors import CheckpointExistsError, CorruptCheckpointError
from statesource.format.exclusive import AlreadyExists, put_if_absent
from statesource.format.metadata import CheckpointMeta
from statesource.format.pins import Pin, check_still_listed, pin_files
from statesource.format.storage import (
    METADATA_FILE,
    Location,
    check_files,
    check_writable_root,
    checkpoint_dir_name,
    sync_directory,
)


class NonExclusiveCommitWarning(UserWarning):
    """A commit on a file system where two writers of one id cannot be told apart."""


@dataclass(frozen=True)
class CheckpointInfo:
    """A committed checkpoint: where it is and what its metadata says."""

    location: Location
    metadata: CheckpointMeta

    @property
    def checkpoint_id(self) -> int:
        return self.metadata.checkpoint_id

    @property
    def path(self) -> str:
        """The checkpoint's full URI (scheme and endpoint query kept; a plain local path)."""
        return self.location.uri

    def __repr__(self) -> str:
        """Short, whatever the checkpoint holds (its metadata lists every file): the id, the
        location (without credentials) and how many operators, states and files."""
        meta = self.metadata
        states = sum(len(op.keyed_states) + len(op.operator_states) for op in meta.operators)
        return (f"CheckpointInfo(checkpoint_id={meta.checkpoint_id},"
                f" location={str(self.location)!r}, operators={len(meta.operators)},"
                f" states={states}, files={len(_listed_paths(meta))})")


def _listed_paths(meta: CheckpointMeta) -> set[str]:
    """The data files the metadata names, unchecked: a repr never fails (the metadata of a
    Flink savepoint written from Spark names its operator states' files by no path)."""
    paths = {f.path for op in meta.operators for state in op.keyed_states
             for f in (*state.files, *(d.file for d in state.delta_files))}
    paths.update(state.path for op in meta.operators for state in op.operator_states)
    paths.discard("")
    return paths


def commit_checkpoint(root: Location, metadata: CheckpointMeta, pin: Pin | None = None
                      ) -> CheckpointInfo:
    """Publish ``metadata`` as checkpoint ``metadata.checkpoint_id`` under ``root``.

    Raises :class:`CheckpointExistsError` when that id is already committed,
    including when another writer commits it first; the caller then owns the
    cleanup of its data files. ``pin`` is one the writer took when it started
    relying on other checkpoints' files (and checked then): while it exists,
    the files it names need no second check.
    """
    check_writable_root(root)
    directory = root.child(checkpoint_dir_name(metadata.checkpoint_id))
    target = directory.child(METADATA_FILE)
    if target.exists():
        raise _exists(metadata.checkpoint_id, directory)
    own = f"{directory.name}/"
    foreign = [path for path in metadata.referenced_files() if not path.startswith(own)]
    commit_pin = pin_files(root, metadata.checkpoint_id, foreign) if foreign else None
    try:
        covered = pin.files if pin is not None and pin.exists() else frozenset()
        check_still_listed(root, set(foreign) - covered, metadata.checkpoint_id)
        _check_referenced_files(root, metadata)
        directory.filesystem.create_dir(directory.path, recursive=True)
        _publish(target, metadata)
    finally:
        if commit_pin is not None:
            commit_pin.release()
    return CheckpointInfo(directory, replace(metadata, format_version=metadata.lowest_version))


def _publish(target: Location, metadata: CheckpointMeta) -> None:
    payload = metadata.to_json_bytes()
    if target.is_local:
        _publish_local(target, payload, metadata.checkpoint_id)
    else:
        _publish_remote(target, payload, metadata.checkpoint_id)


def _publish_remote(target: Location, payload: bytes, checkpoint_id: int) -> None:
    """One upload, visible whole; exclusive where the store has a conditional create (S3's
    ``If-None-Match``), else guarded only by the existence check before it."""
    create_exclusively(
        target, payload, lambda: _exists(checkpoint_id, target.parent),
        f"committing checkpoint {checkpoint_id}", "the same id could replace it"
        " (docs/FORMAT.md, section 9); give each writer its own ids")


def create_exclusively(target: Location, payload: bytes, taken: Callable[[], Exception],
                       doing: str, race: str) -> None:
    """Create ``target`` holding ``payload`` in one upload, only if absent where the store has
    a conditional create (``taken()`` is raised when it exists); elsewhere written plainly,
    with a :class:`NonExclusiveCommitWarning` saying what (``doing``) a writer racing for
    ``race`` could do. Both the format's commit and a Flink savepoint's publish end here."""
    try:
        if put_if_absent(target, payload):
            return
    except AlreadyExists:
        raise taken() from None
    warnings.warn(
        f"{doing} on {target.filesystem.type_name!r}: no create-if-absent is available there"
        f" (S3 has one: pip install statesource[s3]), so a second writer racing for {race}",
        NonExclusiveCommitWarning, stacklevel=4)
    with target.filesystem.open_output_stream(target.path) as out:
        out.write(payload)


def _check_referenced_files(root: Location, metadata: CheckpointMeta) -> None:
    try:
        check_files(root, metadata.referenced_files())
    except CorruptCheckpointError as error:
        raise CorruptCheckpointError(
            f"checkpoint {metadata.checkpoint_id} references a file it cannot rely on: {error}:"
            " not committing") from None


def _publish_local(target: Location, payload: bytes, checkpoint_id: int) -> None:
    """Write a durable temporary sibling, then hard-link it to the final name.

    ``link`` fails when the name exists, which rename would silently replace:
    of two writers racing for one id exactly one wins. The directory is synced
    so the new name survives a power loss.
    """
    temporary = f"{target.path}.tmp-{uuid.uuid4().hex}"
    try:
        with open(temporary, "wb") as out:
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(temporary, target.path)
        except FileExistsError:
            raise _exists(checkpoint_id, target.parent) from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
    sync_directory(target.parent.path)


def _exists(checkpoint_id: int, directory: Location) -> CheckpointExistsError:
    return CheckpointExistsError(
        f"checkpoint {checkpoint_id} already exists at {directory}; checkpoints are never"
        " overwritten: choose another id"
    )

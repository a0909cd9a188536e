"""Pins: how a writer tells ``retain`` which files of other checkpoints it relies on.

A writer that carries files of other checkpoints over (a rewrite, a rescale,
an incremental checkpoint) writes a *pin* into ``<root>/_pins/`` naming those
files, then checks that a complete checkpoint still lists each of them, and
removes the pin only after publishing (or giving up). ``retain`` deletes
expired pins first, then retires, then reads every remaining pin and never
deletes a pinned file. docs/FORMAT.md section 11 proves that the two orders
together mean no published checkpoint ever references a deleted file.

A pin is one small JSON object written atomically (a fsynced temporary sibling
renamed on a local disk, one upload on an object store). Pins are read from
disk by ``retain``, so they are untrusted input like metadata.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow.fs as pafs

from statesource.errors import CheckpointRetiredError, CorruptCheckpointError
from statesource.format.metadata import MAX_METADATA_BYTES
from statesource.format.metadata_file import read_metadata
from statesource.format.storage import (
    Location,
    check_relative_path,
    checkpoint_dir_name,
    complete_checkpoints,
    open_regular_file,
    sync_directory,
)

PINS_DIR = "_pins"
_PIN_SUFFIX = ".json"


@dataclass(frozen=True)
class Pin:
    """A pin on disk: the files of other checkpoints a writer of ``checkpoint_id`` relies on."""

    location: Location
    checkpoint_id: int
    files: frozenset[str]

    def exists(self) -> bool:
        return self.location.exists()

    def release(self) -> None:
        """Remove the pin; one already gone (expired and removed by ``retain``) is fine.

        An emptied local pins directory goes too, so a finished write leaves no
        trace (a writer creating its pin there meanwhile retries, see :func:`pin_files`).
        """
        with contextlib.suppress(FileNotFoundError):
            self.location.filesystem.delete_file(self.location.path)
        if self.location.is_local:
            with contextlib.suppress(OSError):
                os.rmdir(self.location.parent.path)


@dataclass(frozen=True)
class PinFile:
    """A file found in the pins directory, with its modification time (seconds)."""

    location: Location
    mtime: float

    @property
    def is_pin(self) -> bool:
        """Pins end in ``.json``; anything else there is a crashed writer's temporary file."""
        return self.location.name.endswith(_PIN_SUFFIX)


def pin_files(root: Location, checkpoint_id: int, files: Iterable[str]) -> Pin:
    """Write a pin naming ``files`` (root-relative paths) for a writer of ``checkpoint_id``."""
    pin = Pin(root.child(PINS_DIR, f"{checkpoint_dir_name(checkpoint_id)}-{uuid.uuid4().hex}"
                         f"{_PIN_SUFFIX}"), checkpoint_id, frozenset(files))
    payload = json.dumps({"checkpointId": checkpoint_id, "files": sorted(pin.files)}).encode()
    filesystem = root.filesystem
    if not root.is_local:
        with filesystem.open_output_stream(pin.location.path) as out:
            out.write(payload)
        return pin
    for attempt in range(3):  # another writer's release may remove the emptied directory
        filesystem.create_dir(pin.location.parent.path, recursive=True)
        try:
            _write_local(pin.location.path, payload)
            return pin
        except FileNotFoundError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _write_local(path: str, payload: bytes) -> None:
    """Atomically: a fsynced temporary sibling renamed to ``path``, the directory synced."""
    temporary = f"{path}.tmp-{uuid.uuid4().hex}"
    try:
        with open(temporary, "wb") as out:
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
    sync_directory(os.path.dirname(path))


def pin_listed(root: Location, checkpoint_id: int, files: Iterable[str]) -> Pin:
    """Pin ``files`` for a writer of ``checkpoint_id`` that starts relying on them, and
    check that they are still listed: from then on ``retain`` leaves them alone."""
    pin = pin_files(root, checkpoint_id, files)
    try:
        check_still_listed(root, pin.files, checkpoint_id)
    except BaseException:
        pin.release()
        raise
    return pin


def pin_directory_files(root: Location) -> list[PinFile]:
    """Every file in ``root``'s pins directory."""
    selector = pafs.FileSelector(root.child(PINS_DIR).path, allow_not_found=True)
    return [PinFile(Location(root.filesystem, info.path), _seconds(info.mtime_ns))
            for info in root.filesystem.get_file_info(selector)
            if info.type == pafs.FileType.File]


def read_pin(pin_file: PinFile) -> Pin:
    """Parse one pin; anything but the shape :func:`pin_files` writes is corruption."""
    with open_regular_file(pin_file.location, "pin") as handle:
        size = handle.size()
        if size > MAX_METADATA_BYTES:
            raise CorruptCheckpointError(f"pin {pin_file.location} is {size:,} bytes")
        payload = handle.read(size)
    try:
        document = json.loads(payload)
        checkpoint_id, files = document["checkpointId"], document["files"]
    except (ValueError, TypeError, KeyError) as error:
        raise CorruptCheckpointError(f"pin {pin_file.location} is unreadable: {error}") from None
    if (not isinstance(checkpoint_id, int) or isinstance(checkpoint_id, bool)
            or checkpoint_id < 0 or not isinstance(files, list)):
        raise CorruptCheckpointError(
            f"pin {pin_file.location} holds {document!r}, not a checkpoint id and a file list")
    source = str(pin_file.location)
    return Pin(pin_file.location, checkpoint_id,
               frozenset(check_relative_path(path, source) for path in files))


def check_still_listed(root: Location, files: Iterable[str], checkpoint_id: int) -> None:
    """Each of ``files`` is listed by a checkpoint complete now, or raise.

    Called after the writer's pin is on disk: from then on ``retain`` keeps
    the files (docs/FORMAT.md section 11). The newest checkpoints are read
    first, since a writer's base is almost always among them.
    """
    missing = set(files)
    complete = complete_checkpoints(root)
    for candidate in sorted(complete, reverse=True):
        if not missing:
            return
        with contextlib.suppress(CheckpointRetiredError):
            missing -= set(read_metadata(complete[candidate]).referenced_files())
    if missing:
        path = min(missing)
        raise CheckpointRetiredError(
            f"checkpoint {checkpoint_id} would reference {path}, which no complete checkpoint"
            f" under {root} lists any more: checkpoint {path.split('/', 1)[0].removeprefix('chk-')}"
            " (or the checkpoint it was carried over from) was removed by retention; nothing was"
            " committed: rerun the write from a kept checkpoint")


def _seconds(mtime_ns: int | None) -> float:
    return 0.0 if mtime_ns is None else mtime_ns / 1e9

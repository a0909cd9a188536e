"""Where checkpoints live: filesystem resolution, directory layout, confined paths.

All I/O goes through ``pyarrow.fs``, so local paths, ``file://``, ``s3://`` and
``hdfs://`` URIs work alike. The layout (see docs/FORMAT.md)::

    <root>/chk-<id>/_metadata.json     written last; its presence makes the checkpoint
    <root>/chk-<id>/data/<file>.arrow  data files, uniquely named per write attempt

Metadata names data files by paths relative to the root, and may name files
another checkpoint wrote. Those paths come from disk, so they are untrusted:
:func:`confined` is the only way from a recorded path to a location.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow.fs as pafs

from statesource.errors import (
    CheckpointNotFoundError,
    CorruptCheckpointError,
    InvalidArgumentError,
)

METADATA_FILE = "_metadata.json"
RETIRED_FILE = "_retired.json"
"""A checkpoint's metadata after ``retain`` retired it: no longer a checkpoint, but
still the list of files the interrupted deletion must finish with."""
DATA_DIR = "data"
_CHECKPOINT_DIR = re.compile(r"chk-(\d+)")


@dataclass(frozen=True)
class Location:
    """A filesystem and a path on it, the pair every pyarrow.fs call takes."""

    filesystem: pafs.FileSystem
    path: str

    def child(self, *names: str) -> Location:
        return Location(self.filesystem, "/".join([self.path.rstrip("/"), *names]))

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    @property
    def parent(self) -> Location:
        return Location(self.filesystem, self.path.rstrip("/").rsplit("/", 1)[0] or "/")

    @property
    def is_local(self) -> bool:
        return isinstance(self.filesystem, pafs.LocalFileSystem)

    def exists(self) -> bool:
        return self.filesystem.get_file_info(self.path).type != pafs.FileType.NotFound

    def __str__(self) -> str:
        return self.path


def resolve(path: str, filesystem: pafs.FileSystem | None = None) -> Location:
    """Turn a path or URI (and an optional filesystem) into a :class:`Location`."""
    if not isinstance(path, str) or not path:
        raise InvalidArgumentError(f"a checkpoint path must be a non-empty string, got {path!r}")
    if filesystem is not None:
        return Location(filesystem, path)
    try:
        filesystem, resolved = pafs.FileSystem.from_uri(path)
    except (ValueError, TypeError):  # a relative local path is not a URI
        filesystem, resolved = pafs.LocalFileSystem(), os.path.abspath(path)
    except OSError as error:
        raise InvalidArgumentError(f"cannot open filesystem for {path!r}: {error}") from None
    return Location(filesystem, resolved)


def checkpoint_dir_name(checkpoint_id: int) -> str:
    return f"chk-{checkpoint_id}"


def complete_checkpoints(root: Location) -> dict[int, Location]:
    """The checkpoints under ``root`` whose metadata exists, by id."""
    return checkpoint_dirs(root, METADATA_FILE)


def checkpoint_dirs(root: Location, marker: str) -> dict[int, Location]:
    """The ``chk-<id>`` directories under ``root`` holding a file named ``marker``, by id."""
    selector = pafs.FileSelector(root.path, allow_not_found=True)
    found = {}
    for info in root.filesystem.get_file_info(selector):
        match = _CHECKPOINT_DIR.fullmatch(info.base_name)
        if match and info.type == pafs.FileType.Directory:
            directory = Location(root.filesystem, info.path)
            if directory.child(marker).exists():
                found[int(match.group(1))] = directory
    return found


def find_checkpoint(location: Location, checkpoint_id: int | None = None) -> Location:
    """The checkpoint directory at ``location``, or the newest complete one under it."""
    if location.child(METADATA_FILE).exists():
        return location
    if not location.exists():
        raise CheckpointNotFoundError(f"checkpoint path {location} does not exist")
    found = complete_checkpoints(location)
    if checkpoint_id is not None:
        if checkpoint_id not in found:
            raise CheckpointNotFoundError(
                f"no complete checkpoint {checkpoint_id} under {location};"
                f" complete checkpoints: {sorted(found) or 'none'}"
            )
        return found[checkpoint_id]
    if not found:
        raise CheckpointNotFoundError(
            f"no complete checkpoint under {location} (a checkpoint is a chk-<id> directory"
            f" holding {METADATA_FILE})"
        )
    return found[max(found)]


def unique_data_file_name(stem: str) -> str:
    """A data file name no other write attempt can produce, so retries never collide."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", stem)
    return f"{safe}-{uuid.uuid4().hex[:16]}.arrow"


def new_data_file(root: Location, checkpoint_id: int, stem: str) -> tuple[Location, str]:
    """A fresh data file of checkpoint ``checkpoint_id``: where to write it and the
    root-relative path the metadata records."""
    relative = "/".join([checkpoint_dir_name(checkpoint_id), DATA_DIR,
                         unique_data_file_name(stem)])
    target = root.child(*relative.split("/"))
    target.filesystem.create_dir(target.parent.path, recursive=True)
    return target, relative


def remove_attempt(files: Iterable[Location]) -> None:
    """Delete the data files of a failed write attempt, as far as possible.

    A file that cannot be deleted is harmless: no metadata lists it, so no
    reader ever opens it, and no later attempt reuses its name.
    """
    for location in files:
        with contextlib.suppress(OSError):
            location.filesystem.delete_file(location.path)


def check_relative_path(path: object, source: str) -> str:
    """A recorded data-file path, refused unless it is plainly inside the root.

    Refused: anything but a non-empty string; absolute paths; URIs and drive
    letters; backslashes; empty, ``.`` and ``..`` components; control characters.
    """
    if (not isinstance(path, str) or not path or path.startswith("/") or "\\" in path
            or ":" in path or any(ord(c) < 32 for c in path)
            or any(part in ("", ".", "..") for part in path.split("/"))):
        raise CorruptCheckpointError(
            f"metadata {source} names data file {path!r}, which is not a relative path inside"
            " the checkpoint root"
        )
    return path


def confined(root: Location, path: str) -> Location:
    """The location of recorded ``path`` under ``root``, refusing symlink escapes.

    On a local filesystem a recorded path could pass every syntactic check and
    still lead out of the root through a symlink, so the resolved path must
    stay inside the resolved root.
    """
    check_relative_path(path, str(root))
    location = root.child(*path.split("/"))
    if location.is_local:
        real_root = os.path.realpath(root.path)
        real = os.path.realpath(location.path)
        if os.path.commonpath([real_root, real]) != real_root:
            raise CorruptCheckpointError(
                f"data file {path!r} resolves to {real}, outside the checkpoint root {real_root}"
            )
    return location

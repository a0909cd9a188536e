"""Where checkpoints live: filesystem resolution, directory layout, atomic commit.

All I/O goes through ``pyarrow.fs``, so local paths, ``file://``, ``s3://`` and
``hdfs://`` URIs work alike. The layout (see docs/FORMAT.md)::

    <root>/chk-<id>/_metadata.json     written last; its presence makes the checkpoint
    <root>/chk-<id>/data/<file>.arrow  data files, uniquely named per write attempt
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass

import pyarrow.fs as pafs

from statesource.errors import CheckpointNotFoundError, InvalidArgumentError

METADATA_FILE = "_metadata.json"
DATA_DIR = "data"
_CHECKPOINT_DIR = re.compile(r"chk-(\d+)")


@dataclass(frozen=True)
class Location:
    """A filesystem and a path on it, the pair every pyarrow.fs call takes."""

    filesystem: pafs.FileSystem
    path: str

    def child(self, *names: str) -> Location:
        return Location(self.filesystem, "/".join([self.path.rstrip("/"), *names]))

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
    selector = pafs.FileSelector(root.path, allow_not_found=True)
    found = {}
    for info in root.filesystem.get_file_info(selector):
        match = _CHECKPOINT_DIR.fullmatch(info.base_name)
        if match and info.type == pafs.FileType.Directory:
            directory = Location(root.filesystem, info.path)
            if directory.child(METADATA_FILE).exists():
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


def write_atomically(target: Location, payload: bytes) -> None:
    """Make ``payload`` appear at ``target`` all at once, or not at all.

    Locally: write a temporary sibling, then rename (atomic on POSIX). Object
    stores make a single-object upload visible only when it completes, so
    there the payload is written to its final name directly.
    """
    if isinstance(target.filesystem, pafs.LocalFileSystem):
        temporary = Location(target.filesystem, f"{target.path}.tmp-{uuid.uuid4().hex}")
        with temporary.filesystem.open_output_stream(temporary.path) as out:
            out.write(payload)
        try:
            target.filesystem.move(temporary.path, target.path)
        except OSError:
            target.filesystem.delete_file(temporary.path)
            raise
        return
    with target.filesystem.open_output_stream(target.path) as out:
        out.write(payload)

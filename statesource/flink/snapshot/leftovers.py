"""What killed savepoint writes leave behind, found and removed (``statesource
clean-savepoints``).

A write that is killed never leaves anything a reader takes for a savepoint
(:mod:`statesource.flink.snapshot.publish`), but it does leave files:

- on a local file system, its hidden temporary directory ``.<name>.tmp-<32 hex>``
  (:func:`~statesource.flink.snapshot.publish.is_staging_name`), holding state files
  and perhaps a complete ``_metadata``; a Spark write's tasks stage their sections in a
  directory named the same way, on the output's store;
- on an object store, its state files in the output itself, named by UUIDs, with no
  ``_metadata`` naming them: in an output no write published, or in one that a rerun
  published next to them.

:func:`find_leftovers` looks in a directory and in the directories right under it (a
``state.savepoints.dir``, or one output) and takes for leftovers only what is older than
``older_than``: a write still running has newer files. A directory whose ``_metadata``
does not parse, and Flink's own ``shared/`` and ``taskowned/`` directories of a job's
checkpoints (their UUID-named files are named by the ``_metadata`` of the ``chk-<id>``
directories beside them), are left alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import posixpath
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pyarrow.fs as pafs

from statesource.errors import StateSourceError
from statesource.flink.snapshot.metadata import parse_metadata
from statesource.flink.snapshot.publish import METADATA, is_staging_name, referenced_streams
from statesource.flink.snapshot.remote_output import STATE_FILE, delete_quietly, unreachable
from statesource.format.storage import Location, PathOrLocation, resolve

_FLINK_JOB_DIRECTORIES = ("shared", "taskowned")


@dataclass(frozen=True)
class Leftovers:
    """What :func:`find_leftovers` found: abandoned temporary directories (each with its
    files' total size) and orphaned state files (each with its size)."""

    root: Location
    staging: tuple[tuple[Location, int], ...]
    orphans: tuple[tuple[Location, int], ...]

    @property
    def bytes(self) -> int:
        return sum(size for _, size in (*self.staging, *self.orphans))


def find_leftovers(path: PathOrLocation, older_than: timedelta,
                   now: datetime | None = None) -> Leftovers:
    """The leftovers of killed savepoint writes in ``path`` and right under it whose newest
    file is older than ``older_than`` (at ``now``, default the current time)."""
    root = resolve(path)
    cutoff = (now or datetime.now(timezone.utc)) - older_than
    staging: list[tuple[Location, int]] = []
    orphans: list[tuple[Location, int]] = []
    try:
        children = _listing(root)
        for directory in [root, *(c for c in children if c.type == pafs.FileType.Directory
                                   and not is_staging_name(c.base_name))]:
            where = root if directory is root else _at(root, directory.path)
            entries = children if directory is root else _listing(where)
            staging += _staging(where, entries, cutoff)
            orphans += _orphans(where, entries, cutoff)
    except OSError as error:
        if isinstance(error, StateSourceError):
            raise
        raise unreachable(root, error) from None
    return Leftovers(root, tuple(staging), tuple(orphans))


def remove_leftovers(found: Leftovers) -> None:
    """Delete what :func:`find_leftovers` found."""
    for directory, _ in found.staging:
        if directory.is_local:
            shutil.rmtree(directory.path, ignore_errors=True)
        else:
            delete_quietly([_at(directory, info.path) for info in
                            _listing(directory, recursive=True)
                            if info.type == pafs.FileType.File])
    delete_quietly(location for location, _ in found.orphans if not location.is_local)
    for location, _ in found.orphans:
        if location.is_local:
            with contextlib.suppress(FileNotFoundError):
                location.filesystem.delete_file(location.path)


def _at(near: Location, path: str) -> Location:
    """``path`` on the store of ``near``, reached again by the same URI parts."""
    return dataclasses.replace(near, path=path)


def _listing(directory: Location, recursive: bool = False) -> list[pafs.FileInfo]:
    return directory.filesystem.get_file_info(
        pafs.FileSelector(directory.path, allow_not_found=True, recursive=recursive))


def _staging(directory: Location, entries: Iterable[pafs.FileInfo], cutoff: datetime
             ) -> list[tuple[Location, int]]:
    found = []
    for entry in entries:
        if entry.type == pafs.FileType.Directory and is_staging_name(entry.base_name):
            staged = _at(directory, entry.path)
            files = [f for f in _listing(staged, recursive=True) if f.type == pafs.FileType.File]
            newest = max([_modified(entry), *map(_modified, files)])
            if newest < cutoff:
                found.append((staged, sum(f.size or 0 for f in files)))
    return found


def _orphans(directory: Location, entries: list[pafs.FileInfo], cutoff: datetime
             ) -> list[tuple[Location, int]]:
    if directory.name in _FLINK_JOB_DIRECTORIES:
        return []
    names = {entry.base_name for entry in entries}
    if METADATA in names:
        try:
            with directory.filesystem.open_input_file(directory.child(METADATA).path) as source:
                metadata = parse_metadata(source.read(), str(directory.child(METADATA)))
        except (StateSourceError, ValueError):
            return []  # not ours to judge: nothing in it is taken for an orphan
        # by file name: a checkpoint's _metadata names its files by absolute paths
        named = {posixpath.basename(s.path) for s in referenced_streams(metadata)
                 if s.inline is None and s.path is not None}
    else:
        named = set()
    return [(_at(directory, entry.path), entry.size or 0) for entry in entries
            if entry.type == pafs.FileType.File and STATE_FILE.fullmatch(entry.base_name)
            and entry.base_name not in named and _modified(entry) < cutoff]


def _modified(info: pafs.FileInfo) -> datetime:
    """When a file or directory last changed (a store that does not say: now, so that it
    is never taken for old)."""
    mtime = info.mtime
    if mtime is None:
        return datetime.now(timezone.utc)
    return mtime if mtime.tzinfo is not None else mtime.replace(tzinfo=timezone.utc)

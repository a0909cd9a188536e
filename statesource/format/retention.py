"""Retention: delete older checkpoints and exactly the files no remaining one references.

Checkpoints share data files (format v2), so a file belongs to no single
checkpoint and deleting one is a reference question. The procedure is built
so that a kill at any instant leaves every kept checkpoint readable and a
rerun finishes the job:

1. every checkpoint's metadata is read first; anything unreadable stops the
   run before a byte is changed;
2. each doomed checkpoint is *retired*: its ``_metadata.json`` is renamed to
   ``_retired.json`` in one atomic step, so it stops being a checkpoint but
   still lists its files;
3. the references of every checkpoint complete *now* are collected again (a
   checkpoint committed meanwhile is honoured), and each retired checkpoint's
   files outside them are deleted, its ``_retired.json`` last.

Besides those, ``retain`` removes **orphans**: files that crashed or losing
write attempts left in the ``data/`` directory of a checkpoint id that is
committed (or retired). Such a file is deleted only when no complete or
retired checkpoint lists it *and* it was last modified before that id's
metadata was published. Once an id is published no writer can ever publish
it again, and every file of the attempt that won was written before its
metadata, so an unlisted older file can only belong to an attempt that can
never commit; a newer one may belong to a writer still running (which will
fail and clean up after itself), so it is left alone. Directories of ids that
were never committed are left alone too: a writer may be working there.

A writer that *references* files of a checkpoint while ``retain`` retires
that same checkpoint is the one race this cannot see; the commit refuses to
publish when a referenced file is already gone.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow.fs as pafs

from statesource.checks import check_int
from statesource.errors import CheckpointNotFoundError
from statesource.format.commit import sync_directory
from statesource.format.metadata import CheckpointMeta
from statesource.format.reader import read_metadata
from statesource.format.storage import (
    DATA_DIR,
    METADATA_FILE,
    RETIRED_FILE,
    Location,
    checkpoint_dirs,
    complete_checkpoints,
    confined,
    resolve,
)
from statesource.model import Progress


@dataclass(frozen=True)
class RetentionPlan:
    """What ``retain`` keeps and removes (or, in a dry run, would)."""

    kept: tuple[int, ...]
    retired: tuple[int, ...]
    """Checkpoints removed, including those a crashed earlier run had retired."""
    deleted_files: tuple[str, ...]
    """Root-relative paths of the data files removed."""
    shared_files: tuple[str, ...]
    """Files of removed checkpoints that a kept checkpoint still references."""
    orphans: tuple[str, ...] = ()
    """Files of failed write attempts that no metadata lists (see the module docstring)."""


def retain(path: str, keep: int, *, dry_run: bool = False,
           filesystem: pafs.FileSystem | None = None,
           progress: Progress | None = None) -> RetentionPlan:
    """Keep the newest ``keep`` complete checkpoints under ``path``; delete the rest."""
    check_int(keep, "keep", 1)
    root = resolve(path, filesystem)
    if not root.exists():
        raise CheckpointNotFoundError(f"checkpoint root {root} does not exist")
    report = progress or (lambda _: None)
    complete = _load(complete_checkpoints(root), METADATA_FILE)
    kept_ids = sorted(complete)[-keep:]
    doomed = {i: complete[i] for i in sorted(complete) if i not in kept_ids}
    retired = _load(checkpoint_dirs(root, RETIRED_FILE), RETIRED_FILE)
    live = _references(complete[i][1] for i in kept_ids)
    to_delete = {path for _, meta in [*doomed.values(), *retired.values()]
                 for path in _data_files(meta)}
    listed = live | to_delete
    plan = RetentionPlan(
        kept=tuple(kept_ids),
        retired=tuple(sorted({*doomed, *retired})),
        deleted_files=tuple(sorted(to_delete - live)),
        shared_files=tuple(sorted(to_delete & live)),
        orphans=tuple(sorted(
            path for directory, marker in [*((d, METADATA_FILE) for d, _ in complete.values()),
                                           *((d, RETIRED_FILE) for d, _ in retired.values())]
            for path in _orphans(directory, marker, listed))),
    )
    if dry_run:
        return plan
    for checkpoint_id, (directory, _) in doomed.items():
        _retire(directory)
        report(f"retired checkpoint {checkpoint_id}")
    retired.update(doomed)
    complete_now = _load(complete_checkpoints(root), METADATA_FILE)
    live = _references(meta for _, meta in complete_now.values())
    listed = live | _references(meta for _, meta in retired.values())
    for checkpoint_id, (directory, meta) in sorted(retired.items()):
        removed = _delete_files(root, meta, live)
        orphans = _delete_orphans(root, directory, RETIRED_FILE, listed)
        _remove(directory.child(RETIRED_FILE))
        _remove_empty_dirs(directory)
        report(f"deleted checkpoint {checkpoint_id}: {removed} data files removed"
               + (f", and {orphans} files of failed attempts" if orphans else ""))
    for checkpoint_id, (directory, _) in sorted(complete_now.items()):
        orphans = _delete_orphans(root, directory, METADATA_FILE, listed)
        if orphans:
            report(f"checkpoint {checkpoint_id}: removed {orphans} files of failed attempts")
    return plan


def _orphans(directory: Location, marker: str, listed: set[str]) -> list[str]:
    """Root-relative paths of the files in ``directory``'s data directory that no metadata
    lists and that are older than ``directory``'s metadata file ``marker``."""
    filesystem = directory.filesystem
    published = filesystem.get_file_info(directory.child(marker).path)
    if published.type != pafs.FileType.File or published.mtime is None:
        return []
    selector = pafs.FileSelector(directory.child(DATA_DIR).path, allow_not_found=True)
    return [relative for info in filesystem.get_file_info(selector)
            if info.type == pafs.FileType.File and info.mtime is not None
            and info.mtime < published.mtime
            and (relative := f"{directory.name}/{DATA_DIR}/{info.base_name}") not in listed]


def _delete_orphans(root: Location, directory: Location, marker: str, listed: set[str]) -> int:
    orphans = _orphans(directory, marker, listed)
    for path in orphans:
        _remove(confined(root, path))
    return len(orphans)


def _load(directories: dict[int, Location], file_name: str
          ) -> dict[int, tuple[Location, CheckpointMeta]]:
    return {i: (d, read_metadata(d, file_name)) for i, d in directories.items()}


def _references(metas: Iterable[CheckpointMeta]) -> set[str]:
    return {path for meta in metas for path in meta.referenced_files()}


def _retire(directory: Location) -> None:
    """Atomically turn a checkpoint into a retired one (a rename within its directory)."""
    directory.filesystem.move(directory.child(METADATA_FILE).path,
                              directory.child(RETIRED_FILE).path)
    if directory.is_local:
        sync_directory(directory.path)


def _delete_files(root: Location, meta: CheckpointMeta, live: set[str]) -> int:
    removed = 0
    for path in _data_files(meta):
        if path not in live:
            _remove(confined(root, path))
            removed += 1
    return removed


_DATA_FILE = re.compile(r"[^/]+/data/[^/]+\.arrow")


def _data_files(meta: CheckpointMeta) -> list[str]:
    """The files a retired checkpoint lists that have a data file's shape.

    Metadata is untrusted: a path naming another checkpoint's ``_metadata.json``
    (or anything outside a ``data/`` directory) is confined to the root but still
    no data file, and retention must never delete it.
    """
    return [path for path in meta.referenced_files() if _DATA_FILE.fullmatch(path)]


def _remove(location: Location) -> None:
    """Delete one file; one already gone is what a rerun after a crash expects."""
    with contextlib.suppress(FileNotFoundError):
        location.filesystem.delete_file(location.path)


def _remove_empty_dirs(directory: Location) -> None:
    """Local directories left empty go too; object stores have none to remove.

    ``rmdir`` refuses a non-empty directory, so files still referenced, or
    left by a crashed writer, keep theirs.
    """
    if directory.is_local:
        for candidate in (directory.child(DATA_DIR), directory):
            with contextlib.suppress(OSError):
                os.rmdir(candidate.path)

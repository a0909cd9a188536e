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

Only files that a retired checkpoint's metadata lists are ever deleted, so a
checkpoint being written concurrently (whose files no metadata lists yet)
is never touched. A writer that *references* files of a checkpoint while
``retain`` retires that same checkpoint is the one race this cannot see; the
commit refuses to publish when a referenced file is already gone.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
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

Progress = Callable[[str], None]


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
    to_delete = _references(meta for _, meta in [*doomed.values(), *retired.values()])
    plan = RetentionPlan(
        kept=tuple(kept_ids),
        retired=tuple(sorted({*doomed, *retired})),
        deleted_files=tuple(sorted(to_delete - live)),
        shared_files=tuple(sorted(to_delete & live)),
    )
    if dry_run:
        return plan
    for checkpoint_id, (directory, _) in doomed.items():
        _retire(directory)
        report(f"retired checkpoint {checkpoint_id}")
    retired.update(doomed)
    live = _references(meta for _, meta in _load(complete_checkpoints(root),
                                                 METADATA_FILE).values())
    for checkpoint_id, (directory, meta) in sorted(retired.items()):
        removed = _delete_files(root, meta, live)
        _remove(directory.child(RETIRED_FILE))
        _remove_empty_dirs(directory)
        report(f"deleted checkpoint {checkpoint_id}: {removed} data files removed")
    return plan


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
    for path in meta.referenced_files():
        if path not in live:
            _remove(confined(root, path))
            removed += 1
    return removed


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

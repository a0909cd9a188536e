"""Retention: delete older checkpoints and exactly the files no remaining one references.

Checkpoints share data files (format v2), so a file belongs to no single
checkpoint and deleting one is a reference question. The procedure is built
so that a kill at any instant leaves every kept checkpoint readable and a
rerun finishes the job:

1. every checkpoint's metadata is read first; anything unreadable stops the
   run before a byte is changed;
2. each doomed checkpoint is *retired*: its ``_metadata.json`` is renamed to
   ``_retired.json`` (one atomic rename on a local disk; a copy, then the
   delete, on an object store), so it stops being a checkpoint but still lists
   its files;
3. the references of every checkpoint complete *now* are collected again (a
   checkpoint committed meanwhile is honoured), and each retired checkpoint's
   files outside them are deleted, its ``_retired.json`` last.

Writers that reference files of other checkpoints pin them first
(:mod:`statesource.format.pins`). ``retain`` therefore deletes expired pins
*before* retiring, reads every remaining pin *after* retiring and before
collecting the references of the checkpoints complete then, and deletes
neither pinned nor referenced files; a retired checkpoint with pinned files
keeps its ``_retired.json`` so that a later run finishes it. docs/FORMAT.md
section 11 proves that no published checkpoint ever references a file this
deletes.

Besides those, ``retain`` removes what crashes leave:

- **orphans**: files in the ``data/`` directory of a published (complete or
  retired) id that no metadata lists and that are older than that id's
  metadata (written at the publish, or at the retirement on an object store,
  where the retiring "rename" is a copy): once an id is published no writer
  can publish it again, and every file of the attempt that won was written
  before its metadata;
- **abandoned** files, older than ``older_than`` (default three days, as
  Iceberg's ``remove_orphan_files``): unlisted files in ``data/`` of an id
  no pin names as its writer's, and temporary metadata files (``_metadata.json.tmp-*``)
  of a kill between writing and renaming. No write is expected to run longer
  (nor to be shorter than :data:`MIN_OLDER_THAN`, the least ``older_than`` taken);
- **expired pins** (older than ``older_than``) of writers that were killed;
- empty ``data/`` and ``chk-<id>`` directories of ids that are not published
  or whose files retention just deleted.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from datetime import timedelta

import pyarrow.fs as pafs

from statesource.checks import check_int
from statesource.errors import CheckpointNotFoundError, InvalidArgumentError
from statesource.format.metadata import CheckpointMeta
from statesource.format.metadata_file import read_metadata
from statesource.format.pins import Pin, PinFile, pin_directory_files, read_pin
from statesource.format.storage import (
    DATA_DIR,
    METADATA_FILE,
    RETIRED_FILE,
    Location,
    checkpoint_dirs,
    checkpoint_id_of,
    complete_checkpoints,
    confined,
    resolve,
    sync_directory,
)
from statesource.model import Progress

DEFAULT_OLDER_THAN = timedelta(days=3)
"""How old an unpublished file must be before ``retain`` takes it for abandoned."""
MIN_OLDER_THAN = timedelta(hours=1)
"""The shortest ``older_than`` taken. A pin older than it is taken for a killed writer's,
and a write's pins live from its plan to its commit, so a shorter threshold (``0s``) would
let ``retain`` delete the base files of writes still running; an hour is the least that
is not plainly shorter than a real write (Iceberg's ``remove_orphan_files`` procedure
refuses under a day for the same reason)."""
_TEMPORARY_METADATA = f"{METADATA_FILE}.tmp-"


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
    abandoned: tuple[str, ...] = ()
    """Files of ids never published, and temporary metadata files, older than ``older_than``."""
    pinned_files: tuple[str, ...] = ()
    """Files of removed checkpoints that a running writer pinned: kept until a later run."""
    expired_pins: tuple[str, ...] = ()
    """Pins (and their temporary files) older than ``older_than``: their writers are gone."""
    empty_dirs: tuple[str, ...] = ()
    """Empty directories left by crashes, older than ``older_than``."""

    def __repr__(self) -> str:
        """The checkpoints kept and retired, and how many paths of each kind: a plan may list
        thousands of files."""
        counts = ", ".join(f"{field.name}={len(getattr(self, field.name))}"
                           for field in fields(self)[2:])
        return f"RetentionPlan(kept={self.kept}, retired={self.retired}, {counts})"


@dataclass(frozen=True)
class _State:
    """Everything on disk that retention decides from, read before anything changes."""

    complete: dict[int, tuple[Location, CheckpointMeta]]
    retired: dict[int, tuple[Location, CheckpointMeta]]
    pins: list[Pin]
    unpublished: dict[int, Location]
    late_retired: dict[int, tuple[Location, CheckpointMeta]]
    """Checkpoints another ``retain`` retired after ``retired`` was listed: still protected."""

    def live(self) -> set[str]:
        """The files this run must keep for checkpoints: complete, or retired by another run."""
        return _references(meta for _, meta in [*self.complete.values(),
                                                 *self.late_retired.values()])

    @property
    def pinned(self) -> set[str]:
        return {path for pin in self.pins for path in pin.files}

    def listed(self) -> set[str]:
        """Every file some metadata or pin names: never an orphan or abandoned."""
        return (self.live() | self.pinned
                | _references(meta for _, meta in self.retired.values()))


def retain(path: str, keep: int, *, dry_run: bool = False,
           older_than: timedelta = DEFAULT_OLDER_THAN,
           filesystem: pafs.FileSystem | None = None,
           progress: Progress | None = None) -> RetentionPlan:
    """Keep the newest ``keep`` complete checkpoints under ``path``; delete the rest, and
    what crashes left that is older than ``older_than`` (see the module docstring)."""
    check_int(keep, "keep", 1)
    if not isinstance(older_than, timedelta):
        raise InvalidArgumentError(
            f"older_than must be a datetime.timedelta, got {older_than!r}")
    check_older_than(older_than, f"older_than {older_than}")
    root = resolve(path, filesystem)
    if not root.exists():
        raise CheckpointNotFoundError(f"checkpoint root {root} does not exist")
    report = progress or (lambda _: None)
    cutoff = time.time() - older_than.total_seconds()
    pin_files = pin_directory_files(root)
    expired = [f for f in pin_files if f.mtime < cutoff]
    state = _read_state(root, lambda: [f for f in pin_files if f not in expired])
    kept_ids = sorted(state.complete)[-keep:]
    doomed = {i: state.complete[i] for i in sorted(state.complete) if i not in kept_ids}
    removed = {i: c for i, c in {**state.retired, **doomed}.items() if i not in kept_ids}
    live = _references(state.complete[i][1] for i in kept_ids)
    to_delete = {path for _, meta in removed.values() for path in _data_files(meta)}
    listed = state.listed()
    plan = RetentionPlan(
        kept=tuple(kept_ids),
        retired=tuple(sorted(removed)),
        deleted_files=tuple(sorted(to_delete - live - state.pinned)),
        shared_files=tuple(sorted(to_delete & live)),
        orphans=tuple(sorted(_all_orphans(state, listed))),
        abandoned=tuple(sorted(_abandoned(root, state, listed, cutoff))),
        pinned_files=tuple(sorted((to_delete - live) & state.pinned)),
        expired_pins=tuple(sorted(_relative(root, f.location) for f in expired)),
        empty_dirs=tuple(sorted(_relative(root, d) for d in _empty_dirs(root, state, cutoff))),
    )
    if dry_run:
        return plan
    for pin_file in expired:
        _remove(pin_file.location)
    for checkpoint_id, (directory, _) in doomed.items():
        _retire(directory)
        report(f"retired checkpoint {checkpoint_id}")
    # The order is the protocol's: pins are read after retiring, and the references
    # of the checkpoints complete now after the pins (docs/FORMAT.md section 11).
    state = _read_state(root, lambda: pin_directory_files(root))
    _finish_retired(root, state, report)
    for checkpoint_id, (directory, _) in sorted(state.complete.items()):
        orphans = _delete_all(root, _orphans(directory, METADATA_FILE, state.listed()))
        if orphans:
            report(f"checkpoint {checkpoint_id}: removed {orphans} files of failed attempts")
    state = _read_state(root, lambda: pin_directory_files(root))
    abandoned_files = _abandoned(root, state, state.listed(), cutoff)
    abandoned = _delete_all(root, abandoned_files)
    busy = {*state.complete, *state.retired, *state.late_retired,
            *(pin.checkpoint_id for pin in state.pins)}
    for owner in {path.split("/", 1)[0] for path in abandoned_files}:
        _remove_empty_dirs(root.child(owner), unless=busy)
    empty = _empty_dirs(root, state, cutoff)
    for directory in empty:
        with contextlib.suppress(OSError):
            directory.filesystem.delete_dir(directory.path)
    if abandoned or empty:
        report(f"removed {abandoned} files of abandoned attempts and {len(empty)} empty"
               " directories")
    return plan


def check_older_than(older_than: timedelta, shown: str) -> None:
    """Refuse a threshold under :data:`MIN_OLDER_THAN`; ``shown`` is the value as given."""
    if older_than < MIN_OLDER_THAN:
        raise InvalidArgumentError(
            f"{shown} is under {MIN_OLDER_THAN.total_seconds() / 3600:g}h: retain takes pins"
            " and unpublished files older than it for those of killed writers, and would"
            " delete files that writes still running rely on; give at least that (default"
            f" {DEFAULT_OLDER_THAN.days}d, longer than any write)")


def _read_state(root: Location, pin_files: Callable[[], list[PinFile]]) -> _State:
    """Read metadata and pins; anything unreadable stops the run here.

    The order is the protocol's (docs/FORMAT.md section 11.1): retired
    checkpoints, then pins, then the checkpoints complete now.
    """
    retired = _load(checkpoint_dirs(root, RETIRED_FILE), RETIRED_FILE)
    pins = [read_pin(f) for f in pin_files() if f.is_pin]
    complete = _load(complete_checkpoints(root), METADATA_FILE)
    late = _load({i: d for i, d in checkpoint_dirs(root, RETIRED_FILE).items()
                  if i not in retired}, RETIRED_FILE)
    unpublished = {i: d for i, d in _all_checkpoint_dirs(root).items()
                   if i not in complete and i not in retired and i not in late}
    return _State(complete, retired, pins, unpublished, late)


def _finish_retired(root: Location, state: _State, report: Progress) -> None:
    """Delete each retired checkpoint's files that nothing references or pins; its
    ``_retired.json`` goes last, unless a writer pinned some of its files."""
    live = state.live()
    protected = live | state.pinned
    listed = state.listed()
    for checkpoint_id, (directory, meta) in sorted(state.retired.items()):
        if checkpoint_id in state.complete:  # a retirement killed between copy and delete
            _remove(directory.child(RETIRED_FILE))  # (object stores): still a checkpoint
            continue
        doomed = [path for path in _data_files(meta) if path not in protected]
        removed = _delete_all(root, doomed)
        orphans = _delete_all(root, _orphans(directory, RETIRED_FILE, listed))
        pinned = [path for path in _data_files(meta) if path in state.pinned and path not in live]
        if pinned:
            report(f"checkpoint {checkpoint_id}: {len(pinned)} files stay, pinned by a running"
                   " writer; a later retain finishes it")
            continue
        _remove(directory.child(RETIRED_FILE))
        _remove_empty_dirs(directory)
        busy = {*state.complete, *(pin.checkpoint_id for pin in state.pins)}
        for owner in {path.split("/", 1)[0] for path in doomed}:
            _remove_empty_dirs(root.child(owner), unless=busy)
        report(f"deleted checkpoint {checkpoint_id}: {removed} data files removed"
               + (f", and {orphans} files of failed attempts" if orphans else ""))


def _all_orphans(state: _State, listed: set[str]) -> list[str]:
    return [path for marker, checkpoints in ((METADATA_FILE, state.complete),
                                             (RETIRED_FILE, state.retired))
            for directory, _ in checkpoints.values()
            for path in _orphans(directory, marker, listed)]


def _orphans(directory: Location, marker: str, listed: set[str]) -> list[str]:
    """Root-relative paths of the files in ``directory``'s data directory that no metadata
    lists and that are older than ``directory``'s metadata file ``marker``."""
    filesystem = directory.filesystem
    published = filesystem.get_file_info(directory.child(marker).path)
    if published.type != pafs.FileType.File or published.mtime is None:
        return []
    return [relative for info in _files(directory.child(DATA_DIR))
            if info.mtime is not None and info.mtime < published.mtime
            and (relative := f"{directory.name}/{DATA_DIR}/{info.base_name}") not in listed]


def _abandoned(root: Location, state: _State, listed: set[str], cutoff: float) -> list[str]:
    """Files older than ``cutoff`` that no metadata or pin lists: those in ``data/`` of an
    id no pin names as its writer's, and temporary metadata files anywhere."""
    pinned_ids = {pin.checkpoint_id for pin in state.pins}
    found = []
    for checkpoint_id, directory in _all_checkpoint_dirs(root).items():
        candidates = [(info, directory.name) for info in _files(directory)
                      if info.base_name.startswith(_TEMPORARY_METADATA)]
        if checkpoint_id not in pinned_ids:
            candidates += [(info, f"{directory.name}/{DATA_DIR}")
                           for info in _files(directory.child(DATA_DIR))]
        found += [relative for info, parent in candidates
                  if _seconds(info) < cutoff
                  and (relative := f"{parent}/{info.base_name}") not in listed]
    return found


def _empty_dirs(root: Location, state: _State, cutoff: float) -> list[Location]:
    """Empty ``data/`` directories older than ``cutoff``, then the ``chk-<id>`` directories of
    unpublished ids that hold nothing else, deepest first."""
    pinned_ids = {pin.checkpoint_id for pin in state.pins}
    found = []
    for checkpoint_id, directory in sorted(_all_checkpoint_dirs(root).items()):
        if checkpoint_id in pinned_ids:
            continue
        entries = _entries(directory)
        data = [info for info in entries if info.base_name == DATA_DIR]
        empty_data = bool(data) and data[0].type == pafs.FileType.Directory \
            and not _entries(directory.child(DATA_DIR)) and _seconds(data[0]) < cutoff
        if empty_data:
            found.append(directory.child(DATA_DIR))
        others = [info for info in entries if not (empty_data and info.base_name == DATA_DIR)]
        if checkpoint_id in state.unpublished and not others:
            info = root.filesystem.get_file_info(directory.path)
            if _seconds(info) < cutoff or empty_data:
                found.append(directory)
    return found


def _all_checkpoint_dirs(root: Location) -> dict[int, Location]:
    return {checkpoint_id: Location(root.filesystem, info.path)
            for info in _entries(root) if info.type == pafs.FileType.Directory
            and (checkpoint_id := checkpoint_id_of(Location(root.filesystem, info.path)))
            is not None}


def _entries(directory: Location) -> list[pafs.FileInfo]:
    selector = pafs.FileSelector(directory.path, allow_not_found=True)
    return list(directory.filesystem.get_file_info(selector))


def _files(directory: Location) -> list[pafs.FileInfo]:
    return [info for info in _entries(directory) if info.type == pafs.FileType.File]


def _seconds(info: pafs.FileInfo) -> float:
    return float("inf") if info.mtime_ns is None else info.mtime_ns / 1e9


def _relative(root: Location, location: Location) -> str:
    return location.path[len(root.path.rstrip("/")) + 1:]


def _delete_all(root: Location, paths: Iterable[str]) -> int:
    count = 0
    for path in paths:
        _remove(confined(root, path))
        count += 1
    return count


def _load(directories: dict[int, Location], file_name: str
          ) -> dict[int, tuple[Location, CheckpointMeta]]:
    return {i: (d, read_metadata(d, file_name)) for i, d in directories.items()}


def _references(metas: Iterable[CheckpointMeta]) -> set[str]:
    return {path for meta in metas for path in meta.referenced_files()}


def _retire(directory: Location) -> None:
    """Turn a checkpoint into a retired one: a rename within its directory, atomic on a
    local disk; on an object store a copy, then a delete, and a kill between leaves a
    checkpoint that is still complete (docs/FORMAT.md section 11, step 2)."""
    directory.filesystem.move(directory.child(METADATA_FILE).path,
                              directory.child(RETIRED_FILE).path)
    if directory.is_local:
        sync_directory(directory.path)


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


def _remove_empty_dirs(directory: Location, unless: set[int] | None = None) -> None:
    """Local directories left empty go too; object stores have none to remove.

    ``rmdir`` refuses a non-empty directory, so files still referenced, or
    left by a crashed writer, keep theirs. ``unless`` names ids whose
    directories stay whatever they hold: complete ones, and those a writer pinned.
    """
    checkpoint_id = checkpoint_id_of(directory)
    if directory.is_local and (unless is None or checkpoint_id not in unless):
        for candidate in (directory.child(DATA_DIR), directory):
            with contextlib.suppress(OSError):
                os.rmdir(candidate.path)

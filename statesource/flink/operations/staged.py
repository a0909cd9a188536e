"""A keyed state's new pairs, framed by the tasks of a write, until the savepoint is assembled.

A write into a Flink savepoint runs in two places. Each task encodes its rows
as canonical pairs and frames them per key group as a section body
(:func:`~statesource.flink.layouts.canonical_writer.section_body`: the pairs, the last
key flagged, no state id), one file per Flink subtask in a work directory
beside the output, on the output's store; the state's id is not known there, since it is the
state's position in the header the driver writes. The driver then places each
body under the state's id in its key group
(:meth:`~statesource.flink.layouts.canonical_writer.KeyGroupFramer.add_section`),
next to the pairs carried over from the base, and removes the work directory.

A task reports its file as a :class:`~statesource.format.locations.DataFile`,
whose locations record each key group's byte range, pair count and CRC-32;
the driver checks them all before it uses a byte.
"""

from __future__ import annotations

import contextlib
import os
import uuid
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

import pyarrow.fs as pafs

from statesource.errors import CorruptCheckpointError, StateSourceError, storage_error
from statesource.flink.snapshot.remote_output import delete_quietly
from statesource.flink.statefiles.keyed_header import StateInfo
from statesource.format.locations import DataFile, KeyGroupLocation
from statesource.format.storage import Location, resolve
from statesource.keygroups import KeyGroupRange

Sections = Iterable[tuple[int, bytes, int]]
"""``(key group, section body, pairs)`` in ascending key-group order."""


def write_sections(work: str, key_groups: KeyGroupRange, sections: Sections) -> DataFile:
    """One task's section bodies of one state, as a new file in the directory ``work`` (a
    path or URI, beside the output on its store; created if needed), and where each key
    group's body lies in it."""
    directory = resolve(work)
    if directory.is_local:
        directory.filesystem.create_dir(directory.path, recursive=True)
    name = f"{uuid.uuid4().hex}.sections"
    try:
        if directory.is_local:  # synced: the driver reads it after the task, maybe its host, ended
            with open(directory.child(name).path, "xb") as local:
                locations, size = _write_bodies(local, sections)
                local.flush()
                os.fsync(local.fileno())
        else:
            with directory.filesystem.open_output_stream(directory.child(name).path) as out:
                locations, size = _write_bodies(out, sections)
    except OSError as error:  # pyarrow's message of a full disk does not name the file
        if isinstance(error, StateSourceError):
            raise
        raise storage_error(f"cannot write {directory.child(name)}", error) from error
    written = DataFile(name, key_groups, size, tuple(locations))
    written.check()
    return written


def _write_bodies(out: BinaryIO, sections: Sections) -> tuple[list[KeyGroupLocation], int]:
    """Writes the section bodies one after another: where each lies, and their total size."""
    locations = []
    size = 0
    for key_group, body, pairs in sections:
        out.write(body)
        locations.append(KeyGroupLocation(key_group, 0, 1, size, len(body), pairs, pairs,
                                          zlib.crc32(body)))
        size += len(body)
    return locations, size


def remove_sections(work: str, files: Iterable[DataFile], parents: Iterable[str] = ()) -> None:
    """Remove section files that will not be used, and the work directory once it is empty
    (an object store has no directory left once its files are gone), then the ``parents``
    (:func:`missing_parents`) that are empty: those a failed write created."""
    directory = resolve(work)
    if not directory.is_local:
        delete_quietly([_inside(directory, written) for written in files])
        return
    for written in files:
        with contextlib.suppress(FileNotFoundError):
            os.remove(_inside(directory, written).path)
    for empty in (directory.path, *parents):
        with contextlib.suppress(OSError):
            os.rmdir(empty)


def missing_parents(work: str) -> tuple[str, ...]:
    """The directories above a local work directory that do not exist yet, innermost first:
    the tasks create them, and a write that fails removes them again."""
    directory = resolve(work)
    missing: list[str] = []
    if directory.is_local:
        parent = os.path.dirname(directory.path)
        while not os.path.lexists(parent):
            missing.append(parent)
            parent = os.path.dirname(parent)
    return tuple(missing)


def missing_sections(work: str, files: Iterable[DataFile]) -> list[str]:
    """The section files of ``files`` that are not in ``work``."""
    directory = resolve(work)
    paths = [_inside(directory, written).path for written in files]
    infos = directory.filesystem.get_file_info(paths) if paths else []
    return [written.path for written, info in zip(files, infos)
            if info.type != pafs.FileType.File]


def _inside(work: Location, written: DataFile) -> Location:
    if "/" in written.path or "\\" in written.path or written.path in ("", ".", ".."):
        raise CorruptCheckpointError(
            f"a task reported section file {written.path!r}, which is not a bare file name in"
            f" {work}")
    return work.child(written.path)


@dataclass(frozen=True)
class StagedState:
    """The staged pairs of one keyed state: its meta info for the header, and the files the
    tasks wrote in ``work``."""

    info: StateInfo
    work: str
    files: tuple[DataFile, ...]
    replaces_info: bool = False
    """Whether ``info`` replaces the meta info of the state it replaces in the header (its
    serializers changed, as ``migrate``'s do), rather than the state keeping its own."""

    def sections(self) -> Iterator[tuple[int, bytes, int]]:
        """Every ``(key group, section body, pairs)``, each body checked against its CRC-32."""
        directory = resolve(self.work)
        for written in self.files:
            path = _inside(directory, written)
            with path.filesystem.open_input_file(path.path) as source:
                data = source.read()
            if len(data) != written.size_bytes:
                raise CorruptCheckpointError(
                    f"section file {path} has {len(data)} bytes, its task wrote"
                    f" {written.size_bytes}")
            for loc in written.locations:
                body = data[loc.offset:loc.offset + loc.length]
                if zlib.crc32(body) != loc.crc32:
                    raise CorruptCheckpointError(
                        f"section file {path}: key group {loc.key_group} at byte offset"
                        f" {loc.offset} does not match the CRC-32 its task recorded")
                yield loc.key_group, body, loc.rows

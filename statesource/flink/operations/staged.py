"""A keyed state's new pairs, framed by the tasks of a write, until the savepoint is assembled.

A write into a Flink savepoint runs in two places. Each task encodes its rows
as canonical pairs and frames them per key group as a section body
(:func:`~statesource.flink.layouts.canonical_writer.section_body`: the pairs, the last
key flagged, no state id), one file per Flink subtask in a work directory
beside the output; the state's id is not known there, since it is the
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
from pathlib import Path

from statesource.errors import CorruptCheckpointError
from statesource.flink.statefiles.keyed_header import StateInfo
from statesource.format.locations import DataFile, KeyGroupLocation
from statesource.keygroups import KeyGroupRange

Sections = Iterable[tuple[int, bytes, int]]
"""``(key group, section body, pairs)`` in ascending key-group order."""


def write_sections(work: str, key_groups: KeyGroupRange, sections: Sections) -> DataFile:
    """One task's section bodies of one state, as a new file in the directory ``work``
    (created if needed), and where each key group's body lies in it."""
    os.makedirs(work, exist_ok=True)
    name = f"{uuid.uuid4().hex}.sections"
    locations = []
    size = 0
    with open(os.path.join(work, name), "xb") as out:
        for key_group, body, pairs in sections:
            out.write(body)
            locations.append(KeyGroupLocation(key_group, 0, 1, size, len(body), pairs, pairs,
                                              zlib.crc32(body)))
            size += len(body)
        out.flush()
        os.fsync(out.fileno())
    written = DataFile(name, key_groups, size, tuple(locations))
    written.check()
    return written


def remove_sections(work: str, files: Iterable[DataFile]) -> None:
    """Remove section files that will not be used, and the work directory once it is empty."""
    for written in files:
        with contextlib.suppress(FileNotFoundError):
            os.remove(_inside(work, written))
    with contextlib.suppress(OSError):
        os.rmdir(work)


def missing_sections(work: str, files: Iterable[DataFile]) -> list[str]:
    """The section files of ``files`` that are not in ``work``."""
    return [written.path for written in files if not os.path.isfile(_inside(work, written))]


def _inside(work: str, written: DataFile) -> str:
    if os.path.basename(written.path) != written.path or written.path in ("", ".", ".."):
        raise CorruptCheckpointError(
            f"a task reported section file {written.path!r}, which is not a bare file name in"
            f" {work}")
    return os.path.join(work, written.path)


@dataclass(frozen=True)
class StagedState:
    """The staged pairs of one keyed state: its meta info for the header, and the files the
    tasks wrote in ``work``."""

    info: StateInfo
    work: str
    files: tuple[DataFile, ...]

    def sections(self) -> Iterator[tuple[int, bytes, int]]:
        """Every ``(key group, section body, pairs)``, each body checked against its CRC-32."""
        for written in self.files:
            path = Path(_inside(self.work, written))
            data = path.read_bytes()
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

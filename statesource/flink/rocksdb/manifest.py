"""Which SST files of a RocksDB directory are live, and which column family each belongs to.

``CURRENT`` names the MANIFEST (one line, ``MANIFEST-000042``); the MANIFEST is a log
(:mod:`~statesource.flink.rocksdb.log`) of version edits
(:mod:`~statesource.flink.rocksdb.version_edit`), replayed here from the first as
RocksDB's ``VersionEditHandler`` and ``VersionBuilder`` replay them:

- column family 0, ``default``, exists from the start; an edit that adds one gives the new
  id its name, one that drops one removes it with its files, and an edit of a dropped column
  family is ignored;
- within an edit, files are deleted (from the level they are on) before files are added,
  so a file moved down a level is deleted from one and added to the next;
- edits of an atomic group (each says how many are still to come) apply together once the
  last one is read; a group the MANIFEST ends inside never happened.

Anything that cannot happen in a MANIFEST RocksDB wrote (a file deleted that is not live, a
file added twice, an edit of a column family never created) is refused as corruption.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from statesource.flink.rocksdb.coding import Buffer, Place, corrupt
from statesource.flink.rocksdb.log import records
from statesource.flink.rocksdb.version_edit import VersionEdit, decode_edit

DEFAULT_COLUMN_FAMILY = "default"
_MANIFEST_NAME = re.compile(r"MANIFEST-(\d{1,20})")


@dataclass(frozen=True)
class LiveFile:
    """A live table file: its number names it (``000123.sst``)."""

    number: int
    column_family: int
    level: int
    size: int
    smallest: bytes  # internal keys
    largest: bytes
    smallest_seqno: int
    largest_seqno: int
    added_at: int  # the offset in the MANIFEST of the edit that added it

    @property
    def name(self) -> str:
        """The file's name in the database directory."""
        return f"{self.number:06d}.sst"


@dataclass(frozen=True)
class Manifest:
    """The state of a database that replaying its MANIFEST arrives at."""

    source: str  # the MANIFEST, as errors name it
    column_families: dict[int, str]  # id -> name
    comparators: dict[int, str]  # id -> comparator name, where recorded
    files: tuple[LiveFile, ...]  # by column family, level, number
    last_sequence: int
    next_file_number: int


def manifest_name(current: Buffer, source: str = "CURRENT") -> str:
    """The MANIFEST that a ``CURRENT`` file's contents name."""
    text = bytes(current[:64]).decode("ascii", "replace")
    match = _MANIFEST_NAME.fullmatch(text.rstrip("\n"))
    if not text.endswith("\n") or match is None:
        raise corrupt(source, 0, f"CURRENT does not name a MANIFEST ({text[:60]!r})")
    return match.group(0)


def manifest_number(name: str) -> int:
    """The file number in a MANIFEST's name (``MANIFEST-000042``: 42)."""
    match = _MANIFEST_NAME.fullmatch(name)
    if match is None:
        raise ValueError(f"{name!r} is not a MANIFEST's name")
    return int(match.group(1))


def read_manifest(data: Buffer, source: str, number: int | None = None) -> Manifest:
    """Replay the MANIFEST ``data`` (file ``source``, whose file number is ``number``)."""
    replay = _Replay(source)
    group: list[tuple[VersionEdit, Place]] = []
    still_to_come = 0
    for offset, record in records(data, source, number):
        place = Place(source, offset)
        edit = decode_edit(record, place)
        remaining = edit.atomic_group_remaining
        if remaining is None:
            if group:
                raise place.error(0, "an edit outside the atomic group before it ended")
            replay.apply(edit, place)
            continue
        if group and remaining != still_to_come - 1:
            raise place.error(0, "atomic group counts do not count down")
        group.append((edit, place))
        still_to_come = remaining
        if remaining == 0:
            for grouped, grouped_place in group:
                replay.apply(grouped, grouped_place)
            group = []
    return replay.result()


class _Replay:
    """The live files and column families, edit after edit."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.names: dict[int, str] = {0: DEFAULT_COLUMN_FAMILY}
        self.dropped: set[int] = set()
        self.comparators: dict[int, str] = {}
        self.live: dict[int, LiveFile] = {}  # by file number
        self.last_sequence = 0
        self.next_file_number = 0

    def apply(self, edit: VersionEdit, place: Place) -> None:
        family = edit.column_family
        if edit.last_sequence is not None:
            self.last_sequence = edit.last_sequence
        if edit.next_file_number is not None:
            self.next_file_number = edit.next_file_number
        if edit.column_family_add is not None:
            if family in self.names or family in self.dropped:
                raise place.error(0, f"column family {family} created twice")
            self.names[family] = edit.column_family_add
        elif family in self.dropped:
            return
        elif family not in self.names:
            raise place.error(0, f"an edit of column family {family}, never created")
        if edit.column_family_drop:
            if family == 0:
                raise place.error(0, "the default column family dropped")
            del self.names[family]
            self.comparators.pop(family, None)
            self.dropped.add(family)
            self.live = {n: f for n, f in self.live.items() if f.column_family != family}
            return
        if edit.comparator is not None:
            self.comparators[family] = edit.comparator
        for level, number in edit.deleted_files:
            found = self.live.get(number)
            if found is None or found.level != level or found.column_family != family:
                raise place.error(0, f"file {number} deleted from level {level} of column"
                                     f" family {family}, where it is not")
            del self.live[number]
        for new in edit.new_files:
            if new.number in self.live:
                raise place.error(0, f"file {new.number} added while it is live")
            self.live[new.number] = LiveFile(new.number, family, new.level, new.size,
                                             new.smallest, new.largest, new.smallest_seqno,
                                             new.largest_seqno, place.offset)

    def result(self) -> Manifest:
        files = sorted(self.live.values(), key=lambda f: (f.column_family, f.level, f.number))
        return Manifest(self.source, dict(self.names), dict(self.comparators), tuple(files),
                        self.last_sequence, self.next_file_number)

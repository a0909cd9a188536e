"""One record of a MANIFEST: a ``VersionEdit``, a change to the set of live files.

From ``db/version_edit.h`` and ``VersionEdit::DecodeFrom`` in ``db/version_edit.cc``, a record
is a run of (varint32 tag, field) pairs:

- 1 comparator name, 2 log number, 3 next file number, 4 last sequence, 9 previous log
  number, 10 minimum log number to keep, 203 largest column family id (numbers: varints);
- 5 a compaction cursor (level, internal key), 6 a deleted file (level, file number);
- 7, 100, 102, 103: a new file, in four generations: level, file number, (path id,) size,
  smallest and largest internal keys, (smallest and largest sequence numbers,) and for
  103 a list of custom fields (varint32 tag, length-prefixed value, ended by tag 1) of
  which only the path id (tag 65) may not be ignored;
- 200 the column family the edit applies to, 201 the creation of one (with its name; the
  id is then the edit's column family), 202 its drop; 300 membership of an atomic group
  (the count of edits still to come in it);
- 400 and 401 blob files (BlobDB, which Flink does not use: refused, as are their
  deprecated forms 8194 and 8195);
- tags with bit 13 set come from newer releases and carry a length, so they can be skipped;
  except the first forms of the WAL records 8196 (a log number, then varint32-tagged
  fields up to tag 1, where tag 2 is a synced size) and 8197 (a log number).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from statesource.errors import UnsupportedFormatVersionError
from statesource.flink.rocksdb.coding import Place, length_prefixed, varint, varint32

COMPARATOR, LOG_NUMBER, NEXT_FILE_NUMBER, LAST_SEQUENCE, COMPACT_CURSOR = 1, 2, 3, 4, 5
DELETED_FILE, NEW_FILE, PREV_LOG_NUMBER, MIN_LOG_NUMBER_TO_KEEP = 6, 7, 9, 10
NEW_FILE2, NEW_FILE3, NEW_FILE4 = 100, 102, 103
COLUMN_FAMILY, COLUMN_FAMILY_ADD, COLUMN_FAMILY_DROP, MAX_COLUMN_FAMILY = 200, 201, 202, 203
IN_ATOMIC_GROUP = 300
BLOB_FILE_ADDITION, BLOB_FILE_GARBAGE = 400, 401
SAFE_TO_IGNORE = 1 << 13
BLOB_TAGS = frozenset({BLOB_FILE_ADDITION, BLOB_FILE_GARBAGE, SAFE_TO_IGNORE + 2,
                       SAFE_TO_IGNORE + 3})
WAL_ADDITION, WAL_DELETION = SAFE_TO_IGNORE + 4, SAFE_TO_IGNORE + 5  # not length-prefixed
_WAL_TERMINATE, _WAL_SYNCED_SIZE = 1, 2
_CUSTOM_TERMINATE, _CUSTOM_PATH_ID, _CUSTOM_MUST_UNDERSTAND = 1, 65, 1 << 6
_NUMBERS = {LOG_NUMBER: "log_number", NEXT_FILE_NUMBER: "next_file_number",
            LAST_SEQUENCE: "last_sequence", PREV_LOG_NUMBER: None, MIN_LOG_NUMBER_TO_KEEP: None,
            MAX_COLUMN_FAMILY: None}


@dataclass(frozen=True)
class NewFile:
    """A table file added to a level of a column family."""

    level: int
    number: int
    size: int
    smallest: bytes  # internal keys
    largest: bytes
    smallest_seqno: int
    largest_seqno: int


@dataclass
class VersionEdit:
    """What one MANIFEST record changes."""

    column_family: int = 0
    column_family_add: str | None = None
    column_family_drop: bool = False
    comparator: str | None = None
    log_number: int | None = None
    next_file_number: int | None = None
    last_sequence: int | None = None
    deleted_files: list[tuple[int, int]] = field(default_factory=list)  # (level, number)
    new_files: list[NewFile] = field(default_factory=list)
    atomic_group_remaining: int | None = None


def decode_edit(record: bytes, place: Place) -> VersionEdit:
    """The edit a MANIFEST record holds (``place``: the record's offset in its file)."""
    edit = VersionEdit()
    pos, end = 0, len(record)
    while pos < end:
        at = pos
        tag, pos = varint32(record, pos, end, place, "version edit tag")
        if tag in _NUMBERS:
            number, pos = varint(record, pos, end, place, f"field {tag}")
            kept = _NUMBERS[tag]
            if kept is not None:
                setattr(edit, kept, number)
        elif tag == COMPARATOR:
            name, pos = length_prefixed(record, pos, end, place, "comparator name")
            edit.comparator = name.decode("utf-8", "replace")
        elif tag == COMPACT_CURSOR:
            _, pos = varint32(record, pos, end, place, "compaction cursor level")
            _, pos = length_prefixed(record, pos, end, place, "compaction cursor key")
        elif tag == DELETED_FILE:
            level, pos = varint32(record, pos, end, place, "deleted file level")
            number, pos = varint(record, pos, end, place, "deleted file number")
            edit.deleted_files.append((level, number))
        elif tag in (NEW_FILE, NEW_FILE2, NEW_FILE3, NEW_FILE4):
            new_file, pos = _new_file(tag, record, pos, end, place)
            edit.new_files.append(new_file)
        elif tag == COLUMN_FAMILY:
            edit.column_family, pos = varint32(record, pos, end, place, "column family id")
        elif tag == COLUMN_FAMILY_ADD:
            name, pos = length_prefixed(record, pos, end, place, "column family name")
            edit.column_family_add = name.decode("utf-8", "replace")
        elif tag == COLUMN_FAMILY_DROP:
            edit.column_family_drop = True
        elif tag == IN_ATOMIC_GROUP:
            edit.atomic_group_remaining, pos = varint32(record, pos, end, place,
                                                        "atomic group size")
        elif tag in BLOB_TAGS:
            raise UnsupportedFormatVersionError(
                f"{place.source}: the MANIFEST records blob files (BlobDB, at byte offset"
                f" {place.offset}), which statesource does not read")
        elif tag == WAL_ADDITION:
            pos = _skip_wal_addition(record, pos, end, place)
        elif tag == WAL_DELETION:
            _, pos = varint(record, pos, end, place, "deleted WAL number")
        elif tag & SAFE_TO_IGNORE:
            _, pos = length_prefixed(record, pos, end, place, f"ignorable field {tag}")
        else:
            raise place.error(at, f"unknown version edit tag {tag}")
    return edit


def _new_file(tag: int, record: bytes, pos: int, end: int, place: Place
              ) -> tuple[NewFile, int]:
    level, pos = varint32(record, pos, end, place, "new file level")
    number, pos = varint(record, pos, end, place, "new file number")
    if tag == NEW_FILE3:
        path_id, pos = varint32(record, pos, end, place, "new file path id")
        _refuse_path(path_id, place)
    size, pos = varint(record, pos, end, place, "new file size")
    smallest, pos = length_prefixed(record, pos, end, place, "smallest key")
    largest, pos = length_prefixed(record, pos, end, place, "largest key")
    smallest_seqno, largest_seqno = 0, (1 << 56) - 1
    if tag != NEW_FILE:
        smallest_seqno, pos = varint(record, pos, end, place, "smallest sequence number")
        largest_seqno, pos = varint(record, pos, end, place, "largest sequence number")
    if tag == NEW_FILE4:
        while True:
            custom, pos = varint32(record, pos, end, place, "new file field tag")
            if custom == _CUSTOM_TERMINATE:
                break
            value, pos = length_prefixed(record, pos, end, place, f"new file field {custom}")
            if custom == _CUSTOM_PATH_ID:
                if len(value) != 1:
                    raise place.error(pos, "path id field of the wrong size")
                _refuse_path(value[0], place)
            elif custom & _CUSTOM_MUST_UNDERSTAND:
                raise place.error(pos, f"new file field {custom} that must be understood")
    return NewFile(level, number, size, smallest, largest, smallest_seqno, largest_seqno), pos


def _skip_wal_addition(record: bytes, pos: int, end: int, place: Place) -> int:
    _, pos = varint(record, pos, end, place, "WAL number")
    while True:
        field_tag, pos = varint32(record, pos, end, place, "WAL field tag")
        if field_tag == _WAL_TERMINATE:
            return pos
        if field_tag != _WAL_SYNCED_SIZE:
            raise place.error(pos, f"unknown WAL field {field_tag}")
        _, pos = varint(record, pos, end, place, "WAL synced size")


def _refuse_path(path_id: int, place: Place) -> None:
    """Files under another of ``db_paths`` than the first are not in the directory Flink
    checkpoints (it never sets ``db_paths``)."""
    if path_id != 0:
        raise UnsupportedFormatVersionError(
            f"{place.source}: a file in db_paths[{path_id}] (at byte offset {place.offset}),"
            " not in the database's own directory")

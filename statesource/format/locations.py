"""Where a keyed state's rows lie: data files and the byte range of each key group.

Part of the checkpoint metadata (:mod:`statesource.format.metadata`), kept apart
because every producer builds these entries and every reader plans from them.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from statesource.errors import CorruptCheckpointError
from statesource.format.json_fields import json_field, json_int, json_int_list, json_object
from statesource.format.storage import check_relative_path
from statesource.keygroups import KeyGroupRange

CRC_LIMIT = 1 << 32
"""CRC-32 values are unsigned 32-bit integers."""

PathReader = Callable[[Any], str]
"""Turns a recorded path into a checked root-relative one (rebasing version 1 paths)."""


@dataclass(frozen=True)
class KeyGroupLocation:
    """Where one key group's rows lie in a data file, and how to check them.

    The byte range holds whole record batches. A key group's rows are all of
    them, except in a row-addressed delta file (format version 5), where several
    runs may share a range and a run is the ``rows`` rows from ``row_offset`` on.
    """

    key_group: int
    batch_start: int
    batch_count: int
    offset: int
    length: int
    rows: int
    entries: int
    crc32: int
    row_offset: int = 0


_INDEX_FIELDS = {  # JSON column name -> KeyGroupLocation field, in the dataclass's order
    "keyGroup": "key_group",
    "batchStart": "batch_start",
    "batchCount": "batch_count",
    "offset": "offset",
    "length": "length",
    "rows": "rows",
    "entries": "entries",
    "crc32": "crc32",
}

_RUN_FIELDS = {**_INDEX_FIELDS, "rowOffset": "row_offset"}
"""The columns of a row-addressed delta file's runs (format version 5)."""


def _index_fields(row_addressed: bool) -> dict[str, str]:
    return _RUN_FIELDS if row_addressed else _INDEX_FIELDS


def locations_to_json(locations: Sequence[KeyGroupLocation], row_addressed: bool = False
                      ) -> dict[str, list[int]]:
    """Locations as the metadata records them: one list per field."""
    fields = _index_fields(row_addressed)
    columns = list(zip(*map(operator.attrgetter(*fields.values()), locations))) \
        or [()] * len(fields)
    return {name: list(column) for name, column in zip(fields, columns)}


def locations_from_json(data: object, path: object, row_addressed: bool = False
                        ) -> tuple[KeyGroupLocation, ...]:
    """:func:`locations_to_json`'s inverse (``path`` names the file in errors)."""
    keys = json_object(data)
    columns = [json_int_list(json_field(keys, name)) for name in _index_fields(row_addressed)]
    if len(set(map(len, columns))) != 1:
        raise ValueError(f"key-group index columns of {path} differ in length")
    return tuple(KeyGroupLocation(*fields) for fields in zip(*columns))


@dataclass(frozen=True)
class DataFile:
    """One Arrow IPC file of one keyed state, covering ``key_group_range``.

    ``locations`` lists only the key groups that have rows, in ascending order.
    ``row_addressed``: the runs of a delta file of format version 5, which may
    share byte ranges (:class:`KeyGroupLocation`).
    """

    path: str
    key_group_range: KeyGroupRange
    size_bytes: int
    locations: tuple[KeyGroupLocation, ...]
    row_addressed: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "keyGroupStart": self.key_group_range.start,
            "keyGroupEnd": self.key_group_range.end,
            "sizeBytes": self.size_bytes,
            "keyGroups": locations_to_json(self.locations, self.row_addressed),
        }

    @classmethod
    def from_json(cls, data: object, paths: PathReader, row_addressed: bool = False
                  ) -> DataFile:
        locations = locations_from_json(json_field(data, "keyGroups"),
                                        json_field(data, "path"), row_addressed)
        data_file = cls(paths(json_field(data, "path")),
                        KeyGroupRange(json_int(json_field(data, "keyGroupStart")),
                                      json_int(json_field(data, "keyGroupEnd"))),
                        json_int(json_field(data, "sizeBytes")), locations, row_addressed)
        if data_file.size_bytes < 0:
            raise ValueError(f"data file {data_file.path} has sizeBytes {data_file.size_bytes}")
        data_file.check()
        return data_file

    def to_json_text(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"))

    @classmethod
    def from_json_text(cls, text: str) -> DataFile:
        """A data file's entry as a producer's task reported it (checked like metadata)."""
        try:
            return cls.from_json(json.loads(text),
                                 lambda path: check_relative_path(path, "a task's result"))
        except ValueError as error:  # malformed JSON or entry; any other error is a bug
            raise CorruptCheckpointError(f"a task reported an invalid data file: {error}") \
                from None

    def with_locations(self, locations: Sequence[KeyGroupLocation]) -> DataFile:
        """This file listing only ``locations`` (ascending by key group)."""
        return replace(self, locations=tuple(sorted(locations,
                                                    key=operator.attrgetter("key_group"))))

    def check(self, locations: Sequence[KeyGroupLocation] | None = None) -> None:
        """Locations (default: this file's) ascend inside the file's range and its size, and
        never overlap, except that consecutive runs of a row-addressed file may share one
        byte range."""
        previous_group, previous_end = self.key_group_range.start - 1, 0
        previous: KeyGroupLocation | None = None
        for loc in self.locations if locations is None else locations:
            if not previous_group < loc.key_group <= self.key_group_range.end:
                raise ValueError(
                    f"{self.path}: key group {loc.key_group} is out of order or outside"
                    f" {self.key_group_range}"
                )
            shared = self.row_addressed and previous is not None \
                and byte_range_of(loc) == byte_range_of(previous)
            if min(loc.batch_start, loc.offset, loc.row_offset) < 0 or loc.length < 1 \
                    or (loc.offset < previous_end and not shared) \
                    or loc.offset + loc.length > self.size_bytes \
                    or (loc.row_offset and not self.row_addressed):
                raise ValueError(
                    f"{self.path}: key group {loc.key_group} has an invalid byte range"
                    f" {loc.offset}+{loc.length} (file of {self.size_bytes} bytes)"
                )
            if not 1 <= loc.batch_count <= loc.rows or not 1 <= loc.entries <= loc.rows \
                    or not 0 <= loc.crc32 < CRC_LIMIT:
                raise ValueError(
                    f"{self.path}: key group {loc.key_group} has impossible counts: batchCount"
                    f" {loc.batch_count}, rows {loc.rows}, entries {loc.entries}, crc32"
                    f" {loc.crc32} (need 1 <= batchCount <= rows, 1 <= entries <= rows)"
                )
            previous_group, previous_end, previous = loc.key_group, loc.offset + loc.length, loc


def byte_range_of(location: KeyGroupLocation) -> tuple[int, int, int, int, int]:
    """What identifies a location's byte range (runs sharing one have it equal)."""
    return (location.batch_start, location.batch_count, location.offset, location.length,
            location.crc32)

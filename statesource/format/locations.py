"""Where a keyed state's rows lie: data files and the byte range of each key group.

Part of the checkpoint metadata (:mod:`statesource.format.metadata`), kept apart
because every producer builds these entries and every reader plans from them.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable
from dataclasses import dataclass
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
    """Where one key group's rows lie in a data file, and how to check them."""

    key_group: int
    batch_start: int
    batch_count: int
    offset: int
    length: int
    rows: int
    entries: int
    crc32: int


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

_location_fields = operator.attrgetter(*_INDEX_FIELDS.values())


@dataclass(frozen=True)
class DataFile:
    """One Arrow IPC file of one keyed state, covering ``key_group_range``.

    ``locations`` lists only the key groups that have rows, in ascending order.
    """

    path: str
    key_group_range: KeyGroupRange
    size_bytes: int
    locations: tuple[KeyGroupLocation, ...]

    def to_json(self) -> dict[str, Any]:
        columns = list(zip(*map(_location_fields, self.locations))) or [()] * len(_INDEX_FIELDS)
        return {
            "path": self.path,
            "keyGroupStart": self.key_group_range.start,
            "keyGroupEnd": self.key_group_range.end,
            "sizeBytes": self.size_bytes,
            "keyGroups": {name: list(column) for name, column in zip(_INDEX_FIELDS, columns)},
        }

    @classmethod
    def from_json(cls, data: object, paths: PathReader) -> DataFile:
        keys = json_object(json_field(data, "keyGroups"))
        columns = [json_int_list(json_field(keys, name)) for name in _INDEX_FIELDS]
        if len(set(map(len, columns))) != 1:
            raise ValueError(
                f"key-group index columns of {json_field(data, 'path')} differ in length"
            )
        locations = tuple(KeyGroupLocation(*fields) for fields in zip(*columns))
        data_file = cls(paths(json_field(data, "path")),
                        KeyGroupRange(json_int(json_field(data, "keyGroupStart")),
                                      json_int(json_field(data, "keyGroupEnd"))),
                        json_int(json_field(data, "sizeBytes")), locations)
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

    def check(self) -> None:
        """Locations ascend inside the file's range and its size, and never overlap."""
        previous_group, previous_end = self.key_group_range.start - 1, 0
        for loc in self.locations:
            if not previous_group < loc.key_group <= self.key_group_range.end:
                raise ValueError(
                    f"{self.path}: key group {loc.key_group} is out of order or outside"
                    f" {self.key_group_range}"
                )
            if min(loc.batch_start, loc.offset) < 0 or loc.length < 1 \
                    or loc.offset < previous_end or loc.offset + loc.length > self.size_bytes:
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
            previous_group, previous_end = loc.key_group, loc.offset + loc.length

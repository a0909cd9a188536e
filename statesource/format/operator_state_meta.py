"""One operator state's part of the checkpoint metadata: its mode, value types and shares.

An operator state is one data file (:mod:`statesource.format.operator_columns`)
in which each old subtask's share is one byte range, so a rescale reads
exactly the shares it redistributes; the checks here keep those ranges within
the file and apart from one another.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from statesource.format.declaration_json import schemas_from_json, schemas_to_json
from statesource.format.json_fields import (
    check_unique,
    json_field,
    json_int,
    json_list,
    json_name,
)
from statesource.format.locations import CRC_LIMIT, PathReader
from statesource.model import DistributionMode, operator_state_roles
from statesource.schema import ValueSchema


@dataclass(frozen=True)
class SubtaskPartition:
    """One subtask's share of an operator state: a byte range of the state's file."""

    subtask: int
    batch_start: int
    batch_count: int
    offset: int
    length: int
    rows: int
    crc32: int

    def to_json(self) -> dict[str, Any]:
        return {"subtask": self.subtask, "batchStart": self.batch_start,
                "batchCount": self.batch_count, "offset": self.offset, "length": self.length,
                "rows": self.rows, "crc32": self.crc32}

    @classmethod
    def from_json(cls, data: object) -> SubtaskPartition:
        fields = [json_int(json_field(data, name))
                  for name in ("subtask", "batchStart", "batchCount", "offset", "length", "rows",
                               "crc32")]
        partition = cls(*fields)
        empty = (partition.batch_count, partition.length, partition.rows) == (0, 0, 0)
        if min(fields) < 0 or partition.crc32 >= CRC_LIMIT or not empty and (
                partition.length < 1 or not 1 <= partition.batch_count <= partition.rows):
            raise ValueError(f"subtask partition {data!r:.200} has a negative or impossible field")
        return partition


@dataclass(frozen=True)
class OperatorStateMeta:
    """One operator (non-keyed) state: its mode, types and per-subtask partitions."""

    name: str
    mode: DistributionMode
    schemas: Mapping[str, ValueSchema]
    path: str
    size_bytes: int
    partitions: tuple[SubtaskPartition, ...]

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.partitions)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "mode": self.mode.value,
                "valueSchemas": schemas_to_json(self.schemas), "path": self.path,
                "sizeBytes": self.size_bytes,
                "partitions": [p.to_json() for p in self.partitions]}

    @classmethod
    def from_json(cls, data: object, paths: PathReader) -> OperatorStateMeta:
        meta = cls(json_name(json_field(data, "name")),
                   DistributionMode(json_field(data, "mode")),
                   schemas_from_json(json_field(data, "valueSchemas")),
                   paths(json_field(data, "path")),
                   json_int(json_field(data, "sizeBytes")),
                   tuple(SubtaskPartition.from_json(p)
                         for p in json_list(json_field(data, "partitions"))))
        if set(meta.schemas) != set(operator_state_roles(meta.mode)):
            raise ValueError(f"operator state {meta.name!r} has value types for roles"
                             f" {sorted(meta.schemas)}")
        if meta.size_bytes < 0:
            raise ValueError(f"operator state {meta.name!r} has sizeBytes {meta.size_bytes}")
        previous_end = 0
        for partition in sorted(meta.partitions, key=lambda p: (p.offset, p.length)):
            if partition.offset + partition.length > meta.size_bytes:
                raise ValueError(f"operator state {meta.name!r}: subtask {partition.subtask}'s"
                                 f" bytes lie beyond the file's {meta.size_bytes} bytes")
            if partition.length and partition.offset < previous_end:
                raise ValueError(f"operator state {meta.name!r}: subtask {partition.subtask}'s"
                                 " bytes overlap another subtask's")
            previous_end = max(previous_end, partition.offset + partition.length)
        check_unique(meta.partitions, f"subtask of operator state {meta.name!r}", "subtask")
        return meta

"""The checkpoint metadata model (format version 1) and its JSON form.

The metadata is the only file a reader must trust: it names every data file,
the key-group range each covers, and where each key group's bytes lie with
their checksum. Readers check ``formatVersion`` before anything else, so a
future layout is refused with a message instead of being misread.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from statesource.errors import (
    CorruptCheckpointError,
    StateNotFoundError,
    StateSourceError,
    UnsupportedFormatVersionError,
)
from statesource.keygroups import KeyGroupRange
from statesource.schema import ValueSchema
from statesource.state.descriptors import StateDescriptor, StateKind
from statesource.state.redistribution import DistributionMode
from statesource.state.ttl import TtlConfig
from statesource.types import DataType, parse_type

FORMAT_VERSION = 1
SUPPORTED_FORMAT_VERSIONS = (1,)


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


_INDEX_FIELDS = {
    "keyGroup": "key_group",
    "batchStart": "batch_start",
    "batchCount": "batch_count",
    "offset": "offset",
    "length": "length",
    "rows": "rows",
    "entries": "entries",
    "crc32": "crc32",
}


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
        return {
            "path": self.path,
            "keyGroupStart": self.key_group_range.start,
            "keyGroupEnd": self.key_group_range.end,
            "sizeBytes": self.size_bytes,
            "keyGroups": {
                json_name: [getattr(loc, attr) for loc in self.locations]
                for json_name, attr in _INDEX_FIELDS.items()
            },
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DataFile:
        columns = data["keyGroups"]
        lengths = {len(columns[name]) for name in _INDEX_FIELDS}
        if len(lengths) != 1:
            raise ValueError(f"key-group index columns of {data['path']} differ in length")
        locations = tuple(
            KeyGroupLocation(**{attr: int(columns[name][i])
                                for name, attr in _INDEX_FIELDS.items()})
            for i in range(lengths.pop())
        )
        return cls(data["path"], KeyGroupRange(data["keyGroupStart"], data["keyGroupEnd"]),
                   int(data["sizeBytes"]), locations)


def _schemas_to_json(schemas: dict[str, ValueSchema]) -> dict[str, Any]:
    return {role: schema.avro for role, schema in schemas.items()}


def _schemas_from_json(data: dict[str, Any]) -> dict[str, ValueSchema]:
    return {role: ValueSchema.parse(avro) for role, avro in data.items()}


@dataclass(frozen=True)
class KeyedStateMeta:
    """One keyed state of an operator: its declaration and its data files."""

    name: str
    kind: StateKind
    namespace_type: DataType
    schemas: dict[str, ValueSchema]
    ttl: TtlConfig | None
    files: tuple[DataFile, ...]

    @property
    def entries(self) -> int:
        """State entries: (key, namespace) pairs holding a value."""
        return sum(loc.entries for f in self.files for loc in f.locations)

    @property
    def rows(self) -> int:
        """Data rows: one per value, list element or map entry."""
        return sum(loc.rows for f in self.files for loc in f.locations)

    @property
    def size_bytes(self) -> int:
        return sum(f.size_bytes for f in self.files)

    def declaration(self) -> StateDescriptor:
        return StateDescriptor(self.name, self.kind, self.schemas,
                               namespace_type=self.namespace_type, ttl=self.ttl)

    def key_group_locations(self) -> Iterator[tuple[DataFile, KeyGroupLocation]]:
        for data_file in self.files:
            for location in data_file.locations:
                yield data_file, location

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind.value,
            "namespaceType": self.namespace_type.name,
            "valueSchemas": _schemas_to_json(self.schemas),
            "ttl": None if self.ttl is None else self.ttl.to_json(),
            "files": [f.to_json() for f in self.files],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KeyedStateMeta:
        return cls(
            name=data["name"],
            kind=StateKind(data["kind"]),
            namespace_type=parse_type(data["namespaceType"]),
            schemas=_schemas_from_json(data["valueSchemas"]),
            ttl=None if data["ttl"] is None else TtlConfig.from_json(data["ttl"]),
            files=tuple(DataFile.from_json(f) for f in data["files"]),
        )


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
    def from_json(cls, data: dict[str, Any]) -> SubtaskPartition:
        return cls(int(data["subtask"]), int(data["batchStart"]), int(data["batchCount"]),
                   int(data["offset"]), int(data["length"]), int(data["rows"]),
                   int(data["crc32"]))


@dataclass(frozen=True)
class OperatorStateMeta:
    """One operator (non-keyed) state: its mode, types and per-subtask partitions."""

    name: str
    mode: DistributionMode
    schemas: dict[str, ValueSchema]
    path: str
    size_bytes: int
    partitions: tuple[SubtaskPartition, ...]

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.partitions)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "mode": self.mode.value,
                "valueSchemas": _schemas_to_json(self.schemas), "path": self.path,
                "sizeBytes": self.size_bytes,
                "partitions": [p.to_json() for p in self.partitions]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OperatorStateMeta:
        return cls(data["name"], DistributionMode(data["mode"]),
                   _schemas_from_json(data["valueSchemas"]), data["path"],
                   int(data["sizeBytes"]),
                   tuple(SubtaskPartition.from_json(p) for p in data["partitions"]))


@dataclass(frozen=True)
class OperatorMeta:
    """One operator (by uid): its parallelism, key type and states."""

    uid: str
    parallelism: int
    max_parallelism: int
    key_type: DataType | None
    keyed_states: tuple[KeyedStateMeta, ...]
    operator_states: tuple[OperatorStateMeta, ...]

    @property
    def keyed_key_type(self) -> DataType:
        """The key type, for reading keyed state (an error if the operator keeps none)."""
        if self.key_type is None:
            raise StateNotFoundError(f"operator {self.uid!r} has no keyed state")
        return self.key_type

    def keyed_state(self, name: str | None = None) -> KeyedStateMeta:
        return _pick(self.keyed_states, name, f"keyed state of operator {self.uid!r}")

    def operator_state(self, name: str) -> OperatorStateMeta:
        return _pick(self.operator_states, name, f"operator state of operator {self.uid!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            "uid": self.uid,
            "parallelism": self.parallelism,
            "maxParallelism": self.max_parallelism,
            "keyType": None if self.key_type is None else self.key_type.name,
            "keyedStates": [s.to_json() for s in self.keyed_states],
            "operatorStates": [s.to_json() for s in self.operator_states],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OperatorMeta:
        return cls(
            uid=data["uid"],
            parallelism=int(data["parallelism"]),
            max_parallelism=int(data["maxParallelism"]),
            key_type=None if data["keyType"] is None else parse_type(data["keyType"]),
            keyed_states=tuple(KeyedStateMeta.from_json(s) for s in data["keyedStates"]),
            operator_states=tuple(OperatorStateMeta.from_json(s) for s in data["operatorStates"]),
        )


@dataclass(frozen=True)
class CheckpointMeta:
    """Everything a reader needs to know about one checkpoint."""

    checkpoint_id: int
    timestamp_ms: int
    operators: tuple[OperatorMeta, ...]
    format_version: int = FORMAT_VERSION

    def operator(self, uid: str | None = None) -> OperatorMeta:
        """The operator ``uid``; optional when the checkpoint holds only one."""
        return _pick(self.operators, uid, "operator", attribute="uid")

    def to_json_bytes(self) -> bytes:
        document = {
            "formatVersion": self.format_version,
            "checkpointId": self.checkpoint_id,
            "timestampMillis": self.timestamp_ms,
            "operators": [o.to_json() for o in self.operators],
        }
        return json.dumps(document, indent=1, sort_keys=False).encode("utf-8")

    @classmethod
    def from_json_bytes(cls, payload: bytes, source: str) -> CheckpointMeta:
        """Parse metadata read from ``source`` (named in every error)."""
        try:
            document = json.loads(payload.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise CorruptCheckpointError(f"metadata {source} is not valid JSON: {error}") from None
        if not isinstance(document, dict) or "formatVersion" not in document:
            raise CorruptCheckpointError(f"metadata {source} has no formatVersion")
        version = document["formatVersion"]
        if version not in SUPPORTED_FORMAT_VERSIONS:
            raise UnsupportedFormatVersionError(
                f"checkpoint {source} has format version {version!r}; this statesource reads"
                f" versions {list(SUPPORTED_FORMAT_VERSIONS)}: upgrade statesource to read it"
            )
        try:
            return cls(
                checkpoint_id=int(document["checkpointId"]),
                timestamp_ms=int(document["timestampMillis"]),
                operators=tuple(OperatorMeta.from_json(o) for o in document["operators"]),
                format_version=version,
            )
        except StateSourceError as error:
            raise CorruptCheckpointError(f"metadata {source} is invalid: {error}") from None
        except (KeyError, TypeError, ValueError) as error:
            raise CorruptCheckpointError(
                f"metadata {source} is invalid: {type(error).__name__}: {error}"
            ) from None


def _pick(items: tuple, name: str | None, what: str, attribute: str = "name") -> Any:
    names = [getattr(item, attribute) for item in items]
    if name is None:
        if len(items) == 1:
            return items[0]
        raise StateNotFoundError(
            f"choose a {what}: there are {len(items)}: {', '.join(map(repr, names)) or 'none'}"
        )
    for item in items:
        if getattr(item, attribute) == name:
            return item
    raise StateNotFoundError(
        f"no {what} named {name!r}; available: {', '.join(map(repr, names)) or 'none'}"
    )

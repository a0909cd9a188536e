"""The checkpoint metadata model and its JSON form (format versions 1 to 5).

The metadata is the only file a reader must trust: it names every data file,
the key-group range each covers, and where each key group's bytes lie with
their checksum. Readers check ``formatVersion`` before anything else, so a
future layout is refused with a message instead of being misread.

In memory every data-file path is relative to the checkpoint *root* (the
directory holding ``chk-<id>`` directories), as version 2 records it, so a
checkpoint can reference files an earlier checkpoint wrote. Version 1
recorded paths relative to the checkpoint directory; they are rebased when
read, which is why parsing takes the checkpoint directory's name.

Version 3 lets the data files of one state cover overlapping key-group ranges,
as an incremental checkpoint's new file and the older files it references do;
what stays strict is that each key group's rows lie in at most one of them. A
writer records the lowest version that expresses its checkpoint, so that
readers of version 2 keep reading every checkpoint that is not incremental.

Version 4 adds per-entry deltas: a state may list *delta files*, each holding
runs of changed entries (upserts, tombstones, and the entries' prior rows) per
key group, which readers apply in ``sequence`` order over the key group's base
rows (:mod:`statesource.format.deltas`).

Version 5 adds *row-addressed* delta files: runs of several key groups share
record batches and are found by row, the prior rows lie apart from the state
rows, and each state row may say where its entry lies in the base.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from statesource.checks import check_checkpoint_id
from statesource.errors import (
    CorruptCheckpointError,
    StateNotFoundError,
    StateSourceError,
    UnsupportedFormatVersionError,
)
from statesource.format.json_fields import (
    MissingFieldError,
    check_unique,
    json_field,
    json_int,
    json_list,
    json_name,
    json_object,
)
from statesource.format.locations import (
    CRC_LIMIT,
    DataFile,
    KeyGroupLocation,
    PathReader,
    locations_from_json,
    locations_to_json,
)
from statesource.format.storage import check_relative_path
from statesource.keygroups import check_max_parallelism, check_parallelism
from statesource.model import (
    DistributionMode,
    StateDeclaration,
    StateKind,
    StateVisibility,
    TtlConfig,
    UpdateType,
    operator_state_roles,
)
from statesource.schema import ValueSchema
from statesource.types import DataType, key_type, parse_type

FORMAT_VERSION = 5
"""The newest version this implementation writes (only when a checkpoint needs it)."""
SUPPORTED_FORMAT_VERSIONS = (1, 2, 3, 4, 5)
OVERLAPPING_FILES_VERSION = 3
"""The first version whose states' data files may cover overlapping key-group ranges."""
DELTA_FILES_VERSION = 4
"""The first version whose states may list delta files (per-entry changes)."""
ROW_ADDRESSED_RUNS_VERSION = 5
"""The first version whose delta files may be row-addressed."""
MAX_METADATA_BYTES = 256 << 20
"""Metadata larger than this is refused before it is read (docs/FORMAT.md, section 3)."""
MAX_TIMESTAMP_MS = 253402300799999
"""The last millisecond of the year 9999: later timestamps cannot be shown as dates."""

T = TypeVar("T")


def _ttl_to_json(ttl: TtlConfig) -> dict[str, Any]:
    return {
        "ttlMillis": ttl.ttl_ms,
        "updateType": ttl.update_type.value,
        "visibility": ttl.visibility.value,
        "cleanupFullSnapshot": ttl.cleanup_full_snapshot,
        "incrementalCleanupSize": ttl.incremental_cleanup_size,
    }


def _ttl_from_json(data: object) -> TtlConfig:
    cleanup = json_field(data, "cleanupFullSnapshot")
    if type(cleanup) is not bool:
        raise ValueError(f"cleanupFullSnapshot must be a boolean, got {cleanup!r}")
    ttl_ms = json_int(json_field(data, "ttlMillis"))
    try:
        ttl = timedelta(milliseconds=ttl_ms)
    except OverflowError:
        raise ValueError(f"ttlMillis {ttl_ms} is beyond what a timedelta holds") from None
    return TtlConfig(
        ttl=ttl,
        update_type=UpdateType(json_field(data, "updateType")),
        visibility=StateVisibility(json_field(data, "visibility")),
        cleanup_full_snapshot=cleanup,
        incremental_cleanup_size=json_int(json_field(data, "incrementalCleanupSize")),
    )


def _unless_null(value: object, parse: Callable[[Any], T]) -> T | None:
    """An optional field: JSON null, or what ``parse`` makes of it."""
    return None if value is None else parse(value)


def _schemas_to_json(schemas: Mapping[str, ValueSchema]) -> dict[str, Any]:
    return {role: schema.avro for role, schema in schemas.items()}


def _schemas_from_json(data: object) -> dict[str, ValueSchema]:
    return {role: ValueSchema.parse(avro) for role, avro in json_object(data).items()}


@dataclass(frozen=True)
class DeltaFile:
    """A file of delta runs (format version 4): per key group, one run of changed entries.

    ``sequence`` orders the runs of a key group: they apply in ascending
    sequence over its base rows (writers use the id of the checkpoint that
    wrote the file).

    ``priors`` is None for a file of version 4, whose runs hold their entries'
    prior rows. A row-addressed file (version 5) lists its runs' state rows in
    ``file`` and their prior rows in ``priors`` (none for a run that only
    inserts), each by row within byte ranges that runs may share.
    """

    sequence: int
    file: DataFile
    priors: tuple[KeyGroupLocation, ...] | None = None

    @property
    def path(self) -> str:
        return self.file.path

    @property
    def row_addressed(self) -> bool:
        return self.priors is not None

    def keeping(self, locations: Sequence[KeyGroupLocation]) -> DeltaFile:
        """This file listing only the runs of ``locations`` (with their prior rows)."""
        key_groups = {location.key_group for location in locations}
        priors = None if self.priors is None else tuple(sorted(
            (location for location in self.priors if location.key_group in key_groups),
            key=lambda location: location.key_group))
        return DeltaFile(self.sequence, self.file.with_locations(locations), priors)

    def prior_locations(self) -> dict[int, KeyGroupLocation]:
        return {location.key_group: location for location in self.priors or ()}

    def to_json(self) -> dict[str, Any]:
        document = {"sequence": self.sequence, **self.file.to_json()}
        if self.priors is not None:
            document["priorKeyGroups"] = locations_to_json(self.priors, row_addressed=True)
        return document

    @classmethod
    def from_json(cls, data: object, paths: PathReader, version: int = FORMAT_VERSION
                  ) -> DeltaFile:
        sequence = json_int(json_field(data, "sequence"))
        if sequence < 0:
            raise ValueError(f"delta file sequence {sequence} is negative")
        row_addressed = "priorKeyGroups" in json_object(data)
        if row_addressed and version < ROW_ADDRESSED_RUNS_VERSION:
            raise ValueError(f"delta file {json_field(data, 'path')} is row-addressed (allowed"
                             f" from format version {ROW_ADDRESSED_RUNS_VERSION})")
        file = DataFile.from_json(data, paths, row_addressed)
        if not row_addressed:
            return cls(sequence, file)
        priors = locations_from_json(json_field(data, "priorKeyGroups"), file.path,
                                     row_addressed=True)
        file.check(priors)
        runs = {location.key_group for location in file.locations}
        for location in priors:
            if location.key_group not in runs:
                raise ValueError(f"delta file {file.path} lists prior rows of key group"
                                 f" {location.key_group}, which has no run there")
        return cls(sequence, file, priors)


DeltaRun = tuple[DeltaFile, KeyGroupLocation]
"""One key group's run in a delta file."""


@dataclass(frozen=True)
class KeyedStateMeta:
    """One keyed state of an operator: its declaration, its data files and delta files."""

    name: str
    kind: StateKind
    namespace_type: DataType
    schemas: Mapping[str, ValueSchema]
    ttl: TtlConfig | None
    files: tuple[DataFile, ...]
    delta_files: tuple[DeltaFile, ...] = ()
    """In ascending ``sequence`` (format version 4)."""

    @classmethod
    def of(cls, declaration: StateDeclaration, files: tuple[DataFile, ...],
           delta_files: tuple[DeltaFile, ...] = ()) -> KeyedStateMeta:
        return cls(declaration.name, declaration.kind, declaration.namespace_type,
                   declaration.schemas, declaration.ttl, files, delta_files)

    @property
    def entries(self) -> int | None:
        """State entries: (key, namespace) pairs holding a value (None: known only by
        merging delta runs)."""
        if self.delta_files:
            return None
        return sum(loc.entries for f in self.files for loc in f.locations)

    @property
    def rows(self) -> int | None:
        """Data rows: one per value, list element or map entry (None: known only by
        merging delta runs)."""
        if self.delta_files:
            return None
        return sum(loc.rows for f in self.files for loc in f.locations)

    @property
    def size_bytes(self) -> int:
        return sum(f.size_bytes for f in self.files) + sum(
            d.file.size_bytes for d in self.delta_files)

    def runs_of(self) -> dict[int, list[DeltaRun]]:
        """Each key group's delta runs, oldest first (empty for a state without deltas)."""
        runs: dict[int, list[DeltaRun]] = {}
        for delta in self.delta_files:
            for location in delta.file.locations:
                runs.setdefault(location.key_group, []).append((delta, location))
        return runs

    @property
    def declaration(self) -> StateDeclaration:
        return StateDeclaration(self.name, self.kind, self.namespace_type, self.schemas,
                                self.ttl)

    def key_group_locations(self) -> Iterator[tuple[DataFile, KeyGroupLocation]]:
        for data_file in self.files:
            for location in data_file.locations:
                yield data_file, location

    def to_json(self) -> dict[str, Any]:
        document = {
            "name": self.name,
            "kind": self.kind.value,
            "namespaceType": self.namespace_type.name,
            "valueSchemas": _schemas_to_json(self.schemas),
            "ttl": None if self.ttl is None else _ttl_to_json(self.ttl),
            "files": [f.to_json() for f in self.files],
        }
        if self.delta_files:
            document["deltaFiles"] = [d.to_json() for d in self.delta_files]
        return document

    @property
    def files_overlap(self) -> bool:
        """Whether some of this state's files cover overlapping key-group ranges."""
        files = sorted(self.files, key=lambda f: f.key_group_range.start)
        return any(after.key_group_range.start <= before.key_group_range.end
                   for before, after in zip(files, files[1:]))

    def location_of(self) -> dict[int, tuple[DataFile, KeyGroupLocation]]:
        """Each key group that has rows: the file and byte range holding them."""
        return {loc.key_group: (f, loc) for f, loc in self.key_group_locations()}

    def check_files(self, version: int) -> None:
        """Up to version 2 file ranges never overlap; from version 3 only rows may not.

        In either case a key group's rows lie in exactly one file, which is
        what every reader relies on.
        """
        if version < OVERLAPPING_FILES_VERSION:
            files = sorted(self.files, key=lambda f: f.key_group_range.start)
            for before, after in zip(files, files[1:]):
                if after.key_group_range.start <= before.key_group_range.end:
                    raise ValueError(
                        f"state {self.name!r}: data files {before.path} and {after.path} overlap"
                        f" (allowed from format version {OVERLAPPING_FILES_VERSION})"
                    )
            return
        paths = [f.path for f in self.files]
        if len(set(paths)) != len(paths):
            raise ValueError(f"state {self.name!r} lists a data file more than once")
        holder: dict[int, str] = {}
        for data_file, location in self.key_group_locations():
            other = holder.setdefault(location.key_group, data_file.path)
            if other != data_file.path:
                raise ValueError(
                    f"state {self.name!r}: key group {location.key_group} has rows in both"
                    f" {other} and {data_file.path}"
                )
        self._check_delta_files(set(paths))

    def _check_delta_files(self, base_paths: set[str]) -> None:
        """Delta files ascend by sequence, and a key group's runs have distinct sequences."""
        previous = -1
        last_sequence: dict[int, int] = {}
        for delta in self.delta_files:
            if delta.sequence < previous:
                raise ValueError(f"state {self.name!r}: delta file {delta.path} (sequence"
                                 f" {delta.sequence}) comes after sequence {previous}")
            if delta.path in base_paths:
                raise ValueError(f"state {self.name!r} lists data file {delta.path} more"
                                 " than once")
            base_paths.add(delta.path)
            previous = delta.sequence
            for location in delta.file.locations:
                if last_sequence.get(location.key_group) == delta.sequence:
                    raise ValueError(
                        f"state {self.name!r}: key group {location.key_group} has two delta"
                        f" runs of sequence {delta.sequence}")
                last_sequence[location.key_group] = delta.sequence

    @classmethod
    def from_json(cls, data: object, paths: PathReader,
                  version: int = FORMAT_VERSION) -> KeyedStateMeta:
        deltas = json_object(data).get("deltaFiles", []) \
            if version >= DELTA_FILES_VERSION else []
        meta = cls(
            name=json_name(json_field(data, "name")),
            kind=StateKind(json_field(data, "kind")),
            namespace_type=parse_type(json_field(data, "namespaceType")),
            schemas=_schemas_from_json(json_field(data, "valueSchemas")),
            ttl=_unless_null(json_field(data, "ttl"), _ttl_from_json),
            files=tuple(DataFile.from_json(f, paths)
                        for f in json_list(json_field(data, "files"))),
            delta_files=tuple(DeltaFile.from_json(d, paths, version) for d in json_list(deltas)),
        )
        meta.declaration  # noqa: B018 - checks the roles against the kind
        meta.check_files(version)
        return meta


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
                "valueSchemas": _schemas_to_json(self.schemas), "path": self.path,
                "sizeBytes": self.size_bytes,
                "partitions": [p.to_json() for p in self.partitions]}

    @classmethod
    def from_json(cls, data: object, paths: PathReader) -> OperatorStateMeta:
        meta = cls(json_name(json_field(data, "name")),
                   DistributionMode(json_field(data, "mode")),
                   _schemas_from_json(json_field(data, "valueSchemas")),
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

    def state_names(self) -> list[str]:
        """Every state's name: keyed states, then operator states."""
        return [s.name for s in self.keyed_states] + [s.name for s in self.operator_states]

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
    def from_json(cls, data: object, paths: PathReader,
                  version: int = FORMAT_VERSION) -> OperatorMeta:
        meta = cls(
            uid=json_name(json_field(data, "uid")),
            parallelism=json_int(json_field(data, "parallelism")),
            max_parallelism=check_max_parallelism(json_int(json_field(data, "maxParallelism"))),
            key_type=_unless_null(json_field(data, "keyType"), key_type),
            keyed_states=tuple(KeyedStateMeta.from_json(s, paths, version)
                               for s in json_list(json_field(data, "keyedStates"))),
            operator_states=tuple(OperatorStateMeta.from_json(s, paths)
                                  for s in json_list(json_field(data, "operatorStates"))),
        )
        check_parallelism(meta.parallelism, meta.max_parallelism)
        if meta.keyed_states and meta.key_type is None:
            raise ValueError(f"operator {meta.uid!r} has keyed states but no key type")
        for state in meta.keyed_states:
            for data_file in (*state.files, *(d.file for d in state.delta_files)):
                if data_file.key_group_range.end >= meta.max_parallelism:
                    raise ValueError(
                        f"data file {data_file.path} covers {data_file.key_group_range}, beyond"
                        f" operator {meta.uid!r}'s {meta.max_parallelism} key groups"
                    )
        for op_state in meta.operator_states:
            for partition in op_state.partitions:
                if partition.subtask >= meta.parallelism:
                    raise ValueError(f"operator state {op_state.name!r} has a share of subtask"
                                     f" {partition.subtask} of {meta.parallelism}")
        check_unique(meta.keyed_states, f"keyed state of operator {meta.uid!r}")
        check_unique(meta.operator_states, f"operator state of operator {meta.uid!r}")
        return meta


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

    def referenced_files(self) -> dict[str, int]:
        """Every data file this checkpoint reads, root-relative, with its size.

        A data file holds the rows of one state (its schema is that state's),
        so a path listed by two states, or with two sizes, is corruption.
        """
        files: dict[str, int] = {}
        owners: dict[str, tuple[str, str]] = {}
        for op in self.operators:
            recorded = [(f.path, f.size_bytes, state.name)
                        for state in op.keyed_states
                        for f in (*state.files, *(d.file for d in state.delta_files))]
            recorded += [(s.path, s.size_bytes, s.name) for s in op.operator_states]
            for path, size, state in recorded:
                if owners.setdefault(path, (op.uid, state)) != (op.uid, state):
                    raise ValueError(f"data file {path} is listed by state {owners[path][1]!r}"
                                     f" of operator {owners[path][0]!r} and by state"
                                     f" {state!r} of operator {op.uid!r}")
                if files.setdefault(path, size) != size:
                    raise ValueError(f"data file {path} is recorded with sizes {files[path]}"
                                     f" and {size}")
        return files

    @property
    def lowest_version(self) -> int:
        """The lowest format version that can record this checkpoint (what writers write)."""
        states = [state for op in self.operators for state in op.keyed_states]
        if any(delta.row_addressed for state in states for delta in state.delta_files):
            return ROW_ADDRESSED_RUNS_VERSION
        if any(state.delta_files for state in states):
            return DELTA_FILES_VERSION
        overlapping = any(state.files_overlap for state in states)
        return OVERLAPPING_FILES_VERSION if overlapping else 2

    def to_json_bytes(self) -> bytes:
        """The metadata in the lowest format version that records it (2 to 5)."""
        for op in self.operators:
            for state in op.keyed_states:
                state.check_files(FORMAT_VERSION)
        document = {
            "formatVersion": self.lowest_version,
            "checkpointId": self.checkpoint_id,
            "timestampMillis": self.timestamp_ms,
            "operators": [o.to_json() for o in self.operators],
        }
        # Compact, so that the C encoder writes it: an indented document goes through the
        # pure-Python encoder, which cost an incremental checkpoint (whose metadata lists
        # every key group's base and runs) more than writing its changed entries.
        return json.dumps(document, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_json_bytes(cls, payload: bytes, source: str, directory_name: str,
                        directory_id: int | None = None) -> CheckpointMeta:
        """Parse metadata read from ``source`` (named in every error).

        ``directory_name`` is the name of the checkpoint's directory, which
        version 1 paths are relative to; ``directory_id`` is the id that name
        gives (``chk-<id>``), which the recorded ``checkpointId`` must equal.
        """
        try:
            document = json.loads(payload.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise CorruptCheckpointError(f"metadata {source} is not valid JSON: {error}") from None
        except RecursionError:
            raise CorruptCheckpointError(
                f"metadata {source} nests JSON too deeply to be checkpoint metadata") from None
        if not isinstance(document, dict) or "formatVersion" not in document:
            raise CorruptCheckpointError(f"metadata {source} has no formatVersion")
        version = document["formatVersion"]
        if type(version) is not int or version not in SUPPORTED_FORMAT_VERSIONS:
            raise UnsupportedFormatVersionError(
                f"checkpoint {source} has format version {version!r}; this statesource reads"
                f" versions {list(SUPPORTED_FORMAT_VERSIONS)}: upgrade statesource to read it"
            )
        prefix = f"{directory_name}/" if version == 1 else ""

        def paths(recorded: Any) -> str:
            return check_relative_path(prefix + check_relative_path(recorded, source), source)

        try:
            metadata = cls(
                checkpoint_id=check_checkpoint_id(json_int(json_field(document, "checkpointId"))),
                timestamp_ms=json_int(json_field(document, "timestampMillis")),
                operators=tuple(OperatorMeta.from_json(o, paths, version)
                                for o in json_list(json_field(document, "operators"))),
                format_version=version,
            )
            if not 0 <= metadata.timestamp_ms <= MAX_TIMESTAMP_MS:
                raise ValueError(f"timestampMillis {metadata.timestamp_ms} is outside"
                                 f" 0..{MAX_TIMESTAMP_MS}")
            if directory_id is not None and metadata.checkpoint_id != directory_id:
                raise ValueError(f"checkpointId {metadata.checkpoint_id} differs from the"
                                 f" directory's name {directory_name}")
            check_unique(metadata.operators, "operator", attribute="uid")
            metadata.referenced_files()  # checks that each file has one size and one state
            return metadata
        except StateSourceError as error:
            raise CorruptCheckpointError(f"metadata {source} is invalid: {error}") from None
        except RecursionError:
            raise CorruptCheckpointError(
                f"metadata {source} is invalid: a value schema nests too deeply") from None
        except MissingFieldError as error:  # worded as when a KeyError reported it
            raise CorruptCheckpointError(
                f"metadata {source} is invalid: KeyError: {error.name!r}") from None
        except ValueError as error:
            # What the typed reads and the checks raise for a malformed document. Any other
            # exception is a bug of this code, and must not pass for a corrupt checkpoint.
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

"""One keyed state's part of the checkpoint metadata: its declaration, data files and delta files.

Its data files hold each key group's base rows; from format version 4 its
delta files hold runs of changed entries that readers apply over them
(:mod:`statesource.format.deltas`). The checks here are what every reader
relies on: a key group's base rows lie in one file, and its runs apply in one
order.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from statesource.format.declaration_json import (
    schemas_from_json,
    schemas_to_json,
    ttl_from_json,
    ttl_to_json,
)
from statesource.format.json_fields import (
    json_field,
    json_int,
    json_list,
    json_name,
    json_nullable,
    json_object,
)
from statesource.format.locations import (
    DataFile,
    KeyGroupLocation,
    PathReader,
    locations_from_json,
    locations_to_json,
)
from statesource.format.versions import (
    DELTA_FILES_VERSION,
    FORMAT_VERSION,
    OVERLAPPING_FILES_VERSION,
    ROW_ADDRESSED_RUNS_VERSION,
)
from statesource.model import StateDeclaration, StateKind, TtlConfig
from statesource.schema import ValueSchema
from statesource.types import DataType, parse_type


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
            "valueSchemas": schemas_to_json(self.schemas),
            "ttl": None if self.ttl is None else ttl_to_json(self.ttl),
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
            schemas=schemas_from_json(json_field(data, "valueSchemas")),
            ttl=json_nullable(json_field(data, "ttl"), ttl_from_json),
            files=tuple(DataFile.from_json(f, paths)
                        for f in json_list(json_field(data, "files"))),
            delta_files=tuple(DeltaFile.from_json(d, paths, version) for d in json_list(deltas)),
        )
        meta.declaration  # noqa: B018 - checks the roles against the kind
        meta.check_files(version)
        return meta

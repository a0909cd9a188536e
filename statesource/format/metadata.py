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

A checkpoint's metadata lists its operators, and each operator its keyed states
(:mod:`statesource.format.keyed_state_meta`) and operator states
(:mod:`statesource.format.operator_state_meta`); which format version allows
what is :mod:`statesource.format.versions`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

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
    json_nullable,
)
from statesource.format.keyed_state_meta import KeyedStateMeta
from statesource.format.locations import PathReader
from statesource.format.operator_state_meta import OperatorStateMeta
from statesource.format.storage import check_relative_path
from statesource.format.versions import (
    DELTA_FILES_VERSION,
    FORMAT_VERSION,
    OVERLAPPING_FILES_VERSION,
    PLAIN_FORMAT_VERSION,
    ROW_ADDRESSED_RUNS_VERSION,
    SUPPORTED_FORMAT_VERSIONS,
)
from statesource.keygroups import check_max_parallelism, check_parallelism
from statesource.types import DataType, key_type

MAX_METADATA_BYTES = 256 << 20
"""Metadata larger than this is refused before it is read (docs/FORMAT.md, section 3)."""
MAX_TIMESTAMP_MS = 253402300799999
"""The last millisecond of the year 9999: later timestamps cannot be shown as dates."""


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
            key_type=json_nullable(json_field(data, "keyType"), key_type),
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
        return OVERLAPPING_FILES_VERSION if overlapping else PLAIN_FORMAT_VERSION

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

"""Reading checkpoints without Spark: metadata, key-group ranges and checks.

A reader trusts the metadata and nothing else: it reads only the files and
byte ranges the metadata lists, checks each range's CRC-32 before decoding,
and derives every Arrow schema from the declared types. Data-file paths are
resolved under the checkpoint root and never outside it. The metadata file
itself is read by :mod:`statesource.format.metadata_file`, delta runs by
:mod:`statesource.format.delta_reads`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterator
from itertools import groupby

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from statesource.errors import CorruptCheckpointError, IncompatibleCheckpointError
from statesource.format.columns import KEY_GROUP, data_schema
from statesource.format.delta_reads import delta_file_block, delta_file_runs
from statesource.format.deltas import SortedRuns
from statesource.format.ipc import ReadListener, read_ranges
from statesource.format.keyed_state_meta import DeltaFile, DeltaRun, KeyedStateMeta
from statesource.format.keyorder import merge_blocks
from statesource.format.locations import KeyGroupLocation
from statesource.format.metadata import CheckpointMeta, OperatorMeta
from statesource.format.metadata_file import read_metadata, retired, was_retired
from statesource.format.operator_columns import decode_operator_state, operator_state_schema
from statesource.format.runblocks import RunBlocks
from statesource.format.source import (
    STATESOURCE,
    ArrowLayout,
    OperatorStateShares,
    SourceRef,
    StateSummary,
    TimerState,
)
from statesource.format.storage import (
    METADATA_FILE,
    Location,
    PathOrLocation,
    check_files,
    confined,
    find_checkpoint,
    resolve,
)
from statesource.keygroups import KeyGroupRange
from statesource.redistribution import OldOperatorState

BaseListener = Callable[[str, int, pa.Table], None]
"""Called with (data file path, key group, rows) for each base range a read decodes, before
any delta run is applied. The read may then write runs' values into those rows' buffers
(:mod:`statesource.format.inplace`): a listener copies what it keeps."""

_CHUNK_BASE_ROWS = 1 << 20
"""Key groups with delta runs are merged together until their bases hold this many rows."""


def _chunks(key_groups: list[int], base_rows: dict[int, int]) -> Iterator[list[int]]:
    chunk: list[int] = []
    rows = 0
    for key_group in key_groups:
        chunk.append(key_group)
        rows += base_rows.get(key_group, 0)
        if rows >= _CHUNK_BASE_ROWS:
            yield chunk
            chunk, rows = [], 0
    if chunk:
        yield chunk


class Checkpoint:
    """One committed checkpoint, opened by reading its metadata (a :class:`StateSource`)."""

    kind = STATESOURCE

    def __init__(self, location: Location, metadata: CheckpointMeta) -> None:
        self.location = location
        self.metadata = metadata

    @classmethod
    def open(cls, path: PathOrLocation, *, checkpoint_id: int | None = None,
             filesystem: pafs.FileSystem | None = None) -> Checkpoint:
        """Open the checkpoint at ``path``, or the newest complete one under it.

        ``path`` is a local path, an ``os.PathLike`` or a ``pyarrow.fs`` URI;
        ``checkpoint_id`` (an ``int``) picks a checkpoint under a root.
        """
        location = find_checkpoint(resolve(path, filesystem), checkpoint_id)
        metadata = read_metadata(location)
        if checkpoint_id is not None and metadata.checkpoint_id != checkpoint_id:
            raise CorruptCheckpointError(
                f"metadata {location.child(METADATA_FILE)} holds checkpoint"
                f" {metadata.checkpoint_id}, not {checkpoint_id}"
            )
        return cls(location, metadata)

    @property
    def checkpoint_id(self) -> int:
        return self.metadata.checkpoint_id

    def __repr__(self) -> str:
        return f"Checkpoint(checkpoint_id={self.checkpoint_id}, location={str(self.location)!r})"

    @property
    def root(self) -> Location:
        """The directory of checkpoints this one belongs to; data paths are relative to it."""
        return self.location.parent

    def ref(self) -> SourceRef:
        return SourceRef(self.kind, self.location, self.checkpoint_id)

    def data_file(self, path: str) -> Location:
        """Where a data file the metadata names lies (confined to the root)."""
        return confined(self.root, path)

    def operator(self, uid: str | None = None) -> OperatorMeta:
        return self.metadata.operator(uid)

    def summaries(self) -> list[StateSummary]:
        """One summary per keyed and operator state, operators in metadata order."""
        rows = []
        for op in self.metadata.operators:
            key_type = None if op.key_type is None else op.key_type.name
            for state in op.keyed_states:
                rows.append(StateSummary(
                    self.checkpoint_id, op.uid, op.parallelism, op.max_parallelism, state.name,
                    state.kind.value, key_type, {r: s.avro for r, s in state.schemas.items()},
                    state.entries, state.rows, state.size_bytes))
            for op_state in op.operator_states:
                rows.append(StateSummary(
                    self.checkpoint_id, op.uid, op.parallelism, op.max_parallelism,
                    op_state.name, f"operator-{op_state.mode.value}", None,
                    {r: s.avro for r, s in op_state.schemas.items()},
                    op_state.rows, op_state.rows, op_state.size_bytes))
        return rows

    # -- keyed state -----------------------------------------------------------------------

    def read_keyed_state(self, state: str | None = None, *, operator: str | None = None,
                         key_groups: KeyGroupRange | Collection[int] | None = None,
                         verify: bool = True, listener: ReadListener | None = None,
                         base_listener: BaseListener | None = None) -> Iterator[pa.Table]:
        """One table per non-empty key group in ``key_groups`` (default: all), in order.

        ``key_groups`` is a range or any collection of key groups; only their
        byte ranges are read, adjacent ones with one request. The key groups of
        an incremental checkpoint lie in several files whose ranges interleave;
        consecutive key groups of one file are still read together. A key group
        with delta runs (format version 4 and later) is its base range with its
        runs applied oldest first, so that the newest naming an entry decides:
        by binary search where the key order allows it
        (:func:`~statesource.format.keyorder.merge_blocks`), else by
        :class:`~statesource.format.deltas.SortedRuns`; key groups are merged a
        chunk at a time (up to ``_CHUNK_BASE_ROWS`` base rows).
        ``base_listener`` sees each base range as read, before any run is applied (see
        :data:`BaseListener`).
        """
        op = self.operator(operator)
        meta = op.keyed_state(state)
        schema = data_schema(op.keyed_key_type, meta.declaration)
        wanted = self._checked_range(op, key_groups)
        bases = self._base_tables(meta, schema, wanted, verify, listener, base_listener)
        if not meta.delta_files:
            for _, table in bases:
                yield table
            return
        base_rows = {loc.key_group: loc.rows for _, loc in meta.key_group_locations()}
        with_runs = {loc.key_group for delta in meta.delta_files for loc in delta.file.locations}
        stored = sorted(kg for kg in base_rows.keys() | with_runs if kg in wanted)
        head = next(bases, None)
        all_runs = self._run_blocks(meta, set(stored), schema, verify, listener)
        for chunk in _chunks(stored, base_rows):
            chunk_runs = all_runs.keeping(chunk[0], chunk[-1])
            chunk_bases = {}
            while head is not None and head[0] <= chunk[-1]:
                chunk_bases[head[0]] = head[1]
                head = next(bases, None)
            merged = merge_blocks(chunk_bases, chunk_runs, schema, own_bases=True)
            if merged is None:
                merged = SortedRuns(chunk_runs.by_key_group()).merged(chunk_bases)
            for key_group in chunk:
                if key_group in merged:
                    yield merged[key_group]

    def read_runs(self, state: str, *, operator: str | None = None,
                  runs: dict[int, list[DeltaRun]], verify: bool = True
                  ) -> dict[int, list[pa.Table]]:
        """The given delta runs of keyed state ``state`` (per key group, oldest first), with
        their prior rows, as tables of its delta schema (:mod:`statesource.format.deltas`)."""
        op = self.operator(operator)
        schema = data_schema(op.keyed_key_type, op.keyed_state(state).declaration)
        return self._run_tables(runs, sorted(runs), schema, verify, None, priors=True)

    def _base_tables(self, meta: KeyedStateMeta, schema: pa.Schema,
                     wanted: KeyGroupRange | Collection[int], verify: bool,
                     listener: ReadListener | None, base_listener: BaseListener | None = None
                     ) -> Iterator[tuple[int, pa.Table]]:
        """``(key group, rows)`` of each wanted key group's base range, ascending."""
        pieces = sorted(((loc, data_file) for data_file, loc in meta.key_group_locations()
                         if loc.key_group in wanted), key=lambda piece: piece[0].key_group)
        with self._unless_retired():
            for _, run in groupby(pieces, key=lambda piece: piece[1].path):
                run_pieces = list(run)
                data_file = run_pieces[0][1]
                locations = [loc for loc, _ in run_pieces]
                file = self.data_file(data_file.path)
                for location, batches in zip(locations,
                                             read_ranges(file, schema, locations,
                                                         data_file.size_bytes, verify,
                                                         listener)):
                    table = pa.Table.from_batches(batches, schema=schema)
                    _check_key_group(file, location, table)
                    if base_listener is not None:
                        base_listener(data_file.path, location.key_group, table)
                    yield location.key_group, table

    def _run_blocks(self, meta: KeyedStateMeta, key_groups: set[int], schema: pa.Schema,
                    verify: bool, listener: ReadListener | None) -> RunBlocks:
        """The delta runs of ``key_groups``, a block per delta file (oldest first), in the
        row-addressed delta schema of data ``schema`` (a file's locations ascend by key
        group: :meth:`DataFile.check`)."""
        blocks = []
        with self._unless_retired():
            for delta in meta.delta_files:
                locations = [loc for loc in delta.file.locations if loc.key_group in key_groups]
                if locations:
                    blocks.append(delta_file_block(self.data_file(delta.path), delta,
                                                   locations, schema, verify, listener))
        return RunBlocks(blocks)

    def _run_tables(self, runs: dict[int, list[DeltaRun]], key_groups: list[int],
                    schema: pa.Schema, verify: bool, listener: ReadListener | None, *,
                    priors: bool = False) -> dict[int, list[pa.Table]]:
        """Each of ``key_groups``' delta runs, oldest first, as tables of the (row-addressed)
        delta schema of data ``schema``; with their prior rows if ``priors`` (a run of
        version 4 always has them). One request per delta file for adjacent ranges, one
        decode per range that runs share. (:class:`SortedRuns` checks their key groups.)"""
        by_file: dict[str, tuple[DeltaFile, list[KeyGroupLocation]]] = {}
        for key_group in key_groups:
            for delta, location in runs.get(key_group, ()):
                by_file.setdefault(delta.path, (delta, []))[1].append(location)
        tables: dict[int, dict[int, pa.Table]] = {}
        with self._unless_retired():
            for delta, locations in by_file.values():
                file = self.data_file(delta.path)
                for key_group, table in delta_file_runs(file, delta, locations, schema,
                                                        verify, listener, priors):
                    tables.setdefault(key_group, {})[delta.sequence] = table
        return {kg: [by_sequence[s] for s in sorted(by_sequence)]
                for kg, by_sequence in tables.items()}

    @contextlib.contextmanager
    def _unless_retired(self) -> Iterator[None]:
        """A file gone because ``retain`` removed this checkpoint is no corruption: say so."""
        try:
            yield
        except CorruptCheckpointError as error:
            if was_retired(self.location):
                raise retired(self.location) from error
            raise

    def key_group_weights(self, operator: str, state: str) -> dict[int, int]:
        """Rows per non-empty key group (with delta runs: base and run rows, an upper bound)."""
        meta = self.operator(operator).keyed_state(state)
        weights = {loc.key_group: loc.rows for _, loc in meta.key_group_locations()}
        for key_group, runs in meta.runs_of().items():
            weights[key_group] = weights.get(key_group, 0) + sum(loc.rows for _, loc in runs)
        return weights

    def timer_states(self, operator: str | None = None) -> list[TimerState]:
        """None: statesource checkpoints keep no timers."""
        self.operator(operator)
        return []

    def arrow_layout(self, operator: str, state: str) -> ArrowLayout:
        op = self.operator(operator)
        meta = op.keyed_state(state)
        index_of = {data_file.path: index for index, data_file in enumerate(meta.files)}
        return ArrowLayout(
            data_schema(op.keyed_key_type, meta.declaration),
            tuple((self.data_file(f.path), f.size_bytes) for f in meta.files),
            tuple(sorted(((index_of[data_file.path], loc)
                          for data_file, loc in meta.key_group_locations()),
                         key=lambda piece: piece[1].key_group)),
            tuple(sorted(meta.runs_of())))

    def _checked_range(self, op: OperatorMeta, key_groups: KeyGroupRange | Collection[int] | None
                       ) -> KeyGroupRange | Collection[int]:
        full = KeyGroupRange(0, op.max_parallelism - 1)
        if key_groups is None:
            return full
        if isinstance(key_groups, KeyGroupRange):
            outside = key_groups.intersection(full) != key_groups
        else:
            outside = any(kg not in full for kg in key_groups)
        if outside:
            shown = key_groups if isinstance(key_groups, KeyGroupRange) else sorted(key_groups)
            raise IncompatibleCheckpointError(
                f"key groups {shown} are outside operator {op.uid!r}'s key groups {full}"
                f" (max parallelism {op.max_parallelism})"
            )
        return key_groups

    def check_files(self) -> int:
        """Check that every data file exists with its recorded size, reading none of them.

        Returns the number of files; raises :class:`CorruptCheckpointError` naming
        the first missing, replaced or truncated one.
        """
        files = self.metadata.referenced_files()
        with self._unless_retired():
            check_files(self.root, files)
        return len(files)

    def verify(self) -> int:
        """Read every listed byte range and check its checksum and contents against the
        metadata; raises on the first fault. Returns the number of ranges checked."""
        self.check_files()
        ranges = 0
        for op in self.metadata.operators:
            for state in op.keyed_states:
                ranges += sum(1 for _ in self.read_keyed_state(state.name, operator=op.uid))
            for op_state in op.operator_states:
                self.read_operator_state(op_state.name, operator=op.uid)
                ranges += sum(1 for p in op_state.partitions if p.batch_count)
        return ranges

    # -- operator state --------------------------------------------------------------------

    def operator_states_as_left(self, operator: str | None = None) -> list[OldOperatorState]:
        """Every operator state of ``operator`` as its subtasks left it: what Flink's rules
        redistribute (:func:`statesource.redistribution.redistribute_operator`)."""
        op = self.operator(operator)
        return [OldOperatorState(meta.name, meta.mode,
                                 self.read_operator_state(meta.name, operator=op.uid),
                                 holders=sorted(p.subtask for p in meta.partitions))
                for meta in op.operator_states]

    def operator_state(self, name: str, *, operator: str | None = None) -> OperatorStateShares:
        meta = self.operator(operator).operator_state(name)
        return OperatorStateShares(meta.name, meta.mode, dict(meta.schemas),
                                   self.read_operator_state(name, operator=operator),
                                   meta.size_bytes, meta.rows)

    def read_operator_state(self, name: str, *, operator: str | None = None,
                            verify: bool = True) -> list[list | dict]:
        """Each old subtask's share of operator state ``name``, in subtask order."""
        op = self.operator(operator)
        meta = op.operator_state(name)
        schema = operator_state_schema(meta.mode, meta.schemas)
        file = self.data_file(meta.path)
        shares: list[list | dict] = [decode_operator_state(meta.mode, meta.schemas, [])
                                     for _ in range(op.parallelism)]
        partitions = [p for p in meta.partitions if p.batch_count]
        with self._unless_retired():
            for partition, batches in zip(partitions,
                                          read_ranges(file, schema, partitions, meta.size_bytes,
                                                      verify)):
                shares[partition.subtask] = decode_operator_state(meta.mode, meta.schemas,
                                                                  batches)
        return shares


def _check_key_group(file: Location, location: KeyGroupLocation, table: pa.Table) -> None:
    """The rows read for a key group must all carry it: anything else is a misplaced range."""
    column = table.column(KEY_GROUP)
    bounds = pc.min_max(column)
    if column.null_count or (bounds["min"].as_py(), bounds["max"].as_py()) \
            != (location.key_group,) * 2:
        raise CorruptCheckpointError(
            f"data file {file}: the bytes recorded for key group {location.key_group} hold rows"
            f" of key groups {bounds['min']}..{bounds['max']}"
            + (f" and {column.null_count} of none (null)" if column.null_count else "")
        )

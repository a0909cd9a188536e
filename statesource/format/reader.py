"""Reading checkpoints without Spark: metadata, key-group ranges and checks.

A reader trusts the metadata and nothing else: it reads only the files and
byte ranges the metadata lists, checks each range's CRC-32 before decoding,
and derives every Arrow schema from the declared types. Data-file paths are
resolved under the checkpoint root and never outside it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterator
from itertools import groupby

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from statesource.errors import (
    CheckpointRetiredError,
    CorruptCheckpointError,
    IncompatibleCheckpointError,
)
from statesource.format.columns import (
    BASE_ROW,
    DELTA_KIND,
    KEY_GROUP,
    PRIOR,
    UPSERT,
    data_schema,
)
from statesource.format.deltas import SortedRuns, delta_schema
from statesource.format.ipc import ReadListener, read_ranges
from statesource.format.keyorder import merge_blocks
from statesource.format.locations import byte_range_of
from statesource.format.metadata import (
    MAX_METADATA_BYTES,
    CheckpointMeta,
    DeltaFile,
    DeltaRun,
    KeyedStateMeta,
    KeyGroupLocation,
    OperatorMeta,
)
from statesource.format.operator_columns import decode_operator_state, operator_state_schema
from statesource.format.runblocks import RunBlock, RunBlocks
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
    RETIRED_FILE,
    Location,
    PathOrLocation,
    check_files,
    checkpoint_id_of,
    confined,
    find_checkpoint,
    open_regular_file,
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


def read_metadata(directory: Location, file_name: str = METADATA_FILE) -> CheckpointMeta:
    """Parse the metadata file ``file_name`` of checkpoint directory ``directory``.

    Only a regular file inside the directory is read, and only up to
    ``MAX_METADATA_BYTES``: its size is checked before anything is allocated.
    """
    metadata_file = directory.child(file_name)
    try:
        handle = open_regular_file(metadata_file, "metadata", confine_to=directory)
    except CorruptCheckpointError as error:
        if file_name == METADATA_FILE and was_retired(directory):
            raise retired(directory) from error
        raise
    with handle:
        size = handle.size()
        if size > MAX_METADATA_BYTES:
            raise CorruptCheckpointError(
                f"metadata {metadata_file} is {size:,} bytes, more than the"
                f" {MAX_METADATA_BYTES:,} a checkpoint's metadata may hold")
        try:
            payload = handle.read(size)
        except OSError as error:
            raise CorruptCheckpointError(
                f"cannot read metadata {metadata_file}: {error}") from None
    if len(payload) != size:
        raise CorruptCheckpointError(f"metadata {metadata_file} changed while it was read")
    return CheckpointMeta.from_json_bytes(payload, str(metadata_file), directory.name,
                                          checkpoint_id_of(directory))


def was_retired(directory: Location) -> bool:
    """Whether checkpoint ``directory``, seen complete a moment ago, was since retired.

    ``retain`` renames the metadata before it deletes a single file, so a
    checkpoint whose metadata is gone (its ``_retired.json`` in its place, or
    the directory removed) was retired, not corrupted.
    """
    return not directory.child(METADATA_FILE).exists() and (
        directory.child(RETIRED_FILE).exists() or not directory.exists())


def retired(directory: Location) -> CheckpointRetiredError:
    checkpoint_id = checkpoint_id_of(directory)
    return CheckpointRetiredError(
        f"checkpoint {checkpoint_id if checkpoint_id is not None else directory} was removed by"
        f" retention while it was being read ({directory}); read a checkpoint that is kept")


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
                    blocks.append(_delta_file_block(self.data_file(delta.path), delta,
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
                for key_group, table in _delta_file_runs(file, delta, locations, schema,
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


def _delta_file_runs(file: Location, delta: DeltaFile, locations: list[KeyGroupLocation],
                     schema: pa.Schema, verify: bool, listener: ReadListener | None,
                     priors: bool) -> Iterator[tuple[int, pa.Table]]:
    """``(key group, run)`` of ``locations``' runs in one delta file, in the row-addressed
    delta schema of data ``schema``."""
    row_addressed = delta_schema(schema)
    if not delta.row_addressed:
        legacy = delta_schema(schema, row_addressed=False)
        for location, batches in zip(locations, read_ranges(file, legacy, locations,
                                                           delta.file.size_bytes, verify,
                                                           listener)):
            table = pa.Table.from_batches(batches, schema=legacy)
            _check_kinds(file, location, table, None)
            yield location.key_group, table.append_column(
                BASE_ROW, pa.array(np.full(table.num_rows, -1, np.int32)))
        return
    wanted = delta.prior_locations() if priors else {}
    rows, prior_rows = _addressed_rows(
        file, delta.file.size_bytes, row_addressed,
        (locations, [wanted[loc.key_group] for loc in locations if loc.key_group in wanted]),
        verify, listener)
    if not priors:
        yield from rows
        return
    prior_of = dict(prior_rows)
    for key_group, table in rows:
        prior = prior_of.get(key_group)
        yield key_group, table if prior is None else pa.concat_tables([table, prior])


def _delta_file_block(file: Location, delta: DeltaFile, locations: list[KeyGroupLocation],
                      schema: pa.Schema, verify: bool, listener: ReadListener | None
                      ) -> RunBlock:
    """The rows of ``locations``' runs (ascending by key group) in one delta file, as one
    block: their state rows (and, in a file of version 4, the prior rows each run holds).
    Runs whose rows lie one after the other, as row-addressed files hold them, are taken
    with one slice."""
    key_groups = np.array([location.key_group for location in locations], dtype=np.int64)
    if not delta.row_addressed:
        tables = [table for _, table in _delta_file_runs(file, delta, locations, schema, verify,
                                                          listener, priors=False)]
        return RunBlock(pa.concat_tables(tables), key_groups,
                        np.array([len(table) for table in tables], dtype=np.int64))
    decoded = _decoded_ranges(file, delta.file.size_bytes, delta_schema(schema),
                              (locations, []), verify, listener)
    _check_runs(file, locations, decoded)
    pieces: list[list] = []  # [table, first row, rows]
    table, offset = None, -1
    for location in locations:
        if location.offset != offset:  # else the range the previous run shares (DataFile.check)
            table, offset = decoded[byte_range_of(location)], location.offset
        if pieces and pieces[-1][0] is table \
                and pieces[-1][1] + pieces[-1][2] == location.row_offset:
            pieces[-1][2] += location.rows
        else:
            pieces.append([table, location.row_offset, location.rows])
    counts = np.array([location.rows for location in locations], dtype=np.int64)  # checked
    return RunBlock(pa.concat_tables([table.slice(start, rows) for table, start, rows in pieces]),
                    key_groups, counts)


def _addressed_rows(file: Location, size: int, schema: pa.Schema,
                    parts: tuple[list[KeyGroupLocation], list[KeyGroupLocation]],
                    verify: bool, listener: ReadListener | None
                    ) -> tuple[list[tuple[int, pa.Table]], list[tuple[int, pa.Table]]]:
    """The rows of row-addressed runs: of ``parts``' state locations and of its prior
    locations."""
    decoded = _decoded_ranges(file, size, schema, parts, verify, listener)
    state_rows: list[tuple[int, pa.Table]] = []
    prior_rows: list[tuple[int, pa.Table]] = []
    for locations, rows in zip(parts, (state_rows, prior_rows)):
        _check_runs(file, locations, decoded)
        rows += [(location.key_group, decoded[byte_range_of(location)].slice(
            location.row_offset, location.rows)) for location in locations]
    return state_rows, prior_rows


def _decoded_ranges(file: Location, size: int, schema: pa.Schema,
                    parts: tuple[list[KeyGroupLocation], list[KeyGroupLocation]],
                    verify: bool, listener: ReadListener | None
                    ) -> dict[tuple[int, int, int, int, int], pa.Table]:
    """The byte ranges of ``parts``' state locations and of its prior locations, each read
    and checked once however many runs share it, all with one request where they are
    adjacent."""
    claims: dict[tuple[int, int, int, int, int], tuple[KeyGroupLocation, bool]] = {}
    for locations, state in zip(parts, (True, False)):
        offset = -1
        for location in locations:
            if location.offset == offset:
                continue  # the range the previous run shares (DataFile.check)
            offset = location.offset
            claimed = claims.setdefault(byte_range_of(location), (location, state))
            if claimed[1] != state:
                raise CorruptCheckpointError(
                    f"data file {file}: bytes {location.offset}.."
                    f"{location.offset + location.length} are listed as both state rows and"
                    " prior rows of delta runs")
    ranges = sorted(claims.values(), key=lambda claim: claim[0].offset)
    decoded = {}
    for (location, state), batches in zip(ranges, read_ranges(
            file, schema, [location for location, _ in ranges], size, verify, listener,
            exact_rows=False)):
        table = pa.Table.from_batches(batches, schema=schema)
        _check_kinds(file, location, table, state)
        decoded[byte_range_of(location)] = table
    return decoded


def _check_kinds(file: Location, location: KeyGroupLocation, table: pa.Table,
                 state: bool | None) -> None:
    """Every row of runs must be of a known kind: with ``state``, an upsert or a tombstone;
    with ``state`` False, a prior row; None (a version 4 run), any. A merge takes a row of
    no other kind for a tombstone, so a null or unknown kind must not reach it."""
    column = table.column(DELTA_KIND)
    kinds = column.to_numpy()
    if column.null_count or np.any((kinds < UPSERT) | (kinds > PRIOR)):
        raise CorruptCheckpointError(
            f"data file {file}: bytes {location.offset}..{location.offset + location.length}"
            f" hold delta runs' rows of no known {DELTA_KIND} (null, or not {UPSERT}..{PRIOR})")
    if state is not None and (np.any(kinds == PRIOR) if state else not np.all(kinds == PRIOR)):
        raise CorruptCheckpointError(
            f"data file {file}: bytes {location.offset}..{location.offset + location.length}"
            f" hold {'prior' if state else 'state'} rows among the"
            f" {'state' if state else 'prior'} rows of delta runs")


def _check_runs(file: Location, locations: list[KeyGroupLocation],
                decoded: dict[tuple[int, int, int, int, int], pa.Table]) -> None:
    """Each run's rows must lie within the range decoded for it, and be all its key group's
    rows there. A file holds one run per key group and part, so rows of a run's key group
    next to its own mean the metadata miscounts them; read as listed, the run would lose
    its first or last upserts or tombstones without a word. (``locations``: one part's
    runs, ascending by key group; runs sharing a range are listed one after the other.)"""
    for _, sharing in groupby(locations, key=lambda location: location.offset):
        runs = list(sharing)
        table = decoded[byte_range_of(runs[0])]
        for location in runs:
            if location.row_offset + location.rows > table.num_rows:
                raise CorruptCheckpointError(
                    f"data file {file}: key group {location.key_group}'s run is rows"
                    f" {location.row_offset}..{location.row_offset + location.rows} of bytes"
                    f" {location.offset}..{location.offset + location.length}, which hold"
                    f" {table.num_rows} rows")
        groups = table.column(KEY_GROUP).to_numpy(zero_copy_only=False)
        key_groups, starts, counts = (np.array([getattr(run, name) for run in runs],
                                               dtype=np.int64)
                                      for name in ("key_group", "row_offset", "rows"))
        ends = starts + counts
        cut = (starts > 0) & (groups[np.maximum(starts - 1, 0)] == key_groups)
        cut |= (ends < len(groups)) & (groups[np.minimum(ends, len(groups) - 1)] == key_groups)
        if cut.any():
            run = runs[int(np.argmax(cut))]
            raise CorruptCheckpointError(
                f"data file {file}: key group {run.key_group}'s run is rows {run.row_offset}.."
                f"{run.row_offset + run.rows} of bytes {run.offset}..{run.offset + run.length},"
                " but rows of its key group lie next to them: the metadata miscounts the run")


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

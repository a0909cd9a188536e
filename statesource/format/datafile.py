"""The one data-file writer: Arrow IPC files whose batch groups are addressable byte ranges.

Every producer (the Python backend's checkpoints, the Spark writer, the
rescaler, importers) writes data files through :func:`write_keyed_file`,
:func:`write_delta_file` and :func:`write_operator_state_file`. Batches stream straight to the file
system: the IPC writer writes into a sink that forwards each piece to the
file and folds it into the running CRC-32 of the current group, so memory is
bounded by the batches in hand, whatever the file's size. The file stays a
regular Arrow IPC file that any Arrow reader can open whole.
"""

from __future__ import annotations

import contextlib
import os
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from statesource.errors import InvalidArgumentError, StateSourceError
from statesource.format.columns import KEY_GROUP
from statesource.format.commit import sync_directory
from statesource.format.deltas import EncodedRun
from statesource.format.ipc import MAX_ROWS_PER_BATCH, ByteRange
from statesource.format.keyed_state_meta import DeltaFile
from statesource.format.locations import DataFile, KeyGroupLocation
from statesource.format.operator_columns import operator_state_schema, operator_state_table
from statesource.format.operator_state_meta import OperatorStateMeta, SubtaskPartition
from statesource.format.storage import Location
from statesource.keygroups import KeyGroupRange
from statesource.model import DistributionMode
from statesource.schema import ValueSchema

_MAGIC_PADDED = 8  # "ARROW1" and two bytes of padding precede the schema message
_HEADER_BYTES = _MAGIC_PADDED + 8  # then a continuation marker and the schema's length
_BUFFER_BYTES = 1 << 20


class _ChecksummingSink:
    """The file-like object the IPC writer writes into.

    The writer emits the magic and schema message lazily, with the first
    batch, so the sink finds where the first batch starts by reading the
    schema message's length from the bytes passing through; checksums count
    only bytes from there on.
    """

    def __init__(self, out: pa.NativeFile) -> None:
        self._out = out
        self.position = 0
        self._head = bytearray()
        self.first_batch_offset: int | None = None
        self._crc = 0

    def write(self, data: bytes | pa.Buffer) -> int:
        self._out.write(data)
        size = len(data)
        start = self.position
        self.position += size
        if self.first_batch_offset is None:
            self._read_header(data)
            if self.first_batch_offset is None:
                return size
        skip = self.first_batch_offset - start
        if skip <= 0:
            self._crc = zlib.crc32(data, self._crc)
        elif skip < size:
            self._crc = zlib.crc32(memoryview(data)[skip:], self._crc)
        return size

    def _read_header(self, data: bytes | pa.Buffer) -> None:
        """Collect the file's first bytes until the schema message's length is known."""
        self._head += bytes(memoryview(data)[:_HEADER_BYTES - len(self._head)])
        if len(self._head) == _HEADER_BYTES:
            length = int.from_bytes(self._head[_MAGIC_PADDED + 4:], "little", signed=True)
            self.first_batch_offset = _HEADER_BYTES + length

    def take_crc(self) -> int:
        crc, self._crc = self._crc, 0
        return crc

    def tell(self) -> int:
        return self.position

    def flush(self) -> None:
        self._out.flush()

    @property
    def closed(self) -> bool:
        return self._out.closed

    def close(self) -> None:
        """The IPC writer does not own the file; :func:`_write_groups` closes it."""


def _write_groups(target: Location, schema: pa.Schema,
                  groups: Iterable[Sequence[pa.RecordBatch]]) -> tuple[int, list[ByteRange]]:
    """Write each group of batches contiguously; return the file size and each group's range.

    A failed write removes the partial file before re-raising.
    """
    ranges: list[ByteRange] = []
    batch_index = 0
    try:
        with target.filesystem.open_output_stream(target.path,
                                                  buffer_size=_BUFFER_BYTES) as out:
            sink = _ChecksummingSink(out)
            with pa.ipc.new_file(sink, schema) as writer:
                for batches in groups:
                    start = sink.position
                    for batch in batches:
                        writer.write_batch(batch)
                    count = len(batches)
                    offset = max(start, sink.first_batch_offset or 0) if count else start
                    ranges.append(ByteRange(batch_index, count, offset, sink.position - offset,
                                            sink.take_crc()))
                    batch_index += count
            size = sink.position
        if target.is_local:
            _sync_file(target.path)
    except BaseException:
        with contextlib.suppress(OSError):
            target.filesystem.delete_file(target.path)
        raise
    return size, ranges


def _sync_file(path: str) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    sync_directory(os.path.dirname(path))


def write_keyed_file(target: Location, relative_path: str, schema: pa.Schema,
                     key_group_range: KeyGroupRange,
                     key_groups: Iterable[tuple[int, Sequence[pa.RecordBatch], int]]
                     ) -> DataFile:
    """Write one keyed-state data file covering ``key_group_range``.

    ``key_groups`` yields ``(key group, batches, entries)`` in ascending key-group
    order, each with at least one non-empty batch holding only that key group's
    rows, every batch of exactly ``schema``; ``entries`` counts the distinct
    (key, namespace) pairs among them. Anything else is refused before it is
    written, since a producer's mistake here would misplace rows silently.
    """
    counts: list[tuple[int, int, int]] = []  # key group, rows, entries

    def checked() -> Iterable[Sequence[pa.RecordBatch]]:
        previous = key_group_range.start - 1
        for key_group, batches, entries in key_groups:
            if key_group not in key_group_range:
                raise InvalidArgumentError(
                    f"data file {relative_path}: key group {key_group!r} is outside the"
                    f" file's key groups {key_group_range}"
                )
            if key_group <= previous:
                raise InvalidArgumentError(
                    f"data file {relative_path}: key group {key_group} arrives after key"
                    f" group {previous}; key groups must ascend"
                )
            _check_batches(relative_path, schema, key_group, batches)
            counts.append((key_group, sum(b.num_rows for b in batches), entries))
            previous = key_group
            yield batches

    size, ranges = _write_groups(target, schema, checked())
    locations = tuple(
        KeyGroupLocation(key_group, r.batch_start, r.batch_count, r.offset, r.length, rows,
                         entries, r.crc32)
        for (key_group, rows, entries), r in zip(counts, ranges)
    )
    return DataFile(relative_path, key_group_range, size, locations)


RUN_BLOCK_ROWS = 16384
"""Runs of consecutive key groups are packed into record batches of up to this many rows
(a larger run has batches of its own): a read of every run decodes few batches, and a read of
one key group's run reads at most this many rows besides it."""


def write_delta_file(target: Location, relative_path: str, schema: pa.Schema,
                     key_group_range: KeyGroupRange, sequence: int,
                     runs: Sequence[EncodedRun]) -> DeltaFile:
    """Write one row-addressed delta file (format version 5): the runs' state rows packed
    into shared batches, then their prior rows likewise; ``runs`` ascend by key group."""
    previous = key_group_range.start - 1
    for run in runs:
        if not previous < run.key_group <= key_group_range.end or not run.rows.num_rows:
            raise InvalidArgumentError(
                f"delta file {relative_path}: a run of key group {run.key_group} is outside"
                f" {key_group_range}, after key group {previous}, or has no rows")
        previous = run.key_group
    for part in ([run.rows for run in runs], [run.priors for run in runs]):
        _check_run_rows(relative_path, schema, [run.key_group for run in runs], part)
    state_blocks = _blocks([run.rows for run in runs])
    prior_blocks = _blocks([run.priors for run in runs])
    size, ranges = _write_groups(target, schema, (
        pa.concat_tables(tables).combine_chunks().to_batches(max_chunksize=MAX_ROWS_PER_BATCH)
        for tables, _ in (*state_blocks, *prior_blocks)))
    state_ranges, prior_ranges = ranges[:len(state_blocks)], ranges[len(state_blocks):]
    state = _run_locations(runs, state_blocks, state_ranges, lambda run: run.entries)
    priors = _run_locations(runs, prior_blocks, prior_ranges, lambda run: run.prior_entries)
    return DeltaFile(sequence, DataFile(relative_path, key_group_range, size, state, True),
                     priors)


def _check_run_rows(path: str, schema: pa.Schema, key_groups: Sequence[int],
                    tables: Sequence[pa.Table]) -> None:
    """Each of ``tables`` (one per key group of ``key_groups``) is of ``schema`` and holds
    rows of its key group only; checked for all runs at once, as runs are often tiny."""
    for table in tables:
        if not table.schema.equals(schema):
            raise InvalidArgumentError(
                f"delta file {path}: a run has schema {table.schema}, expected {schema}")
    sizes = [table.num_rows for table in tables]
    if not sum(sizes):
        return
    found = pa.concat_tables(tables).column(KEY_GROUP).to_numpy()
    wrong = np.flatnonzero(found != np.repeat(np.asarray(key_groups, found.dtype), sizes))
    if len(wrong):
        given = np.repeat(np.asarray(key_groups), sizes)[wrong[0]]
        raise InvalidArgumentError(
            f"delta file {path}: a run given as key group {given} holds rows of key group"
            f" {found[wrong[0]]}")


def _blocks(tables: Sequence[pa.Table]) -> list[tuple[list[pa.Table], list[int]]]:
    """The non-empty ``tables`` grouped into blocks of up to :data:`RUN_BLOCK_ROWS` rows, in
    order: each block's tables and their indexes."""
    blocks: list[tuple[list[pa.Table], list[int]]] = []
    rows = RUN_BLOCK_ROWS
    for index, table in enumerate(tables):
        if not table.num_rows:
            continue
        if rows + table.num_rows > RUN_BLOCK_ROWS:
            blocks.append(([], []))
            rows = 0
        blocks[-1][0].append(table)
        blocks[-1][1].append(index)
        rows += table.num_rows
    return blocks


def _run_locations(runs: Sequence[EncodedRun], blocks: list[tuple[list[pa.Table], list[int]]],
                   ranges: Sequence[ByteRange], entries: Callable[[EncodedRun], int]
                   ) -> tuple[KeyGroupLocation, ...]:
    locations = []
    for (tables, indexes), r in zip(blocks, ranges):
        row_offset = 0
        for table, index in zip(tables, indexes):
            locations.append(KeyGroupLocation(
                runs[index].key_group, r.batch_start, r.batch_count, r.offset, r.length,
                table.num_rows, entries(runs[index]), r.crc32, row_offset))
            row_offset += table.num_rows
    return tuple(locations)


def _check_batches(path: str, schema: pa.Schema, key_group: int,
                   batches: Sequence[pa.RecordBatch]) -> None:
    if not batches or any(b.num_rows == 0 for b in batches):
        raise InvalidArgumentError(
            f"data file {path}: key group {key_group} must come as non-empty batches"
        )
    for batch in batches:
        if not batch.schema.equals(schema):
            raise InvalidArgumentError(
                f"data file {path}: a batch of key group {key_group} has schema {batch.schema},"
                f" expected {schema}"
            )
        bounds = pc.min_max(batch.column(KEY_GROUP))
        if bounds["min"].as_py() != key_group or bounds["max"].as_py() != key_group:
            raise InvalidArgumentError(
                f"data file {path}: a batch given as key group {key_group} holds rows of key"
                f" groups {bounds['min']}..{bounds['max']}"
            )


def write_operator_state_file(target: Location, schema: pa.Schema,
                              shares: Iterable[tuple[int, Sequence[pa.RecordBatch]]]
                              ) -> tuple[int, tuple[SubtaskPartition, ...]]:
    """Write one operator state's file: each subtask's share as one run of batches.

    Returns the file size and one partition per share, in the order given.
    """
    rows: list[tuple[int, int]] = []  # subtask, rows

    def groups() -> Iterable[Sequence[pa.RecordBatch]]:
        for subtask, batches in shares:
            kept = [b for b in batches if b.num_rows]
            rows.append((subtask, sum(b.num_rows for b in kept)))
            yield kept

    try:
        size, ranges = _write_groups(target, schema, groups())
    except pa.ArrowException as error:
        raise StateSourceError(f"operator state file {target}: cannot encode: {error}") \
            from None
    return size, tuple(
        SubtaskPartition(subtask, r.batch_start, r.batch_count, r.offset, r.length, count,
                         r.crc32)
        for (subtask, count), r in zip(rows, ranges)
    )


def write_operator_state(target: Location, relative_path: str, name: str, mode: DistributionMode,
                         schemas: Mapping[str, ValueSchema],
                         shares: Iterable[tuple[int, list | dict]]) -> OperatorStateMeta:
    """Write operator state ``name`` from each subtask's share (a list, or a dict for
    broadcast state), in the order given; return its metadata."""
    size, partitions = write_operator_state_file(
        target, operator_state_schema(mode, schemas),
        ((subtask, operator_state_table(mode, schemas, share).to_batches())
         for subtask, share in shares))
    return OperatorStateMeta(name, mode, schemas, relative_path, size, partitions)

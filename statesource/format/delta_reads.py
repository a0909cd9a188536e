"""Reading delta runs out of delta files, checked against what the metadata says of them.

A version 4 delta file holds one byte range per run, its prior rows inside;
a row-addressed one (version 5) lets runs of several key groups share a
range, found by row, with their prior rows in ranges of their own. Either
way a run is read here into the row-addressed delta schema
(:func:`~statesource.format.deltas.delta_schema`), each shared range read and
checked once, and every row's kind and every run's bounds checked before a
merge sees them: a merge takes a row of unknown kind for a tombstone, and a
miscounted run would lose upserts without a word.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import groupby

import numpy as np
import pyarrow as pa

from statesource.errors import CorruptCheckpointError
from statesource.format.columns import BASE_ROW, DELTA_KIND, KEY_GROUP, PRIOR, UPSERT
from statesource.format.deltas import delta_schema
from statesource.format.ipc import ReadListener, read_ranges
from statesource.format.keyed_state_meta import DeltaFile
from statesource.format.locations import KeyGroupLocation, byte_range_of
from statesource.format.runblocks import RunBlock
from statesource.format.storage import Location


def delta_file_runs(file: Location, delta: DeltaFile, locations: list[KeyGroupLocation],
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


def delta_file_block(file: Location, delta: DeltaFile, locations: list[KeyGroupLocation],
                     schema: pa.Schema, verify: bool, listener: ReadListener | None
                     ) -> RunBlock:
    """The rows of ``locations``' runs (ascending by key group) in one delta file, as one
    block: their state rows (and, in a file of version 4, the prior rows each run holds).
    Runs whose rows lie one after the other, as row-addressed files hold them, are taken
    with one slice."""
    key_groups = np.array([location.key_group for location in locations], dtype=np.int64)
    if not delta.row_addressed:
        tables = [table for _, table in delta_file_runs(file, delta, locations, schema, verify,
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

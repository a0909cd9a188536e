"""A lower bound for reading the end of a chain of incremental checkpoints.

Run: python bench/chain_floor.py [--entries 5000000] [--repeats 7]

``bench/incremental.py`` measures the read of a checkpoint at the end of a chain
of 10 incremental ones against the read of a full checkpoint of the same state.
This bench asks how low that ratio can go while the reader works as it does (numpy
and pyarrow, checking what it reads). It times, in the same run:

1. the read of the full checkpoint (the baseline);
2. the same read, doing per key group, while its base range is fresh in cache, only
   the work any merge of checked runs must do: the base keys strictly ascending (so
   that a key's row is its only one), each run row's hinted row in range and holding
   its key, and the newest values written into the base's own value buffer at once;
3. reading, CRC-checking and decoding the byte ranges of the chain's delta files.

The floor is (2) + (3): a read that also checks its runs' key groups, kinds, key
order and row bounds, puts them in key-group order, finds which run is newest where
several name one row, locates each base's buffers and adds the entries no base holds
can only cost more. Its ratio to (1) says what the
merge may cost at most, however it is written in these terms.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from incremental import build_chain, scan_rows  # noqa: E402
from timing import best_of  # noqa: E402

from statesource import Checkpoint  # noqa: E402
from statesource.format.columns import BASE_ROW, DELTA_KIND, KEY, PRIOR  # noqa: E402
from statesource.format.deltas import delta_schema  # noqa: E402
from statesource.format.ipc import read_ranges  # noqa: E402

STATE = "counts"

Upserts = dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
"""Per key group: its run rows' hints and keys (all runs), and the base rows they write
with the values written there (the newest run's where several name one)."""


def chain_upserts(chained: Checkpoint) -> Upserts:
    """The chain's run rows, prepared outside the timing (the floor does not count it)."""
    runs = chained.operator().keyed_state(STATE).runs_of()
    upserts: Upserts = {}
    for key_group, tables in chained.read_runs(STATE, runs=runs).items():
        state = pa.concat_tables(tables)
        state = state.filter(pa.compute.not_equal(state.column(DELTA_KIND), PRIOR))
        hints = state.column(BASE_ROW).to_numpy().astype(np.intp)
        values = state.column("value").to_numpy().view(np.uint64)
        newest = len(hints) - 1 - np.unique(hints[::-1], return_index=True)[1]
        upserts[key_group] = (hints, state.column(KEY).to_numpy(), hints[newest],
                              values[newest])
    return upserts


def writable_values(base: pa.Table) -> np.ndarray:
    """The base's value column as a writable view of the buffer the read decoded it from."""
    chunk = base.column("value").chunk(0)
    data = root = chunk.buffers()[1]
    while root.parent is not None:
        root = root.parent
    return np.frombuffer(root, np.uint64, count=len(chunk),
                         offset=data.address - root.address + chunk.offset * 8)


def merge_work(upserts: Upserts, _path: str, key_group: int, base: pa.Table) -> None:
    base_keys = base.column(KEY).chunk(0).to_numpy()
    assert np.all(base_keys[1:] > base_keys[:-1])
    if key_group in upserts:
        hints, keys, rows, values = upserts[key_group]
        assert hints.min() >= 0 and hints.max() < len(base_keys)
        assert np.array_equal(base_keys[hints], keys)
        writable_values(base)[rows] = values


def read_with(full: Checkpoint, listener=None) -> int:
    return sum(table.num_rows for table in full.read_keyed_state(STATE, base_listener=listener))


def read_deltas(chained: Checkpoint) -> int:
    """Each delta file's ranges read with one request, CRC-checked and decoded."""
    rows = 0
    meta = chained.operator().keyed_state(STATE)
    schema = delta_schema(full_schema(chained))
    for delta in meta.delta_files:
        ranges = sorted({loc.offset: loc for loc in delta.file.locations}.values(),
                        key=lambda location: location.offset)
        for batches in read_ranges(chained.data_file(delta.path), schema, ranges,
                                   delta.file.size_bytes, exact_rows=False):
            rows += pa.Table.from_batches(batches, schema=schema).num_rows
    return rows


def full_schema(checkpoint: Checkpoint) -> pa.Schema:
    return checkpoint.arrow_layout(checkpoint.operator().uid, STATE).schema


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=5_000_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="statesource-chain-floor-")
    try:
        chained, full = build_chain(args.entries, directory)
        upserts = chain_upserts(chained)
        full_read = best_of(args.repeats, functools.partial(read_with, full))
        with_merge = best_of(args.repeats, functools.partial(
            read_with, full, functools.partial(merge_work, upserts)))
        deltas = best_of(args.repeats, functools.partial(read_deltas, chained))
        chain_read = best_of(args.repeats, functools.partial(scan_rows, chained))
        floor = with_merge + deltas
        print(f"reading {args.entries:,} entries: full checkpoint {full_read * 1e3:.1f} ms;"
              f" with the merge's minimal work {with_merge * 1e3:.1f} ms; the chain's delta"
              f" ranges {deltas * 1e3:.1f} ms")
        print(f"  floor {floor * 1e3:.1f} ms = {floor / full_read:.2f}x the full read;"
              f" the reader now {chain_read * 1e3:.1f} ms = {chain_read / full_read:.2f}x")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()

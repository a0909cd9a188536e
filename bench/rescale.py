"""Rescaling a large checkpoint to a new parallelism, against reading its state once.

Run: python bench/rescale.py [--entries 10000000] [--max-parallelism 128 32768]

The checkpoint (one Value state of string keys and long values, written by 4
subtasks, plus a small split operator state) is built straight from Arrow
arrays through the format's data-file writer, which is much faster than
filling Python backends. Baseline, measured in the same run: reading every
row of the state once with ``Checkpoint.read_keyed_state``. A rescale
references the keyed data files instead of copying them, so its cost follows
the metadata (files and non-empty key groups), not the entries.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import best_of  # noqa: E402

from statesource.format import Checkpoint, CheckpointMeta, commit_checkpoint  # noqa: E402
from statesource.format.columns import data_schema  # noqa: E402
from statesource.format.datafile import write_keyed_file, write_operator_state  # noqa: E402
from statesource.format.ipc import MAX_ROWS_PER_BATCH  # noqa: E402
from statesource.format.keyed_state_meta import KeyedStateMeta  # noqa: E402
from statesource.format.metadata import OperatorMeta  # noqa: E402
from statesource.format.storage import new_data_file, resolve  # noqa: E402
from statesource.keygroups import key_group_range_for_operator, key_groups  # noqa: E402
from statesource.model import DistributionMode, StateDeclaration, StateKind  # noqa: E402
from statesource.rescale import rescale_parallelism  # noqa: E402
from statesource.schema import ValueSchema  # noqa: E402
from statesource.types import STRING, VOID  # noqa: E402

OLD_PARALLELISM = 4
NEW_PARALLELISM = 6
DECLARATION = StateDeclaration("counts", StateKind.VALUE, VOID,
                               {"value": ValueSchema.parse("long")})


def build_checkpoint(root: str, entries: int, max_parallelism: int) -> None:
    """Checkpoint 1 under ``root``: ``entries`` keys ``user-<i>``, sorted into key groups."""
    keys = pc.binary_join_element_wise("user-", pa.array(np.arange(entries)).cast(pa.string()),
                                       "")
    groups = key_groups(keys, STRING, max_parallelism)
    order = pc.sort_indices(groups)
    schema = data_schema(STRING, DECLARATION)
    batch = pa.RecordBatch.from_arrays(
        [groups.take(order), keys.take(order), pa.nulls(entries),
         pa.array(np.arange(entries, dtype=np.int64)).take(order)], schema=schema)
    sorted_groups = batch.column(0).to_numpy()
    bounds = np.searchsorted(sorted_groups, np.arange(max_parallelism + 1))
    root_location = resolve(root)
    files = []
    for subtask in range(OLD_PARALLELISM):
        owned = key_group_range_for_operator(max_parallelism, OLD_PARALLELISM, subtask)
        target, relative = new_data_file(root_location, 1, f"op.counts.kg{owned.start}")

        def per_group(owned=owned):
            for group in owned:
                start, end = int(bounds[group]), int(bounds[group + 1])
                if end > start:
                    batches = [batch.slice(s, min(MAX_ROWS_PER_BATCH, end - s))
                               for s in range(start, end, MAX_ROWS_PER_BATCH)]
                    yield group, batches, end - start

        files.append(write_keyed_file(target, relative, schema, owned, per_group()))
    target, relative = new_data_file(root_location, 1, "op.op.offsets")
    offsets = write_operator_state(target, relative, "offsets", DistributionMode.SPLIT_DISTRIBUTE,
                                   {"element": ValueSchema.parse("long")},
                                   [(i, [i * 1000]) for i in range(OLD_PARALLELISM)])
    operator = OperatorMeta("op", OLD_PARALLELISM, max_parallelism, STRING,
                            (KeyedStateMeta.of(DECLARATION, tuple(files)),), (offsets,))
    commit_checkpoint(root_location, CheckpointMeta(1, 0, (operator,)))


def measure(entries: int, max_parallelism: int) -> None:
    print(f"-- {entries:,} entries, max parallelism {max_parallelism:,},"
          f" parallelism {OLD_PARALLELISM} -> {NEW_PARALLELISM}")
    root = tempfile.mkdtemp(prefix="statesource-bench-rescale-")
    try:
        started = time.perf_counter()
        build_checkpoint(root, entries, max_parallelism)
        built = time.perf_counter() - started
        source = Checkpoint.open(root, checkpoint_id=1)
        state = source.operator().keyed_state("counts")
        print(f"built checkpoint 1 in {built:.1f} s: {state.rows:,} rows,"
              f" {state.size_bytes / 1e6:,.0f} MB in {len(state.files)} files")

        def read_once() -> None:
            rows = sum(t.num_rows for t in source.read_keyed_state("counts"))
            assert rows == entries

        read = best_of(3, read_once)
        ids = iter(range(2, 100))
        rescale = best_of(5, lambda: rescale_parallelism(root, NEW_PARALLELISM,
                                                         checkpoint_id=1,
                                                         new_checkpoint_id=next(ids)))
        copied = sum(os.path.getsize(os.path.join(d, f))
                     for d, _, names in os.walk(os.path.join(root, "chk-2")) for f in names)
        print(f"read the state once (baseline): {read:7.3f} s  (1.00x)")
        print(f"rescale to parallelism {NEW_PARALLELISM}:      {rescale:7.3f} s"
              f"  ({rescale / read:.4f}x the read; {copied:,} bytes written for checkpoint 2,"
              " its metadata and operator state)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10_000_000)
    parser.add_argument("--max-parallelism", type=int, nargs="+", default=[128, 32768])
    args = parser.parse_args()
    for max_parallelism in args.max_parallelism:
        measure(args.entries, max_parallelism)


if __name__ == "__main__":
    main()

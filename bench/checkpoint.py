"""Checkpoint write throughput, the program's pause, and byte-range reads.

Run: python bench/checkpoint.py [--entries 1000000 5000000]

Baseline, measured in the same run: the floor of building the same Arrow table
(key_group, key, namespace, value) from Python lists and writing it as one
Arrow IPC file with pyarrow. Ratios are throughput relative to that floor.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import pyarrow as pa

from statesource import Checkpoint, CheckpointWriter
from statesource.keygroups import KeyGroupRange
from statesource.state.descriptors import ValueStateDescriptor
from statesource.state.keyed_backend import KeyedStateBackend

MAX_PARALLELISM = 128


def build_backend(entries: int) -> KeyedStateBackend:
    backend = KeyedStateBackend("string", MAX_PARALLELISM)
    counts = backend.get_state(ValueStateDescriptor("counts", "long"))
    for i in range(entries):
        backend.set_current_key(f"user-{i:09d}")
        counts.update(i)
    return backend


def floor_seconds(backend: KeyedStateBackend, directory: str) -> tuple[float, int]:
    """Build the same rows from Python lists and write them with plain pyarrow."""
    with backend.snapshot(0) as snapshot:
        (state,) = snapshot.states
        groups, keys, values = [], [], []
        for key_group, map_snapshot in state:
            k, _, v = map_snapshot.columns()
            groups.extend([key_group] * len(k))
            keys.extend(k)
            values.extend(v)
    path = os.path.join(directory, "floor.arrow")
    started = time.perf_counter()
    table = pa.table({
        "key_group": pa.array(groups, pa.int32()),
        "key": pa.array(keys, pa.string()),
        "namespace": pa.nulls(len(keys)),
        "value": pa.array(values, pa.int64()),
    })
    with pa.ipc.new_file(path, table.schema) as writer:
        writer.write_table(table)
    return time.perf_counter() - started, os.path.getsize(path)


def measure(entries: int) -> None:
    print(f"-- {entries:,} Value-state entries (string keys, long values)")
    backend = build_backend(entries)
    directory = tempfile.mkdtemp(prefix="statesource-bench-")
    try:
        floor, floor_bytes = floor_seconds(backend, directory)
        with CheckpointWriter(directory) as writer:
            started = time.perf_counter()
            pending = writer.write_async(1, {"op": [backend]})
            pause = time.perf_counter() - started
            info = pending.result()
            total = time.perf_counter() - started
        state = info.metadata.operator().keyed_state("counts")
        written = state.size_bytes
        print(f"floor (pa.table + IPC write): {entries / floor / 1e6:6.2f} M entries/s,"
              f" {floor_bytes / floor / 1e6:7.1f} MB/s  (baseline 1.00x)")
        print(f"statesource checkpoint:      {entries / total / 1e6:6.2f} M entries/s,"
              f" {written / total / 1e6:7.1f} MB/s  ({floor / total:.2f}x the floor; goal >= 0.5x)")
        print(f"synchronous pause seen by the program: {pause * 1e3:.1f} ms"
              f" ({pause / total:.3f}x the whole write)")
        location = state.files[0].locations[len(state.files[0].locations) // 2]
        read = []
        checkpoint = Checkpoint.open(directory)
        started = time.perf_counter()
        rows = sum(t.num_rows for t in checkpoint.read_keyed_state(
            "counts", key_groups=KeyGroupRange(location.key_group, location.key_group),
            listener=lambda path, offset, length: read.append(length)))
        one = time.perf_counter() - started
        started = time.perf_counter()
        all_rows = sum(t.num_rows for t in checkpoint.read_keyed_state("counts"))
        whole = time.perf_counter() - started
        print(f"one key group: {sum(read):,} bytes read of a {written:,}-byte file"
              f" ({sum(read) / written:.4f}x), {rows:,} of {all_rows:,} rows,"
              f" {one * 1e3:.1f} ms vs {whole * 1e3:.0f} ms for the whole state")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, nargs="+", default=[1_000_000, 5_000_000])
    args = parser.parse_args()
    for entries in args.entries:
        measure(entries)


if __name__ == "__main__":
    main()

"""flinkstate scans against spark.read.parquet of the same rows.

Run: python bench/spark_read.py [--entries 10000000]

Writes one checkpoint of Value-state entries and the same rows
(key_group, key, namespace, value) as Parquet, then times, best of
``--repeats``, in one local[2] session:
- an aggregate scan, GROUP BY key_group (goal: at most 1.5x the Parquet time);
- a point lookup by key, pruned to one key group by filter pushdown
  (goal: at most 0.2x the Parquet time, which cannot skip on key);
and, in a fresh process, the latency of a first query in a new session.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time

import pyarrow as pa
import pyarrow.parquet as pq
from timing import best_of

from statesource import CheckpointWriter
from statesource.keygroups import key_group_range_for_operator
from statesource.state.descriptors import ValueStateDescriptor
from statesource.state.keyed_backend import KeyedStateBackend

MAX_PARALLELISM = 128
PARALLELISM = 2


def key_of(i: int) -> str:
    return f"user-{i:09d}"


def write_checkpoint(root: str, entries: int) -> None:
    """Two subtasks, as a job with parallelism 2 would write them."""
    subtasks = []
    for index in range(PARALLELISM):
        owned = key_group_range_for_operator(MAX_PARALLELISM, PARALLELISM, index)
        subtasks.append(KeyedStateBackend("string", MAX_PARALLELISM, owned))
    handles = [b.get_state(ValueStateDescriptor("counts", "long")) for b in subtasks]
    for i in range(entries):
        key = key_of(i)
        for backend, counts in zip(subtasks, handles):
            try:
                backend.set_current_key(key)
            except ValueError:
                continue  # another subtask's key group
            counts.update(i)
            break
    with CheckpointWriter(root) as writer:
        writer.write(1, {"op": subtasks})


def write_parquet(checkpoint_root: str, path: str) -> None:
    from statesource.format import Checkpoint

    tables = list(Checkpoint.open(checkpoint_root).read_keyed_state("counts"))
    table = pa.concat_tables(tables)
    table = table.set_column(2, "namespace", pa.nulls(table.num_rows, pa.string()))
    pq.write_table(table, path)


FIRST_QUERY = textwrap.dedent("""
    import sys, time
    started = time.perf_counter()
    from statesource.spark import session
    spark = session(master="local[2]")
    spark.read.format("flinkstate").load(sys.argv[1]).where("key = 'user-000000007'").collect()
    print(time.perf_counter() - started)
""")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="statesource-spark-bench-")
    checkpoint, parquet = os.path.join(directory, "ckpt"), os.path.join(directory, "rows.parquet")
    try:
        started = time.perf_counter()
        write_checkpoint(checkpoint, args.entries)
        write_parquet(checkpoint, parquet)
        elapsed = time.perf_counter() - started
        print(f"{args.entries:,} Value-state entries written in {elapsed:.0f} s")

        from statesource.spark import session

        spark = session("statesource-bench", master="local[2]")
        state = spark.read.format("flinkstate").load(checkpoint)
        pushed = spark.read.format("flinkstate").option("filterPushdown", "true").load(checkpoint)
        rows = spark.read.parquet(parquet)
        group_by = "SELECT key_group, count(*), sum(value) FROM {} GROUP BY key_group"
        lookup = f"key = '{key_of(args.entries // 3)}'"
        for name, df in (("state", state), ("pushed", pushed), ("rows", rows)):
            df.createOrReplaceTempView(name)
        scan_parquet = best_of(args.repeats, lambda: spark.sql(group_by.format("rows")).collect())
        scan_state = best_of(args.repeats, lambda: spark.sql(group_by.format("state")).collect())
        look_parquet = best_of(args.repeats, lambda: rows.where(lookup).collect())
        look_pushed = best_of(args.repeats, lambda: pushed.where(lookup).collect())
        look_state = best_of(args.repeats, lambda: state.where(lookup).collect())
        print(f"GROUP BY key_group: parquet {scan_parquet:.2f} s (1.00x),"
              f" flinkstate {scan_state:.2f} s ({scan_state / scan_parquet:.2f}x; goal <= 1.5x)")
        print(f"point lookup: parquet {look_parquet:.2f} s (1.00x),"
              f" flinkstate with filterPushdown {look_pushed:.2f} s"
              f" ({look_pushed / look_parquet:.2f}x; goal <= 0.2x),"
              f" without {look_state:.2f} s ({look_state / look_parquet:.2f}x)")
        spark.stop()
        first = subprocess.run([sys.executable, "-c", FIRST_QUERY, checkpoint], check=True,
                               capture_output=True, text=True).stdout.split()[-1]
        print(f"first query in a fresh process (JVM start, session, lookup): {float(first):.1f} s")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()

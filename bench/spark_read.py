"""flinkstate scans, JVM and Python readers, against spark.read.parquet of the same rows.

Run: python bench/spark_read.py [--entries 10000000]

Writes one checkpoint of Value-state entries and the same rows
(key_group, key, namespace, value) as Parquet, then times, best of
``--repeats``, in one local[2] session, with Parquet = 1.00x:
- GROUP BY key_group (goal: JVM reader at most 1.0x);
- count(*) (goal: JVM reader at most 0.9x);
- a point lookup by key, pruned to one key group by filter pushdown
  (goal: JVM reader at most 0.05x; Parquet cannot skip on key);
- flink_key_group over every key, against the same query without it
  (goal: the shim's JVM function at most 1.3x), and the Python fallback of the function;
and, in fresh processes, the latency of a first query in a new session with
the shim's jar cached and with a cold build of it.
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
from statesource.jvm.build import CACHE_ENV
from statesource.keygroups import key_group_range_for_operator
from statesource.spark.jvm.plan import load_shim
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


def first_query_seconds(checkpoint: str, cache: str | None) -> float:
    """A new process, session and lookup; ``cache`` names a jar cache (None: the user's)."""
    env = dict(os.environ)
    if cache is not None:
        env[CACHE_ENV] = cache
    done = subprocess.run([sys.executable, "-c", FIRST_QUERY, checkpoint], check=True,
                          capture_output=True, text=True, env=env)
    return float(done.stdout.split()[-1])


def ratio_line(name: str, parquet: float, timings: dict[str, float], goal: str) -> str:
    shown = ", ".join(f"{path} {seconds:.2f} s ({seconds / parquet:.2f}x)"
                      for path, seconds in timings.items())
    return f"{name}: parquet {parquet:.2f} s (1.00x), {shown}; goal {goal}"


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
        from statesource.spark.functions import register_functions

        spark = session("statesource-bench", master="local[2]")
        if not load_shim(spark):
            raise SystemExit("the JVM shim is unavailable: `statesource jvm status` says why")
        views = {
            "rows": spark.read.parquet(parquet),
            "jvm": spark.read.format("flinkstate").load(checkpoint),
            "python": spark.read.format("flinkstate-python").load(checkpoint),
            "python_pushed": spark.read.format("flinkstate-python")
            .option("filterPushdown", "true").load(checkpoint),
        }
        for name, df in views.items():
            df.createOrReplaceTempView(name)

        def timed(query: str) -> float:
            return best_of(args.repeats, lambda: spark.sql(query).collect())

        group_by = "SELECT key_group, count(*), sum(value) FROM {} GROUP BY key_group"
        print(ratio_line("GROUP BY key_group", timed(group_by.format("rows")),
                         {"jvm": timed(group_by.format("jvm")),
                          "python": timed(group_by.format("python"))}, "jvm <= 1.0x"))
        count = "SELECT count(*) FROM {}"
        print(ratio_line("count(*)", timed(count.format("rows")),
                         {"jvm": timed(count.format("jvm")),
                          "python": timed(count.format("python"))}, "jvm <= 0.9x"))
        lookup = f"SELECT * FROM {{}} WHERE key = '{key_of(args.entries // 3)}'"
        print(ratio_line("point lookup", timed(lookup.format("rows")),
                         {"jvm": timed(lookup.format("jvm")),
                          "python with filterPushdown": timed(lookup.format("python_pushed"))},
                         "jvm <= 0.05x"))
        without = timed("SELECT sum(length(key)) FROM rows")
        with_udf = "SELECT sum(length(key) + flink_key_group(key, 128)) FROM rows"
        java_udf = timed(with_udf)
        register_functions(spark, use_jvm=False)
        python_udf = timed(with_udf)
        print(f"flink_key_group over {args.entries:,} keys (Parquet scan, same query without the"
              f" function = 1.00x, {without:.2f} s): JVM function {java_udf:.2f} s"
              f" ({java_udf / without:.2f}x; goal <= 1.3x), Python fallback {python_udf:.2f} s"
              f" ({python_udf / without:.2f}x)")
        spark.stop()
        cached = first_query_seconds(checkpoint, None)
        cold = first_query_seconds(checkpoint, os.path.join(directory, "cold-jar-cache"))
        print(f"first query in a fresh process (JVM start, session, shim, lookup): jar cached"
              f" {cached:.1f} s, cold build {cold:.1f} s")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()

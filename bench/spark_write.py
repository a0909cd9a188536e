"""Rewriting a keyed state with Spark, against writing the same rows as Parquet.

Run: python bench/spark_write.py [--rows 10000000]

Same run, local[2]. The checkpoint is bench/rescale.py's (one Value state of
string keys and long values, 4 subtasks, max parallelism 128). Each job reads
the state with ``format("flinkstate")`` and writes every row once:
  baseline:     .write.parquet
  df.write:     .write.format("flinkstate") (partitions already follow key groups: no shuffle)
  write_state:  statesource.spark.write_state (recomputes key groups and shuffles by subtask,
                as it must for a DataFrame of unknown partitioning)
Then the time to carry over an untouched state while writing a one-row state,
for untouched states of a tenth of --rows and of --rows: it should not grow.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rescale import build_checkpoint  # noqa: E402
from timing import best_of  # noqa: E402

from statesource.spark import session, write_state  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    spark = session("bench-spark-write", master="local[2]")
    work = tempfile.mkdtemp(prefix="statesource-bench-write-")
    try:
        root = os.path.join(work, "checkpoints")
        build_checkpoint(root, args.rows, 128)
        state = spark.read.format("flinkstate").option("state", "counts").load(root)
        print(f"-- {args.rows:,} rows (string key, long value), local[2]")

        def parquet() -> None:
            target = os.path.join(work, "out.parquet")
            shutil.rmtree(target, ignore_errors=True)
            state.write.parquet(target)

        def df_write() -> None:
            (state.write.format("flinkstate").mode("append")
             .options(operator="op", state="counts").save(root))

        floor = best_of(args.repeat, parquet)
        direct = best_of(args.repeat, df_write)
        shuffled = best_of(args.repeat, lambda: write_state(state, root, "op", "counts"))
        print(f"read + write.parquet:                     {floor:7.2f} s  (1.00x)")
        print(f"read + write.format('flinkstate'):        {direct:7.2f} s"
              f"  ({direct / floor:.2f}x; goal <= 1.3x)")
        print(f"read + write_state (key groups, shuffle): {shuffled:7.2f} s"
              f"  ({shuffled / floor:.2f}x)")

        tiny = spark.createDataFrame([("k", 1)], "key string, value bigint")
        for rows in (args.rows // 10, args.rows):
            carry = os.path.join(work, f"carry-{rows}")
            build_checkpoint(carry, rows, 128)
            started = time.perf_counter()
            write_state(tiny, carry, "op", "tiny", kind="value")
            elapsed = time.perf_counter() - started
            print(f"write a one-row state next to an untouched {rows:,}-row state:"
                  f" {elapsed:.2f} s (nothing of it copied)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        spark.stop()


if __name__ == "__main__":
    main()

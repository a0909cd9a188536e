"""Rewriting a keyed state with Spark, against writing the same rows as Parquet.

Run: python bench/spark_write.py [--rows 10000000]

Same run, local[2]: the rows (string key, long value) are first saved as
Parquet; then, reading that Parquet each time,
  baseline:      df.write.parquet
  write_state:   statesource.spark.write_state (key groups, shuffle by subtask, sort, commit)
  df.write:      df.write.format("flinkstate") on rows already partitioned by subtask
and the time to carry over an untouched state while writing a tiny one, for
an untouched state of --rows and of a tenth of it (it should not grow).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from timing import best_of

from statesource.spark import session, write_state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    spark = session("bench-spark-write", master="local[2]")
    work = Path(tempfile.mkdtemp(prefix="statesource-bench-write-"))
    try:
        rows = work / "rows.parquet"
        (spark.range(args.rows).selectExpr("concat('user-', lpad(id, 9, '0')) AS key",
                                           "id AS value")
         .write.parquet(str(rows)))
        source = spark.read.parquet(str(rows))
        print(f"-- {args.rows:,} rows (string key, long value), local[2]")

        def parquet() -> None:
            target = work / "out.parquet"
            shutil.rmtree(target, ignore_errors=True)
            source.write.parquet(str(target))

        counter = iter(range(1_000_000))

        def statesource_write() -> None:
            write_state(source, str(work / f"chk-{next(counter)}"), "op", "counts",
                        kind="value", parallelism="2", maxParallelism="128")

        floor = best_of(args.repeat, parquet)
        ours = best_of(args.repeat, statesource_write)
        print(f"df.write.parquet:           {floor:7.2f} s  (baseline 1.00x)")
        print(f"write_state (with shuffle): {ours:7.2f} s  ({ours / floor:.2f}x; goal <= 1.3x)")

        root = work / "carry"
        for untouched in (args.rows // 10, args.rows):
            write_state(source.limit(untouched), str(root), "op", "big", kind="value",
                        parallelism="2", maxParallelism="128")
            tiny = spark.createDataFrame([("k", 1)], "key string, value bigint")
            started = time.perf_counter()
            write_state(tiny, str(root), "op", "tiny", kind="value")
            elapsed = time.perf_counter() - started
            print(f"carry over an untouched state of {untouched:,} rows while writing one"
                  f" row: {elapsed:.2f} s")
            shutil.rmtree(root)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        spark.stop()


if __name__ == "__main__":
    main()

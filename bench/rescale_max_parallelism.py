"""A new max parallelism (every key re-keyed by Spark) against a plain Spark shuffle of the rows.

Run: python bench/rescale_max_parallelism.py [--entries 10000000]

Same run, local[2]. The checkpoint is bench/rescale.py's (one Value state,
string keys, long values, 4 subtasks, max parallelism 128). Baseline: the same
rows as Parquet, ``spark.read.parquet`` + ``repartition`` + ``write.parquet``.
Measured: ``rescale_max_parallelism`` to 256 key groups (read the state,
recompute every key group, shuffle by subtask, write, commit).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rescale import OLD_PARALLELISM, build_checkpoint  # noqa: E402
from timing import best_of  # noqa: E402

from statesource.spark import (
    rescale_max_parallelism,  # noqa: E402
    session,  # noqa: E402
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="statesource-bench-maxp-")
    spark = session("bench-rescale-max-parallelism", master="local[2]")
    try:
        build_checkpoint(root, args.entries, 128)
        rows = os.path.join(root, "rows.parquet")
        (spark.read.format("flinkstate").option("state", "counts").load(root)
         .select("key", "value").write.parquet(rows))
        print(f"-- {args.entries:,} entries, max parallelism 128 -> 256, local[2]")

        def shuffle_parquet() -> None:
            out = os.path.join(root, "out.parquet")
            shutil.rmtree(out, ignore_errors=True)
            spark.read.parquet(rows).repartition(OLD_PARALLELISM).write.parquet(out)

        ids = iter(range(2, 100))
        baseline = best_of(args.repeat, shuffle_parquet)
        rekey = best_of(args.repeat, lambda: rescale_max_parallelism(
            spark, root, None, 256, checkpoint_id=1, new_checkpoint_id=next(ids)))
        print(f"read.parquet + repartition + write.parquet: {baseline:7.2f} s  (1.00x)")
        print(f"rescale_max_parallelism:                     {rekey:7.2f} s"
              f"  ({rekey / baseline:.2f}x; goal <= 1.5x)")
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

"""``statesource migrate`` of a Flink 1.20 savepoint against a rescale of it, same run.

Run: python bench/migrate.py [--entries 10000000] [--repeats 2] [--max-parallelism 256]

The savepoint is bench/flink_generated.py's (``--entries`` pairs of a value, a list and a
map state, String keys) written for Flink 1.20 (``_metadata`` version 4) and kept in the
system's temp directory. Timed, best of ``--repeats``: ``migrate`` to Flink 2.3 (every state
moves as its bytes: files copied, ``_metadata`` rewritten), and ``rescale_max_parallelism``
to ``--max-parallelism`` (every pair re-keyed and rewritten) as the 1.00x. Goal: migrate at
most 1.5x.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from flink_generated import generated
from timing import best_of

from statesource.flink.operations.migrate import migrate
from statesource.flink.operations.rescale import rescale_max_parallelism


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-parallelism", type=int, default=256)
    args = parser.parse_args()
    savepoint, _ = generated(args.entries, "1.20")
    runs = []
    with tempfile.TemporaryDirectory(prefix="statesource-bench-migrate-") as scratch:

        def run(job) -> None:
            output = Path(scratch, f"out-{len(runs)}")
            runs.append(job(output))
            shutil.rmtree(output)

        migrated = best_of(args.repeats, lambda: run(
            lambda out: migrate(savepoint, out, to="2.3")))
        rescaled = best_of(args.repeats, lambda: run(
            lambda out: rescale_max_parallelism(savepoint, out, args.max_parallelism)))
    size = sum(f.stat().st_size for f in savepoint.iterdir()) / 1e6
    print(f"savepoint {savepoint}: {args.entries:,} pairs, {size:.1f} MB (Flink 1.20)")
    print(f"rescale --max-parallelism {args.max_parallelism}: {rescaled:.2f} s (1.00x)")
    print(f"migrate --to 2.3: {migrated:.2f} s: {migrated / rescaled:.2f}x (goal <= 1.5x)")


if __name__ == "__main__":
    main()

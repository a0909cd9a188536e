"""``statesource migrate`` of a Flink 1.20 savepoint against a rescale of it, same run.

Run: python bench/migrate.py [--entries 10000000] [--repeats 2] [--max-parallelism 256]
         [--kryo-keys 1100000] [--kryo-events 2200000] [--flink-1x .venv/flink-1.20]

The savepoint is bench/flink_generated.py's (``--entries`` pairs of a value, a list and a
map state, String keys) written for Flink 1.20 (``_metadata`` version 4) and kept in the
system's temp directory. Timed, best of ``--repeats``: ``migrate`` to Flink 2.3 (every state
moves as its bytes: files copied, ``_metadata`` rewritten), and ``rescale_max_parallelism``
to ``--max-parallelism`` (every pair re-keyed and rewritten) as the 1.00x. Goal: migrate at
most 1.5x. ``--entries 0`` skips this part.

Then the same for a savepoint whose values are re-encoded: a canonical savepoint that a real
Flink 1.20 (the jars of ``--flink-1x``; Java 17) takes of tests/fixtures/flink/KryoJob.java
after ``--kryo-events`` events over ``--kryo-keys`` keys, made once (a minute or two) and
kept in the system's temp directory. Per key it holds a POJO whose ``List`` and ``Map``
fields are Kryo 2 bytes, a Kryo ``UUID`` and a Kryo ``HashMap``: about four Kryo values a
key, each decoded and written as Flink 2.x's bytes; by default 9.9 million entries in all
(1.1 million keys: 3.3 million re-encoded values, a ``total``, two ``per_tag`` entries, two
timers and a ``note`` each). Its ``notes`` state (a user class under Kryo) cannot migrate,
so ``migrate`` is timed with ``skip_unmigratable``. ``--kryo-keys 0`` skips this part.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from flink_generated import generated
from timing import best_of

from statesource.flink.operations.migrate import migrate
from statesource.flink.operations.rescale import rescale_max_parallelism

ROOT = Path(__file__).resolve().parents[1]


def kryo_savepoint(keys: int, events: int, flink_home: Path) -> Path:
    """A canonical savepoint Flink 1.20 takes of KryoJob after ``events`` events over ``keys``
    keys (heap backend), made once and kept in the system's temp directory."""
    target = Path(tempfile.gettempdir()) / f"statesource-bench-migrate-kryo-{keys}-{events}"
    if (target / "_metadata").is_file():
        return target
    sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "fixtures" / "flink")]
    from generate import JAVA_1X, run_until_done
    from kryo_fixture import job_source

    jars = ":".join(map(str, sorted((flink_home / "pyflink" / "lib").glob("*.jar"))))
    with tempfile.TemporaryDirectory(prefix="statesource-bench-kryo-job-") as scratch:
        classes = Path(scratch, "classes")
        subprocess.run(["javac", "-nowarn", "-cp", jars, "-d", str(classes),
                        str(job_source(Path(scratch), 1))], check=True)
        out = Path(scratch, "out")
        run_until_done([*JAVA_1X, "-cp", f"{classes}:{jars}", "KryoJob", "savepoint", "hashmap",
                        str(out), str(events), str(keys)])
        shutil.copytree(next((out / "canonical").iterdir()), target.with_suffix(".tmp"))
        target.with_suffix(".tmp").rename(target)
    return target


def compare(savepoint: Path, what: str, repeats: int, max_parallelism: int,
            skip_unmigratable: bool = False) -> None:
    """Time ``migrate`` of ``savepoint`` to Flink 2.3 against ``rescale_max_parallelism`` of
    it, best of ``repeats`` each, and print both and their ratio."""
    with tempfile.TemporaryDirectory(prefix="statesource-bench-migrate-") as scratch:
        runs: list[object] = []

        def run(job: Callable[[Path], object]) -> None:
            output = Path(scratch, f"out-{len(runs)}")
            runs.append(job(output))
            shutil.rmtree(output)

        migrated = best_of(repeats, lambda: run(lambda out: migrate(
            savepoint, out, to="2.3", skip_unmigratable=skip_unmigratable)))
        rescaled = best_of(repeats, lambda: run(
            lambda out: rescale_max_parallelism(savepoint, out, max_parallelism)))
    size = sum(f.stat().st_size for f in savepoint.rglob("*") if f.is_file()) / 1e6
    print(f"savepoint {savepoint}: {what}, {size:.1f} MB (Flink 1.20)")
    print(f"  rescale --max-parallelism {max_parallelism}: {rescaled:.2f} s (1.00x)")
    print(f"  migrate --to 2.3: {migrated:.2f} s: {migrated / rescaled:.2f}x (goal <= 1.5x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-parallelism", type=int, default=256)
    parser.add_argument("--kryo-keys", type=int, default=1_100_000)
    parser.add_argument("--kryo-events", type=int, default=2_200_000)
    parser.add_argument("--flink-1x", type=Path, default=ROOT / ".venv" / "flink-1.20",
                        help="a directory holding Flink 1.20's jars under pyflink/lib")
    args = parser.parse_args()
    if args.entries:
        savepoint, _ = generated(args.entries, "1.20")
        compare(savepoint, f"{args.entries:,} generated pairs, every state moved as bytes",
                args.repeats, args.max_parallelism)
    if args.kryo_keys:
        savepoint = kryo_savepoint(args.kryo_keys, args.kryo_events, args.flink_1x)
        compare(savepoint, f"KryoJob, {args.kryo_events:,} events over {args.kryo_keys:,} keys,"
                " Kryo values re-encoded (--skip-unmigratable: notes)",
                args.repeats, args.max_parallelism, skip_unmigratable=True)


if __name__ == "__main__":
    main()

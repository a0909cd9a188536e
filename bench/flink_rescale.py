"""A new max parallelism for a real Flink savepoint, in pure Python: pairs/s and MB/s.

Run: python bench/flink_rescale.py [--events 1000000 --keys 200000]
         [--max-parallelism 1024] [--savepoint DIR] [--repeats 2]

Without --savepoint, a canonical savepoint of tests/fixtures/flink/FixtureJob.java
(max parallelism 128; six keyed states, timers, a Kryo state and a window
operator) is made with a real Flink, from the jars of the installed
``apache-flink-libraries`` (Java 17), and kept in the system's temp directory
for later runs. Then ``statesource.flink.operations.rescale.rescale_max_parallelism``
writes it under ``--max-parallelism`` key groups: every pair re-keyed (only keys
decoded), framed and written, ``_metadata`` published. Printed: the best of
``--repeats`` runs, pairs per second (a pair is one value-state entry, one list,
one map entry or one timer) and MB/s of keyed-state bytes read.

With ``--spark-baseline``, the same run also times Spark (local[2]) reading the
same pairs from Parquet (key group, state, composite key and value bytes: one
row per pair), ``repartition`` into the operator's parallelism and
``write.parquet``: the shuffle a Spark rescale of the same rows would do at
least, as the ratio's 1.00x.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import tempfile
from pathlib import Path

from timing import best_of

from statesource.flink.operations.rescale import rescale_max_parallelism
from statesource.flink.snapshot.directory import FlinkSnapshot

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "tests" / "fixtures" / "flink" / "FixtureJob.java"


def flink_lib() -> Path:
    spec = importlib.util.find_spec("pyflink")
    for location in (spec.submodule_search_locations or []) if spec else []:
        if any(Path(location, "lib").glob("flink-dist-*.jar")):
            return Path(location, "lib")
    raise SystemExit("no Flink runtime: pip install apache-flink-libraries==2.3.0")


def make_savepoint(target: Path, events: int, keys: int) -> Path:
    """A canonical savepoint of FixtureJob over ``events`` events and ``keys`` keys."""
    classpath = ":".join(str(p) for p in sorted(flink_lib().glob("*.jar")))
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run(["javac", "-nowarn", "-cp", classpath, "-d", scratch, str(JOB)],
                       check=True)
        subprocess.run(["java", "--add-opens", "java.base/java.util=ALL-UNNAMED",
                        "--add-opens", "java.base/java.lang=ALL-UNNAMED", "-Xmx2g",
                        "-cp", f"{scratch}:{classpath}", "FixtureJob", "128", "false",
                        f"{scratch}/out", str(events), "20kb", str(keys)],
                       check=True, capture_output=True)
        (savepoint,) = Path(scratch, "out", "canonical").iterdir()
        shutil.copytree(savepoint, target)
    return target


def savepoint_for(given: Path | None, events: int, keys: int) -> Path:
    """``given``, or the savepoint of ``events`` events over ``keys`` keys kept in the
    system's temp directory, made by a real Flink on first use."""
    savepoint = given or Path(tempfile.gettempdir()) / f"statesource-bench-flink-{events}-{keys}"
    if not savepoint.exists():
        print(f"making a savepoint of {events:,} events over {keys:,} keys ...")
        make_savepoint(savepoint, events, keys)
    return savepoint


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--max-parallelism", type=int, default=1024)
    parser.add_argument("--savepoint", type=Path)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--spark-baseline", action="store_true")
    args = parser.parse_args()
    savepoint = savepoint_for(args.savepoint, args.events, args.keys)
    snapshot = FlinkSnapshot.open(str(savepoint))
    size = sum(h.stream.size for op in snapshot.operators for h in snapshot.keyed_handles(op))
    done = []
    with tempfile.TemporaryDirectory(prefix="statesource-bench-flink-rescale-") as scratch:

        def run() -> None:
            output = Path(scratch, f"out-{len(done)}")
            done.append(rescale_max_parallelism(savepoint, output, args.max_parallelism))
            shutil.rmtree(output)

        seconds = best_of(args.repeats, run)
    report = done[-1]
    print(f"savepoint {savepoint}: {size / 1e6:.1f} MB of keyed state, max parallelism"
          f" {report.operators[0].max_parallelism}")
    for op in report.operators:
        print(f"  {op.operator}: {op.entries:,} pairs ({op.timers:,} timers),"
              f" {op.key_groups:,} key groups written, {op.bytes / 1e6:.1f} MB")
    print(f"rescale to max parallelism {args.max_parallelism}: {seconds:.2f} s (best of"
          f" {args.repeats}); {report.entries / seconds:,.0f} pairs/s,"
          f" {size / 1e6 / seconds:.1f} MB/s")
    if args.spark_baseline:
        baseline = spark_baseline(snapshot, args.repeats)
        print(f"Spark read.parquet + repartition + write.parquet of the same pairs:"
              f" {baseline:.2f} s (1.00x); rescale {seconds / baseline:.2f}x")


def spark_baseline(snapshot: FlinkSnapshot, repeats: int) -> float:
    """Seconds of Spark's read.parquet + repartition + write.parquet of every pair."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from statesource.flink.layouts.canonical import canonical_pairs
    from statesource.spark import session

    columns: dict[str, list] = {"key_group": [], "state": [], "key": [], "value": []}
    parallelism = 1
    for op in snapshot.operators:
        parallelism = max(parallelism, op.parallelism)
        prefix = 2 if op.max_parallelism > 128 else 1
        for piece in snapshot.key_group_bytes(op):
            header = snapshot.read_header(piece.handle)
            for state_id, pairs in canonical_pairs(snapshot.piece_bytes(piece), "",
                                                   piece.begin, piece.key_group, header,
                                                   prefix):
                columns["key_group"] += [piece.key_group] * len(pairs)
                columns["state"] += [state_id] * len(pairs)
                columns["key"] += [key for key, _ in pairs]
                columns["value"] += [value for _, value in pairs]
    spark = session("bench-flink-rescale-baseline", master="local[2]")
    with tempfile.TemporaryDirectory(prefix="statesource-bench-flink-baseline-") as scratch:
        rows = Path(scratch, "rows.parquet")
        pq.write_table(pa.table(columns), rows)

        def shuffle() -> None:
            out = Path(scratch, "out.parquet")
            shutil.rmtree(out, ignore_errors=True)
            spark.read.parquet(str(rows)).repartition(parallelism).write.parquet(str(out))

        try:
            return best_of(repeats, shuffle)
        finally:
            spark.stop()


if __name__ == "__main__":
    main()

"""Scanning a Flink SQL aggregation's state: statesource against Parquet of the same rows.

Run: python bench/flink_sql_scan.py [--keys 1000000] [--repeats 3] [--flink-python PY]

A real Flink 2.3 (the ``pyflink`` jars of ``--flink-python``, default this interpreter; Java
17) runs bench/SqlAggregationJob.java: ``SELECT usr, COUNT(*), SUM(qty), MAX(price) FROM events
GROUP BY usr`` over twice ``--keys`` events, and takes a canonical savepoint of its state, one
``RowData`` accumulator per user keyed by a ``RowData`` key. It is kept in the system's temp
directory for later runs. Then, in the same run:

- statesource's Python reader alone (``FlinkCheckpoint.read_keyed_state``, one core): rows/s
  and MB/s of savepoint bytes;
- Spark ``local[2]`` full scans to the ``noop`` sink of every keyed state of the aggregation,
  from the savepoint (``flinkstate``: the JVM reader where the shim loads; and
  ``flinkstate-python``, the Python source) and from Parquet of the same rows, written once
  from it: the savepoint's time as a ratio of Parquet's (goal <= 2x).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from flink_read import _flink_classpath
from timing import print_scans, spark_scans

from statesource.flink.reader import FlinkCheckpoint

HERE = Path(__file__).resolve().parent
JOB = "SqlAggregationJob"


def make_savepoint(target: Path, keys: int, flink_python: str) -> Path:
    """The canonical savepoint of SqlAggregationJob over ``keys`` users (two events each)."""
    classpath = _flink_classpath(flink_python)
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run(["javac", "-nowarn", "-cp", classpath, "-d", scratch,
                        str(HERE / f"{JOB}.java")], check=True)
        subprocess.run(["java", f"-Djava.io.tmpdir={scratch}",
                        "--add-opens", "java.base/java.util=ALL-UNNAMED",
                        "--add-opens", "java.base/java.lang=ALL-UNNAMED",
                        "-cp", f"{scratch}:{classpath}", JOB, str(keys), str(2 * keys),
                        f"{scratch}/out"], check=True, capture_output=True)
        (savepoint,) = Path(scratch, "out", "canonical").iterdir()
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(savepoint, target)
    return target


def aggregation(checkpoint: FlinkCheckpoint) -> tuple[str, list[str]]:
    """The aggregation operator's name and its keyed states."""
    (name,) = [op.name for op in checkpoint.snapshot.operators
               if (op.name or "").startswith("GroupAggregate")]
    return name, [s.name for s in checkpoint.operator(name).keyed_states]


def bench_python(checkpoint: FlinkCheckpoint, operator: str, states: list[str],
                 savepoint: Path) -> None:
    started = time.perf_counter()
    rows = sum(table.num_rows for state in states
               for table in checkpoint.read_keyed_state(state, operator=operator))
    taken = time.perf_counter() - started
    size = sum(f.stat().st_size for f in savepoint.rglob("*") if f.is_file()) / 1e6
    print(f"Python reader, one core: {rows:,} rows in {taken:.2f} s: {rows / taken:,.0f} rows/s,"
          f" {size / taken:.1f} MB/s of a {size:.1f} MB savepoint")


def bench_spark(savepoint: Path, operator: str, states: list[str], repeats: int) -> None:
    from statesource.spark import session
    from statesource.spark.jvm.plan import FlinkStatePythonSource

    spark = session("bench-flink-sql", master="local[2]",
                    **{"spark.ui.showConsoleProgress": "false"})
    spark.dataSource.register(FlinkStatePythonSource)
    try:
        def from_savepoint(state: str, source: str = "flinkstate") -> object:
            return (spark.read.format(source).option("operator", operator)
                    .option("state", state).load(str(savepoint)))

        with tempfile.TemporaryDirectory(prefix="statesource-bench-sql-") as scratch:
            for state in states:
                from_savepoint(state).write.parquet(f"{scratch}/{state}")  # type: ignore[attr-defined]
            plan = from_savepoint(states[0])._jdf.queryExecution().executedPlan()  # type: ignore[attr-defined]
            print("read by the " + ("JVM reader" if "Flink key groups" in plan.toString()
                                    else "Python source"))
            routes = {"Parquet": lambda state: spark.read.parquet(f"{scratch}/{state}"),
                      "savepoint, flinkstate": from_savepoint,
                      "savepoint, flinkstate-python":
                          lambda state: from_savepoint(state, "flinkstate-python")}
            seconds = spark_scans(routes, states, repeats)
        print_scans(seconds, ", ".join(states))
    finally:
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--flink-python", default=sys.executable)
    args = parser.parse_args()
    savepoint = Path(tempfile.gettempdir()) / f"statesource-bench-sql-{args.keys}"
    if not (savepoint / "_metadata").exists():
        print(f"running {JOB} over {args.keys:,} keys (kept at {savepoint})", flush=True)
        make_savepoint(savepoint, args.keys, args.flink_python)
    checkpoint = FlinkCheckpoint.open(str(savepoint))
    operator, states = aggregation(checkpoint)
    bench_python(checkpoint, operator, states, savepoint)
    bench_spark(savepoint, operator, states, args.repeats)


if __name__ == "__main__":
    main()

"""Reading a real Flink RocksDB checkpoint: Python, Spark against Parquet, and point lookups.

Run: python bench/rocksdb_checkpoint.py [--entries 10000000] [--repeats 1]

A real Flink 2.3 job (bench/RocksDBBenchJob.java: RocksDB backend, incremental checkpoints,
one ValueState<Long> entry per String key ``user-<i>``, parallelism 2, max parallelism 128)
makes a retained checkpoint of ``--entries`` entries and a canonical savepoint of the same
state; both, and the checkpoint's rows as Parquet, are kept in the system's temp directory
for later runs (making them takes minutes). Then, in the same run:

- the Python reader (``FlinkCheckpoint.read_keyed_state``, one core): rows/s of wall time and
  per CPU-second;
- Spark ``local[2]`` full scans (``noop`` sink) of the checkpoint (``flinkstate``) and of the
  Parquet rows: the ratio (goal <= 2x), and which reader scanned the checkpoint. Where the
  Java shim is loaded that is the JVM reader: each Spark task reads its key groups' entries
  from the tables (RocksColumnFamily.java) and decodes them as a savepoint's key groups
  (planning reads the MANIFESTs and weighs key groups by the tables' bytes: nothing is
  converted); else the Python source;
- a point lookup of one key in Python: from the RocksDB checkpoint (only the blocks that can
  hold the key, nothing converted whole: a new ``FlinkCheckpoint`` each time) against the
  same lookup (its key group) in the canonical savepoint.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
from flink_read import _flink_classpath
from timing import best_of

from statesource.flink.reader import FlinkCheckpoint
from statesource.keygroups import assign_to_key_group
from statesource.types import STRING

HERE = Path(__file__).resolve().parent
OPERATOR, STATE, KEY = "bench", "count", "user-4242424"


def snapshots(entries: int) -> tuple[Path, Path, Path]:
    """The retained checkpoint, the canonical savepoint and the Parquet rows: made once."""
    kept = Path(tempfile.gettempdir()) / f"statesource-bench-rocksdb-checkpoint-{entries}"
    if not (kept / "out" / "canonical").exists():
        shutil.rmtree(kept, ignore_errors=True)
        kept.mkdir(parents=True)
        print(f"a real Flink job writes {entries:,} entries into RocksDB (minutes) ...")
        classpath = _flink_classpath(sys.executable)
        classes, scratch = kept / "classes", kept / "tmp"
        scratch.mkdir()
        subprocess.run(["javac", "-nowarn", "-cp", classpath, "-d", str(classes),
                        str(HERE / "RocksDBBenchJob.java")], check=True)
        subprocess.run(["java", f"-Djava.io.tmpdir={scratch}",
                        "--add-opens", "java.base/java.util=ALL-UNNAMED",
                        "--add-opens", "java.base/java.lang=ALL-UNNAMED",
                        "-cp", f"{classes}:{classpath}", "RocksDBBenchJob",
                        str(kept / "out"), str(entries)], check=True, capture_output=True)
        shutil.rmtree(scratch)
    parquet = kept / "rows.parquet"
    if not parquet.exists():
        writer = None
        partial = kept / "rows.parquet.partial"
        for table in FlinkCheckpoint.open(str(_checkpoint(kept))).read_keyed_state(
                STATE, operator=OPERATOR):
            if writer is None:
                writer = pq.ParquetWriter(str(partial), table.schema)
            writer.write_table(table)
        assert writer is not None
        writer.close()
        partial.rename(parquet)
    (canonical,) = (kept / "out" / "canonical").iterdir()
    return _checkpoint(kept), canonical, parquet


def _checkpoint(kept: Path) -> Path:
    return max((kept / "out" / "checkpoints").glob("*/chk-*"),
               key=lambda p: int(p.name.removeprefix("chk-")))


def _mb(path: Path) -> float:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    checkpoint, canonical, parquet = snapshots(args.entries)
    shared = checkpoint.parent / "shared"
    print(f"checkpoint {checkpoint}: {_mb(checkpoint) + _mb(shared):.0f} MB of RocksDB files"
          f" ({len(list(shared.rglob('*')))} shared); canonical savepoint {_mb(canonical):.0f}"
          f" MB; Parquet {_mb(parquet):.0f} MB")
    rows = 0

    def python_scan() -> None:
        nonlocal rows
        flink = FlinkCheckpoint.open(str(checkpoint))
        rows = sum(t.num_rows for t in flink.read_keyed_state(STATE, operator=OPERATOR))

    cpu = time.process_time()
    wall = best_of(args.repeats, python_scan)
    cpu = (time.process_time() - cpu) / args.repeats
    print(f"Python reader, full read: {wall:.1f} s for {rows:,} rows: {rows / wall:,.0f} rows/s;"
          f" {rows / cpu:,.0f} rows per CPU-second")

    key_group = assign_to_key_group(KEY, STRING, 128)

    def rocksdb_lookup() -> None:
        flink = FlinkCheckpoint.open(str(checkpoint))
        found = [r for t in flink.read_keyed_state(STATE, operator=OPERATOR, keys=[KEY])
                 for r in t.to_pylist() if r["key"] == KEY]
        assert len(found) == 1, found

    def canonical_lookup() -> None:
        flink = FlinkCheckpoint.open(str(canonical))
        found = [r for t in flink.read_keyed_state(STATE, operator=OPERATOR,
                                                   key_groups=[key_group])
                 for r in t.to_pylist() if r["key"] == KEY]
        assert len(found) == 1, found

    base = best_of(max(args.repeats, 3), canonical_lookup)
    fast = best_of(max(args.repeats, 3), rocksdb_lookup)
    print(f"point lookup of {KEY!r} (opening the snapshot included): canonical savepoint"
          f" {base * 1000:.0f} ms; RocksDB checkpoint {fast * 1000:.0f} ms: {fast / base:.2f}x")
    _spark_scans(checkpoint, parquet, rows, args.repeats)


def _spark_scans(checkpoint: Path, parquet: Path, rows: int, repeats: int) -> None:
    from statesource.spark import session

    spark = session("bench-rocksdb-checkpoint", master="local[2]",
                    **{"spark.ui.showConsoleProgress": "false"})
    try:
        scan = (spark.read.format("flinkstate").option("operator", OPERATOR)
                .option("state", STATE).load(str(checkpoint)))
        reader = ("JVM reader" if "Flink key groups" in
                  scan._jdf.queryExecution().executedPlan().toString() else "Python source")

        def from_checkpoint() -> None:
            (spark.read.format("flinkstate").option("operator", OPERATOR).option("state", STATE)
             .load(str(checkpoint)).write.format("noop").mode("overwrite").save())

        def from_parquet() -> None:
            spark.read.parquet(str(parquet)).write.format("noop").mode("overwrite").save()

        from_parquet()  # warm up: the first job pays for starting the JVM's and Python's workers
        base = best_of(repeats, from_parquet)
        fast = best_of(repeats, from_checkpoint)
        print(f"Spark local[2] full scan: Parquet {base:.1f} s ({rows / base / 2:,.0f} rows/s per"
              f" core); RocksDB checkpoint ({reader}) {fast:.1f} s ({rows / fast / 2:,.0f}"
              f" rows/s per core): {fast / base:.2f}x (goal <= 2x)")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()

"""Reading real Flink savepoints: statesource's Flink reader against Spark reading Parquet.

Run: python bench/flink_read.py [--entries 10000000] [--repeats 1] [--max-parallelism 256]
         [--flink-version 1.20]
         [--fixture [--savepoint DIR] [--events 1000000 --keys 200000] [--feed-keys 200000]]

By default a canonical savepoint of ``--entries`` pairs (String keys; a value, a
list and a map state: bench/flink_generated.py) is generated with statesource's
own Flink writers (for Flink ``--flink-version``, default the newest: 1.20 makes a
Flink 1.x savepoint), its rows written as Parquet, and both kept in the system's
temp directory for later runs. Then, in the same run, with Spark ``local[2]``:

- full scan: every state read by Python alone (``FlinkCheckpoint.read_keyed_state``,
  one core), and by Spark from the savepoint (``flinkstate``) and from Parquet,
  each written to Spark's ``noop`` sink: rows/s and MB/s per core, and the ratio
  of the savepoint's time to Parquet's (goal <= 2x);
- point lookup: one key's rows of the value state (``key = 'user-7'``), from the
  savepoint (pushed down to its key group) and from Parquet (goal <= 0.1x); with
  the JVM reader (loaded by ``session()`` where a JDK is), repeated lookups reuse
  the plan, and once more with ``_metadata`` touched before each, so that every
  lookup is planned afresh by the Python planner;
- rescale: ``rescale_max_parallelism`` of the savepoint to ``--max-parallelism``
  (Python, one core) against Spark's read.parquet + repartition + write.parquet of
  every state's rows (goal <= 1.3x).

``--fixture`` instead measures a savepoint of tests/fixtures/flink/FixtureJob.java
made by a real Flink (``apache-flink`` importable by --flink-python; Java 17)
against the same state imported into statesource's format: without --savepoint,
the savepoint is made and kept in the system's temp directory for later runs,
then imported (``statesource import-flink``), and each keyed state of operator
``stateful`` is read in full from both: decode throughput in MB/s of Flink
snapshot bytes and rows/s, and the ratio to the baseline, reading the imported
checkpoint in the same run. Then a point lookup: one key group's rows. Then,
with Spark ``local[2]``, every keyed state scanned from the canonical and the
native savepoint the job took of the same state (the JVM reader where the shim
loads), and from the native one through the Python source, against Parquet of
the same rows in the same run.

Last, the change feed between two retained Flink checkpoints of
tests/fixtures/flink/ChangesJob.java (``--feed-keys`` keys, seven keyed states;
0 skips this part), against a full read of one state of the later checkpoint,
same run: once after 1% of the keys changed *clustered* in as few key groups as
hold them, once after 1% changed *spread* over all keys (then every key group
differs, and the feed must decode both sides of each). Checkpoints share no
file, so every key group's bytes are read; only those whose bytes differ are
decoded.

With ``--flink-source DIR`` (an apache/flink checkout, as for
tests/fixtures/flink/generate.py) it also measures Avro decoding: a canonical
savepoint of AvroFixtureJob (``--avro-events``, 50,000 keys) holds the same
objects in state ``point`` (flink-avro, by reflection) and ``point_pojo``
(Flink's POJO serializer), and the richer GenericRecord state ``profile``;
rows/s of each, and the Avro/POJO ratio, in the same run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
from flink_generated import OPERATOR, PARALLELISM, STATES, generated
from timing import best_of, print_scans, spark_scans

from statesource.flink.operations.changefeed import FlinkChangeFeed
from statesource.flink.operations.importer import import_flink
from statesource.flink.reader import FlinkCheckpoint
from statesource.format.reader import Checkpoint
from statesource.keygroups import assign_to_key_group
from statesource.types import LONG, STRING

ROOT = Path(__file__).resolve().parents[1]
JOBS = ROOT / "tests" / "fixtures" / "flink"
FEED_STATE = "count"


def _flink_classpath(flink_python: str) -> str:
    """The jars of ``pyflink/lib`` as ``flink_python`` finds it (apache-flink-libraries
    installs ``pyflink`` as a namespace package: no ``__file__``)."""
    lib = subprocess.run([flink_python, "-c", "import os, pyflink; print(os.path.join("
                          "list(pyflink.__path__)[0], 'lib'))"],
                         check=True, capture_output=True, text=True).stdout.strip()
    return ":".join(str(p) for p in sorted(Path(lib).glob("*.jar")))


def _run_job(job: str, scratch: str, flink_python: str, *args: str) -> str:
    """Compile and run one job of tests/fixtures/flink with the jars of ``flink_python``'s
    pyflink; its standard output."""
    classpath = _flink_classpath(flink_python)
    subprocess.run(["javac", "-nowarn", "-cp", classpath, "-d", scratch,
                    str(JOBS / f"{job}.java")], check=True)
    # Flink unpacks its RPC jar (24 MB) into java.io.tmpdir and leaves it there.
    return subprocess.run(["java", f"-Djava.io.tmpdir={scratch}",
                           "--add-opens", "java.base/java.util=ALL-UNNAMED",
                           "--add-opens", "java.base/java.lang=ALL-UNNAMED",
                           "-cp", f"{scratch}:{classpath}", job, *args],
                          check=True, capture_output=True, text=True).stdout


def native_of(savepoint: Path) -> Path:
    """Where :func:`make_savepoint` keeps the native savepoint taken beside ``savepoint``."""
    return savepoint.with_name(savepoint.name + "-native")


def make_savepoint(target: Path, events: int, keys: int, flink_python: str) -> Path:
    """A canonical savepoint of FixtureJob over ``events`` events and ``keys`` keys, and the
    native one the job takes of the same state (at :func:`native_of`)."""
    with tempfile.TemporaryDirectory() as scratch:
        _run_job("FixtureJob", scratch, flink_python, "128", "false", f"{scratch}/out",
                 str(events), "20kb", str(keys))
        for kind, kept in (("canonical", target), ("native", native_of(target))):
            (savepoint,) = Path(scratch, "out", kind).iterdir()
            shutil.rmtree(kept, ignore_errors=True)
            shutil.copytree(savepoint, kept)
    return target


def bench_spark_scans(savepoint: Path, repeats: int) -> None:
    """Spark scans of every keyed state of operator ``stateful`` (to the ``noop`` sink):
    the canonical and the native savepoint through ``flinkstate`` (the JVM reader where the
    shim loads), the native one through the Python source, against Parquet of the same rows,
    written once from the savepoint."""
    from statesource.spark import session
    from statesource.spark.jvm.plan import FlinkStatePythonSource

    states = [s.name for s in FlinkCheckpoint.open(str(savepoint)).operator("stateful")
              .keyed_states]
    spark = session("bench-flink-native", master="local[2]",
                    **{"spark.ui.showConsoleProgress": "false"})
    spark.dataSource.register(FlinkStatePythonSource)
    try:
        def reader(fmt: str, path: Path) -> Callable[[str], Any]:
            return lambda name: (spark.read.format(fmt).option("operator", "stateful")
                                 .option("state", name).load(str(path)))

        with tempfile.TemporaryDirectory(prefix="statesource-bench-native-") as scratch:
            for name in states:
                reader("flinkstate", savepoint)(name).write.parquet(f"{scratch}/{name}")
            routes = {"Parquet": lambda name: spark.read.parquet(f"{scratch}/{name}"),
                      "canonical, flinkstate": reader("flinkstate", savepoint),
                      "native, flinkstate": reader("flinkstate", native_of(savepoint)),
                      "native, flinkstate-python": reader("flinkstate-python",
                                                          native_of(savepoint))}
            plan = routes["native, flinkstate"](states[0])._jdf.queryExecution().executedPlan()
            print("native savepoint read by the " + (
                "JVM reader" if "Flink key groups" in plan.toString() else "Python source"))
            seconds = spark_scans(routes, states, repeats)
        print_scans(seconds, "every state of 'stateful'")
    finally:
        spark.stop()


def make_checkpoints(target: Path, keys: int, flink_python: str) -> list[int]:
    """Retained checkpoints of ChangesJob: ``keys`` keys, then 1% of them changed in as few
    key groups as hold them, then 1% spread over all keys; the three checkpoint ids."""
    names = [f"k{i}" for i in range(keys)]
    by_group: dict[int, list[str]] = {}
    for name in names:
        by_group.setdefault(assign_to_key_group(name, STRING, 128), []).append(name)
    clustered: list[str] = []
    for group in sorted(by_group, key=lambda g: -len(by_group[g])):
        clustered += by_group[group][:keys // 100 - len(clustered)]
    phases = [names, clustered, names[::100]]
    with tempfile.TemporaryDirectory() as scratch:
        events = Path(scratch, "events.csv")
        events.write_text("".join(f"{phase},add,{name},{'abcde'[seq % 5]},{seq}\n"
                                  for seq, (phase, name) in enumerate(
                                      (p, n) for p, members in enumerate(phases) for n in members)))
        out = _run_job("ChangesJob", scratch, flink_python, str(events), f"{scratch}/out")
        ids = [int(line.split()[3]) for line in out.splitlines() if line.startswith("PHASE ")]
        (job,) = Path(scratch, "out", "checkpoints").iterdir()
        for checkpoint_id in ids:
            shutil.copytree(job / f"chk-{checkpoint_id}", target / f"chk-{checkpoint_id}")
    return ids


def bench_change_feed(keys: int, flink_python: str, repeats: int) -> None:
    root = Path(tempfile.gettempdir()) / f"statesource-bench-flink-changes-{keys}"
    if not root.exists():
        print(f"making retained checkpoints of {keys:,} keys ...")
        make_checkpoints(root, keys, flink_python)
    ids = sorted(int(d.name[4:]) for d in root.iterdir())
    end = FlinkCheckpoint.open(str(root), checkpoint_id=ids[-1])
    op = end.snapshot.operator("tracker")
    size = sum(h.stream.size for h in end.snapshot.keyed_handles(op))
    rows = 0

    def full_read() -> None:
        nonlocal rows
        rows = sum(t.num_rows for t in end.read_keyed_state(FEED_STATE, operator="tracker"))

    full = best_of(repeats, full_read)
    print(f"change feed: retained checkpoints {ids} under {root}, {size / 1e6:.1f} MB each;"
          f" full read of state {FEED_STATE!r} ({rows:,} rows) {full:.2f} s")
    for label, (start_id, end_id) in (("clustered", ids[:2]), ("spread", ids[1:])):
        changes = 0

        def read_feed(start_id: int = start_id, end_id: int = end_id) -> None:
            nonlocal changes
            feed = FlinkChangeFeed.open(str(root), start_id, end_id, operator="tracker",
                                        state=FEED_STATE)
            changes = sum(t.num_rows for t in feed.read())

        seconds = best_of(repeats, read_feed)
        print(f"  1% of keys changed, {label}: feed {start_id} -> {end_id} {seconds:.2f} s"
              f" ({changes:,} change rows); ratio {seconds / full:.3f}x of the full read")
def avro_vs_pojo(flink_source: Path, flink_python: str, events: int, repeats: int) -> None:
    """Rows/s of Avro-valued states vs the same values through the POJO serializer."""
    savepoint = Path(tempfile.gettempdir()) / f"statesource-bench-flink-avro-{events}"
    if not savepoint.exists():
        print(f"making an Avro savepoint of {events:,} events over 50,000 keys ...")
        import pyspark

        sys.path.insert(0, str(JOBS))
        from generate import types_savepoints

        classpath = _flink_classpath(flink_python)
        with tempfile.TemporaryDirectory() as scratch:
            out = types_savepoints(classpath, scratch, flink_source,
                                   Path(pyspark.__file__).parent / "jars", events, 50_000)
            (canonical,) = (out / "canonical").iterdir()
            shutil.copytree(canonical, savepoint)
    flink = FlinkCheckpoint.open(str(savepoint))
    rates = {}
    for state in ("point_pojo", "point", "profile"):
        count = sum(t.num_rows for t in flink.read_keyed_state(state, operator="typed"))
        seconds = best_of(repeats, lambda state=state: [None for _ in flink.read_keyed_state(
            state, operator="typed")])
        rates[state] = count / seconds
        print(f"state {state!r}: {count:,} rows in {seconds:.2f} s, {rates[state]:,.0f} rows/s")
    print(f"Avro (reflect) point vs POJO point: {rates['point'] / rates['point_pojo']:.2f}x;"
          f" Avro GenericRecord profile (15 fields): {rates['profile'] / rates['point_pojo']:.2f}x"
          " of the POJO rows/s")


def _mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def bench_generated(entries: int, repeats: int, max_parallelism: int,
                    flink_version: str | None) -> None:
    """The savepoint of ``entries`` generated pairs against the same rows in Parquet."""
    from statesource.flink.operations.rescale import rescale_max_parallelism
    from statesource.spark import session

    savepoint, parquet = generated(entries, flink_version)
    flink = FlinkCheckpoint.open(str(savepoint))
    names = [s.name for s in STATES]
    flink_mb, parquet_mb = _mb(savepoint), _mb(parquet)
    rows = 0

    def python_scan() -> None:
        nonlocal rows
        rows = sum(t.num_rows for name in names
                   for t in flink.read_keyed_state(name, operator=OPERATOR))

    python = best_of(repeats, python_scan)
    print(f"savepoint {savepoint} (_metadata version {flink.snapshot.metadata.version}):"
          f" {entries:,} pairs, {rows:,} rows, {flink_mb:.1f} MB; Parquet {parquet_mb:.1f} MB")
    print(f"Python alone (1 core), every state: {python:.2f} s, {rows / python:,.0f} rows/s,"
          f" {flink_mb / python:.1f} MB/s per core")
    group = assign_to_key_group("user-7", STRING, flink.operator(OPERATOR).max_parallelism)

    def python_lookup() -> None:
        (table,) = flink.read_keyed_state("total", operator=OPERATOR, key_groups=[group])
        assert table.filter(pc.equal(table.column("key"), "user-7")).num_rows == 1

    python_point = best_of(max(repeats, 3), python_lookup)
    spark = session("bench-flink-read", master="local[2]",
                    **{"spark.ui.showConsoleProgress": "false"})
    cores = 2
    try:
        def scan(reader: object) -> None:
            for name in names:
                reader(name).write.format("noop").mode("overwrite").save()  # type: ignore

        def from_savepoint(name: str) -> object:
            # filterPushdown: this pyspark does not push filters into Python readers unasked.
            return (spark.read.format("flinkstate").option("operator", OPERATOR)
                    .option("state", name).option("filterPushdown", "true")
                    .load(str(savepoint)))

        def from_parquet(name: str) -> object:
            return spark.read.parquet(str(parquet / name))

        scan(from_savepoint)  # warm up both: the first job pays for starting Python workers
        scan(from_parquet)
        plan = from_savepoint(names[0])._jdf.queryExecution().executedPlan().toString()  # type: ignore
        print("savepoint read by the " + ("JVM reader" if "Flink key groups" in plan
                                          else "Python source"))
        base = best_of(repeats, lambda: scan(from_parquet))
        fast = best_of(repeats, lambda: scan(from_savepoint))
        for label, seconds, mb in (("Parquet", base, parquet_mb), ("savepoint", fast, flink_mb)):
            print(f"Spark local[{cores}] full scan from {label}: {seconds:.2f} s,"
                  f" {rows / seconds / cores:,.0f} rows/s and {mb / seconds / cores:.1f} MB/s"
                  " per core")
        print(f"  full scan: savepoint {fast / base:.2f}x of Parquet (goal <= 2x)")

        def lookup(reader: object) -> None:
            found = reader("total").filter("key = 'user-7'").collect()  # type: ignore
            assert len(found) == 1, found

        def replanned_lookup() -> None:
            # A new modification time of _metadata: the JVM provider plans afresh, in Python.
            os.utime(savepoint / "_metadata")
            lookup(from_savepoint)

        base = best_of(max(repeats, 3), lambda: lookup(from_parquet))
        fast = best_of(max(repeats, 3), lambda: lookup(from_savepoint))
        planned = best_of(max(repeats, 3), replanned_lookup)
        floor = best_of(max(repeats, 3), lambda: spark.range(1).collect())
        print(f"point lookup (state 'total', key 'user-7'): Spark from Parquet"
              f" {base * 1000:.0f} ms; Spark from the savepoint {fast * 1000:.0f} ms:"
              f" {fast / base:.3f}x (goal <= 0.1x); planned afresh {planned * 1000:.0f} ms:"
              f" {planned / base:.3f}x; Python alone (key group {group})"
              f" {python_point * 1000:.1f} ms: {python_point / base:.3f}x")
        print(f"  Spark's floor, spark.range(1).collect(): {floor * 1000:.0f} ms:"
              f" {floor / base:.3f}x of the Parquet lookup")

        with tempfile.TemporaryDirectory(prefix="statesource-bench-flink-read-") as scratch:
            def shuffle() -> None:
                for name in names:
                    out = Path(scratch, f"{name}.parquet")
                    shutil.rmtree(out, ignore_errors=True)
                    from_parquet(name).repartition(PARALLELISM).write.parquet(str(out))

            def rescale() -> None:
                out = Path(scratch, "rescaled")
                shutil.rmtree(out, ignore_errors=True)
                rescale_max_parallelism(savepoint, out, max_parallelism)

            base = best_of(repeats, shuffle)
            fast = best_of(repeats, rescale)
        print(f"rescale --max-parallelism {max_parallelism} (Python, 1 core): {fast:.2f} s,"
              f" {entries / fast:,.0f} pairs/s, {flink_mb / fast:.1f} MB/s; Spark"
              f" read.parquet + repartition + write.parquet {base:.2f} s:"
              f" {fast / base:.2f}x (goal <= 1.3x)")
    finally:
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--savepoint", type=Path)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--feed-keys", type=int, default=200_000)
    parser.add_argument("--flink-python", default=sys.executable)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--flink-source", type=Path,
                        help="an apache/flink checkout: also measure Avro vs POJO values")
    parser.add_argument("--avro-events", type=int, default=200_000)
    parser.add_argument("--avro-only", action="store_true")
    parser.add_argument("--fixture", action="store_true",
                        help="measure a real Flink job's savepoint against its import instead")
    parser.add_argument("--entries", type=int, default=10_000_000)
    parser.add_argument("--max-parallelism", type=int, default=256)
    parser.add_argument("--flink-version", metavar="X.Y",
                        help="the generated savepoint's Flink release (1.20: a 1.x one)")
    args = parser.parse_args()
    if not args.fixture and args.flink_source is None:
        bench_generated(args.entries, args.repeats, args.max_parallelism, args.flink_version)
        return
    if args.flink_source is not None:
        avro_vs_pojo(args.flink_source, args.flink_python, args.avro_events, args.repeats)
        if args.avro_only:
            return
    savepoint = args.savepoint or Path(tempfile.gettempdir()) / (
        f"statesource-bench-flink-{args.events}-{args.keys}")
    if not savepoint.exists() or not args.savepoint and not native_of(savepoint).exists():
        print(f"making a savepoint of {args.events:,} events over {args.keys:,} keys ...")
        make_savepoint(savepoint, args.events, args.keys, args.flink_python)
    flink = FlinkCheckpoint.open(str(savepoint))
    snapshot = flink.snapshot
    op = snapshot.operator("stateful")
    size = sum(h.stream.size for h in snapshot.keyed_handles(op))
    with tempfile.TemporaryDirectory() as scratch:
        imported_at = os.path.join(scratch, "imported")
        seconds = best_of(1, lambda: import_flink(str(savepoint), imported_at))
        imported = Checkpoint.open(imported_at)
        states = [s.name for s in flink.operator("stateful").keyed_states]
        rows = {name: imported.operator("stateful").keyed_state(name).rows for name in states}
        entries = sum(imported.operator("stateful").keyed_state(n).entries for n in states)
        print(f"savepoint {savepoint}: operator 'stateful', {size / 1e6:.1f} MB in"
              f" {len(snapshot.keyed_handles(op))} files, {len(states)} keyed states,"
              f" {entries:,} entries, {sum(rows.values()):,} rows;"
              f" import-flink took {seconds:.1f} s")

        def read_all(source: FlinkCheckpoint | Checkpoint) -> None:
            for name in states:
                for _ in source.read_keyed_state(name, operator="stateful"):
                    pass

        flink_seconds = best_of(args.repeats, lambda: read_all(flink))
        base_seconds = best_of(args.repeats, lambda: read_all(imported))
        total = sum(rows.values())
        print(f"full read, every state once: Flink savepoint {flink_seconds:.2f} s"
              f" ({size / 1e6 / flink_seconds:.1f} MB/s of snapshot,"
              f" {total / flink_seconds:,.0f} rows/s); statesource checkpoint"
              f" {base_seconds:.2f} s ({total / base_seconds:,.0f} rows/s);"
              f" ratio {base_seconds / flink_seconds:.3f}x of the baseline")
        group = assign_to_key_group(7, LONG, op.max_parallelism)

        def lookup(source: FlinkCheckpoint | Checkpoint) -> None:
            for _ in source.read_keyed_state("events", operator="stateful", key_groups=[group]):
                pass

        flink_lookup = best_of(max(args.repeats, 3), lambda: lookup(flink))
        base_lookup = best_of(max(args.repeats, 3), lambda: lookup(imported))
        print(f"point lookup (state 'events', key 7, key group {group}): Flink savepoint"
              f" {flink_lookup * 1000:.1f} ms, statesource checkpoint {base_lookup * 1000:.1f} ms"
              f" (ratio {base_lookup / flink_lookup:.3f}x)")
    if native_of(savepoint).exists():
        bench_spark_scans(savepoint, args.repeats)
    if args.feed_keys:
        bench_change_feed(args.feed_keys, args.flink_python, args.repeats)


if __name__ == "__main__":
    main()

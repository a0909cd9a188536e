"""Reading RocksDB's files in Python: a ~100 MB Snappy SST, against RocksDB itself.

Run: python bench/rocksdb_read.py [--entries 1650000] [--repeats 3]

A database of ``--entries`` Flink-like pairs (a key-group byte, a length-prefixed
``user-NNNNNNN`` key; an 8-byte number and a short comma-separated list as the value) is
written by rocksdict (RocksDB 9.x: Snappy, XXH3 checksums, ``format_version`` 6) and
compacted into one table of about 100 MB, kept in the system's temp directory for later
runs (rocksdict is in the ``test`` extra). Then, in the same run, best of ``--repeats``:

- the baseline: RocksDB (C++, through rocksdict) iterating the database;
- ``SstFile.entries()``: every entry of the table, decoded in Python;
- ``read_directory`` + ``merged_entries``: the column family as a snapshot reader gets it
  (CURRENT, MANIFEST, the table memory-mapped, then merged by key).

Each prints wall time, MB/s of the file, entries/s, entries/s per CPU-second (the rate of one
core, whatever else the machine runs) and the ratio to the baseline's time.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rocksdict import DBCompressionType, Options, Rdict, WriteBatch

from statesource.flink.rocksdb import SstFile, merged_entries, read_directory


def database(entries: int) -> Path:
    """The benchmark's database: made once per entry count, then reused."""
    directory = Path(tempfile.gettempdir()) / f"statesource-bench-rocksdb-{entries}"
    if directory.exists():
        return directory
    scratch = Path(tempfile.mkdtemp(prefix=directory.name + ".", dir=directory.parent))
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_compression_type(DBCompressionType.snappy())
    options.set_target_file_size_base(1 << 30)  # one table, however large
    options.set_write_buffer_size(256 << 20)
    options.set_disable_auto_compactions(True)
    db = Rdict(str(scratch), options)
    rng = random.Random(3)
    tags = [b"tag-%d" % i for i in range(300)]
    batch = WriteBatch(raw_mode=True)
    for _ in range(entries):
        user = b"user-%07d" % rng.randrange(10_000_000)
        batch.put(bytes([rng.randrange(128), len(user)]) + user,
                  rng.randrange(1 << 40).to_bytes(8, "big")
                  + b",".join(rng.choice(tags) for _ in range(rng.randrange(1, 12)))
                  + rng.randbytes(rng.randrange(40)))
        if len(batch) >= 10_000:
            db.write(batch)
            batch = WriteBatch(raw_mode=True)
    db.write(batch)
    db.flush()
    db.compact_range(None, None)
    db.close()
    scratch.rename(directory)  # whole, or not at all: an interrupted build is not reused
    return directory


def timed(repeats: int, job: Callable[[], int]) -> tuple[float, float, int]:
    """(best wall seconds, CPU seconds of that run, what the job counted)."""
    best = (float("inf"), 0.0, 0)
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        count = job()
        run = (time.perf_counter() - wall, time.process_time() - cpu, count)
        best = min(best, run)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_650_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    directory = database(args.entries)
    (table_path,) = directory.glob("*.sst")
    size = table_path.stat().st_size
    data = table_path.read_bytes()
    table = SstFile(data, str(table_path))
    print(f"{table_path.name}: {size / 1e6:.1f} MB, {table.properties.num_entries:,} entries in"
          f" {table.properties.num_data_blocks:,} blocks, {table.properties.compression},"
          f" format_version {table.footer.format_version}, best of {args.repeats}")

    def rocksdb() -> int:
        db = Rdict(str(directory), Options(raw_mode=True))
        try:
            return sum(1 for _ in db.items())
        finally:
            db.close()

    jobs = [("RocksDB via rocksdict (baseline)", rocksdb),
            ("SstFile.entries()", lambda: sum(1 for _ in SstFile(data, "t").entries())),
            ("read_directory + merged_entries", lambda: sum(
                1 for tables in read_directory(directory).values()
                for _ in merged_entries(tables)))]
    baseline = None
    for label, job in jobs:
        wall, cpu, count = timed(args.repeats, job)
        baseline = baseline or wall
        print(f"{label:34s} {wall:6.2f} s  {size / wall / 1e6:6.1f} MB/s  {count / wall / 1e6:5.2f}"
              f" M entries/s  {count / max(cpu, 1e-9) / 1e6:5.2f} M/CPU-s  {wall / baseline:5.1f}x")


if __name__ == "__main__":
    main()

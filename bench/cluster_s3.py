"""A full read and ``rescale_max_parallelism`` on a localhost Spark cluster: S3 against local files.

Run: python bench/cluster_s3.py [--entries 5000000] [--repeat 2]

Same run, same cluster: a Spark standalone master with two one-core workers and an
S3 server (moto, IAM auth on), all on 127.0.0.1, started as tests/cluster/ starts them
and stopped at the end. The checkpoint is bench/rescale.py's (one Value state, string keys,
long values, 4 subtasks, max parallelism 128), written once to local files and once to S3.
Baseline: each operation on the local files. Measured: the same on S3. Printed: times,
ratios, and where the time goes (the raw transfer of the data files, and the phases of the
rescale: planning on the driver, the Spark job, the commit on the driver).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "cluster"))
import pyarrow.fs as pafs  # noqa: E402
from rescale import build_checkpoint  # noqa: E402

from processes import (  # noqa: E402
    Processes,
    executor_credentials,
    python_env,
    start_s3,
    start_spark,
)
from statesource.format.storage import resolve  # noqa: E402


def full_read(spark: Any, path: str) -> None:
    df = spark.read.format("flinkstate").option("state", "counts").load(path)
    df.selectExpr("count(key)", "sum(value)").collect()


def transfer(path: str) -> tuple[float, int]:
    """Seconds to read every data file of checkpoint 1 from this process, and its bytes: one
    ranged read per file, as the reader reads (pyarrow's S3 ``open_input_stream().read()``
    is far slower than ``read_at`` of the same bytes, and the reader never uses it)."""
    checkpoint = resolve(path).child("chk-1")  # the one read and rescaled
    started = time.perf_counter()
    total = 0
    for info in checkpoint.filesystem.get_file_info(pafs.FileSelector(checkpoint.path,
                                                                      recursive=True)):
        if info.type == pafs.FileType.File and info.path.endswith(".arrow"):
            total += len(checkpoint.filesystem.open_input_file(info.path).read_at(info.size, 0))
    return time.perf_counter() - started, total


def timed_rescale(spark: Any, path: str) -> tuple[float, list[tuple[float, str]]]:
    from statesource.spark import rescale_max_parallelism

    marks: list[tuple[float, str]] = []
    started = time.perf_counter()
    rescale_max_parallelism(spark, path, None, 256, checkpoint_id=1,
                            progress=lambda line: marks.append((time.perf_counter(), line)))
    ended = time.perf_counter()
    phases = []
    previous = started
    for moment, line in marks:
        phases.append((moment - previous, line.strip()))
        previous = moment
    return ended - started, phases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=5_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="statesource-bench-cluster-"))
    processes = Processes(work)
    try:
        s3 = start_s3(processes)
        cluster = start_spark(processes)
        os.environ.update(python_env(**s3.credentials_env()))  # this driver's own credentials
        local, remote = str(work / "root"), s3.uri("bench/root")
        started = time.perf_counter()
        build_checkpoint(local, args.entries, 128)
        build_checkpoint(remote, args.entries, 128)
        print(f"built {args.entries:,} entries twice in {time.perf_counter() - started:.1f} s")

        from pyspark.sql import SparkSession

        builder = SparkSession.builder.master(cluster.master_url).appName("bench-cluster-s3")
        settings = executor_credentials(s3)[1::2] + [
            "spark.executor.memory=1g", "spark.cores.max=2", "spark.ui.enabled=false",
            "spark.sql.python.filterPushdown.enabled=true"]
        for setting in settings:
            key, value = setting.split("=", 1)
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        from statesource.spark import register

        register(spark)
        full_read(spark, local)  # warm: JVMs, Python workers
        results: dict[str, float] = {}

        def best(key: str, seconds: float) -> None:
            results[key] = min(seconds, results.get(key, seconds))

        for _ in range(args.repeat):  # alternating, so that neither side runs warmer
            for name, path in (("local", local), ("s3", remote)):
                seconds, size = transfer(path)
                best(f"transfer {name}", seconds)
                print(f"{name}: raw transfer of {size / 1e6:.0f} MB of data files: {seconds:.2f} s")
                started = time.perf_counter()
                full_read(spark, path)
                best(f"read {name}", time.perf_counter() - started)
                print(f"{name}: full read: {time.perf_counter() - started:.1f} s")
                seconds, phases = timed_rescale(spark, path)
                best(f"rescale {name}", seconds)
                print(f"{name}: rescale_max_parallelism to 256: {seconds:.1f} s")
                for seconds_before, line in phases:
                    print(f"    {seconds_before:6.1f} s until: {line}")
        spark.stop()
        print(f"best of {args.repeat}:")
        for operation in ("transfer", "read", "rescale"):
            ratio = results[f"{operation} s3"] / results[f"{operation} local"]
            print(f"{operation}: S3 {results[f'{operation} s3']:.2f} s / local files"
                  f" {results[f'{operation} local']:.2f} s = {ratio:.2f}x")
    finally:
        processes.stop_all()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

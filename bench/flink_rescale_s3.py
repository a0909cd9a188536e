"""A new max parallelism of a Flink savepoint, S3 to S3 against local files to local files.

Run: python bench/flink_rescale_s3.py [--entries 5000000] [--max-parallelism 1024]
         [--repeat 2]

Same run, same savepoint: bench/flink_generated.py's canonical savepoint of ``--entries``
pairs (three keyed states, String keys, parallelism 4, max parallelism 128), made once
and kept under the temp directory, is rescaled by
``statesource.flink.operations.rescale.rescale_max_parallelism`` (the ``rescale
--max-parallelism`` command, pure Python) from a local directory into a new local one
(the baseline), and from an S3 server (moto in server mode, IAM auth on, on 127.0.0.1, as
tests/cluster/ starts it) into a new output on the same server: every state file uploaded,
``_metadata`` created last with a conditional put. The two alternate, so that neither side
runs warmer; each output is deleted after its run. Printed: the best time of each, the
ratio S3 / local (goal: at most 1.5x), and the raw transfer of the savepoint's bytes from
S3 for scale.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "cluster"))
import pyarrow.fs as pafs  # noqa: E402
from flink_generated import generated  # noqa: E402

from processes import Processes, python_env, start_s3  # noqa: E402
from statesource.flink.operations.rescale import rescale_max_parallelism  # noqa: E402
from statesource.format.storage import resolve  # noqa: E402


def upload(source: Path, uri: str) -> int:
    """``source`` copied whole to ``uri``; its bytes."""
    target = resolve(uri)
    pafs.copy_files(str(source), target.path, destination_filesystem=target.filesystem)
    return sum(p.stat().st_size for p in source.iterdir())


def remove(uri: str) -> None:
    location = resolve(uri)
    if location.is_local:
        shutil.rmtree(location.path)
    else:
        location.filesystem.delete_dir(location.path)


def transfer(uri: str) -> float:
    """Seconds to read every file of the savepoint on S3 into this process (ranged reads)."""
    location = resolve(uri)
    started = time.perf_counter()
    for info in location.filesystem.get_file_info(pafs.FileSelector(location.path)):
        location.filesystem.open_input_file(info.path).read_at(info.size, 0)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=5_000_000)
    parser.add_argument("--max-parallelism", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    savepoint, _ = generated(args.entries)
    work = Path(tempfile.mkdtemp(prefix="statesource-bench-flink-rescale-s3-"))
    processes = Processes(work)
    try:
        s3 = start_s3(processes)
        os.environ.update(python_env(**s3.credentials_env()))
        remote = s3.uri("bench/savepoint")
        size = upload(savepoint, remote)
        print(f"savepoint of {args.entries:,} pairs, {size / 1e6:.0f} MB: {savepoint} and"
              f" {s3.uri('bench/savepoint').split('?')[0]}")
        best: dict[str, float] = {}
        for attempt in range(args.repeat):
            for name, source, output in (
                    ("local", str(savepoint), str(work / f"out-{attempt}")),
                    ("s3", remote, s3.uri(f"bench/out-{attempt}"))):
                started = time.perf_counter()
                done = rescale_max_parallelism(source, output, args.max_parallelism)
                seconds = time.perf_counter() - started
                best[name] = min(seconds, best.get(name, seconds))
                print(f"{name}: {done.entries:,} pairs to max parallelism"
                      f" {args.max_parallelism} in {seconds:.2f} s")
                remove(output)
        download = transfer(remote)
        print(f"best of {args.repeat}: local to local {best['local']:.2f} s (1.00x); S3 to S3"
              f" {best['s3']:.2f} s = {best['s3'] / best['local']:.2f}x (goal <= 1.5x)")
        print(f"for scale: reading the savepoint's {size / 1e6:.0f} MB from S3 alone takes"
              f" {download:.2f} s")
    finally:
        processes.stop_all()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

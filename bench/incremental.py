"""Incremental checkpoints and the change feed, against their full counterparts.

Run: python bench/incremental.py [--checkpoint-entries 5000000] [--feed-entries 10000000]
[--chain-entries 5000000] (0 skips that part)

Three ratios, each against a baseline measured in the same run on the same state:

1. an incremental checkpoint after 1% of the entries changed, against a full
   checkpoint of the same state (snapshot, write and commit, synchronously);
2. the change feed between two checkpoints whose keys differ in 1%, against a
   full scan of one of them (every key group read, checked and decoded to Arrow);
3. reading a checkpoint at the end of a chain of 10 incremental ones (each
   after 1% changed, spread), against reading a full checkpoint of the same state.

Every figure is the best of ``--repeats`` runs (checkpoints: each after the
same update, as a checkpoint is written once).

Incremental checkpoints write the changed entries as delta runs (format
version 5), so they should cost what changed whichever key groups it touches.
The first two ratios are measured twice: with the changed entries *clustered*
in as few key groups as hold them (keys that share key groups, as with a hot
tenant or region), and *spread* uniformly over all keys, which with 128 key
groups touches every one of them (the real case: key groups are a hash).
"""

from __future__ import annotations

import argparse
import functools
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from timing import best_of  # noqa: E402

from statesource import Checkpoint, CheckpointWriter  # noqa: E402
from statesource.format.changefeed import ChangeFeed  # noqa: E402
from statesource.keygroups import key_groups  # noqa: E402
from statesource.state.descriptors import ValueStateDescriptor  # noqa: E402
from statesource.state.keyed_backend import KeyedStateBackend  # noqa: E402
from statesource.types import LONG  # noqa: E402

MAX_PARALLELISM = 128
CHANGED = 0.01
CHAIN = 10


class Job:
    """One subtask holding ``entries`` long keys with a long value each."""

    def __init__(self, entries: int) -> None:
        self.backend = KeyedStateBackend("long", MAX_PARALLELISM)
        self.state = self.backend.get_state(ValueStateDescriptor("counts", "long"))
        self.keys = np.arange(entries, dtype=np.int64)
        self.groups = key_groups(self.keys.tolist(), LONG, MAX_PARALLELISM)
        self.update(self.keys.tolist(), 0)

    def update(self, keys: list[int], value: int) -> None:
        set_key, update = self.backend.set_current_key, self.state.update
        for key in keys:
            set_key(key)
            update(value)

    def changed_keys(self, clustered: bool, rng: np.random.Generator) -> list[int]:
        """1% of the keys: all of a few key groups' keys, or drawn uniformly."""
        count = int(len(self.keys) * CHANGED)
        if not clustered:
            return rng.choice(self.keys, count, replace=False).tolist()
        order = np.argsort(self.groups, kind="stable")
        return self.keys[order[:count]].tolist()

    def touched(self, keys: list[int]) -> int:
        return len(np.unique(key_groups(keys, LONG, MAX_PARALLELISM)))


def timed_write(writer: CheckpointWriter, checkpoint_id: int, job: Job,
                incremental: bool) -> float:
    """One checkpoint's wall-clock seconds: snapshot, write and commit (done once only)."""
    started = time.perf_counter()
    writer.write(checkpoint_id, {"op": [job.backend]}, incremental=incremental)
    return time.perf_counter() - started


def bench_checkpoints(entries: int, directory: str, repeats: int) -> None:
    """Each checkpoint comes right after an update of the same keys; best of ``repeats``."""
    print(f"incremental checkpoint after {CHANGED:.0%} of {entries:,} entries changed")
    job = Job(entries)
    rng = np.random.default_rng(1)
    # A writer of incremental checkpoints, as its users run it: it keeps what hints its runs
    # need (docs/FORMAT.md section 14), also while writing the full checkpoints.
    with CheckpointWriter(f"{directory}/checkpoints", incremental=True) as writer:
        writer.write(1, {"op": [job.backend]})
        checkpoint_id = 1
        for clustered in (True, False):
            changed = job.changed_keys(clustered, rng)
            times = {True: float("inf"), False: float("inf")}
            for _ in range(repeats):
                for incremental in (True, False):
                    checkpoint_id += 1
                    job.update(changed, checkpoint_id)
                    times[incremental] = min(times[incremental],
                                             timed_write(writer, checkpoint_id, job, incremental))
            label = "clustered" if clustered else "spread"
            print(f"  {label:<9} ({job.touched(changed):>3} of {MAX_PARALLELISM} key groups"
                  f" changed): incremental {times[True]:.3f} s, full {times[False]:.3f} s"
                  f" = {times[True] / times[False]:.3f}x full")


def scan_rows(checkpoint: Checkpoint) -> int:
    return sum(t.num_rows for t in checkpoint.read_keyed_state("counts"))


def feed_rows(feed: ChangeFeed) -> int:
    return sum(t.num_rows for t in feed.read())


def bench_feed(entries: int, directory: str, repeats: int) -> None:
    print(f"change feed between two {entries:,}-entry checkpoints differing in {CHANGED:.0%}"
          " of keys")
    job = Job(entries)
    rng = np.random.default_rng(2)
    root = f"{directory}/feed"
    with CheckpointWriter(root, incremental=True) as writer:
        writer.write(1, {"op": [job.backend]}, incremental=False)
        for start, clustered in ((1, True), (2, False)):
            changed = job.changed_keys(clustered, rng)
            job.update(changed, start)
            writer.write(start + 1, {"op": [job.backend]})
            end = Checkpoint.open(root, checkpoint_id=start + 1)
            feed = ChangeFeed.open(root, start, start + 1, state="counts")
            scan = best_of(repeats, functools.partial(scan_rows, end))
            feed_time = best_of(repeats, functools.partial(feed_rows, feed))
            label = "clustered" if clustered else "spread"
            print(f"  {label:<9} ({len(feed.changed_key_groups()):>3} of {MAX_PARALLELISM} key"
                  f" groups read, {feed_rows(feed):,} change rows): feed {feed_time:.3f} s,"
                  f" full scan {scan:.3f} s = {feed_time / scan:.3f}x the scan")


def build_chain(entries: int, directory: str) -> tuple[Checkpoint, Checkpoint]:
    """The end of a chain of ``CHAIN`` incremental checkpoints, each after ``CHANGED`` of
    the keys changed (spread), and a full checkpoint of the same state."""
    job = Job(entries)
    rng = np.random.default_rng(3)
    root = f"{directory}/chain"
    with CheckpointWriter(root, incremental=True) as writer:
        writer.write(1, {"op": [job.backend]}, incremental=False)
        for checkpoint_id in range(2, CHAIN + 2):
            job.update(job.changed_keys(False, rng), checkpoint_id)
            writer.write(checkpoint_id, {"op": [job.backend]})
        writer.write(CHAIN + 2, {"op": [job.backend]}, incremental=False)
    return (Checkpoint.open(root, checkpoint_id=CHAIN + 1),
            Checkpoint.open(root, checkpoint_id=CHAIN + 2))


def bench_chain(entries: int, directory: str, repeats: int) -> None:
    print(f"reading the end of a chain of {CHAIN} incremental checkpoints of {entries:,}"
          f" entries, each after {CHANGED:.0%} changed (spread)")
    chained, full = build_chain(entries, directory)
    runs = max(len(r) for r in chained.operator().keyed_state("counts").runs_of().values())
    assert scan_rows(chained) == scan_rows(full) == entries
    chained_time = best_of(repeats, functools.partial(scan_rows, chained))
    full_time = best_of(repeats, functools.partial(scan_rows, full))
    print(f"  up to {runs} delta runs per key group: read {chained_time:.3f} s, full checkpoint"
          f" read {full_time:.3f} s = {chained_time / full_time:.3f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint-entries", type=int, default=5_000_000)
    parser.add_argument("--feed-entries", type=int, default=10_000_000)
    parser.add_argument("--chain-entries", type=int, default=5_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="statesource-incremental-")
    try:
        if args.checkpoint_entries:
            bench_checkpoints(args.checkpoint_entries, directory, args.repeats)
        if args.feed_entries:
            bench_feed(args.feed_entries, directory, args.repeats)
        if args.chain_entries:
            bench_chain(args.chain_entries, directory, args.repeats)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()

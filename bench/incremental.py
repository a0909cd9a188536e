"""Incremental checkpoints and the change feed, against their full counterparts.

Run: python bench/incremental.py [--checkpoint-entries 5000000] [--feed-entries 10000000]

Two ratios, each against a baseline measured in the same run on the same state:

1. an incremental checkpoint after 1% of the entries changed, against a full
   checkpoint of the same state (snapshot, write and commit, synchronously);
2. the change feed between two checkpoints whose keys differ in 1%, against a
   full scan of one of them (every key group read, checked and decoded to Arrow);
   both the best of three runs.

Incremental checkpoints and the feed work per key group, so what matters is
how many key groups the changed 1% touches. Each ratio is measured twice:
with the changed entries *clustered* in as few key groups as hold them (keys
that share key groups, as with a hot tenant or region), and *spread* uniformly
over all keys, which with 128 key groups touches every one of them.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
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


def timed(job: Callable[[], object]) -> float:
    """One run's wall-clock seconds (a checkpoint can be written only once)."""
    started = time.perf_counter()
    job()
    return time.perf_counter() - started


def bench_checkpoints(entries: int, directory: str) -> None:
    print(f"incremental checkpoint after {CHANGED:.0%} of {entries:,} entries changed")
    job = Job(entries)
    rng = np.random.default_rng(1)
    with CheckpointWriter(f"{directory}/checkpoints", incremental=True) as writer:
        checkpoint_id = 1
        writer.write(checkpoint_id, {"op": [job.backend]}, incremental=False)
        for clustered in (True, False):
            changed = job.changed_keys(clustered, rng)
            job.update(changed, checkpoint_id)
            checkpoint_id += 1
            incremental = timed(lambda: writer.write(checkpoint_id, {"op": [job.backend]}))
            checkpoint_id += 1
            full = timed(lambda: writer.write(checkpoint_id, {"op": [job.backend]},
                                              incremental=False))
            label = "clustered" if clustered else "spread"
            print(f"  {label:<9} ({job.touched(changed):>3} of {MAX_PARALLELISM} key groups"
                  f" changed): incremental {incremental:.3f} s, full {full:.3f} s"
                  f" = {incremental / full:.3f}x full")


def bench_feed(entries: int, directory: str) -> None:
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
            scan = best_of(3, lambda: sum(t.num_rows for t in end.read_keyed_state("counts")))
            feed = ChangeFeed.open(root, start, start + 1, state="counts")
            rows = 0

            def read_feed() -> None:
                nonlocal rows
                rows = sum(t.num_rows for t in feed.read())

            feed_time = best_of(3, read_feed)
            label = "clustered" if clustered else "spread"
            print(f"  {label:<9} ({len(feed.changed_key_groups()):>3} of {MAX_PARALLELISM} key"
                  f" groups read, {rows:,} change rows): feed {feed_time:.3f} s, full scan"
                  f" {scan:.3f} s = {feed_time / scan:.3f}x the scan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint-entries", type=int, default=5_000_000)
    parser.add_argument("--feed-entries", type=int, default=10_000_000)
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="statesource-incremental-")
    try:
        bench_checkpoints(args.checkpoint_entries, directory)
        bench_feed(args.feed_entries, directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()

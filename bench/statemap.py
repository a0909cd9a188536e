"""CopyOnWriteStateMap against a plain dict keyed by (key, namespace).

Run: python bench/statemap.py [--entries N] [--grow N] [--quick]

Every figure is a ratio against a baseline measured in the same run: a tiny class whose
get/put do ``self._d.get((k, ns))`` / ``self._d[(k, ns)] = s`` (Flink's nested-map state
table, in Python), so both sides pay one method call per operation. Raw inline dict
numbers are printed too. Figures: get / put (insert) / update throughput, the worst
single-operation latency while growing from empty, the synchronous snapshot pause
against ``dict.copy()``, and memory per entry (RSS growth, measured in a fresh process).
States are small ints, so the collector has nothing to track and the figures show the
structures themselves. ``end_to_end_figure`` is the hook for whole-backend figures.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from statesource.state.statemap import CopyOnWriteStateMap  # noqa: E402

NAMESPACE = "window"


class DictTable:
    """The baseline: a dict keyed by (key, namespace), behind methods like the map's."""

    __slots__ = ("_d",)

    def __init__(self) -> None:
        self._d: dict = {}

    def get(self, key, namespace):
        return self._d.get((key, namespace))

    def put(self, key, namespace, state) -> None:
        self._d[(key, namespace)] = state

    def __len__(self) -> int:
        return len(self._d)


def best_of(repeats: int, job: Callable[[], object]) -> float:
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        job()
        timings.append(time.perf_counter() - started)
    return min(timings)


def filled(table, keys: list[int]):
    put = table.put
    for key in keys:
        put(key, NAMESPACE, key)
    return table


def throughput(keys: list[int], order: list[int], repeats: int) -> None:
    n = len(keys)
    state_map = filled(CopyOnWriteStateMap(), keys)
    baseline = filled(DictTable(), keys)
    raw = baseline._d

    def gets(table) -> Callable[[], None]:
        def job() -> None:
            get = table.get
            for key in order:
                get(key, NAMESPACE)

        return job

    def updates(table) -> Callable[[], None]:
        def job() -> None:
            put = table.put
            for key in order:
                put(key, NAMESPACE, key)

        return job

    def raw_gets() -> None:
        get = raw.get
        for key in order:
            get((key, NAMESPACE))

    def raw_updates() -> None:
        for key in order:
            raw[(key, NAMESPACE)] = key

    def raw_inserts() -> None:
        fresh = {}
        for key in order:
            fresh[(key, NAMESPACE)] = key

    print(f"throughput, {n:,} keys, random order, best of {repeats} (higher ratio is better)")
    figures = [
        ("get", gets(state_map), gets(baseline), raw_gets),
        ("put (insert)", lambda: filled(CopyOnWriteStateMap(), order),
         lambda: filled(DictTable(), order), raw_inserts),
        ("update", updates(state_map), updates(baseline), raw_updates),
    ]
    for label, map_job, dict_job, raw_job in figures:
        map_time = best_of(repeats, map_job)
        dict_time = best_of(repeats, dict_job)
        raw_time = best_of(repeats, raw_job)
        print(
            f"  {label:13s} map {n / map_time / 1e6:5.2f} M/s = {dict_time / map_time:4.2f}x"
            f" dict class ({n / dict_time / 1e6:5.2f} M/s);"
            f" {raw_time / map_time:4.2f}x raw inline dict ({n / raw_time / 1e6:5.2f} M/s)"
        )


def grow_latency(table, n: int) -> tuple[float, float, int]:
    """Insert n keys one by one; return the worst and 99.99th percentile op time, ops > 1ms."""
    put = table.put
    clock = time.perf_counter
    worst = 0.0
    slow = 0
    samples = []
    keep = samples.append
    for key in range(n):
        started = clock()
        put(key, NAMESPACE, key)
        took = clock() - started
        if took > 1e-4:
            keep(took)
            if took > worst:
                worst = took
            if took > 1e-3:
                slow += 1
    samples.sort()
    rank = n // 10_000
    tail = samples[-rank] if 0 < rank <= len(samples) else 1e-4
    return worst, tail, slow


def latency_and_snapshots(grow: int, entries: int) -> None:
    print(f"growing from empty to {grow:,} keys, one timed put at a time")
    results = {}
    for label, factory in (("map", CopyOnWriteStateMap), ("dict", DictTable)):
        gc.collect()
        table = factory()
        results[label] = (table, *grow_latency(table, grow))
        _, worst, tail, slow = results[label]
        print(f"  {label:4s} worst {worst * 1e3:7.2f} ms, 99.99th pct {tail * 1e3:6.3f} ms,"
              f" {slow} ops over 1 ms")
    print(f"  worst-op ratio map/dict {results['map'][1] / results['dict'][1]:.3f}"
          " (lower is better; goal: map worst < 2 ms)")
    grown_map, grown_dict = results["map"][0], results["dict"][0]
    del results

    print("synchronous snapshot pause (lower ratio is better; goal <= 0.25x dict.copy())")
    for size in sorted({entries, grow}):
        if size == grow:
            state_map, raw = grown_map, grown_dict._d
        else:
            state_map = filled(CopyOnWriteStateMap(), list(range(size)))
            raw = filled(DictTable(), list(range(size)))._d
        pauses = []
        for _ in range(3):
            started = time.perf_counter()
            snapshot = state_map.snapshot()
            pauses.append(time.perf_counter() - started)
            snapshot.release()
        copy_time = best_of(3, raw.copy)
        print(f"  {size:>10,} entries: snapshot {min(pauses) * 1e3:7.2f} ms,"
              f" dict.copy() {copy_time * 1e3:7.2f} ms = {min(pauses) / copy_time:.3f}x")


def memory_child(kind: str, n: int) -> None:
    """Print the RSS growth per entry of building one structure (run in a fresh process)."""
    keys = list(range(n))
    gc.collect()
    before = rss_bytes()
    table = filled(CopyOnWriteStateMap() if kind == "map" else DictTable(), keys)
    gc.collect()
    print((rss_bytes() - before) / len(table))


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory(n: int) -> None:
    per_entry = {}
    for kind in ("map", "dict"):
        out = subprocess.run(
            [sys.executable, __file__, "--memory-child", kind, "--entries", str(n)],
            check=True, capture_output=True, text=True,
        ).stdout
        per_entry[kind] = float(out)
    print(f"memory per entry, {n:,} int keys (RSS growth; keys and states not counted):"
          f" map {per_entry['map']:.0f} B, dict {per_entry['dict']:.0f} B"
          f" = {per_entry['map'] / per_entry['dict']:.2f}x (lower is better)")


# -- hook for end-to-end figures -------------------------------------------------------


def end_to_end_figure(label: str, workload: Callable[[], object],
                      baseline: Callable[[], object], repeats: int = 3) -> None:
    """Print one whole-system figure: ``workload``'s time against ``baseline``'s.

    For a backend figure, pass e.g. a function driving a keyed backend through N
    state accesses, and the same accesses done on plain dicts.
    """
    work_time = best_of(repeats, workload)
    base_time = best_of(repeats, baseline)
    print(f"  {label}: {work_time:.3f} s = {base_time / work_time:.2f}x baseline"
          f" ({base_time:.3f} s)")


END_TO_END: list[tuple[str, Callable[[], object], Callable[[], object]]] = []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000_000,
                        help="keys for throughput, memory and the first snapshot figure")
    parser.add_argument("--grow", type=int, default=5_000_000,
                        help="keys for the growth-latency and second snapshot figure")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="100k entries, grow to 500k")
    parser.add_argument("--memory-child", choices=("map", "dict"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args.memory_child, args.entries)
        return
    if args.quick:
        args.entries, args.grow, args.repeats = 100_000, 500_000, 2
    print(f"Python {sys.version.split()[0]}; ratios are against the dict baseline of this run")
    keys = list(range(args.entries))
    order = keys[:]
    random.Random(42).shuffle(order)
    throughput(keys, order, args.repeats)
    latency_and_snapshots(args.grow, args.entries)
    memory(args.entries)
    if END_TO_END:
        print("end to end")
        for label, workload, baseline in END_TO_END:
            end_to_end_figure(label, workload, baseline, args.repeats)


if __name__ == "__main__":
    main()

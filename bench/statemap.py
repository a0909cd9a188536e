"""CopyOnWriteStateMap against a plain dict keyed by (key, namespace).

Run: python bench/statemap.py [--entries N] [--grow N] [--quick]

Every figure is a ratio against a baseline measured in the same run: a tiny class whose
get/put do ``self._d.get((k, ns))`` / ``self._d[(k, ns)] = s`` (Flink's nested-map state
table, in Python), so both sides pay one method call per operation; raw inline dict
numbers are printed too. Figures: get / put (insert) / update throughput; the worst
single-operation latency while growing from empty; the synchronous snapshot pause against
``dict.copy()``; memory per entry (RSS growth). States are small ints, so the garbage
collector has nothing to track and the figures show the structures themselves.

Growth and memory run in fresh processes, so that each starts with an untouched
allocator. One growth run first builds and frees a map: freeing big blocks raises glibc's
dynamic mmap threshold, after which growing a large list can ``realloc`` by copying; the
last run shows the same with the threshold pinned (``MALLOC_MMAP_THRESHOLD_``).
``end_to_end_figure`` is the hook for whole-backend figures.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from timing import best_of

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


def filled(table, keys: list[int]):
    put = table.put
    for key in keys:
        put(key, NAMESPACE, key)
    return table


def throughput(keys: list[int], order: list[int], repeats: int) -> None:
    """Get, insert and update throughput, then the snapshot pause at this size."""
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
        (
            "put (insert)",
            lambda: filled(CopyOnWriteStateMap(), order),
            lambda: filled(DictTable(), order),
            raw_inserts,
        ),
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
    pause = snapshot_pause(state_map)
    copy_time = best_of(repeats, raw.copy)
    print(
        f"synchronous snapshot at {n:,} entries: {pause * 1e3:.2f} ms,"
        f" dict.copy() {copy_time * 1e3:.2f} ms = {pause / copy_time:.3f}x (goal <= 0.25x)"
    )


def grow_latency(table, n: int) -> dict[str, float]:
    """Insert n keys one by one, timing each put in wall-clock and in thread CPU time.

    Preemption on a shared machine shows in wall-clock time only, so the CPU figures
    are the ones that describe the structure.
    """
    put = table.put
    wall = time.perf_counter
    cpu = time.thread_time
    worst_wall = worst_cpu = 0.0
    counts = dict.fromkeys(("wall>1ms", "wall>2ms", "cpu>1ms", "cpu>2ms"), 0)
    for key in range(n):
        started_wall = wall()
        started_cpu = cpu()
        put(key, NAMESPACE, key)
        took_cpu = cpu() - started_cpu
        took_wall = wall() - started_wall
        if took_cpu > worst_cpu:
            worst_cpu = took_cpu
        if took_wall > worst_wall:
            worst_wall = took_wall
        if took_wall > 1e-3:
            counts["wall>1ms"] += 1
            counts["wall>2ms"] += took_wall > 2e-3
            counts["cpu>1ms"] += took_cpu > 1e-3
            counts["cpu>2ms"] += took_cpu > 2e-3
    figures = {"worst wall": worst_wall, "worst cpu": worst_cpu}
    figures.update(counts)
    return figures


def snapshot_pause(state_map: CopyOnWriteStateMap, repeats: int = 3) -> float:
    pauses = []
    for _ in range(repeats):
        started = time.perf_counter()
        snapshot = state_map.snapshot()
        pauses.append(time.perf_counter() - started)
        snapshot.release()
    return min(pauses)


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def child(task: str, structure: str, n: int, warm_up: int) -> dict[str, float]:
    """One measurement in this (fresh) process; the parent reads the printed JSON."""
    if warm_up:
        filled(CopyOnWriteStateMap(), list(range(warm_up)))  # built, then freed
        gc.collect()
    if task == "memory":
        keys = list(range(n))
        gc.collect()
        before = rss_bytes()
        table = filled(CopyOnWriteStateMap() if structure == "map" else DictTable(), keys)
        gc.collect()
        return {"bytes per entry": (rss_bytes() - before) / len(table)}
    table = CopyOnWriteStateMap() if structure == "map" else DictTable()
    figures = grow_latency(table, n)
    if structure == "map":
        figures["pause"] = snapshot_pause(table)
    else:
        figures["pause"] = best_of(3, table._d.copy)
    return figures


def run_child(task: str, structure: str, n: int, warm_up: int = 0, env=None) -> dict:
    command = [sys.executable, __file__, "--child", task, structure, str(n), str(warm_up)]
    out = subprocess.run(
        command, check=True, capture_output=True, text=True, env={**os.environ, **(env or {})}
    ).stdout
    return json.loads(out)


def growth(grow: int, warm_up: int) -> None:
    print(f"growing from empty to {grow:,} keys, one timed put at a time (goal: worst op < 2 ms)")
    pinned = {"MALLOC_MMAP_THRESHOLD_": "131072"}
    runs = [
        ("dict", "dict", 0, None),
        ("map", "map", 0, None),
        (f"map after freeing a {warm_up:,}-entry map", "map", warm_up, None),
        ("  same, mmap threshold pinned", "map", warm_up, pinned),
    ]
    results = {}
    for label, structure, warm, env in runs:
        figures = run_child("latency", structure, grow, warm, env)
        results[label] = figures
        print(
            f"  {label:38s} CPU: worst {figures['worst cpu'] * 1e3:6.2f} ms,"
            f" {figures['cpu>1ms']:3d} ops > 1 ms, {figures['cpu>2ms']:3d} > 2 ms;"
            f" wall: worst {figures['worst wall'] * 1e3:6.2f} ms,"
            f" {figures['wall>1ms']:3d} > 1 ms, {figures['wall>2ms']:3d} > 2 ms"
        )
    base = results["dict"]
    for label, figures in results.items():
        if label != "dict":
            cpu = figures["worst cpu"] / max(base["worst cpu"], 1e-9)
            wall = figures["worst wall"] / max(base["worst wall"], 1e-9)
            print(f"  worst op / dict's: {label.strip():38s} CPU {cpu:.3f}x, wall {wall:.3f}x")
    pause = results["map"]["pause"]
    print(
        f"  synchronous snapshot at {grow:,} entries: {pause * 1e3:.2f} ms,"
        f" dict.copy() {base['pause'] * 1e3:.2f} ms = {pause / base['pause']:.3f}x"
        " (goal <= 0.25x)"
    )


def memory(n: int) -> None:
    per_entry = {kind: run_child("memory", kind, n)["bytes per entry"] for kind in ("map", "dict")}
    print(
        f"memory per entry, {n:,} int keys (RSS growth; keys and states not counted):"
        f" map {per_entry['map']:.0f} B, dict {per_entry['dict']:.0f} B"
        f" = {per_entry['map'] / per_entry['dict']:.2f}x (lower is better)"
    )


# -- hook for end-to-end figures -------------------------------------------------------


def end_to_end_figure(
    label: str, workload: Callable[[], object], baseline: Callable[[], object], repeats: int = 3
) -> None:
    """Print one whole-system figure: ``workload``'s time against ``baseline``'s.

    For a backend figure, pass e.g. a function driving a keyed backend through N
    state accesses, and the same accesses done on plain dicts.
    """
    work_time = best_of(repeats, workload)
    base_time = best_of(repeats, baseline)
    print(
        f"  {label}: {work_time:.3f} s = {base_time / work_time:.2f}x baseline ({base_time:.3f} s)"
    )


BACKEND_KEYS: dict[str, Callable[[int], object]] = {
    "string": lambda n: f"user-{n}",
    "long": lambda n: n,
    "double": lambda n: n / 7,
    "row<string,long>": lambda n: (f"user-{n}", n),
}
"""Key types of the end-to-end figure: cached ones (string, long) and ones canonicalised
to their Java-equality form on every ``set_current_key`` (double, row)."""


def backend_figure(records: int, repeats: int, key_type: str) -> None:
    """Records/s for ``set_current_key`` + ``ValueState.update`` over 100k keys of a type."""
    from statesource.state.descriptors import ValueStateDescriptor
    from statesource.state.keyed_backend import KeyedStateBackend

    rng = random.Random(7)
    make_key = BACKEND_KEYS[key_type]
    stream = [make_key(rng.randrange(100_000)) for _ in range(records)]

    def workload() -> None:
        backend = KeyedStateBackend(key_type, 128)
        state = backend.get_state(ValueStateDescriptor("counts", "long"))
        set_key, update = backend.set_current_key, state.update
        for i, key in enumerate(stream):
            set_key(key)
            update(i)

    def baseline() -> None:
        table: dict[tuple[object, None], int] = {}
        for i, key in enumerate(stream):
            table[(key, None)] = i

    work_time = best_of(repeats, workload)
    end_to_end_figure(
        f"set_current_key + ValueState.update, {records:,} records over 100k {key_type} keys"
        f" ({records / work_time / 1e6:.2f} M records/s)", workload, baseline, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--entries", type=int, default=1_000_000, help="keys for throughput, snapshot, memory"
    )
    parser.add_argument(
        "--grow", type=int, default=5_000_000, help="keys for the growth latency and snapshot"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="100k entries, grow to 500k")
    parser.add_argument("--backend-only", action="store_true",
                        help="only the end-to-end backend figures")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        task, structure, n, warm_up = args.child
        print(json.dumps(child(task, structure, int(n), int(warm_up))))
        return
    if args.quick:
        args.entries, args.grow, args.repeats = 100_000, 500_000, 2
    print(f"Python {sys.version.split()[0]}; ratios are against the dict baseline of this run")
    keys = list(range(args.entries))
    order = keys[:]
    random.Random(42).shuffle(order)
    if not args.backend_only:
        throughput(keys, order, args.repeats)
        growth(args.grow, warm_up=args.entries)
        memory(args.entries)
    print("end to end (baseline: the same writes into a dict keyed by (key, namespace))")
    for key_type in BACKEND_KEYS:
        backend_figure(args.entries, args.repeats, key_type)


if __name__ == "__main__":
    main()

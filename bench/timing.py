"""Timing shared by the benches: the best of several runs, as noise only ever adds time, and
Spark full scans timed that way."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def best_of(repeats: int, job: Callable[[], object]) -> float:
    """The shortest wall-clock time of ``repeats`` runs of ``job``, in seconds."""
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        job()
        timings.append(time.perf_counter() - started)
    return min(timings)


def spark_scans(routes: dict[str, Callable[[str], Any]], states: list[str],
                repeats: int) -> dict[str, float]:
    """The best time of each route's full scan of every state (a DataFrame per state name,
    written to Spark's ``noop`` sink), after one scan to warm up: the first job pays for
    starting Python workers."""
    seconds = {}
    for label, read in routes.items():
        def scan(read: Callable[[str], Any] = read) -> None:
            for name in states:
                read(name).write.format("noop").mode("overwrite").save()
        scan()
        seconds[label] = best_of(repeats, scan)
    return seconds


def print_scans(seconds: dict[str, float], what: str) -> None:
    """Each route's time from :func:`spark_scans`, and its ratio to the ``Parquet`` route's."""
    for label, taken in seconds.items():
        print(f"Spark local[2] full scan, {what}, {label}: {taken:.2f} s:"
              f" {taken / seconds['Parquet']:.2f}x of Parquet")

"""Timing shared by the benches: the best of several runs, as noise only ever adds time."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_of(repeats: int, job: Callable[[], object]) -> float:
    """The shortest wall-clock time of ``repeats`` runs of ``job``, in seconds."""
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        job()
        timings.append(time.perf_counter() - started)
    return min(timings)

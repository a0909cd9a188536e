"""A migration's scan on every core: runs of an operator's key groups in worker processes.

Re-encoding Kryo 2 values (:mod:`~statesource.flink.serializers.kryo_columns`) is Python
and numpy: one process, one core. Where the keyed state of an operator to re-encode is
large, its key groups are cut into contiguous runs of about equal bytes, and each run is
scanned whole by a worker process (reading its key groups from the files itself, framing,
transcoding and keeping what it made), so that nothing but what it kept crosses between
processes. The parent takes the runs' results in their order, so what the scan keeps, the
classes recorded and the states refused are those of a scan in one process.

A run whose worker failed (a fault in its values, which the parent must name as a scan in
one process would; a worker that died; a result that could not be handed back) is scanned
again by the parent. Workers are forked, not spawned (a spawned worker would import
statesource first: a second or more), and only from a process with a single thread
(forking a threaded process, a Spark driver's, can leave a lock held forever in the
child). Else, on one core, or for a small operator, the scan stays in one process.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
Run = tuple[int, int]
"""Key groups ``[first, end)`` of an operator, in the order a scan reads them."""
WORKER_BYTES = 4 << 20
"""An operator's keyed state smaller than this is scanned in one process (starting
workers costs more than it saves)."""
MAX_WORKERS = 8
RUNS_PER_WORKER = 4
"""Runs a worker scans one after another: what it kept of one is handed back (and taken
in by the parent) while it scans the next."""

_SCAN: list[Callable[[int, int], Any]] = []
"""What a worker runs (set before the workers are forked: each has its own copy)."""


def worker_count(size: int) -> int:
    """Workers for an operator of ``size`` keyed bytes: 0 where the scan stays in one
    process."""
    if size < WORKER_BYTES or threading.active_count() != 1:
        return 0
    if "fork" not in multiprocessing.get_all_start_methods():
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    workers = min(cores or 1, MAX_WORKERS)
    return workers if workers > 1 else 0


def runs(sizes: list[int], count: int) -> list[Run]:
    """``count`` contiguous runs (at most) of the key groups of ``sizes`` bytes, each of
    about the same bytes."""
    total = sum(sizes)
    if count < 2 or not total:
        return [(0, len(sizes))] if sizes else []
    cuts, done = [0], 0
    for index, size in enumerate(sizes):
        done += size
        if done * count >= total * len(cuts) and index + 1 < len(sizes):
            cuts.append(index + 1)
    cuts.append(len(sizes))
    return [(first, end) for first, end in zip(cuts, cuts[1:]) if end > first]


def in_workers(scan: Callable[[int, int], T], parts: list[Run], workers: int
               ) -> list[T | None]:
    """``scan`` of each run, in ``workers`` forked workers, in the runs' order; None where
    the worker failed (the caller scans that run itself)."""
    _SCAN[:] = [scan]
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
    try:
        futures = [pool.submit(_scan, first, end) for first, end in parts]
        results: list[T | None] = []
        for future in futures:
            try:
                results.append(future.result())
            except Exception:  # noqa: BLE001 - any failure: the parent scans the run again
                results.append(None)
        return results
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _SCAN.clear()


def _scan(first: int, end: int) -> Any:
    return _SCAN[0](first, end)

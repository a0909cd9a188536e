"""A migration's scan on every core: the fast path of re-encoding in worker processes.

Transcoding Kryo 2 values (:mod:`~statesource.flink.serializers.kryo_transcode`) is pure
Python: one process, one core. Where the keyed state of an operator to re-encode is large,
its key groups' values go, in chunks, to worker processes, each running the states' fast
paths (with their own memory of values met). The parent reads the source and takes the
results back in the order it read them, so what the scan keeps, the element classes it
records of POJO collection fields and the first fault it reports are those of a scan in
one process. What the fast path leaves, the exact path's values and every fault, stays the
parent's.

Workers are forked, not spawned (a spawned worker would import statesource first: a second
or more), and only from a process with a single thread (forking a threaded process, a Spark
driver's, can leave a lock held forever in the child). Else, on one core, or for a small
operator, the scan stays in one process. A worker that dies leaves the rest to the parent.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from statesource.flink.serializers.kryo_columns import Batch
from statesource.flink.serializers.kryo_migration import Kryo2Collection

WORKER_BYTES = 4 << 20
"""An operator's keyed state smaller than this is scanned in one process (starting
workers, and handing values over, costs more than it saves)."""
MAX_WORKERS = 8
CHUNK = 4096
"""Values handed to a worker at once (a key group of more is split)."""
IN_FLIGHT = 3
"""Chunks queued per worker while the parent reads on."""

Pairs = list[tuple[bytes, bytes]]
Fast = dict[str, tuple[Batch, list[Kryo2Collection]]]
"""Per state: its fast path (of a chunk of values), and the POJO collection fields whose
classes it records."""
Scanned = tuple[str, int, str, Pairs, "list[bytes | None] | None"]
"""``(state, key group, source, pairs, transcoded)``: transcoded None where no worker ran."""
Found = tuple[list["bytes | None"], list[dict[str, set[str]]]]

_STATES: Fast = {}
"""A worker's fast paths, by state (set once, as it starts: forked, each its own copy and
its own memory of the values met)."""


def _start(fast: Fast) -> None:
    _STATES.update(fast)


def _transcode(state: str, values: list[bytes]) -> Found:
    """A chunk's 2.x bytes (None: left to the exact path), and the element classes its
    values showed of each collection field (forgotten here once told)."""
    batch, fields = _STATES[state]
    written = batch(values)
    found = [{role: set(classes) for role, classes in field.classes.items()}
             for field in fields]
    for field in fields:
        for classes in field.classes.values():
            classes.clear()
    return written, found


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


def in_workers(items: Iterator[tuple[str, int, str, Pairs]], fast: Fast, workers: int
               ) -> Iterator[Scanned]:
    """``items`` in their order, each with what the workers' fast paths made of its values
    (element classes recorded into ``fast``'s fields as each item is handed on)."""
    if workers < 2 or not fast:
        for item in items:
            yield (*item, None)
        return
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                               initializer=_start, initargs=(fast,))
    pending: deque[tuple[tuple[str, int, str, Pairs], list[Future[Found]] | None]] = deque()
    broken = False
    try:
        for item in items:
            state, _, _, pairs = item
            chunks = None
            if state in fast and not broken:
                try:
                    chunks = [pool.submit(_transcode, state, [v for _, v in pairs[at:at + CHUNK]])
                              for at in range(0, len(pairs), CHUNK)]
                except BrokenProcessPool:
                    broken = True
            pending.append((item, chunks))
            while len(pending) > IN_FLIGHT * workers:
                yield _taken(*pending.popleft(), fast)
        while pending:
            yield _taken(*pending.popleft(), fast)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _taken(item: tuple[str, int, str, Pairs], chunks: list[Future[Found]] | None,
           fast: Fast) -> Scanned:
    if chunks is None:
        return (*item, None)
    written: list[bytes | None] = []
    fields = fast[item[0]][1]
    try:
        for chunk in chunks:
            values, found = chunk.result()
            written += values
            for field, roles in zip(fields, found):
                for role, classes in roles.items():
                    field.classes[role] |= classes
    except BrokenProcessPool:  # a worker died: this item is the parent's, as it was read
        return (*item, None)
    return (*item, written)

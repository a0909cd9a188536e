"""Spark partitions of a keyed-state scan: contiguous key-group slices of Flink's ranges.

Partitions follow Flink's key-group ranges for the requested parallelism:
adjacent subtask ranges are merged until a partition holds about
``TARGET_ROWS`` rows (every Spark task costs a Python worker round trip), and a
larger subtask range is split at key-group boundaries. Kept free of pyspark so
the JVM reader's planner and the tests use it without a session.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from statesource.keygroups import KeyGroupRange, key_group_range_for_operator

TARGET_ROWS = 1 << 21


@dataclass(frozen=True)
class KeyGroupSlice:
    """One Spark partition: a key-group range, optionally thinned to listed key groups."""

    start: int
    end: int
    only: tuple[int, ...] | None = field(default=None)

    def key_groups(self) -> KeyGroupRange | tuple[int, ...]:
        return KeyGroupRange(self.start, self.end) if self.only is None else self.only


def plan_slices(rows: Mapping[int, int], max_parallelism: int, parallelism: int,
                allowed: set[int] | None, cores: int | None = None) -> list[KeyGroupSlice]:
    """Contiguous key-group slices covering every (allowed) key group exactly once.

    ``rows`` weighs each non-empty key group (rows; a Flink snapshot's bytes).
    The slice count is the rows over ``TARGET_ROWS``, rounded up to a multiple
    of ``cores`` (default: this machine's) so that no wave of tasks runs
    half empty; slices end at subtask boundaries where they can.
    """
    total = sum(n for kg, n in rows.items() if allowed is None or kg in allowed)
    cores = cores or os.cpu_count() or 1
    count = -(-total // TARGET_ROWS)
    if count > 1:
        count = -(-count // cores) * cores
    target = max(1, -(-total // max(count, 1)))
    slices: list[KeyGroupSlice] = []
    pending: list[int] = []
    pending_rows = 0

    def flush() -> None:
        nonlocal pending, pending_rows
        if pending:
            whole = allowed is None or len(pending) == pending[-1] - pending[0] + 1
            slices.append(KeyGroupSlice(pending[0], pending[-1],
                                        None if whole else tuple(pending)))
        pending, pending_rows = [], 0

    for index in range(parallelism):
        owned = key_group_range_for_operator(max_parallelism, parallelism, index)
        for key_group in owned:
            if allowed is not None and key_group not in allowed:
                continue
            if pending_rows >= target:
                flush()
            pending.append(key_group)
            pending_rows += rows.get(key_group, 0)
        if pending_rows >= target:
            flush()
    flush()
    return slices

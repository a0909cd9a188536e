"""How keyed state spreads over key groups and subtasks, from checkpoint metadata alone.

This is the picture an operator looks at before rescaling: a subtask owns a
contiguous run of key groups, so a few heavy key groups can make one subtask
much busier than the rest, whatever the parallelism.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from statesource.format.metadata import OperatorMeta
from statesource.keygroups import check_parallelism, operator_index_for_key_group


@dataclass(frozen=True)
class Distribution:
    """Amounts per key group (index = key group) of one operator's keyed state."""

    rows: list[int]
    bytes: list[int]

    @classmethod
    def of(cls, op: OperatorMeta) -> Distribution:
        rows = [0] * op.max_parallelism
        size = [0] * op.max_parallelism
        for state in op.keyed_states:
            for _, location in state.key_group_locations():
                rows[location.key_group] += location.rows
                size[location.key_group] += location.length
        return cls(rows, size)

    def per_subtask(self, amounts: list[int], parallelism: int) -> list[int]:
        """``amounts`` per key group summed over the key groups each subtask would own."""
        max_parallelism = len(amounts)
        check_parallelism(parallelism, max_parallelism)
        totals = [0] * parallelism
        for key_group, amount in enumerate(amounts):
            totals[operator_index_for_key_group(max_parallelism, parallelism, key_group)] += amount
        return totals


def imbalance(amounts: Sequence[float]) -> float:
    """Largest over mean: 1.0 is perfectly even, 2.0 means one part carries twice its share."""
    mean = statistics.fmean(amounts) if amounts else 0.0
    return max(amounts) / mean if mean else 1.0

"""What a rescale tells its user before it commits: how the state spreads now and after."""

from __future__ import annotations

from collections.abc import Iterator

from statesource.format.metadata import OperatorMeta
from statesource.skew import Distribution, KeyGroupBalance, describe_per_subtask


def describe_rescale(op: OperatorMeta, parallelism: int) -> Iterator[str]:
    """Lines describing operator ``op`` rescaled to ``parallelism``: rows per subtask now and
    after with their max/mean skew (as ``inspect`` counts them), and how evenly the key
    groups split."""
    yield (f"operator {op.uid}: parallelism {op.parallelism} -> {parallelism}"
           f" (max parallelism {op.max_parallelism:,})")
    if op.keyed_states:
        distribution = Distribution.of(op)
        for label, subtasks in (("now", op.parallelism), ("after", parallelism)):
            totals = distribution.per_subtask(distribution.rows, subtasks)
            yield (f"  rows per subtask {label} (all keyed states):"
                   f" {describe_per_subtask(totals)}")
        balance = KeyGroupBalance(op.max_parallelism, parallelism)
        yield f"  key groups per subtask after: {balance.describe()}"
        files = len({f.path for state in op.keyed_states for f in state.files})
        yield (f"  keyed states {', '.join(s.name for s in op.keyed_states)}: {files} data"
               " files carried over by reference")
    for meta in op.operator_states:
        yield f"  operator state {meta.name} ({meta.mode.value}): {meta.rows:,} rows"

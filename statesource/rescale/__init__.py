"""Offline rescaling: a checkpoint restated for another parallelism.

A new parallelism changes only which subtask reads which key groups, so
:func:`rescale_parallelism` writes a checkpoint whose keyed states share the
old data files (no bytes copied) and whose operator states are redistributed
by Flink's rules. It works on the format alone: metadata, the format's
operator-state writer and its commit. See docs/RESCALE.md.
"""

from statesource.rescale.operator_states import rescale_operator_states, stored_shares
from statesource.rescale.parallelism import rescale_parallelism
from statesource.rescale.publish import OperatorRescale, commit_rescaled
from statesource.rescale.report import describe_rescale
from statesource.rescale.target import RescaleTarget, check_parallelism_for, plan_target

__all__ = [
    "OperatorRescale",
    "RescaleTarget",
    "check_parallelism_for",
    "commit_rescaled",
    "describe_rescale",
    "plan_target",
    "rescale_operator_states",
    "rescale_parallelism",
    "stored_shares",
]

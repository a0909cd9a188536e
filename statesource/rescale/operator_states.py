"""Operator states at a new parallelism, stored so that a restore sees Flink's result once.

Split and broadcast state are stored as Flink's redistribution
(:func:`statesource.redistribution.redistribute_operator`) hands them to the new
subtasks: restoring at the new parallelism then keeps each subtask's share,
exactly as Flink keeps split state when the parallelism does not change.

Union state is different. A subtask's stored share is its *contribution*,
and every restore hands each subtask the union of all contributions, even at
unchanged parallelism. Storing the union on every new subtask would make the
next restore see every element ``P`` times; so the contributions are kept,
in order, and only moved when their subtask no longer exists: subtask ``i``
keeps its own, the contributions of removed subtasks join the last remaining
one, and added subtasks contribute nothing. Restoring then gives every
subtask the union, once, in the original order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from statesource.format.datafile import write_operator_state
from statesource.format.metadata import OperatorMeta
from statesource.format.operator_state_meta import OperatorStateMeta
from statesource.format.reader import Checkpoint
from statesource.format.storage import Location, new_data_file
from statesource.model import DistributionMode
from statesource.redistribution import OldOperatorState, redistribute_operator


def stored_shares(old: Sequence[OldOperatorState], parallelism: int) -> dict[str, list[Any]]:
    """What each of ``parallelism`` subtasks stores after the rescale, per state name.

    Split and broadcast states are redistributed together by Flink's rules (split
    states continue one another's round robin); union states keep their
    contributions (see the module).
    """
    redistributed = redistribute_operator(old, parallelism)
    for state in old:
        if state.mode is DistributionMode.UNION:
            redistributed[state.name] = _union_contributions(state.shares, parallelism)
    return redistributed


def _union_contributions(shares: Sequence[Any], parallelism: int) -> list[Any]:
    if parallelism >= len(shares):
        return [list(share) for share in shares] + [[] for _ in range(parallelism - len(shares))]
    last = [element for share in shares[parallelism - 1:] for element in share]
    return [list(share) for share in shares[:parallelism - 1]] + [last]


def rescale_operator_states(source: Checkpoint, op: OperatorMeta, parallelism: int,
                            checkpoint_id: int, written: list[Location]
                            ) -> tuple[OperatorStateMeta, ...]:
    """Operator ``op``'s operator states for ``parallelism``, as checkpoint ``checkpoint_id``
    records them.

    A state whose shares stay as they are is carried over by reference; any other
    is written to a new file of the new checkpoint, appended to ``written`` first so
    that a failed rescale can remove it.
    """
    old = source.operator_states_as_left(op.uid)
    stored = stored_shares(old, parallelism)
    metas = []
    for meta, left in zip(op.operator_states, old):
        if parallelism == op.parallelism and stored[meta.name] == list(left.shares):
            metas.append(meta)
            continue
        target, relative = new_data_file(source.root, checkpoint_id, f"{op.uid}.op.{meta.name}")
        written.append(target)
        metas.append(write_operator_state(target, relative, meta.name, meta.mode, meta.schemas,
                                          enumerate(stored[meta.name])))
    return tuple(metas)

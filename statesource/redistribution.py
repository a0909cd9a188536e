"""How operator state is redistributed when a job is rescaled.

Operator state belongs to a parallel subtask, not to a key, so a rescale cannot
route it by key group. Flink instead declares, per state, how its content is
spread over the new subtasks (``OperatorStateHandle.Mode``) and applies the
rules of its ``RoundRobinOperatorStateRepartitioner``:

* split-distribute list state: all elements, in old-subtask order, are cut into
  contiguous slices whose sizes differ by at most one (the larger ones first);
  when the parallelism does not change, every subtask keeps exactly what it had;
* union list state: every new subtask receives every element;
* broadcast state: every old copy is meant to be identical, so new subtask ``i``
  simply takes the copy of old subtask ``i % old_parallelism``.

The functions return new containers; the elements themselves are shared.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from statesource.checks import check_int
from statesource.errors import InvalidArgumentError
from statesource.model import DistributionMode

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")


def _check_parallelism(new_parallelism: int) -> None:
    check_int(new_parallelism, "new parallelism", 1)


def _check_list_subtasks(old: Sequence[Sequence[Any]]) -> None:
    """Reject an empty old layout and subtask contents that are not element sequences.

    A string is a sequence too, but passing one is always a mistake here: slicing
    would spread its characters over the subtasks.
    """
    if isinstance(old, (str, bytes)) or not isinstance(old, Sequence):
        raise InvalidArgumentError(
            f"old state must be a sequence of per-subtask element lists, got {old!r}"
        )
    if not old:
        raise InvalidArgumentError("old state must hold at least one subtask, got none")
    for index, elements in enumerate(old):
        if isinstance(elements, (str, bytes)) or not isinstance(elements, Sequence):
            raise InvalidArgumentError(
                f"old subtask {index} must hold a sequence of elements, got {elements!r}"
            )


def redistribute_split(old: Sequence[Sequence[T]], new_parallelism: int) -> list[list[T]]:
    """Cut the elements of all old subtasks into ``new_parallelism`` contiguous slices.

    With ``N`` elements, every new subtask gets ``N // new_parallelism`` of them and
    the first ``N % new_parallelism`` subtasks one more, so the elements keep their
    old-subtask order when the slices are read one after the other. When the
    parallelism is unchanged Flink returns the previous assignment as it was, even
    if it is uneven: there is nothing to repartition.
    """
    _check_parallelism(new_parallelism)
    _check_list_subtasks(old)
    if len(old) == new_parallelism:
        return [list(elements) for elements in old]
    everything = [element for elements in old for element in elements]
    base, extra = divmod(len(everything), new_parallelism)
    result = []
    start = 0
    for subtask in range(new_parallelism):
        end = start + base + (1 if subtask < extra else 0)
        result.append(everything[start:end])
        start = end
    return result


def redistribute_union(old: Sequence[Sequence[T]], new_parallelism: int) -> list[list[T]]:
    """Give every new subtask all elements of all old subtasks, in old-subtask order.

    Flink unions this state even when the parallelism does not change: the point of
    union list state is that each subtask sees the global content on restore.
    """
    _check_parallelism(new_parallelism)
    _check_list_subtasks(old)
    everything = [element for elements in old for element in elements]
    return [list(everything) for _ in range(new_parallelism)]


def redistribute_broadcast(
    old: Sequence[Mapping[K, V]], new_parallelism: int
) -> list[dict[K, V]]:
    """Give new subtask ``i`` a copy of old subtask ``i % len(old)``'s map.

    Broadcast state is written identically on every subtask, so any copy will do;
    Flink picks them round-robin rather than merging them, and so does this.
    """
    _check_parallelism(new_parallelism)
    if isinstance(old, (str, bytes)) or not isinstance(old, Sequence):
        raise InvalidArgumentError(
            f"old broadcast state must be a sequence of per-subtask maps, got {old!r}"
        )
    if not old:
        raise InvalidArgumentError("old broadcast state must hold at least one subtask, got none")
    for index, entries in enumerate(old):
        if not isinstance(entries, Mapping):
            raise InvalidArgumentError(
                f"old subtask {index} of broadcast state must hold a mapping, got {entries!r}"
            )
    return [dict(old[subtask % len(old)]) for subtask in range(new_parallelism)]


def redistribute(mode: DistributionMode, old: Sequence[Any], new_parallelism: int) -> list[Any]:
    """Redistribute one state's per-subtask content according to its mode."""
    if mode is DistributionMode.SPLIT_DISTRIBUTE:
        return redistribute_split(old, new_parallelism)
    if mode is DistributionMode.UNION:
        return redistribute_union(old, new_parallelism)
    if mode is DistributionMode.BROADCAST:
        return redistribute_broadcast(old, new_parallelism)
    raise InvalidArgumentError(
        f"distribution mode must be one of {[m.name for m in DistributionMode]}, got {mode!r}"
    )

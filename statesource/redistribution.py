"""How operator state is redistributed when a job is rescaled.

Operator state belongs to a parallel subtask, not to a key, so a rescale cannot
route it by key group. Flink instead declares, per state, how its content is
spread over the new subtasks (``OperatorStateHandle.Mode``) and applies the
rules of its ``RoundRobinOperatorStateRepartitioner``:

* split-distribute list state: all elements, in old-subtask order, are cut into
  contiguous slices whose sizes differ by at most one. The states of one operator
  are cut one after the other, in the iteration order of the Java ``HashMap`` that
  Flink groups them by name in, and each continues the round robin where the
  previous one's larger slices ran out, so that the extra elements of many small
  states do not all land on subtask 0. When the parallelism does not change, every
  subtask keeps exactly what it had;
* union list state: every new subtask receives every element;
* broadcast state: every old copy is meant to be identical, so new subtask ``i``
  takes the copy of the ``i % n``-th of the ``n`` old subtasks that hold the state.

:func:`redistribute_operator` applies these rules to all states of an operator at
once, as Flink does (the split states depend on each other); the per-mode functions
handle one state alone. They return new containers; the elements themselves are shared.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from statesource.checks import check_int
from statesource.errors import InvalidArgumentError
from statesource.model import DistributionMode
from statesource.types import STRING

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

    This is the first (or only) split-distribute state of an operator; see
    :func:`redistribute_operator` for the others. With ``N`` elements, every new
    subtask gets ``N // new_parallelism`` of them and the first ``N % new_parallelism``
    subtasks one more, so the elements keep their old-subtask order when the slices
    are read one after the other. When the parallelism is unchanged Flink returns
    the previous assignment as it was, even if it is uneven: there is nothing to
    repartition.
    """
    _check_parallelism(new_parallelism)
    _check_list_subtasks(old)
    if len(old) == new_parallelism:
        return [list(elements) for elements in old]
    return _split_round_robin(old, new_parallelism, 0)[0]


def _split_round_robin(old: Sequence[Sequence[T]], new_parallelism: int,
                       start: int) -> tuple[list[list[T]], int]:
    """Slices for new subtasks ``start, start + 1, ...`` (wrapping), and the next start.

    The first ``N % new_parallelism`` subtasks visited get the larger slices; the
    next state starts at the first subtask that got a smaller one (or at ``start``
    again when the elements divide evenly), as Flink's repartitioner does.
    """
    everything = [element for elements in old for element in elements]
    base, extra = divmod(len(everything), new_parallelism)
    result: list[list[T]] = [[] for _ in range(new_parallelism)]
    next_start = start
    taken = 0
    for step in range(new_parallelism):
        subtask = (start + step) % new_parallelism
        if step == extra:
            next_start = subtask
        size = base + (1 if step < extra else 0)
        result[subtask] = everything[taken:taken + size]
        taken += size
    return result, next_start


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
    old: Sequence[Mapping[K, V]], new_parallelism: int, holders: Sequence[int] | None = None
) -> list[dict[K, V]]:
    """Give new subtask ``i`` the map of the ``i % n``-th of the ``n`` holders.

    ``holders`` are the old subtasks that hold the state, in ascending order (all of
    them when None); a subtask that never registered it holds none, even empty.
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
    holding = _check_holders(holders, len(old))
    return [dict(old[holding[subtask % len(holding)]]) for subtask in range(new_parallelism)]


def _check_holders(holders: Sequence[int] | None, old_parallelism: int) -> list[int]:
    if holders is None:
        return list(range(old_parallelism))
    holding = list(holders)
    if (not holding or holding != sorted(set(holding))
            or not all(type(h) is int and 0 <= h < old_parallelism for h in holding)):
        raise InvalidArgumentError(
            f"holders {holders!r} must be distinct ascending old subtask indexes in"
            f" [0, {old_parallelism}), at least one"
        )
    return holding


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


@dataclass(frozen=True)
class OldOperatorState:
    """One operator state as the old subtasks left it: what a rescale redistributes.

    ``shares`` has one entry per old subtask (a list, or a mapping for broadcast
    state); ``holders`` are the old subtasks that registered the state (None: all),
    which matters for broadcast state and for the order of split-distribute states.
    """

    name: str
    mode: DistributionMode
    shares: Sequence[Any]
    holders: Sequence[int] | None = None


def redistribute_operator(states: Sequence[OldOperatorState],
                          new_parallelism: int) -> dict[str, list[Any]]:
    """Every state of one operator, redistributed together: name -> per new subtask.

    Split-distribute states are cut in :func:`split_state_order` and each continues
    the round robin where the previous one left off. At unchanged parallelism split
    states stay in place, union states are still unioned, and a broadcast state that
    some subtasks lack is handed round-robin from its holders to those subtasks.
    """
    _check_parallelism(new_parallelism)
    if not states:
        return {}
    old_parallelism = len(states[0].shares)
    for state in states:
        if len(state.shares) != old_parallelism:
            raise InvalidArgumentError(
                f"operator state {state.name!r} has {len(state.shares)} old shares, state"
                f" {states[0].name!r} {old_parallelism}: every state needs one per old subtask"
            )
    result: dict[str, list[Any]] = {}
    split = [s for s in states if s.mode is DistributionMode.SPLIT_DISTRIBUTE]
    start = 0
    for state in split_state_order(split):
        if old_parallelism == new_parallelism:
            result[state.name] = redistribute_split(state.shares, new_parallelism)
            continue
        _check_list_subtasks(state.shares)
        result[state.name], start = _split_round_robin(state.shares, new_parallelism, start)
    for state in states:
        if state.mode is DistributionMode.UNION:
            result[state.name] = redistribute_union(state.shares, new_parallelism)
        elif state.mode is DistributionMode.BROADCAST:
            result[state.name] = _broadcast(state, old_parallelism, new_parallelism)
        elif state.mode is not DistributionMode.SPLIT_DISTRIBUTE:
            raise InvalidArgumentError(
                f"operator state {state.name!r}: distribution mode must be one of"
                f" {[m.name for m in DistributionMode]}, got {state.mode!r}"
            )
    return result


def _broadcast(state: OldOperatorState, old_parallelism: int,
               new_parallelism: int) -> list[dict[Any, Any]]:
    """At unchanged parallelism a holder keeps its own copy; otherwise round robin."""
    spread = redistribute_broadcast(state.shares, new_parallelism, state.holders)
    if old_parallelism == new_parallelism:
        holders = _check_holders(state.holders, old_parallelism)
        for subtask in holders:
            spread[subtask] = dict(state.shares[subtask])
    return spread


def split_state_order(states: Sequence[OldOperatorState]) -> list[OldOperatorState]:
    """Split-distribute states in the order Flink's repartitioner cuts them.

    Flink groups them by name in a ``java.util.HashMap`` and iterates that: by bucket
    (the name's ``String.hashCode`` spread as ``h ^ (h >>> 16)``, masked to the table
    size, which starts at 16 and doubles while more than 3/4 full), and within a
    bucket newest first: Flink adds names with ``computeIfAbsent``, which puts a new
    entry at the head of its bucket. Names are added as they are first met walking
    the old subtasks in order; within one subtask statesource takes them by name
    (Flink follows the subtask's own snapshot map there, which a checkpoint does not
    record, so two split-distribute names sharing a bucket may be cut in either order).
    """
    capacity = 16
    while len(states) > capacity * 3 // 4:
        capacity *= 2

    def first_met(state: OldOperatorState) -> tuple[int, str]:
        holders = _check_holders(state.holders, len(state.shares))
        return holders[0], state.name

    newest_first = sorted(states, key=first_met, reverse=True)
    return sorted(newest_first, key=lambda state: _java_hash_map_bucket(state.name, capacity))


def _java_hash_map_bucket(name: str, capacity: int) -> int:
    h = STRING.java_hash(name) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & (capacity - 1)

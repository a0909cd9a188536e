"""How keyed state spreads over key groups and subtasks, from checkpoint metadata alone.

This is the picture an operator looks at before rescaling: a subtask owns a
contiguous run of key groups, so a few heavy key groups can make one subtask
much busier than the rest, whatever the parallelism. Independently of the
data, the key groups themselves split evenly only when the parallelism
divides the max parallelism (:class:`KeyGroupBalance`).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from statesource.format.metadata import OperatorMeta
from statesource.keygroups import check_parallelism, key_group_range_for_operator

_SHOWN_SUBTASKS = 8


@dataclass(frozen=True)
class Distribution:
    """Amounts per key group (index = key group) of one operator's keyed state.

    Delta runs (format version 4) count as stored: their rows, bytes and entries are
    added to the base's, an upper bound of what merging them leaves.
    """

    rows: list[int]
    bytes: list[int]
    entries: list[int]
    """Distinct (key, namespace) pairs, summed over the operator's keyed states."""

    @classmethod
    def of(cls, op: OperatorMeta) -> Distribution:
        rows = [0] * op.max_parallelism
        size = [0] * op.max_parallelism
        entries = [0] * op.max_parallelism
        for state in op.keyed_states:
            runs = [location for delta in state.delta_files for location in delta.file.locations]
            for location in [*(loc for _, loc in state.key_group_locations()), *runs]:
                rows[location.key_group] += location.rows
                size[location.key_group] += location.length
                entries[location.key_group] += location.entries
        return cls(rows, size, entries)

    def per_subtask(self, amounts: list[int], parallelism: int) -> list[int]:
        """``amounts`` per key group summed over the key groups each subtask would own."""
        max_parallelism = len(amounts)
        check_parallelism(parallelism, max_parallelism)
        ranges = (key_group_range_for_operator(max_parallelism, parallelism, subtask)
                  for subtask in range(parallelism))
        return [sum(amounts[owned.start:owned.end + 1]) for owned in ranges]


@dataclass(frozen=True)
class StateCounts:
    """One state as ``inspect`` lists it: its kind, what it holds, and its value types.

    ``entries``, ``rows`` and ``size_bytes`` are None where they could not be
    counted, and ``unreadable`` then says why.
    """

    name: str
    kind: str
    entries: int | None
    rows: int | None
    size_bytes: int | None
    types: Mapping[str, Any]
    """The Avro schema of each value role (a timer state: its namespace type's name)."""
    unreadable: str | None = None


@dataclass(frozen=True)
class OperatorCounts:
    """One operator as ``inspect`` shows it, whatever kind of snapshot holds it: its states'
    counts and, when it keeps keyed state, how that spreads over key groups.

    ``skew_by`` names the amount of :attr:`distribution` the skew is told in
    (``"rows"``, or ``"bytes"`` where some keyed state's rows could not be
    counted) and ``skew_of`` what it covers; ``notes`` are lines on how the
    counts were taken. ``name`` is a Flink operator's name, ``operator_id`` its hex id
    (None in a statesource checkpoint, whose operators have a uid alone).
    """

    uid: str
    label: str
    parallelism: int
    max_parallelism: int
    key_type: str | None
    states: tuple[StateCounts, ...]
    distribution: Distribution | None
    skew_by: str = "rows"
    skew_of: str = "rows of all keyed states"
    notes: tuple[str, ...] = ()
    name: str | None = None
    operator_id: str | None = None

    @classmethod
    def of(cls, op: OperatorMeta) -> OperatorCounts:
        """A statesource checkpoint's operator, counted by its metadata."""
        states = [StateCounts(s.name, s.kind.value, s.entries, s.rows, s.size_bytes,
                              _avro(s.schemas)) for s in op.keyed_states]
        states += [StateCounts(s.name, f"operator-{s.mode.value}", s.rows, s.rows, s.size_bytes,
                               _avro(s.schemas)) for s in op.operator_states]
        return cls(op.uid, op.uid, op.parallelism, op.max_parallelism,
                   op.key_type.name if op.key_type else None, tuple(states),
                   Distribution.of(op) if op.keyed_states else None)

    @property
    def skew_amounts(self) -> list[int]:
        """Per key group, the amount the skew is told in."""
        assert self.distribution is not None
        return self.distribution.bytes if self.skew_by == "bytes" else self.distribution.rows


def _avro(schemas: Mapping[str, Any]) -> dict[str, Any]:
    return {role: schema.avro for role, schema in schemas.items()}


def format_bytes(size: float) -> str:
    """``98.5 KiB``: a size in the largest binary unit (1024-based, as its name says) that
    keeps it at least 1, up to GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def imbalance(amounts: Sequence[float]) -> float:
    """Largest over mean: 1.0 is perfectly even, 2.0 means one part carries twice its share."""
    mean = statistics.fmean(amounts) if amounts else 0.0
    return max(amounts) / mean if mean else 1.0


def describe_per_subtask(totals: Sequence[int]) -> str:
    """``0: 1,204, 1: 1,187, ... (max/mean 1.01)``, the first few subtasks of many."""
    shown = ", ".join(f"{i}: {t:,}" for i, t in enumerate(totals[:_SHOWN_SUBTASKS]))
    more = f", ... ({len(totals)} subtasks)" if len(totals) > _SHOWN_SUBTASKS else ""
    return f"{shown}{more} (max/mean {imbalance(totals):.2f})"


@dataclass(frozen=True)
class KeyGroupBalance:
    """How ``max_parallelism`` key groups split over ``parallelism`` subtasks.

    Flink gives every subtask ``M // P`` or ``M // P + 1`` contiguous key
    groups, so unless ``P`` divides ``M`` some subtasks carry one key group
    more: with evenly spread keys their load is ``ratio`` times the others'.
    Flink's advice is hence a max parallelism that is a multiple of the
    parallelisms a job will run at.
    """

    max_parallelism: int
    parallelism: int

    def __post_init__(self) -> None:
        check_parallelism(self.parallelism, self.max_parallelism)

    @property
    def fewest(self) -> int:
        """Key groups of the lightest subtask."""
        return self.max_parallelism // self.parallelism

    @property
    def most(self) -> int:
        """Key groups of the heaviest subtask."""
        return -(-self.max_parallelism // self.parallelism)

    @property
    def ratio(self) -> float:
        """Most over fewest key groups per subtask: the load ratio of evenly spread keys."""
        return self.most / self.fewest

    @property
    def even(self) -> bool:
        return self.max_parallelism % self.parallelism == 0

    def even_parallelisms_near(self, count: int = 2) -> list[int]:
        """Up to ``count`` parallelisms below and above this one that divide the max
        parallelism, nearest first: the choices that keep subtask loads equal."""
        divisors = [d for d in range(1, self.max_parallelism + 1) if self.max_parallelism % d == 0]
        below = [d for d in divisors if d < self.parallelism][-count:]
        above = [d for d in divisors if d > self.parallelism][:count]
        return below + above

    def describe(self) -> str:
        """One line of advice, as ``inspect`` and ``rescale`` print it."""
        if self.even:
            return (f"{self.fewest:,} each ({self.max_parallelism:,} is a multiple of"
                    f" {self.parallelism}: equal loads)")
        near = ", ".join(map(str, self.even_parallelisms_near()))
        return (f"{self.fewest:,} to {self.most:,} (load ratio {self.ratio:.2f}:"
                f" {self.max_parallelism:,} is not a multiple of {self.parallelism};"
                f" parallelisms that divide it nearby: {near})")

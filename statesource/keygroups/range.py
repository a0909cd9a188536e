"""``KeyGroupRange``: the inclusive span of key groups a subtask or file covers."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from statesource.errors import InvalidArgumentError


@dataclass(frozen=True, order=True)
class KeyGroupRange:
    """Key groups ``start..end``, both inclusive, as Flink writes them.

    The empty range is ``EMPTY_RANGE`` (start 0, end -1), the only range
    whose end precedes its start.
    """

    start: int
    end: int

    def __post_init__(self) -> None:
        empty = (self.start, self.end) == (0, -1)
        if not empty and not 0 <= self.start <= self.end:
            raise InvalidArgumentError(
                f"invalid key-group range [{self.start}, {self.end}]: need 0 <= start <= end"
            )

    @classmethod
    def of(cls, start: int, end: int) -> KeyGroupRange:
        """A range, or the empty range when ``end < start``."""
        return cls(start, end) if start <= end else EMPTY_RANGE

    def __len__(self) -> int:
        return self.end - self.start + 1

    def __contains__(self, key_group: object) -> bool:
        return isinstance(key_group, int) and self.start <= key_group <= self.end

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start, self.end + 1))

    def intersection(self, other: KeyGroupRange) -> KeyGroupRange:
        """The key groups both ranges hold (possibly the empty range)."""
        return KeyGroupRange.of(max(self.start, other.start), min(self.end, other.end))

    def __str__(self) -> str:
        return f"[{self.start}, {self.end}]" if len(self) else "[]"


EMPTY_RANGE = KeyGroupRange(0, -1)

"""Where TTL reads the time: the system clock, or one that moves only when told."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Milliseconds since the epoch, as TTL timestamps count them."""

    def now_ms(self) -> int: ...


class SystemClock:
    """Wall-clock time."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told: for tests and replayed event time."""

    def __init__(self, now_ms: int = 0) -> None:
        self._now_ms = now_ms

    def now_ms(self) -> int:
        return self._now_ms

    def advance(self, millis: int) -> None:
        self._now_ms += millis

    def set(self, now_ms: int) -> None:
        self._now_ms = now_ms

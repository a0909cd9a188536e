"""State time-to-live: the configuration, the clock, and what "expired" means.

Every TTL'd value carries the timestamp of its last access; List state keeps
one per element and Map state one per entry, so that appending to a list or
putting into a map does not refresh the rest. The rules follow Flink's
``StateTtlConfig``: what refreshes the timestamp (``UpdateType``), whether an
expired value may still be returned (``StateVisibility``) and when expired
values are dropped for good (on read, on a full snapshot, incrementally).
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from statesource.errors import InvalidArgumentError


class UpdateType(enum.Enum):
    """Which accesses refresh a value's last-access timestamp."""

    ON_CREATE_AND_WRITE = "OnCreateAndWrite"
    ON_READ_AND_WRITE = "OnReadAndWrite"


class StateVisibility(enum.Enum):
    """Whether a read may return a value that expired but was not yet cleaned up."""

    NEVER_RETURN_EXPIRED = "NeverReturnExpired"
    RETURN_EXPIRED_IF_NOT_CLEANED_UP = "ReturnExpiredIfNotCleanedUp"


@dataclass(frozen=True)
class TtlConfig:
    """Time-to-live of one state.

    ``incremental_cleanup_size`` is the number of entries checked on every
    state access (0 turns incremental cleanup off). Expired values are always
    dropped when read; ``cleanup_full_snapshot`` also keeps them out of checkpoints.
    """

    ttl: timedelta
    update_type: UpdateType = UpdateType.ON_CREATE_AND_WRITE
    visibility: StateVisibility = StateVisibility.NEVER_RETURN_EXPIRED
    cleanup_full_snapshot: bool = False
    incremental_cleanup_size: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.ttl, timedelta) or self.ttl <= timedelta(0):
            raise InvalidArgumentError(f"TTL {self.ttl!r} must be a positive timedelta")
        if type(self.incremental_cleanup_size) is not int or self.incremental_cleanup_size < 0:
            raise InvalidArgumentError(
                f"incremental cleanup size {self.incremental_cleanup_size!r} must be an int >= 0"
            )

    @property
    def ttl_ms(self) -> int:
        return self.ttl // timedelta(milliseconds=1)

    @property
    def update_on_read(self) -> bool:
        return self.update_type is UpdateType.ON_READ_AND_WRITE

    @property
    def return_expired(self) -> bool:
        return self.visibility is StateVisibility.RETURN_EXPIRED_IF_NOT_CLEANED_UP

    def is_expired(self, last_access_ms: int, now_ms: int) -> bool:
        """Flink's rule: expired once ``last_access + ttl <= now``."""
        return last_access_ms + self.ttl_ms <= now_ms

    def to_json(self) -> dict[str, Any]:
        return {
            "ttlMillis": self.ttl_ms,
            "updateType": self.update_type.value,
            "visibility": self.visibility.value,
            "cleanupFullSnapshot": self.cleanup_full_snapshot,
            "incrementalCleanupSize": self.incremental_cleanup_size,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TtlConfig:
        return cls(
            ttl=timedelta(milliseconds=data["ttlMillis"]),
            update_type=UpdateType(data["updateType"]),
            visibility=StateVisibility(data["visibility"]),
            cleanup_full_snapshot=data["cleanupFullSnapshot"],
            incremental_cleanup_size=data["incrementalCleanupSize"],
        )


class Clock(Protocol):
    """Where TTL reads the time: milliseconds since the epoch."""

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

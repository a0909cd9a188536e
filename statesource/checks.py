"""Integer arguments checked one way everywhere: exact ints, inside a range, named in errors.

``bool`` is an ``int`` subclass in Python but never a count or an id here, so
``True`` is refused like any other non-int.
"""

from __future__ import annotations

from typing import Any

from statesource.errors import InvalidArgumentError


def check_int(value: Any, what: str, low: int, high: int | None = None, *,
              context: str = "") -> int:
    """``value`` if it is an int in ``low..high`` (inclusive; no upper bound when None)."""
    if type(value) is not int:
        raise InvalidArgumentError(f"{what} must be an int, got {value!r}{context}")
    if high is not None and not low <= value <= high:
        raise InvalidArgumentError(f"{what} {value!r} is outside [{low}, {high}]{context}")
    if value < low:
        raise InvalidArgumentError(f"{what} {value!r} must be at least {low}{context}")
    return value


def check_checkpoint_id(checkpoint_id: Any) -> int:
    """Checkpoint ids are Flink's: non-negative longs."""
    return check_int(checkpoint_id, "checkpoint id", 0, (1 << 63) - 1)

"""Arguments checked one way everywhere: exact ints, inside a range, named in errors; JSON
objects given as text (options and flags that cannot carry Python objects).

``bool`` is an ``int`` subclass in Python but never a count or an id here, so
``True`` is refused like any other non-int.
"""

from __future__ import annotations

import json
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


def json_object_argument(text: str, where: str, shape: str) -> dict[str, Any]:
    """The JSON object ``text`` given as ``where`` (named in errors), which must be one of
    ``shape`` (such as "role -> Avro schema")."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as error:
        raise InvalidArgumentError(f"{where} is not JSON: {error}") from None
    if not isinstance(parsed, dict):
        raise InvalidArgumentError(f"{where} must be a JSON object of {shape}, got {text!r}")
    return parsed

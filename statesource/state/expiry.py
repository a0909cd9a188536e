"""Dropping expired TTL values from a stored state object.

The same functions serve reads, incremental cleanup and the checkpoint
writer's full-snapshot cleanup. They never mutate their input: the checkpoint
writer applies them to objects shared with the live map, which copy-on-write
only protects from writes made through the map.

Stored shapes with TTL: a Value, Reducing or Aggregating state holds
``(value, last_access_ms)``; a List state ``[(element, last_access_ms), ...]``;
a Map state ``{user_key: (user_value, last_access_ms)}``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from statesource.state.descriptors import StateKind
from statesource.state.ttl import TtlConfig

Expirer = Callable[[Any, int], Any]
"""``(stored, now_ms) -> stored`` without expired parts, or None when nothing is left."""


def expirer_for(kind: StateKind, ttl: TtlConfig) -> Expirer:
    """The expiry function for states of ``kind``."""
    ttl_ms = ttl.ttl_ms

    def scalar(stored: tuple[Any, int], now_ms: int) -> Any:
        return None if stored[1] + ttl_ms <= now_ms else stored

    def elements(stored: list[tuple[Any, int]], now_ms: int) -> Any:
        kept = [item for item in stored if item[1] + ttl_ms > now_ms]
        if len(kept) == len(stored):
            return stored
        return kept or None

    def entries(stored: dict[Any, tuple[Any, int]], now_ms: int) -> Any:
        kept = {k: item for k, item in stored.items() if item[1] + ttl_ms > now_ms}
        if len(kept) == len(stored):
            return stored
        return kept or None

    if kind is StateKind.LIST:
        return elements
    if kind is StateKind.MAP:
        return entries
    return scalar

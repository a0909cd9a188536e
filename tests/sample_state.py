"""A backend holding every state kind, and ways to dump what a backend stores.

Shared by the format and Spark tests, which compare what they read back with
what the backend held.
"""

from __future__ import annotations

from datetime import timedelta

from statesource.model import TtlConfig
from statesource.state.clock import ManualClock
from statesource.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from statesource.state.keyed_backend import KeyedStateBackend


class Average:
    def create_accumulator(self):
        return {"sum": 0, "count": 0}

    def add(self, value, accumulator):
        accumulator["sum"] += value
        accumulator["count"] += 1
        return accumulator

    def get_result(self, accumulator):
        return accumulator["sum"] / accumulator["count"]


ACCUMULATOR = {"type": "record", "name": "Avg",
               "fields": [{"name": "sum", "type": "long"}, {"name": "count", "type": "long"}]}
TTL = TtlConfig(timedelta(seconds=60))


def descriptors():
    return [
        ValueStateDescriptor("value", "long"),
        ValueStateDescriptor("windowed", "string", namespace_type="long"),
        ListStateDescriptor("list", "string"),
        MapStateDescriptor("map", "string", {"type": "array", "items": "double"}),
        ReducingStateDescriptor("reduce", lambda a, b: a + b, "long"),
        AggregatingStateDescriptor("agg", Average(), ACCUMULATOR),
        ValueStateDescriptor("ttl_value", "long", ttl=TTL),
        ListStateDescriptor("ttl_list", "long", ttl=TTL),
        MapStateDescriptor("ttl_map", "string", "long", ttl=TTL),
    ]


def populate(backend: KeyedStateBackend, keys, *, partly_expired: bool = True,
             states_of=descriptors) -> None:
    """Every state kind for ``keys``; then, on a manual clock, TTL state that has partly
    expired: the clock moves past the TTL and a third of the keys get fresh list
    elements and map entries beside their expired ones (written as they are, since
    the sample states do not clean up on snapshots). ``states_of`` gives descriptors of
    the same names (another accumulator type, say)."""
    states = {d.name: backend.get_state(d) for d in states_of()}
    for i, key in enumerate(keys):
        backend.set_current_key(key)
        states["value"].update(i)
        for window in (0, 1000 * i):
            backend.set_current_namespace(window)
            states["windowed"].update(f"{key}@{window}")
        states["list"].add_all([f"{key}-{j}" for j in range(i % 4 + 1)])
        states["map"].put_all({f"m{j}": [float(j), 0.5] for j in range(i % 3)})
        states["reduce"].add(i)
        states["reduce"].add(1)
        states["agg"].add(i)
        states["ttl_value"].update(i)
        states["ttl_list"].add_all(range(i % 3 + 1))
        states["ttl_map"].put("a", i)
    if partly_expired and isinstance(backend.clock, ManualClock):
        backend.clock.advance(TTL.ttl_ms + 1)
        for i, key in enumerate(keys):
            if i % 3 == 0:
                backend.set_current_key(key)
                states["ttl_list"].add(100 + i)
                states["ttl_map"].put("fresh", i)


def dump(backend: KeyedStateBackend) -> dict:
    """Everything a backend stores, as {state: {(key, namespace): stored}}."""
    with backend.snapshot(0) as snapshot:
        content = {}
        for state in snapshot:
            entries = {}
            for _, map_snapshot in state:
                keys, namespaces, stored = map_snapshot.columns()
                entries.update({(k, n): s for k, n, s in zip(keys, namespaces, stored)})
            content[state.descriptor.name] = entries
        return content


def merged(dumps: list[dict]) -> dict:
    result: dict = {}
    for content in dumps:
        for name, entries in content.items():
            result.setdefault(name, {}).update(entries)
    return result


KEYS = [f"user-{i}" for i in range(300)]

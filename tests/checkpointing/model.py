"""A plain-dict model of a keyed job, driven together with real backends.

Every mutation is applied to the backends (through the state handles) and to
a dict per state, ``{(key, namespace): stored}`` in the shapes of
:mod:`statesource.model`. What a checkpoint taken at time ``t`` must hold is
the model at ``t`` with full-snapshot TTL cleanup applied: that is the
independent truth restores and change feeds are checked against.
"""

from __future__ import annotations

import copy
import random
from datetime import timedelta

from statesource.checkpointing import restore_keyed_backend
from statesource.keygroups import (
    assign_to_key_group,
    key_group_range_for_operator,
    operator_index_for_key_group,
)
from statesource.model import TtlConfig
from statesource.state.clock import ManualClock
from statesource.state.descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)
from statesource.state.keyed_backend import KeyedStateBackend
from statesource.types import STRING

MAX_PARALLELISM = 16
PARALLELISM = 2
TTL_MS = 5_000
DESCRIPTORS = {
    "value": ValueStateDescriptor("value", "long"),
    "windowed": ValueStateDescriptor("windowed", "string", namespace_type="long"),
    "list": ListStateDescriptor("list", "long"),
    "map": MapStateDescriptor("map", "string", "long"),
    "ttl_value": ValueStateDescriptor(
        "ttl_value", "long",
        ttl=TtlConfig(timedelta(milliseconds=TTL_MS), cleanup_full_snapshot=True)),
    "ttl_kept": ValueStateDescriptor("ttl_kept", "long",
                                     ttl=TtlConfig(timedelta(milliseconds=TTL_MS))),
}


class Job:
    """Backends of ``PARALLELISM`` subtasks and the dict model they must match."""

    def __init__(self, seed: int, keys: int = 60) -> None:
        self.rng = random.Random(seed)
        self.clock = ManualClock(1_000_000)
        self.keys = [f"k{i}" for i in range(keys)]
        self.backends = [
            KeyedStateBackend("string", MAX_PARALLELISM,
                              key_group_range_for_operator(MAX_PARALLELISM, PARALLELISM, i),
                              clock=self.clock)
            for i in range(PARALLELISM)]
        self.handles = [{name: b.get_state(d) for name, d in DESCRIPTORS.items()}
                        for b in self.backends]
        self.model: dict[str, dict] = {name: {} for name in DESCRIPTORS}
        self.parallelism = PARALLELISM
        self.touched: set[tuple[str, int]] = set()
        """(state, key group) written since the last committed checkpoint."""

    def restore(self, checkpoint, expected: dict[str, dict], parallelism: int) -> None:
        """Restart from ``checkpoint``, whose content is ``expected``, at ``parallelism``."""
        self.backends = [restore_keyed_backend(checkpoint, i, parallelism, clock=self.clock)
                         for i in range(parallelism)]
        self.handles = [{name: b.get_state(d) for name, d in DESCRIPTORS.items()}
                        for b in self.backends]
        self.parallelism = parallelism
        self.model = copy.deepcopy(expected)
        self.touched = set()

    def _select(self, key: str) -> tuple[dict, int]:
        """Make ``key`` current on the subtask Flink assigns it to: its handles, key group."""
        key_group = assign_to_key_group(key, STRING, MAX_PARALLELISM)
        subtask = operator_index_for_key_group(MAX_PARALLELISM, self.parallelism, key_group)
        self.backends[subtask].set_current_key(key)
        return self.handles[subtask], key_group

    def mutate(self, count: int, hot_keys: int | None = None) -> None:
        """``count`` random writes, over ``hot_keys`` random keys (all keys by default)."""
        keys = self.rng.sample(self.keys, hot_keys) if hot_keys else self.keys
        for _ in range(count):
            self.clock.advance(self.rng.randrange(0, 400))
            key = self.rng.choice(keys)
            handles, key_group = self._select(key)
            name = self.rng.choice(list(DESCRIPTORS))
            self.touched.add((name, key_group))
            self._mutate(name, key, handles[name], self.model[name])

    def _mutate(self, name: str, key: str, handle, model: dict) -> None:
        rng = self.rng
        clear = rng.random() < 0.15
        if name == "windowed":
            window = rng.randrange(3)
            for backend in self.backends:
                backend.set_current_namespace(window)
            entry = (key, window)
        else:
            entry = (key, None)
        if clear:
            handle.clear()
            model.pop(entry, None)
        elif name in ("value", "windowed"):
            value = rng.randrange(100) if name == "value" else f"w{rng.randrange(100)}"
            handle.update(value)
            model[entry] = value
        elif name in ("ttl_value", "ttl_kept"):
            value = rng.randrange(100)
            handle.update(value)
            model[entry] = (value, self.clock.now_ms())
        elif name == "list":
            if rng.random() < 0.3:
                elements = [rng.randrange(10) for _ in range(rng.randrange(1, 4))]
                handle.update(elements)
                model[entry] = list(elements)
            else:
                element = rng.randrange(10)
                handle.add(element)
                model.setdefault(entry, []).append(element)
        else:
            user_key = f"u{rng.randrange(4)}"
            if rng.random() < 0.3 and user_key in model.get(entry, {}):
                handle.remove(user_key)
                del model[entry][user_key]
                if not model[entry]:
                    del model[entry]
            else:
                value = rng.randrange(100)
                handle.put(user_key, value)
                model.setdefault(entry, {})[user_key] = value

    def expected(self) -> dict[str, dict]:
        """What a checkpoint taken now must hold: the model after full-snapshot cleanup
        (of ``ttl_value``; ``ttl_kept`` keeps expired values, as without that cleanup)."""
        cutoff = self.clock.now_ms() - TTL_MS
        content = {name: {k: (list(v) if isinstance(v, list) else
                              dict(v) if isinstance(v, dict) else v)
                          for k, v in entries.items()}
                   for name, entries in self.model.items()}
        content["ttl_value"] = {k: v for k, v in content["ttl_value"].items() if v[1] > cutoff}
        return content

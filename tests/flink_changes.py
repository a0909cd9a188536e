"""The Flink change-feed fixture (tests/fixtures/flink/changes) and its model difference.

``expected.json`` holds the state after each phase of ChangesJob's events, computed by
generate.py from the events alone; :func:`model_changes` turns two of them into the change
rows the feed must produce, in plain Python, never through the reader.
"""

from __future__ import annotations

import json
from pathlib import Path

from statesource.keygroups import assign_to_key_group
from statesource.types import STRING

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "flink" / "changes"
ROOT = FIXTURE / "checkpoints"
TRUTH = json.loads((FIXTURE / "expected.json").read_text())
PHASES = TRUTH["phases"]
IDS = [phase["checkpoint_id"] for phase in PHASES]
STATES = ("count", "max_seq", "last_ttl", "tags", "per_tag", "ratio", "pairs")
"""States of operator ``tracker``; operator ``windows`` holds ``window-contents``."""
ALL_STATES = (*STATES, "window-contents")


def operator_of(state: str) -> str:
    return "windows" if state == "window-contents" else "tracker"


POSITION = {"tags": "element_index", "pairs": "element_index", "per_tag": "user_key"}
WINDOW_MILLIS = 100_000


def _key_group(key: str) -> int:
    return assign_to_key_group(key, STRING, TRUTH["max_parallelism"])


def exact(value):
    """``value`` in a form whose Python equality is Java's ``equals``: a double by its text
    (0.0 and -0.0 differ), a tuple (a struct of ``f0, f1, ...`` or a list) as a tuple."""
    if hasattr(value, "asDict"):
        value = value.asDict()
    if isinstance(value, float):
        return ("double", repr(value))
    if isinstance(value, dict):
        return tuple(exact(v) for v in value.values())
    if isinstance(value, list):
        return tuple(exact(v) for v in value)
    return value


def _items(state: str, value) -> dict:
    """An entry's rows by position: list elements by index, map values by user key."""
    if state in ("tags", "pairs"):
        return dict(enumerate(value))
    if state == "per_tag":
        return dict(value)
    return {None: value}


def _entries(phase: dict, state: str) -> dict:
    """(key, namespace) -> stored value of one phase's state (windows: per window)."""
    if state == "window-contents":
        return {(key, (int(start), int(start) + WINDOW_MILLIS)): total
                for key, sums in phase["state"]["windows"].items()
                for start, total in sums.items()}
    return {(key, None): value for key, value in phase["state"][state].items()}


def model_changes(state: str, before: dict, after: dict) -> set[tuple]:
    """(key group, change type, key, position or window, old, new) from two phases' states,
    values in their :func:`exact` form."""
    old_state, new_state = _entries(before, state), _entries(after, state)
    rows = set()
    for key, namespace in old_state.keys() | new_state.keys():
        entry = (key, namespace)
        old_items = _items(state, old_state[entry]) if entry in old_state else {}
        new_items = _items(state, new_state[entry]) if entry in new_state else {}
        rewritten = (state == "last_ttl" and entry in old_state and entry in new_state
                     and before["state"]["ttl_written_in_phase"][key]
                     != after["state"]["ttl_written_in_phase"][key])
        for position in old_items.keys() | new_items.keys():
            old, new = exact(old_items.get(position)), exact(new_items.get(position))
            change = ("insert" if position not in old_items else
                      "delete" if position not in new_items else
                      "update" if old != new or rewritten else None)
            if change:
                rows.add((_key_group(key), change, key,
                          namespace if namespace is not None else position, old, new))
    return rows


def change_row(row, state: str) -> tuple:
    """A feed row (a dict, or a Spark Row) in the shape of :func:`model_changes`."""
    if hasattr(row, "asDict"):
        row = row.asDict()
    if state == "window-contents":
        namespace = row["namespace"]
        place = (namespace["start"], namespace["end"]) if isinstance(namespace, dict) else (
            namespace.start, namespace.end)
    else:
        assert row["namespace"] is None
        place = row.get(POSITION.get(state, ""), None)
    return (row["key_group"], row["change_type"], row["key"], place, exact(row["old_value"]),
            exact(row["new_value"]))


def feed_changes(feed) -> set[tuple]:
    return {change_row(row, feed.state) for table in feed.read() for row in table.to_pylist()}

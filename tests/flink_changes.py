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
STATES = ("count", "max_seq", "last_ttl", "tags", "per_tag")
POSITION = {"tags": "element_index", "per_tag": "user_key"}


def _key_group(key: str) -> int:
    return assign_to_key_group(key, STRING, TRUTH["max_parallelism"])


def _items(state: str, value) -> dict:
    """An entry's rows by position: list elements by index, map values by user key."""
    if state == "tags":
        return dict(enumerate(value))
    if state == "per_tag":
        return dict(value)
    return {None: value}


def model_changes(state: str, before: dict, after: dict) -> set[tuple]:
    """(key group, change type, key, position, old, new) from two phases' states."""
    old_state, new_state = before["state"][state], after["state"][state]
    rows = set()
    for key in old_state.keys() | new_state.keys():
        old_items = _items(state, old_state[key]) if key in old_state else {}
        new_items = _items(state, new_state[key]) if key in new_state else {}
        rewritten = (state == "last_ttl" and key in old_state and key in new_state
                     and before["state"]["ttl_written_in_phase"][key]
                     != after["state"]["ttl_written_in_phase"][key])
        for position in old_items.keys() | new_items.keys():
            old, new = old_items.get(position), new_items.get(position)
            change = ("insert" if position not in old_items else
                      "delete" if position not in new_items else
                      "update" if old != new or rewritten else None)
            if change:
                rows.add((_key_group(key), change, key, position, old, new))
    return rows


def feed_changes(feed) -> set[tuple]:
    rows = set()
    for table in feed.read():
        for row in table.to_pylist():
            assert row["namespace"] is None
            rows.add((row["key_group"], row["change_type"], row["key"],
                      row.get(POSITION.get(feed.state, ""), None), row["old_value"],
                      row["new_value"]))
    return rows

"""The ``lazy`` fixture (LazyJob.java by a real Flink 2.3, generate.py ``--only-lazy``): its
states, the job's model of them, and rows of a state gathered by key as the model holds them."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from flink_fixture_checks import FIXTURES

LAZY = FIXTURES / "lazy"
KINDS = ["canonical", "native", "checkpoint", "rocksdb", "rocksdb-native", "rocksdb-incremental"]
"""Heap canonical and native savepoints and a checkpoint; RocksDB's canonical savepoint, its
native savepoint and its incremental checkpoint (``chk-<id>`` beside the job's ``shared/``):
its own files."""
JVM_KINDS = KINDS
"""The kinds whose key groups the JVM reader decodes itself: all (RocksDB's own files too,
framed from their tables: RocksKeyGroupSource.java)."""
TRUTH = json.loads((LAZY / "expected.json").read_text())
STATES = {"count": "value", "last": "value", "vip": "map", "rare": "list", "late": "reducing"}


def expected(state: str) -> dict:
    """``key -> value`` of ``state`` as the job's events make it (keys it never obtained it
    for have none)."""
    return {key: held[state] for key, held in TRUTH["keys"].items() if state in held}


def by_key(state: str, rows: Iterable[Mapping[str, Any]]) -> dict:
    """Rows of ``state`` in the format's data schema, gathered by key: a map's entries as a
    dict, a list's elements in row order."""
    found: dict = {}
    for row in rows:
        if STATES[state] == "map":
            found.setdefault(row["key"], {})[row["user_key"]] = row["user_value"]
        elif STATES[state] == "list":
            found.setdefault(row["key"], []).append(row["list_element"])
        else:
            found[row["key"]] = row["value"]
    return found

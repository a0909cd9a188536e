"""Every entry of a Flink snapshot's keyed states as statesource reads it, for comparing two
snapshots state by state (what a rewrite or rescale changed, and what it left alone)."""

from __future__ import annotations

import collections
from pathlib import Path

from statesource.flink.reader import FlinkCheckpoint


def entries_by_state(path: Path) -> dict[tuple[str, str], collections.Counter]:
    """Every entry of every keyed state and timer, by operator and state, as a multiset."""
    savepoint = FlinkCheckpoint.open(str(path))
    found = {}
    for op in savepoint.snapshot.operators:
        header = savepoint.snapshot.header(op)
        for info in header.states if header else ():
            found[(op.label, info.name)] = collections.Counter(
                (repr(key), repr(namespace), repr(stored))
                for _, keys, namespaces, stored in savepoint.entries(info.name, operator=op.label)
                for key, namespace, stored in zip(keys, namespaces, stored))
    return found

"""Every entry of a Flink snapshot's keyed states as statesource reads it, for comparing two
snapshots state by state (what a rewrite or rescale changed, and what it left alone); and a
fixture savepoint seen as keyed by a POJO, for the refusals of keys that cannot be hashed."""

from __future__ import annotations

import collections
import dataclasses
from pathlib import Path

from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.snapshot.directory import FlinkSnapshot


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


def key_stateful_by_its_event_pojo(monkeypatch, savepoint: Path) -> None:
    """As if the fixture job keyed operator ``stateful`` by its Event POJO (the serializer of
    its ``last`` state's values), whose Java hashCode statesource cannot reproduce: every
    header read in this process says so."""
    snapshot = FlinkSnapshot.open(str(savepoint))
    header = snapshot.header(snapshot.operator("stateful"))
    pojo = next(info.value for info in header.states if info.name == "last")
    read_header = FlinkSnapshot.read_header
    monkeypatch.setattr(FlinkSnapshot, "read_header", lambda self, handle: dataclasses.replace(
        read_header(self, handle), key=pojo))

"""What the fixtures' jobs declare and hold, for restores in a real Flink (tests/flink_restore.py).

``fixture_spec`` declares every state of ``tests/fixtures/flink/FixtureJob.java`` (the
``mp256`` and ``mp128-snappy`` fixtures) as the job does, and ``check_fixture`` compares what
Flink restored with the fixture's ``expected.json``; ``shared_java_spec`` and
``check_shared_java`` do the same for the shared Java savepoints
(``../shared/flink-savepoints/java``). Savepoints derived from these (rescaled, rewritten)
are checked with the same functions.
"""

from __future__ import annotations

import base64
import json
import struct
import uuid
from collections.abc import Iterable
from pathlib import Path

from flink_restore import hashable, rows_of, subtasks, timer_order, timers, values
from statesource.flink.handles import operator_id_of

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "flink"
WINDOW = 100_000
STATEFUL_STATES = ["total", "max_id", "avg", "events", "per_user", "last"]


def fixture_spec(max_parallelism: int, parallelism: int = 2, backend: str = "hashmap",
                 flink1x: bool = False) -> dict:
    """Every state of FixtureJob.java (``flink1x``: FixtureJob1x.java, which adds ``last_ttl``),
    declared as the job declares it."""
    job = "FixtureJob1x" if flink1x else "FixtureJob"
    ttl = [{"name": "last_ttl", "kind": "value", "value": "Long", "ttl": True}] if flink1x else []
    return {
        "max_parallelism": max_parallelism, "parallelism": parallelism, "state_backend": backend,
        "operators": [
            {"uid": "stateful", "key": "Long",
             "keyed_states": [
                 {"name": "total", "kind": "value", "value": "Double"},
                 {"name": "max_id", "kind": "reducing", "value": "Long"},
                 {"name": "avg", "kind": "aggregating", "value": {"tuple": ["Double", "Long"]}},
                 {"name": "events", "kind": "list", "element": {"tuple": ["String", "Long"]}},
                 {"name": "per_user", "kind": "map", "user_key": "String",
                  "user_value": "Integer"},
                 {"name": "last", "kind": "value", "value": {"pojo": f"{job}$Event"}},
                 *ttl],
             "timers": [{"name": "user-timers"}],
             "operator_states": [{"name": "seen", "mode": "split", "element": "Long"},
                                 {"name": "subtasks", "mode": "union", "element": "String"}]},
            {"uid": "opaque", "key": "Long",
             "keyed_states": [{"name": "last_uuid", "kind": "value",
                               "value": {"class": "java.util.UUID"}}]},
            {"uid": "windows", "key": {"tuple": ["String", "Integer"]},
             "keyed_states": [{"name": "window-contents", "kind": "aggregating", "value": "Long",
                               "namespace": "window"}],
             "timers": [{"name": "window-timers", "namespace": "window"}]},
            {"uid": "broadcaster",
             "operator_states": [{"name": "rules", "mode": "broadcast", "user_key": "String",
                                  "user_value": "Long"}]},
        ]}


def check_placement(rows: list[dict], heap: bool) -> None:
    """Every key sits in a key group of the subtask that restored it, and (heap) in the map
    of that key group: an entry stored under another key group would be invisible."""
    for row in rows:
        if "keyGroup" not in row:
            continue
        first, last = subtasks(rows, row["operator"])[row["subtask"]]["keyGroupRange"]
        assert first <= row["keyGroup"] <= last, row
        if heap:
            assert row["storedKeyGroup"] == row["keyGroup"], row


def check_fixture(rows: list[dict], truth: dict, parallelism: int, heap: bool = True, *,
                  erased: Iterable[int] = (), dropped: Iterable[str] = (),
                  added: Iterable[str] = ()) -> None:
    """What Flink restored is ``truth``, less the ``erased`` keys of operator ``stateful``
    (its own states and timers; ``opaque`` keeps them) and its ``dropped`` states (none
    restored: empty when still declared), plus its ``added`` states (checked by the caller)."""
    erased, dropped = set(erased), set(dropped)
    maxp = truth["max_parallelism"]
    (snapshot,) = [row for row in rows if row["kind"] == "snapshot"]
    # by id: a Flink 1.x _metadata records no uid
    assert {op["operatorId"]: op["maxParallelism"] for op in snapshot["operators"]}[
        operator_id_of("stateful")] == maxp
    for operator in ("stateful", "opaque", "windows", "broadcaster"):
        done = subtasks(rows, operator)
        assert sorted(done) == list(range(parallelism))
        assert {(d["parallelism"], d["maxParallelism"]) for d in done.values()} == {
            (parallelism, maxp)}
    check_placement(rows, heap)
    if heap:  # the spec names every state the backend restored
        for done in subtasks(rows, "stateful").values():
            assert set(done["restoredKeyedStates"]) == (set(STATEFUL_STATES) | {
                "_timer_state/event_user-timers", "_timer_state/processing_user-timers"}
                | set(added)) - dropped

    everyone = {int(key): want for key, want in truth["stateful"].items()}
    stateful = {k: w for k, w in everyone.items() if k not in erased}
    for name in STATEFUL_STATES:
        found = values(rows, "stateful", name)
        if name == "per_user":
            found = {k: dict(v) for k, v in found.items()}
        assert found == ({} if name in dropped else {k: w[name] for k, w in stateful.items()})
    assert timers(rows, "stateful", "user-timers") == ({} if dropped & {
        "_timer_state/event_user-timers"} else {
        k: [(None, t) for t in sorted(w["timers"])] for k, w in stateful.items()})
    assert timers(rows, "stateful", "user-timers", "processing") == {}

    # UUID(key, id) of each key's last event (FixtureJob.Opaque), serialized by Kryo
    assert values(rows, "opaque", "last_uuid") == {
        k: str(uuid.UUID(int=(k << 64) | w["max_id"])) for k, w in everyone.items()}

    windows, window_timers = {}, {}
    for name, want in truth["windows"].items():
        user, group, start = json.loads(name)
        key, window = (user, group), hashable({"start": start, "end": start + WINDOW})
        windows[(key, window)] = want["sum"]
        window_timers.setdefault(key, []).append((window, start + WINDOW - 1))
    assert values(rows, "windows", "window-contents") == windows
    assert timers(rows, "windows", "window-timers") == {
        key: sorted(entries, key=timer_order) for key, entries in window_timers.items()}

    seen = {row["subtask"]: row["value"] for row in rows_of(rows, "stateful", "seen", "split")}
    assert sorted(sum(seen.values(), [])) == sorted(truth["seen"])
    if parallelism == truth["parallelism"]:  # unchanged parallelism keeps the assignment
        assert seen == {i: [count] for i, count in enumerate(truth["seen"])}
    union = rows_of(rows, "stateful", "subtasks", "union")
    assert len(union) == parallelism
    assert all(sorted(row["value"]) == sorted(sum(truth["subtasks"], [])) for row in union)
    rules = rows_of(rows, "broadcaster", "rules", "broadcast")
    assert len(rules) == parallelism
    assert all(dict(row["value"]) == truth["rules"] for row in rules)


def fixture_truth(variant: str) -> dict:
    """The expected state of fixture ``variant`` (``mp256``, ``mp128-snappy``)."""
    return json.loads((FIXTURES / variant / "expected.json").read_text())


def shared_java_spec(max_parallelism: int, parallelism: int) -> dict:
    """Every state of the shared Java savepoints' job, declared as the job declares it."""
    return {
        "max_parallelism": max_parallelism, "parallelism": parallelism,
        "operators": [
            {"uid": "stateful", "key": "String",
             "keyed_states": [
                 {"name": "count", "kind": "value", "value": "Long"},
                 {"name": "tags", "kind": "list", "element": "String"},
                 {"name": "sum_by_tag", "kind": "map", "user_key": "String", "user_value": "Long"},
                 {"name": "last_seq_ttl", "kind": "value", "value": "Long", "ttl": True}],
             "timers": [{"name": "user-timers"}]},
            {"uid": "src", "parallelism": 1,
             "operator_states": [{"name": "SourceReaderState", "mode": "split",
                                  "element": "byte[]"}]},
        ]}


def check_shared_java(rows: list[dict], truth: dict) -> None:
    """What Flink restored from a shared Java savepoint is exactly its expected state, every
    entry in the key group of its key."""
    check_placement(rows, heap=True)
    state = truth["state"]
    assert values(rows, "stateful", "count") == {k: w["count"] for k, w in state.items()}
    assert values(rows, "stateful", "tags") == {k: w["tags"] for k, w in state.items()}
    assert {k: dict(v) for k, v in values(rows, "stateful", "sum_by_tag").items()} == {
        k: w["sum_by_tag"] for k, w in state.items()}
    assert values(rows, "stateful", "last_seq_ttl") == {
        k: w["last_seq_ttl"] for k, w in state.items()}
    ttl = rows_of(rows, "stateful", "last_seq_ttl")
    assert all(isinstance(row["ttlTimestamp"], int) and row["ttlTimestamp"] > 0 for row in ttl)
    assert timers(rows, "stateful", "user-timers") == {}
    assert [row["value"] for row in rows_of(rows, "src", "SourceReaderState")] == [[]]


def pyflink_spec(max_parallelism: int, parallelism: int) -> dict:
    """The states of the shared PyFlink savepoint's job: ``Row`` keys of one field, every
    value the bytes of PyFlink's coders (restored with ``opt_jars=["flink-python"]``)."""
    return {
        "max_parallelism": max_parallelism, "parallelism": parallelism,
        "operators": [
            {"uid": "stateful", "key": {"row": [["f0", "String"]]},
             "keyed_states": [
                 {"name": "python-state-count", "kind": "list", "element": "byte[]"},
                 {"name": "python-state-tags", "kind": "list", "element": "byte[]"},
                 {"name": "python-state-last_seq_ttl", "kind": "list", "element": "byte[]",
                  "ttl": True}]},
            {"uid": "src", "parallelism": 1,
             "operator_states": [{"name": "SourceReaderState", "mode": "split",
                                  "element": "byte[]"}]},
        ]}


def _pyflink_strings(chunks: list[str]) -> list[str]:
    """PyFlink's list state of strings: batches of (int length, UTF-8) elements."""
    data = b"".join(base64.b64decode(chunk) for chunk in chunks)
    found, at = [], 0
    while at < len(data):
        (size,) = struct.unpack_from(">i", data, at)
        found.append(data[at + 4:at + 4 + size].decode())
        at += 4 + size
    return found


def check_pyflink(rows: list[dict], truth: dict) -> None:
    """What Flink restored from the shared PyFlink savepoint is exactly its expected state,
    every entry in the key group of its key."""
    check_placement(rows, heap=True)
    state = truth["state"]

    def longs(name):
        return {key[0][1]: struct.unpack(">q", base64.b64decode(value[0]))[0]
                for key, value in values(rows, "stateful", name).items()}

    assert longs("python-state-count") == {k: w["count"] for k, w in state.items()}
    assert longs("python-state-last_seq_ttl") == {k: w["last_seq_ttl"] for k, w in state.items()}
    assert {key[0][1]: _pyflink_strings(value) for key, value in values(
        rows, "stateful", "python-state-tags").items()} == {k: w["tags"] for k, w in state.items()}

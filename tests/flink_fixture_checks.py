"""What the fixtures' jobs declare and hold, for restores in a real Flink (tests/flink_restore.py).

``fixture_spec`` declares every state of ``tests/fixtures/flink/FixtureJob.java`` (the
``mp256`` and ``mp128-snappy`` fixtures) as the job does, and ``check_fixture`` compares what
Flink restored with the fixture's ``expected.json``; ``shared_java_spec`` and
``check_shared_java`` do the same for the shared Java savepoints
(``../shared/flink-savepoints/java``). Savepoints derived from these (rescaled, rewritten)
are checked with the same functions.

For the readers, ``expected_keyed`` and ``expected_operator_states`` hold every state of
FixtureJob.java and FixtureJob1x.java as the job's model says (the fixtures'
``expected.json``), in one form that ``found_keyed`` and ``operator_state_of_rows`` bring the
rows of any reader to (the Python reader's Arrow rows, Spark's rows as dicts). Keyed and timer
states: ``(operator, state) -> {JSON [key, namespace]: [entry, ...]}``, an entry being the
row's value columns (``value``, ``accumulator``, ``list_element``, ``user_key`` and
``user_value``, ``timestamp``); list elements in their order, the entries of other states
sorted. Operator states: ``(operator, state) -> [subtask's elements or map, ...]`` by
operator index.
"""

from __future__ import annotations

import base64
import json
import struct
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from flink_restore import hashable, rows_of, subtasks, timer_order, timers, values
from statesource.flink.handles import operator_id_of
from statesource.keygroups import assign_to_key_group, operator_index_for_key_group
from statesource.types import INT, LONG, STRING, DataType, TupleType

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "flink"
INCREMENTAL = {"2.3": FIXTURES / "incremental", "1.20": FIXTURES / "incremental-1.20"}
"""Per Flink version, the fixture its run of IncrementalJob.java made (generate.py
``--only-incremental``, ``--incremental-1x``), each with its ``expected.json``."""
FULL_CHECKPOINT = "full-checkpoint"
"""Flink 2.3's run of IncrementalJob.java with incremental checkpointing off, under
``INCREMENTAL["2.3"]`` beside the incremental runs (generate.py ``--only-full-checkpoint``)."""
INCREMENTAL_RUNS = [(version, run) for version in INCREMENTAL
                    for run in ("rocksdb-timers", "heap-timers")] + [("2.3", FULL_CHECKPOINT)]
"""(Flink version, run) of every run of IncrementalJob.java under :data:`INCREMENTAL`: each
checkpoint's model is its ``expected.json``'s, and Flink's canonical savepoint of the second
checkpoint's state is the run's ``savepoint``."""
RESCALED = {"2.3": FIXTURES / "rescaled", "1.20": FIXTURES / "rescaled-1.20"}
"""Per Flink version, its rescaled run of IncrementalJob.java (generate.py ``--only-rescaled``,
``--rescaled-1x``): ``first/`` at parallelism 2, ``second/`` restored from it at 3."""
INCREMENTAL_STATES = ["count", "seen", "tags", "_timer_state/event_user-timers",
                      "_timer_state/processing_user-timers"]
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
    restored: empty when still declared; ``last_uuid`` is opaque's), plus its ``added``
    states (checked by the caller)."""
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
    assert values(rows, "opaque", "last_uuid") == ({} if "last_uuid" in dropped else {
        k: str(uuid.UUID(int=(k << 64) | w["max_id"])) for k, w in everyone.items()})

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


# -- every state of the fixtures, for the readers ------------------------------------

FLINK_1X = {"flink-1.20": 4, "flink-1.18": 4, "flink-1.15": 3}
"""The Flink 1.x fixtures (FixtureJob1x.java by a real Flink 1.20.5, 1.18.1 and 1.15.4) and the
``_metadata`` version each Flink writes."""
KINDS_1X = ("canonical", "native", "checkpoint", "rocksdb")
"""Heap canonical and native savepoints, a retained heap checkpoint, RocksDB's canonical
savepoint: of every 1.x fixture."""
ROCKSDB_FILES_1X = {"flink-1.20": ("rocksdb-native", "rocksdb-checkpoint")}
"""RocksDB's native savepoint and its retained checkpoint (not incremental, Flink 1.x's
default): its databases' own files, made by Flink 1.20 only."""
CASES_1X = [(version, kind) for version in FLINK_1X
            for kind in (*KINDS_1X, *ROCKSDB_FILES_1X.get(version, ()))]
SNAPSHOTS_1X = [f"{version}/{kind}" for version, kind in CASES_1X]

KEY_TYPES: dict[str, DataType] = {"stateful": LONG, "opaque": LONG,
                                  "windows": TupleType((STRING, INT))}
"""The key type of each keyed operator of FixtureJob.java (and its 1.x twin)."""
FOUND_KEY_TYPES: dict[str, DataType] = {**KEY_TYPES, "incr": STRING}
"""What :func:`found_keyed` checks keys with: also IncrementalJob.java's operator."""
KRYO_TAG = 2
"""Kryo's class tag before a value's own bytes (the model holds what follows it)."""
_NOT_VALUES = {"key_group", "operator_index", "key", "namespace", "ttl_timestamp"}
_ORDERED = {"events", "seen"}  # list states: their elements in order


def varint(value: int) -> bytes:
    """Kryo's unsigned varint: 7 bits a byte, low group first."""
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


def kryo_uuid(key: int, last_id: int, flink1x: bool) -> bytes:
    """FixtureJob's ``UUID(key, id of the key's last event)`` after Kryo's class tag: Kryo 5
    (Flink 2.x) writes the two longs little-endian, Kryo 2 (Flink 1.x) each as a zigzag varint."""
    if flink1x:
        return varint(2 * key) + varint(2 * last_id)
    return key.to_bytes(8, "little") + last_id.to_bytes(8, "little")


def _where(key: Any, namespace: Any) -> str:
    return json.dumps([key, namespace], sort_keys=True)


def _entries(by_key: Mapping[Any, Iterable[dict]]) -> dict[str, list]:
    return {_where(key, None): list(entries) for key, entries in by_key.items()}


def expected_keyed(truth: dict, flink1x: bool) -> dict[tuple[str, str], dict[str, list]]:
    """Every keyed and timer state of the job, from its model."""
    stateful = {int(key): want for key, want in truth["stateful"].items()}

    def each(make) -> dict[str, list]:
        return _entries({key: make(want) for key, want in stateful.items()})

    found = {
        ("stateful", "total"): each(lambda w: [{"value": w["total"]}]),
        ("stateful", "max_id"): each(lambda w: [{"value": w["max_id"]}]),
        ("stateful", "avg"): each(lambda w: [{"accumulator": {"f0": w["avg"][0],
                                                              "f1": w["avg"][1]}}]),
        ("stateful", "events"): each(lambda w: [{"list_element": {"f0": user, "f1": i}}
                                                for user, i in w["events"]]),
        ("stateful", "per_user"): each(lambda w: [{"user_key": user, "user_value": count}
                                                  for user, count in w["per_user"].items()]),
        ("stateful", "last"): each(lambda w: [{"value": w["last"]}]),
        ("stateful", "_timer_state/event_user-timers"): each(
            lambda w: [{"timestamp": t} for t in w["timers"]]),
        ("opaque", "last_uuid"): _entries({key: [{"value": kryo_uuid(key, w["max_id"],
                                                                     flink1x).hex()}]
                                           for key, w in stateful.items()}),
        ("windows", "window-contents"): {}, ("windows", "_timer_state/event_window-timers"): {},
    }
    if flink1x:
        found[("stateful", "last_ttl")] = each(lambda w: [{"value": w["last_ttl"]}])
    for name, window in truth["windows"].items():
        user, group, start = json.loads(name)
        where = _where({"f0": user, "f1": group}, {"start": start, "end": start + WINDOW})
        found[("windows", "window-contents")][where] = [{"accumulator": window["sum"]}]
        found[("windows", "_timer_state/event_window-timers")][where] = [
            {"timestamp": start + WINDOW - 1}]
    for operator, service in (("stateful", "user"), ("opaque", "user"), ("windows", "window")):
        found.setdefault((operator, f"_timer_state/event_{service}-timers"), {})
        found[(operator, f"_timer_state/processing_{service}-timers")] = {}  # none registered
    return {state: {key: _order(state[1], entries) for key, entries in by_key.items()}
            for state, by_key in found.items()}


def incremental_keyed(model: dict) -> dict[str, dict[str, list]]:
    """Every state of IncrementalJob.java's operator ``incr`` (:data:`INCREMENTAL_STATES`) as
    ``model`` (an ``expected.json``'s ``first`` or ``second``) holds it, in the form of
    :func:`found_keyed`."""
    found = {
        "count": _entries({k: [{"value": s["count"]}] for k, s in model.items() if "count" in s}),
        "seen": _entries({k: [{"list_element": i} for i in s["seen"]] for k, s in model.items()}),
        "tags": _entries({k: [{"user_key": tag, "user_value": i} for tag, i in s["tags"].items()]
                          for k, s in model.items() if s["tags"]}),
        "_timer_state/event_user-timers": _entries(
            {k: [{"timestamp": t} for t in s["timers"]] for k, s in model.items() if s["timers"]}),
        "_timer_state/processing_user-timers": {}}
    return {state: {key: _order(state, entries) for key, entries in by_key.items()}
            for state, by_key in found.items()}


def incremental_spec(backend: str, max_parallelism: int = 256, parallelism: int = 3,
                     timer_service: str | None = None) -> dict:
    """IncrementalJob.java's operator ``incr`` declared as the job declares it, for a restore."""
    states = [{"name": "count", "kind": "value", "value": "Long"},
              {"name": "seen", "kind": "list", "element": "Long"},
              {"name": "tags", "kind": "map", "user_key": "String", "user_value": "Long"}]
    return {"max_parallelism": max_parallelism, "parallelism": parallelism,
            "state_backend": backend,
            **({"timer_service": timer_service} if timer_service else {}),
            "operators": [{"uid": "incr", "key": "String", "keyed_states": states,
                           "timers": [{"name": "user-timers"}]}]}


def check_incremental_restore(rows: list[dict], model: dict, erased: tuple[str, ...] = ()
                              ) -> None:
    """Every key and timer of ``incr`` a real Flink restored (:func:`incremental_spec`) equals
    ``model`` (an ``expected.json``'s ``first`` or ``second``), but for the keys ``erased``."""
    kept = {key: held for key, held in model.items() if key not in erased}
    for state in ("count", "seen", "tags"):
        restored = values(rows, "incr", state)
        if state == "tags":
            restored = {key: dict(pairs) for key, pairs in restored.items()}
        assert restored == {key: held[state] for key, held in kept.items()
                            if state in held and held[state] != {}}, state
    restored_timers = {key: [timestamp for _, timestamp in entries]
                       for key, entries in timers(rows, "incr", "user-timers").items()}
    assert restored_timers == {key: held["timers"] for key, held in kept.items()}


def _order(state: str, entries: list[dict]) -> list[dict]:
    return entries if state in _ORDERED else sorted(
        entries, key=lambda entry: json.dumps(entry, sort_keys=True))


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {name: _plain(field) for name, field in value.items()}
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return value


def found_keyed(rows: Iterable[Mapping[str, Any]], operator: str, state: str, truth: dict
                ) -> dict[str, list]:
    """``rows`` of one keyed or timer state in the model's form, after checking that each is in
    its key's key group (and operator index, where the rows have one) and that a TTL state's
    rows have a TTL timestamp."""
    key_type, max_parallelism = FOUND_KEY_TYPES[operator], truth["max_parallelism"]
    found: dict[str, list] = {}
    for row in map(_plain, rows):
        key = row["key"]
        group = assign_to_key_group(tuple(key.values()) if isinstance(key, dict) else key,
                                    key_type, max_parallelism)
        index = operator_index_for_key_group(max_parallelism, truth["parallelism"], group)
        assert (row["key_group"], row.get("operator_index", index)) == (group, index), row
        if "ttl_timestamp" in row:
            assert isinstance(row["ttl_timestamp"], datetime), (state, row)
            assert row["ttl_timestamp"].year >= 2025, (state, row)
        entry = {name: value for name, value in row.items() if name not in _NOT_VALUES}
        if isinstance(entry.get("value"), bytes):  # Kryo's bytes: their class tag, then the value
            entry["value"] = entry["value"][KRYO_TAG:].hex()
        found.setdefault(_where(key, row["namespace"]), []).append(entry)
    return {key: _order(state, entries) for key, entries in found.items()}


def expected_operator_states(truth: dict) -> dict[tuple[str, str], list]:
    """Every operator state of the job, per subtask: split, union and broadcast."""
    return {("stateful", "seen"): [[count] for count in truth["seen"]],
            ("stateful", "subtasks"): truth["subtasks"],
            ("broadcaster", "rules"): [truth["rules"]] * truth["parallelism"]}


def operator_state_of_rows(rows: Iterable[Mapping[str, Any]]) -> list:
    """Rows of an operator state (``operator_index`` and ``list_element``, or ``user_key`` and
    ``user_value``) per subtask, as ``read_operator_state`` returns them."""
    subtasks: dict[int, Any] = {}
    for row in rows:
        if "user_key" in row:
            subtasks.setdefault(row["operator_index"], {})[row["user_key"]] = row["user_value"]
        else:
            subtasks.setdefault(row["operator_index"], []).append(row["list_element"])
    assert sorted(subtasks) == list(range(len(subtasks))), subtasks
    return [subtasks[index] for index in sorted(subtasks)]


def fixture_counts(truth: dict) -> dict[str, dict]:
    """Per operator of a fixture: (entries, rows) per state, and rows per key group, from its
    expected.json alone (what ``inspect`` and the metadata view must count)."""
    maxp = truth["max_parallelism"]
    stateful = truth["stateful"]
    keys = len(stateful)
    timers = sum(len(s["timers"]) for s in stateful.values())
    stateful_states = {
        "total": (keys, keys), "max_id": (keys, keys), "avg": (keys, keys),
        "last": (keys, keys),
        "events": (keys, sum(len(s["events"]) for s in stateful.values())),
        "per_user": (keys, sum(len(s["per_user"]) for s in stateful.values())),
        "_timer_state/event_user-timers": (timers, timers),
        "_timer_state/processing_user-timers": (0, 0),
        "seen": (len(truth["seen"]), len(truth["seen"])),
        "subtasks": (len(truth["subtasks"]), len(truth["subtasks"])),
    }
    stateful_groups: dict[int, int] = {}
    for key, s in stateful.items():
        group = assign_to_key_group(int(key), LONG, maxp)
        rows = 4 + len(s["events"]) + len(s["per_user"]) + len(s["timers"])
        stateful_groups[group] = stateful_groups.get(group, 0) + rows
    windows = len(truth["windows"])
    window_groups: dict[int, int] = {}
    for window in truth["windows"]:
        user, sub_key, _ = json.loads(window)
        group = assign_to_key_group((user, sub_key), TupleType((STRING, INT)), maxp)
        window_groups[group] = window_groups.get(group, 0) + 2  # its contents and its timer
    rules = len(truth["rules"]) * truth["parallelism"]
    return {
        "stateful": {"states": stateful_states, "groups": stateful_groups},
        "windows": {"states": {"window-contents": (windows, windows),
                               "_timer_state/event_window-timers": (windows, windows),
                               "_timer_state/processing_window-timers": (0, 0)},
                    "groups": window_groups},
        "opaque": {"states": {"last_uuid": (keys, keys),
                              "_timer_state/event_user-timers": (0, 0),
                              "_timer_state/processing_user-timers": (0, 0)}},
        "broadcaster": {"states": {"rules": (rules, rules)}},
    }

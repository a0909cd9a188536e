"""Snapshots of a real Flink 2.3 job (tests/fixtures/flink, made by its generate.py) decode exactly.

They cover what the shared snapshots do not: Snappy compression (keyed and
operator state), max parallelism 256 (two-byte key-group prefixes), inline
state in ``_metadata``, Long and Tuple2 keys, Double, Reducing, Aggregating
(Tuple2 accumulator) and POJO values, window state with ``TimeWindow``
namespaces, event-time timers, and split, union and broadcast operator state.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from statesource.errors import IncompatibleCheckpointError
from statesource.flink.reader import FlinkCheckpoint
from statesource.keygroups import assign_to_key_group
from statesource.types import INT, LONG, STRING, TupleType

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "flink"
CASES = [(variant, kind) for variant in ("mp256", "mp128-snappy")
         for kind in ("canonical", "native")] + [
    (version, kind) for version in ("flink-1.20", "flink-1.15")
    for kind in ("canonical", "native", "checkpoint", "rocksdb")]
"""Flink 2.3's FixtureJob.java, and FixtureJob1x.java run by Flink 1.20.5 and 1.15.4 (the same
job and state, plus ``last_ttl``: heap canonical and native savepoints, a retained heap
checkpoint, a RocksDB canonical savepoint; ``_metadata`` version 4 and 3, operators known by
their ids only; 1.15's operator-state files are version 5, without a compression flag)."""


def _open(variant, kind):
    return (FlinkCheckpoint.open(str(FIXTURES / variant / kind)),
            json.loads((FIXTURES / variant / "expected.json").read_text()))


def _by_key(checkpoint, operator, state):
    found: dict = {}
    for table in checkpoint.read_keyed_state(state, operator=operator):
        for row in table.to_pylist():
            found.setdefault(json.dumps(row["key"]), []).append(row)
    return found


@pytest.mark.parametrize("variant, kind", CASES)
def test_compression_flag_and_key_group_prefix(variant, kind):
    checkpoint, truth = _open(variant, kind)
    snapshot = checkpoint.snapshot
    header = snapshot.header(snapshot.operator("stateful"))
    assert header.compressed == (variant == "mp128-snappy")
    assert checkpoint.operator("stateful").max_parallelism == truth["max_parallelism"]


@pytest.mark.parametrize("variant, kind", CASES)
def test_keyed_state_of_long_keys(variant, kind):
    checkpoint, truth = _open(variant, kind)
    op = checkpoint.operator("stateful")
    assert op.key_type == LONG
    kinds = {s.name: s.kind.value for s in op.keyed_states}
    ttl = {"last_ttl": "value"} if variant.startswith("flink-1.") else {}
    assert kinds == {"total": "value", "max_id": "reducing", "avg": "aggregating",
                     "events": "list", "per_user": "map", "last": "value", **ttl}
    states = {name: _by_key(checkpoint, "stateful", name) for name in kinds}
    timers = _by_key(checkpoint, "stateful", "_timer_state/event_user-timers")
    maxp = truth["max_parallelism"]
    for key, want in truth["stateful"].items():
        group = assign_to_key_group(int(key), LONG, maxp)
        for rows in (*(s[key] for s in states.values()), timers[key]):
            assert {r["key_group"] for r in rows} == {group}
        assert [r["value"] for r in states["total"][key]] == [want["total"]]
        assert [r["value"] for r in states["max_id"][key]] == [want["max_id"]]
        assert [r["accumulator"] for r in states["avg"][key]] == [
            {"f0": want["avg"][0], "f1": want["avg"][1]}]
        assert [[r["list_element"]["f0"], r["list_element"]["f1"]]
                for r in states["events"][key]] == want["events"]
        assert {r["user_key"]: r["user_value"] for r in states["per_user"][key]} == \
            want["per_user"]
        assert [r["value"] for r in states["last"][key]] == [want["last"]]
        if ttl:
            (row,) = states["last_ttl"][key]
            assert row["value"] == want["last_ttl"] and row["ttl_timestamp"].year >= 2025
        assert sorted(r["timestamp"] for r in timers[key]) == sorted(want["timers"])
        assert {r["namespace"] for r in timers[key]} == {None}


@pytest.mark.parametrize("variant, kind", CASES)
def test_window_state_with_tuple_keys_time_windows_and_timers(variant, kind):
    checkpoint, truth = _open(variant, kind)
    key_type = TupleType((STRING, INT))
    assert checkpoint.operator("windows").key_type == key_type
    contents = {}
    for table in checkpoint.read_keyed_state("window-contents", operator="windows"):
        for row in table.to_pylist():
            key = (row["key"]["f0"], row["key"]["f1"])
            assert row["key_group"] == assign_to_key_group(key, key_type,
                                                           truth["max_parallelism"])
            contents[json.dumps([*key, row["namespace"]["start"]])] = row
            assert row["namespace"]["end"] == row["namespace"]["start"] + 100_000
    assert {k: r["accumulator"] for k, r in contents.items()} == {
        k: w["sum"] for k, w in truth["windows"].items()}
    timers = [row for table in checkpoint.read_keyed_state(
        "_timer_state/event_window-timers", operator="windows") for row in table.to_pylist()]
    assert sorted((r["key"]["f0"], r["key"]["f1"], r["namespace"]["start"], r["timestamp"])
                  for r in timers) == sorted(
        (*json.loads(k)[:2], json.loads(k)[2], json.loads(k)[2] + 99_999)
        for k in truth["windows"])


@pytest.mark.parametrize("variant, kind", CASES)
def test_split_union_and_broadcast_operator_state(variant, kind):
    checkpoint, truth = _open(variant, kind)
    assert checkpoint.read_operator_state("seen", operator="stateful") == [[n] for n in
                                                                          truth["seen"]]
    assert checkpoint.read_operator_state("subtasks", operator="stateful") == truth["subtasks"]
    assert checkpoint.read_operator_state("rules", operator="broadcaster") == [
        truth["rules"], truth["rules"]]
    modes = {s.state_name: s.kind for s in checkpoint.summaries() if s.key_type is None}
    assert modes == {"seen": "operator-split", "subtasks": "operator-union",
                     "rules": "operator-broadcast"}


@pytest.mark.parametrize("variant, kind", [("mp256", "canonical"), ("mp128-snappy", "canonical"),
                                           *((version, kind)
                                             for version in ("flink-1.20", "flink-1.15")
                                             for kind in ("canonical", "rocksdb"))])
def test_kryo_values_read_as_bytes_from_a_canonical_savepoint(variant, kind):
    # Flink 1.x writes them with Kryo 2 (its snapshot class is 2.x's): the same bytes here
    checkpoint, truth = _open(variant, kind)
    (state,) = checkpoint.operator("opaque").keyed_states
    assert state.schemas["value"].avro == "bytes"
    label = checkpoint.snapshot.operator("opaque").label  # a 1.x snapshot's is the hex id
    (summary,) = [s for s in checkpoint.summaries() if s.operator_uid == label
                  and s.kind == "value"]
    assert summary.value_types == {"value": {"type": "bytes", "java-class": "java.util.UUID"}}
    values = _by_key(checkpoint, "opaque", "last_uuid")
    assert sorted(map(int, values)) == sorted(map(int, truth["stateful"]))
    for key, rows in values.items():
        (row,) = rows
        # UUID(key, id of the key's last event) in FixtureJob. Kryo writes a 2-byte class tag,
        # then Kryo 5 (Flink 2.x) the UUID's two longs little-endian, Kryo 2 (Flink 1.x) each
        # as a zigzag varint
        last_id = truth["stateful"][key]["max_id"]
        if variant.startswith("flink-1."):
            assert row["value"][2:] == _varint(2 * int(key)) + _varint(2 * last_id)
        else:
            assert row["value"][2:] == (int(key).to_bytes(8, "little")
                                        + last_id.to_bytes(8, "little"))


def _varint(value: int) -> bytes:
    """Kryo's unsigned varint: 7 bits a byte, low group first."""
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


@pytest.mark.parametrize("variant, kind", [("mp256", "native"), ("mp128-snappy", "native"),
                                           *((version, kind)
                                             for version in ("flink-1.20", "flink-1.15")
                                             for kind in ("native", "checkpoint"))])
def test_kryo_values_in_a_native_savepoint_fail_that_operator_only(variant, kind):
    checkpoint, _ = _open(variant, kind)
    with pytest.raises(IncompatibleCheckpointError, match="java.util.UUID.*take a canonical"):
        list(checkpoint.read_keyed_state("last_uuid", operator="opaque"))
    assert list(checkpoint.read_keyed_state("total", operator="stateful"))

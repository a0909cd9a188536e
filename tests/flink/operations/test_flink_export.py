"""A statesource checkpoint exported as a Flink savepoint restores in a real Flink 2.3.

The checkpoint is written by statesource's own backends; a real Flink restores the
exported savepoint (``tests/flink_restore.py``) with descriptors of the same names and
types, and every key, namespace, value and TTL timestamp it restored is compared with
what the backends held. Refusals write nothing.
"""

from __future__ import annotations

import pytest

from flink_restore import FIXTURE_JOB, restore, rows_of, subtasks
from sample_state import TTL, descriptors, dump, merged, populate
from statesource.checkpointing import CheckpointWriter, SubtaskBackends
from statesource.cli import main
from statesource.errors import CheckpointExistsError, TypeMismatchError
from statesource.flink.handles import operator_id_of
from statesource.flink.operations.export import export_flink
from statesource.flink.serializers.mapping import PojoClass
from statesource.keygroups import key_group_range_for_operator
from statesource.state.clock import ManualClock
from statesource.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)
from statesource.state.keyed_backend import KeyedStateBackend
from statesource.state.operator_backend import OperatorStateBackend

PAIR = {"type": "record", "name": "Pair",
        "fields": [{"name": "f0", "type": "long"}, {"name": "f1", "type": "long"}]}


class SumCount:
    """An average's accumulator as a Flink ``Tuple2<Long, Long>``: sum, count."""

    def create_accumulator(self):
        return {"f0": 0, "f1": 0}

    def add(self, value, accumulator):
        return {"f0": accumulator["f0"] + value, "f1": accumulator["f1"] + 1}

    def get_result(self, accumulator):
        return accumulator["f0"] / accumulator["f1"]


def user_descriptors():
    """The sample states, the average's accumulator a ``Tuple2`` (a record Flink cannot
    restore without its POJO class)."""
    return [AggregatingStateDescriptor("agg", SumCount(), PAIR) if d.name == "agg" else d
            for d in descriptors()]


USER_SPEC = [
    {"name": "value", "kind": "value", "value": "Long"},
    {"name": "windowed", "kind": "value", "value": "String", "namespace": "Long"},
    {"name": "list", "kind": "list", "element": "String"},
    {"name": "map", "kind": "map", "user_key": "String", "user_value": {"list": "Double"}},
    {"name": "reduce", "kind": "reducing", "value": "Long"},
    {"name": "agg", "kind": "aggregating", "value": {"tuple": ["Long", "Long"]}},
    {"name": "ttl_value", "kind": "value", "value": "Long", "ttl": True},
    {"name": "ttl_list", "kind": "list", "element": "Long", "ttl": True},
    {"name": "ttl_map", "kind": "map", "user_key": "String", "user_value": "Long", "ttl": True},
]


def populate_users(backend: KeyedStateBackend, keys) -> None:
    populate(backend, keys, states_of=user_descriptors)


def window_descriptors():
    return [
        ValueStateDescriptor("clicks", "long", namespace_type="timewindow"),
        ListStateDescriptor("pages", "string", namespace_type="timewindow"),
        ValueStateDescriptor("last_seen", "string", ttl=TTL),
    ]


WINDOW_SPEC = [
    {"name": "clicks", "kind": "value", "value": "Long", "namespace": "window"},
    {"name": "pages", "kind": "list", "element": "String", "namespace": "window"},
    {"name": "last_seen", "kind": "value", "value": "String", "ttl": True},
]


def populate_windows(backend: KeyedStateBackend, keys) -> None:
    states = {d.name: backend.get_state(d) for d in window_descriptors()}
    for i, key in enumerate(keys):
        backend.set_current_key(key)
        for start in (0, 60_000 * (i % 5)):
            backend.set_current_namespace((start, start + 60_000))
            states["clicks"].update(i + start)
            states["pages"].add_all([f"/p/{i}/{j}" for j in range(i % 3 + 1)])
        backend.set_current_namespace(None)
        states["last_seen"].update(f"seen-{key}")


USERS = [f"user-{i}" for i in range(200)] + ["", "ünïcødé 🎉", "a\0b"]
ACCOUNTS = [i * 7919 - 50_000 for i in range(150)] + [-(2**63), 2**63 - 1, 0]


def backends_of(key_type, max_parallelism, parallelism, keys, populate, clock):
    from statesource.keygroups import assign_to_key_group
    from statesource.types import key_type as parse_key_type

    parsed = parse_key_type(key_type)
    backends = []
    for index in range(parallelism):
        owned = key_group_range_for_operator(max_parallelism, parallelism, index)
        mine = [k for k in keys if assign_to_key_group(k, parsed, max_parallelism) in owned]
        backend = KeyedStateBackend(key_type, max_parallelism, owned, clock=clock)
        populate(backend, mine)
        backends.append(backend)
    return backends


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A checkpoint of two keyed operators (string keys at max parallelism 128 on 2
    subtasks; long keys with window namespaces at 300 on 3), exported; and the model."""
    root = tmp_path_factory.mktemp("export")
    clock = ManualClock(1_700_000_000_000)
    users = backends_of("string", 128, 2, USERS, populate_users, clock)
    windows = backends_of("long", 300, 3, ACCOUNTS, populate_windows, clock)
    with CheckpointWriter(str(root / "checkpoints")) as writer:
        writer.write(7, {"users": users, "windows": windows})
    done = export_flink(root / "checkpoints", root / "savepoint")
    model = {"users": merged([dump(b) for b in users]),
             "windows": merged([dump(b) for b in windows])}
    return done, model


def _expected(model: dict, kinds: dict[str, str], ttl: set[str]) -> dict:
    """``state -> {(key, namespace): (value, ttl timestamps)}`` in the harness's shapes."""
    expected: dict = {}
    for state, entries in model.items():
        rows = expected[state] = {}
        for (key, namespace), stored in entries.items():
            timestamps = None
            if state in ttl:
                if kinds[state] == "list":
                    timestamps = [t for _, t in stored]
                    stored = [v for v, _ in stored]
                elif kinds[state] == "map":
                    timestamps = sorted([k, t] for k, (_, t) in stored.items())
                    stored = {k: v for k, (v, _) in stored.items()}
                else:
                    stored, timestamps = stored
            if kinds[state] == "map":
                stored = sorted([k, v] for k, v in stored.items())
            elif isinstance(stored, dict):  # a Tuple accumulator: a list of its fields
                stored = [stored[f"f{i}"] for i in range(len(stored))]
            if isinstance(namespace, tuple):
                namespace = {"start": namespace[0], "end": namespace[1]}
            rows[(_hashable(key), _hashable(namespace))] = (stored, timestamps)
    return expected


def _hashable(value):
    if isinstance(value, dict):
        return tuple(sorted(value.items()))
    return value


def _restored(rows, operator, states) -> dict:
    restored: dict = {}
    for spec in states:
        found = restored[spec["name"]] = {}
        for row in rows_of(rows, operator, spec["name"], spec["kind"]):
            key = (_hashable(row["key"]), _hashable(row["namespace"]))
            assert key not in found, f"{operator}/{spec['name']}: {key} restored twice"
            assert row["storedKeyGroup"] == row["keyGroup"], row
            found[key] = (row["value"], row.get("ttlTimestamp"))
    return restored


def check_restored(rows, operator, states, model):
    kinds = {s["name"]: s["kind"] for s in states}
    ttl = {s["name"] for s in states if s.get("ttl")}
    expected = _expected(model, kinds, ttl)
    restored = _restored(rows, operator, states)
    for name in kinds:
        assert restored[name] == expected[name], f"{operator}/{name}"
        assert expected[name], f"{operator}/{name} has entries"


def restore_spec(max_parallelism, uid, key, states, parallelism):
    return {"max_parallelism": max_parallelism, "parallelism": parallelism,
            "ignore_unclaimed_state": True,
            "operators": [{"uid": uid, "key": key, "keyed_states": states}]}


@pytest.mark.parametrize("parallelism", [2, 3])
def test_string_keyed_states_restore_with_every_value_and_ttl_timestamp(exported, parallelism):
    done, model = exported
    rows = restore(done.output, restore_spec(128, "users", "String", USER_SPEC, parallelism))
    check_restored(rows, "users", USER_SPEC, model["users"])
    restored_states = {name for d in subtasks(rows, "users").values()
                       for name in d["restoredKeyedStates"]}
    assert {s["name"] for s in USER_SPEC} <= restored_states
    (snapshot,) = [row for row in rows if row["kind"] == "snapshot"]
    assert snapshot["checkpointId"] == 7
    by_uid = {op["uid"]: op for op in snapshot["operators"]}
    assert by_uid["users"]["operatorId"] == operator_id_of("users")
    assert (by_uid["users"]["parallelism"], by_uid["users"]["maxParallelism"]) == (2, 128)


def test_long_keyed_window_states_restore(exported):
    done, model = exported
    rows = restore(done.output, restore_spec(300, "windows", "Long", WINDOW_SPEC, 3))
    check_restored(rows, "windows", WINDOW_SPEC, model["windows"])
    (snapshot,) = [row for row in rows if row["kind"] == "snapshot"]
    by_uid = {op["uid"]: op for op in snapshot["operators"]}
    assert (by_uid["windows"]["parallelism"], by_uid["windows"]["maxParallelism"]) == (3, 300)


def test_the_report_counts_what_was_written(exported):
    done, model = exported
    assert done.checkpoint_id == 7 and done.skipped_operator_states == ()
    assert [(op.uid, op.parallelism, op.max_parallelism) for op in done.operators] == [
        ("users", 2, 128), ("windows", 3, 300)]
    users = model["users"]
    pairs = sum(len(stored) if isinstance(stored, dict) and name.endswith("map") else 1
                for name, entries in users.items() for stored in entries.values())
    assert done.operators[0].entries == pairs


def _checkpoint(root, operators):
    with CheckpointWriter(str(root)) as writer:
        writer.write(1, operators)
    return root


def test_an_existing_output_is_refused_and_untouched(tmp_path, exported):
    done, _ = exported
    output = tmp_path / "taken"
    output.mkdir()
    with pytest.raises(CheckpointExistsError, match="taken"):
        export_flink(done.source, output)
    assert list(output.iterdir()) == []
    assert list(tmp_path.iterdir()) == [output]


@pytest.mark.parametrize("schema, message", [
    ({"type": "record", "name": "Avg", "fields": [{"name": "sum", "type": "long"},
                                                   {"name": "count", "type": "long"}]},
     r"record Avg is not a Tuple .* declare the POJO it is"),
    ({"type": "string", "logicalType": "uuid"}, r"logical type 'uuid'.*Kryo"),
], ids=["record", "logical-type"])
def test_a_state_without_a_derivable_serializer_is_refused_writing_nothing(tmp_path, schema,
                                                                          message):
    backend = KeyedStateBackend("string", 128)
    backend.get_state(ValueStateDescriptor("fine", "long"))
    backend.get_state(ValueStateDescriptor("session", schema))
    source = _checkpoint(tmp_path / "checkpoints", {"sessions": [backend]})
    with pytest.raises(TypeMismatchError,
                       match=r"operator 'sessions'.*state 'session'.*" + message):
        export_flink(source, tmp_path / "savepoint")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoints"]


SEEN = {"type": "record", "name": "Seen",
        "fields": [{"name": "f0", "type": "string"}, {"name": "f1", "type": "long"}]}
OPERATOR_SPEC = [{"name": "offsets", "mode": "split", "element": "Long"},
                 {"name": "seen", "mode": "union", "element": {"tuple": ["String", "Long"]}},
                 {"name": "rules", "mode": "broadcast", "user_key": "String",
                  "user_value": "Long"}]


def _operator_backends(parallelism: int) -> list[OperatorStateBackend]:
    """Split, union (``Tuple2<String, Long>``) and broadcast states on each subtask; one
    subtask's split and union shares empty."""
    rules = {f"rule-{i}": i * 1000 - 7 for i in range(12)} | {"": -(2**63), "ü 🎉": 2**63 - 1}
    backends = []
    for index in range(parallelism):
        backend = OperatorStateBackend()
        if index != 1:
            backend.get_list_state("offsets", "long").add_all(
                [index * 100 + i for i in range(index + 3)] + [42])
            backend.get_union_list_state("seen", SEEN).add_all(
                [{"f0": f"s{index}-{i}", "f1": i} for i in range(index + 1)])
        else:
            backend.get_list_state("offsets", "long")
            backend.get_union_list_state("seen", SEEN)
        backend.get_broadcast_state("rules", "string", "long").put_all(rules)
        backends.append(backend)
    return backends


def _check_operator_states(rows, operator, backends, parallelism):
    split = sorted(e for b in backends for e in b.get_list_state("offsets", "long").get())
    union = sorted([e["f0"], e["f1"]] for b in backends
                   for e in b.get_union_list_state("seen", SEEN).get())
    broadcast = dict(backends[0].get_broadcast_state("rules", "string", "long").items())
    restored_split = []
    for index in range(parallelism):
        (offsets,) = [r for r in rows_of(rows, operator, "offsets", "split")
                      if r["subtask"] == index]
        restored_split += offsets["value"]
        (seen,) = [r for r in rows_of(rows, operator, "seen", "union") if r["subtask"] == index]
        assert sorted(seen["value"]) == union, index
        (rules,) = [r for r in rows_of(rows, operator, "rules", "broadcast")
                    if r["subtask"] == index]
        assert {k: v for k, v in rules["value"]} == broadcast, index
    assert sorted(restored_split) == split
    assert split and union and broadcast


@pytest.mark.parametrize("parallelism, compression", [(3, None), (2, "snappy")])
def test_operator_states_restore_split_union_and_broadcast(tmp_path, parallelism, compression):
    """Operator states alone (``src``) and next to keyed state (``mixed``), on 3 subtasks,
    restore at 3 and at 2: the split elements redistributed, every subtask with every union
    element and the whole broadcast map. Snappy-compressed on request (keyed and operator
    state, as a job with snapshot-compression writes them), they restore alike."""
    def populate_counts(backend, keys):
        counts = backend.get_state(ValueStateDescriptor("count", "long"))
        for key in keys:
            backend.set_current_key(key)
            counts.update(key * 2)

    keyed = backends_of("long", 128, 3, range(60), populate_counts, ManualClock(0))
    src = _operator_backends(3)
    mixed = _operator_backends(3)
    source = _checkpoint(tmp_path / "checkpoints", {
        "src": [SubtaskBackends(operator=b) for b in src],
        "mixed": [SubtaskBackends(k, o) for k, o in zip(keyed, mixed)]})
    done = export_flink(source, tmp_path / "savepoint", compression=compression)
    assert done.skipped_operator_states == ()
    assert done.compressed is (compression == "snappy")
    by_uid = {op.uid: op for op in done.operators}
    assert sorted(by_uid["src"].operator_states) == ["offsets", "rules", "seen"]
    assert by_uid["src"].states == () and by_uid["mixed"].states == ("count",)
    spec = {"max_parallelism": 128, "parallelism": parallelism, "operators": [
        {"uid": "src", "operator_states": OPERATOR_SPEC},
        {"uid": "mixed", "key": "Long", "operator_states": OPERATOR_SPEC,
         "keyed_states": [{"name": "count", "kind": "value", "value": "Long"}]}]}
    rows = restore(done.output, spec)
    _check_operator_states(rows, "src", src, parallelism)
    _check_operator_states(rows, "mixed", mixed, parallelism)
    assert {row["key"]: row["value"] for row in rows_of(rows, "mixed", "count", "value")} == {
        key: key * 2 for key in range(60)}


def test_keyed_only_leaves_operator_state_out(tmp_path):
    keyed = KeyedStateBackend("long", 128)
    counts = keyed.get_state(ValueStateDescriptor("count", "long"))
    for key in range(20):
        keyed.set_current_key(key)
        counts.update(key * 2)
    operator = OperatorStateBackend()
    operator.get_list_state("offsets", "long").add_all([1, 2, 3])
    source = _checkpoint(tmp_path / "checkpoints",
                         {"mixed": [SubtaskBackends(keyed, operator)]})
    done = export_flink(source, tmp_path / "savepoint", keyed_only=True)
    assert done.skipped_operator_states == (("mixed", "offsets"),)
    assert done.operators[0].operator_states == ()
    rows = restore(done.output, restore_spec(128, "mixed", "Long",
                                      [{"name": "count", "kind": "value", "value": "Long"}], 1))
    assert {row["key"]: row["value"] for row in rows_of(rows, "mixed", "count", "value")} == {
        key: key * 2 for key in range(20)}
    assert not rows_of(rows, "mixed", "offsets")


def test_an_operator_state_without_a_derivable_serializer_is_refused(tmp_path):
    operator = OperatorStateBackend()
    operator.get_list_state("odd", {"type": "enum", "name": "E", "symbols": ["A"]}).add_all(["A"])
    source = _checkpoint(tmp_path / "checkpoints", {"src": [SubtaskBackends(operator=operator)]})
    with pytest.raises(TypeMismatchError, match=r"operator 'src'.*operator state 'odd'"):
        export_flink(source, tmp_path / "savepoint")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoints"]


EVENT = {"type": "record", "name": "Event", "fields": [
    {"name": "id", "type": "long"}, {"name": "key", "type": "long"},
    {"name": "user", "type": ["null", "string"]}, {"name": "amount", "type": "double"},
    {"name": "ts", "type": "long"}]}


@pytest.mark.parametrize("way", ["python", "cli"])
def test_pojo_values_restore_with_their_declared_class(tmp_path, way):
    """A record declared a POJO (``pojos=``, or ``export-flink --pojo-classes``) restores as
    the job's class."""
    backend = KeyedStateBackend("long", 256)
    last = backend.get_state(ValueStateDescriptor("last", EVENT))
    by_user = backend.get_state(MapStateDescriptor("by_user", "string", EVENT))
    events = {}
    for key in range(40):
        backend.set_current_key(key)
        event = {"id": key * 10, "key": key, "user": None if key % 5 == 0 else f"u{key % 7}",
                 "amount": key / 4, "ts": key * 1000}
        last.update(event)
        by_user.put(f"u{key % 3}", event)
        events[key] = event
    source = _checkpoint(tmp_path / "checkpoints", {"events": [backend]})
    output = tmp_path / "savepoint"
    with pytest.raises(TypeMismatchError, match="declare the POJO it is"):
        export_flink(source, output)
    if way == "python":
        export_flink(source, output, pojos={"Event": PojoClass("FixtureJob$Event")})
    else:
        assert main(["export-flink", str(source), "--output", str(output),
                     "--pojo-classes", '{"Event": "FixtureJob$Event"}']) == 0
    states = [{"name": "last", "kind": "value", "value": {"pojo": "FixtureJob$Event"}},
              {"name": "by_user", "kind": "map", "user_key": "String",
               "user_value": {"pojo": "FixtureJob$Event"}}]
    rows = restore(output, restore_spec(256, "events", "Long", states, 2),
                   java_sources=[FIXTURE_JOB])
    assert {row["key"]: row["value"] for row in rows_of(rows, "events", "last", "value")} == events
    assert {row["key"]: row["value"] for row in rows_of(rows, "events", "by_user", "map")} == {
        key: [[f"u{key % 3}", event]] for key, event in events.items()}

"""Flink SQL state: every keyed state of every SQL operator reads as the job's model says.

The ``sql`` fixture is SqlJob.java run by a real Flink 2.3 (generate.py ``--only-sql``): a
GROUP BY with COUNT DISTINCT, a regular join, a deduplication and a window TVF, whose keys and
values are ``RowData``. Each state reads exactly (value by value and column-wise) on the heap
backend's canonical and native savepoints and RocksDB's canonical one; every key sits in the
key group Flink's hash of its bytes gives, and writes back to Flink's very bytes; operators
are found by the names Flink gave them; keys given as their fields' values are erased. What SQL
operators do not support yet (import into a statesource checkpoint) is refused, saying so.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
from sql_fixture import (
    AGGREGATE,
    DEDUP,
    JOIN,
    KINDS,
    SQL,
    STATES,
    TIMERS,
    WINDOW,
    expected,
    key_of,
    shaped,
)

from flink_fixture_checks import FIXTURES
from statesource.cli import main
from statesource.errors import (
    InvalidArgumentError,
    StateNotFoundError,
)
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.layouts.canonical import CANONICAL
from statesource.flink.operations.census import count_snapshot
from statesource.flink.operations.edit import erase_keys
from statesource.flink.operations.importer import import_flink
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.format.reader import Checkpoint
from statesource.keygroups import assign_to_key_group
from statesource.schema import hashable_record
from statesource.spark.write.erase import erase_on_driver
from statesource.types import Row, SqlRowType, SqlType

EVERY_STATE = sorted(STATES) + sorted(TIMERS)
KEY_TYPES = {AGGREGATE: "sqlrow<STRING, INT>", JOIN: "sqlrow<STRING>", DEDUP: "sqlrow<STRING>",
             WINDOW: "sqlrow<STRING>"}


def _kind(state: tuple[str, str]) -> str:
    return "timers" if state in TIMERS else STATES[state]


def test_the_model_holds_every_query_state():
    """The comparisons below cannot pass by two empty sides: the model has every query's state."""
    sizes = {state: len(expected(*state)) for state in EVERY_STATE}
    assert sizes[(AGGREGATE, "accState")] == sizes[(AGGREGATE, "distinctAcc_0")] > 50
    assert sizes[(JOIN, "left-records")] == sizes[(JOIN, "right-records")] == 13
    assert sizes[(DEDUP, "waiting-to-emit-on-timer")] == 24
    assert sizes[(WINDOW, "window-aggs")] == sizes[(WINDOW, "_timer_state/event_window-timers")]
    assert any("null" in key for key in expected(AGGREGATE, "accState"))  # a NULL key field


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("state", EVERY_STATE, ids="/".join)
def test_every_sql_state_reads_exactly_value_by_value(kind, state):
    checkpoint = FlinkCheckpoint.open(str(SQL / kind))
    operator, name = state
    triples = ((key.fields, namespace, stored)
               for _, keys, namespaces, values in checkpoint.entries(name, operator=operator)
               for key, namespace, stored in zip(keys, namespaces, values))
    assert shaped(_kind(state), triples) == expected(operator, name)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("state", EVERY_STATE, ids="/".join)
def test_every_sql_state_reads_exactly_column_wise(kind, state):
    checkpoint = FlinkCheckpoint.open(str(SQL / kind))
    operator, name = state
    rows = [row for table in checkpoint.read_keyed_state(name, operator=operator)
            for row in table.to_pylist()]
    if _kind(state) == "map":
        grouped: dict = {}
        for row in rows:
            entry = grouped.setdefault(key_of(row["key"], row["namespace"]),
                                       (row["key"], row["namespace"], {}))
            entry[2][hashable_record(row["user_key"])] = row["user_value"]
        triples = list(grouped.values())
    else:
        column = "timestamp" if _kind(state) == "timers" else "value"
        triples = [(row["key"], row["namespace"], row[column]) for row in rows]
    assert shaped(_kind(state), triples) == expected(operator, name)


COLUMNAR_VALUES = {(DEDUP, "already-emitted-state-boolean"), (DEDUP, "waiting-to-emit-on-timer"),
                   (WINDOW, "window-aggs"), (AGGREGATE, "distinctAcc_0_null_state")}
"""The states whose keys and values the column decoders take (the others hold a wide decimal,
a timestamp past microseconds or a RAW, which only the per-value decoder reads)."""


@pytest.mark.parametrize("kind", KINDS)
def test_sql_states_of_columnar_types_decode_column_wise(kind, monkeypatch):
    """The column-wise test above reads these states through the column decoders of binary
    rows (not by falling back to the per-value decoder, which would pass it too): with the
    per-value decoder barred, every row still reads (a native key group is read value by
    value by design, so there only the decoders' existence is checked)."""
    checkpoint = FlinkCheckpoint.open(str(SQL / kind))
    columnar = set()
    for operator, name in EVERY_STATE:
        op = checkpoint.snapshot.operator(operator)
        info = next(i for i in checkpoint.snapshot.header(op).states if i.name == name)
        if checkpoint.column_decoder(op, info) is not None:
            columnar.add((operator, name))
    assert columnar == COLUMNAR_VALUES | set(TIMERS)
    if kind == "native":
        return

    def barred(*args, **kwargs):
        raise AssertionError("a key group went back to the per-value decoder")
    monkeypatch.setattr(FlinkSnapshot, "decode_piece", barred)
    for operator, name in sorted(COLUMNAR_VALUES):
        rows = sum(t.num_rows for t in checkpoint.read_keyed_state(name, operator=operator))
        assert rows == len(expected(operator, name)), name


@pytest.mark.parametrize("kind", KINDS)
def test_the_key_types_are_rows_of_the_keys_sql_types(kind):
    checkpoint = FlinkCheckpoint.open(str(SQL / kind))
    for operator, name in KEY_TYPES.items():
        assert checkpoint.operator(operator).key_type.name == name
    assert checkpoint.operator(AGGREGATE).key_type == SqlRowType(
        (SqlType("VARCHAR", length=2**31 - 1), SqlType("INTEGER")))


@pytest.mark.parametrize("kind", ["canonical", "rocksdb"])
def test_every_key_is_in_the_key_group_flink_put_it_in(kind):
    """Decoded, a key hashes (as Flink's ``BinaryRowData.hashCode``) to the key group whose
    bytes hold it, and writes back to the very bytes Flink wrote."""
    snapshot = FlinkCheckpoint.open(str(SQL / kind)).snapshot
    checked = 0
    for operator in KEY_TYPES:
        op = snapshot.operator(operator)
        key_type = FlinkCheckpoint(snapshot).operator(operator).key_type
        for piece in snapshot.key_group_bytes(op):
            header = snapshot.handle_header(op, piece.handle)
            data = snapshot.key_group_data(piece, snapshot.piece_bytes(piece))
            for state_id, pairs in CANONICAL.pairs(data, header, 1):
                if header.states[state_id].is_timer:  # a timer's key follows its timestamp
                    continue
                for composite, _ in pairs:
                    r = BinaryReader(composite, "key")
                    length = r.i32()
                    r.pos = 0
                    key = header.key.read(r)
                    assert key_type.encode(key) == composite[4:4 + length]
                    assert assign_to_key_group(key, key_type, 128) == piece.key_group
                    checked += 1
    assert checked > 500


@pytest.mark.parametrize("kind", KINDS)
def test_inspect_counts_every_sql_state(kind):
    counts = count_snapshot(FlinkCheckpoint.open(str(SQL / kind)))
    for (operator, name), state_kind in STATES.items():
        (op,) = [o for o in counts.operators if o.uid == FlinkCheckpoint.open(
            str(SQL / kind)).operator(operator).uid]
        (state,) = [s for s in op.states if s.name == name]
        model = expected(operator, name)
        assert state.entries == len(model), name
        assert state.rows == sum(len(v) if state_kind == "map" else 1 for v in model.values())
    assert counts.unchecked == ()


# -- operators by name --------------------------------------------------------------------

def test_an_operator_is_named_by_uid_hex_id_or_its_unique_name():
    checkpoint = FlinkCheckpoint.open(str(SQL / "canonical"))
    op = checkpoint.snapshot.operator("5_group-aggregate")
    for name in (AGGREGATE, "5_group-aggregate", op.operator_id):
        assert checkpoint.operator(name).uid == "5_group-aggregate"
    with pytest.raises(StateNotFoundError, match=r"'5_group-aggregate' \(GroupAggregate\[5\]\)"):
        checkpoint.operator("GroupAggregate[99]")


def test_an_operator_keyed_by_a_row_of_no_fields_fails_alone():
    """A query without a key (an aggregation with no GROUP BY) keys its state by Flink's empty
    row (``EmptyRowDataKeySelector``: a ``RowDataSerializer`` of no fields). statesource does
    not read such keys: the listing names why for that operator and lists the others. The
    fixture has no such query, so its aggregation's parsed key serializer is emptied."""
    checkpoint = FlinkCheckpoint.open(str(SQL / "canonical"))
    checkpoint.snapshot.header(checkpoint.snapshot.operator(AGGREGATE)).key.types = []
    rows = checkpoint.summaries()
    (row,) = [r for r in rows if r.operator_name == AGGREGATE and r.kind == "keyed"]
    assert row.state_name is None
    assert "key row without fields" in row.unreadable
    assert (DEDUP, "waiting-to-emit-on-timer", None) in {
        (r.operator_name, r.state_name, r.unreadable) for r in rows}


def test_a_name_several_operators_have_is_refused_listing_them():
    checkpoint = FlinkCheckpoint.open(str(FIXTURES / "mp256" / "canonical"))
    sinks = [op.label for op in checkpoint.snapshot.operators if op.name == "Sink: Writer"]
    assert len(sinks) == 4
    with pytest.raises(InvalidArgumentError, match="4 operators are named 'Sink: Writer'") as error:
        checkpoint.operator("Sink: Writer")
    assert all(repr(label) in str(error.value) for label in sinks)


def test_the_metadata_names_each_operator():
    summaries = FlinkCheckpoint.open(str(SQL / "rocksdb")).summaries()
    named = {(s.operator_uid, s.operator_name) for s in summaries}
    assert {("5_group-aggregate", AGGREGATE), ("11_join", JOIN), ("16_deduplicate", DEDUP),
            ("21_global-window-aggregate", WINDOW)} <= named


def test_the_command_line_takes_an_operator_by_name(capsys):
    assert main(["diff", str(SQL / "canonical"), str(SQL / "rocksdb"),
                 "--operator", AGGREGATE]) == 0
    out = capsys.readouterr().out
    assert "accState" in out and "left-records" not in out
    assert main(["diff", str(FIXTURES / "mp256" / "canonical"), str(FIXTURES / "mp256" / "native"),
                 "--operator", "Sink: Writer"]) != 0
    assert "4 operators are named 'Sink: Writer'" in capsys.readouterr().err


# -- what SQL operators are not yet ------------------------------------------------------------

def test_import_leaves_sql_operators_out_saying_why(tmp_path):
    result = import_flink(str(SQL / "canonical"), str(tmp_path))
    skipped = dict(result.skipped_operators)
    assert set(skipped) == {"5_group-aggregate", "11_join", "16_deduplicate",
                            "21_global-window-aggregate"}
    assert "its keys are Flink SQL rows (sqlrow<STRING, INT>)" in skipped["5_group-aggregate"]
    assert Checkpoint.open(str(tmp_path)).metadata.operators  # the others are imported


def test_import_leaves_an_operator_keyed_by_no_fields_out_saying_why(tmp_path, monkeypatch):
    """As the listing above: the aggregation's key serializer emptied, import names why it
    leaves that operator out, and imports the others (it refused the whole snapshot)."""
    header = FlinkSnapshot.header

    def keyless(snapshot: FlinkSnapshot, op: Any) -> Any:
        found = header(snapshot, op)
        if op.uid == "5_group-aggregate":
            found.key.types = []
        return found

    monkeypatch.setattr(FlinkSnapshot, "header", keyless)
    skipped = dict(import_flink(str(SQL / "canonical"), str(tmp_path)).skipped_operators)
    assert "key row without fields" in skipped["5_group-aggregate"]
    assert "sqlrow<STRING>" in skipped["11_join"]
    assert Checkpoint.open(str(tmp_path)).metadata.operators


# -- erasing SQL keys (tests/flink/test_sql_restore.py restores them in the SQL job) --------------

def _read(path, state: tuple[str, str]) -> dict:
    operator, name = state
    return shaped(_kind(state), ((key.fields, namespace, stored)
                                 for _, keys, namespaces, values in FlinkCheckpoint.open(
                                     str(path)).entries(name, operator=operator)
                                 for key, namespace, stored in zip(keys, namespaces, values)))


def _without(state: tuple[str, str], keys: list[list]) -> dict:
    """The model of ``state`` without the entries of ``keys`` (key rows' JSON values)."""
    gone = [json.dumps(key)[:-1] for key in keys]  # a key's JSON, open for a namespace
    return {key: value for key, value in expected(*state).items()
            if not any(key == g + "]" or key.startswith(g + ", ") for g in gone)}


@pytest.mark.parametrize("kind", KINDS)
def test_erasing_sql_keys_leaves_out_exactly_their_entries_and_timers(kind, tmp_path):
    keys = [["u0", 0], ["u3", None]]
    done = erase_keys(str(SQL / kind), str(tmp_path / "out"), AGGREGATE,
                      [("u0", 0), Row("u3", None), {"f0": "nobody", "f1": 2}])
    assert done.missing == ({"f0": "nobody", "f1": 2},)
    assert dict(done.removed) == {"accState": 2, "distinctAcc_0": sum(
        len(expected(AGGREGATE, "distinctAcc_0")[json.dumps(k)]) for k in keys)}
    for state in EVERY_STATE:
        if state[0] == AGGREGATE:
            assert _read(tmp_path / "out", state) == _without(state, keys), state
    window = [["u8"]]
    assert main(["erase", str(SQL / kind), "--operator", WINDOW, "--key", '["u8"]',
                 "--output", str(tmp_path / "window")]) == 0
    for state in [(WINDOW, "window-aggs"), (WINDOW, "_timer_state/event_window-timers")]:
        assert _read(tmp_path / "window", state) == _without(state, window), state


def test_the_command_line_erases_sql_keys_given_as_json(tmp_path, capsys):
    keys = tmp_path / "keys.jsonl"
    keys.write_text('["u0", 1]\n["u0", null]\n["nobody", 1]\n')
    assert main(["erase", str(SQL / "canonical"), "--operator", AGGREGATE, "--keys-file",
                 str(keys), "--key", '["u1", 0]', "--output", str(tmp_path / "out"),
                 "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["keys"] == 4 and document["missing"] == [["nobody", 1]]
    assert document["removed"]["accState"] == 3
    state = (AGGREGATE, "accState")
    assert _read(tmp_path / "out", state) == _without(state, [["u1", 0], ["u0", 1], ["u0", None]])
    assert main(["erase", str(SQL / "canonical"), "--operator", AGGREGATE, "--key", '["u0"]',
                 "--output", str(tmp_path / "bad")]) == 1
    assert "sqlrow<STRING, INT> value ['u0'] must be a JSON array of 2 fields" in (
        capsys.readouterr().err)
    assert not (tmp_path / "bad").exists()


def test_a_key_of_another_type_is_refused_naming_it(tmp_path):
    with pytest.raises(InvalidArgumentError, match=r"key \('u0', 'zero'\) is not a key of"
                       r" operator '5_group-aggregate'.*sqlrow<STRING, INT>"):
        erase_keys(str(SQL / "canonical"), str(tmp_path / "out"), AGGREGATE, [("u0", "zero")])
    assert not (tmp_path / "out").exists()


def test_spark_s_erase_takes_sql_keys_as_the_struct_column_reads_give(tmp_path):
    """What runs on Spark's driver: the ``key`` column typed as the operator's key struct."""
    keys = pa.chunked_array([pa.array([{"f0": "item-1"}, {"f0": "item-12"}])])
    done = erase_on_driver(str(SQL / "rocksdb"), str(tmp_path / "out"), JOIN, keys,
                           checkpoint_id=None)
    assert done.missing == ()
    for state in [(JOIN, "left-records"), (JOIN, "right-records")]:
        assert _read(tmp_path / "out", state) == _without(state, [["item-1"], ["item-12"]])

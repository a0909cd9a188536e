"""Flink SQL state: every keyed state of every SQL operator reads as the job's model says.

The ``sql`` fixture is SqlJob.java run by a real Flink 2.3 (generate.py ``--only-sql``): a
GROUP BY with COUNT DISTINCT, a regular join, a deduplication and a window TVF, whose keys and
values are ``RowData``. Each state reads exactly (value by value and column-wise) on the heap
backend's canonical and native savepoints and RocksDB's canonical one; every key sits in the
key group Flink's hash of its bytes gives, and writes back to Flink's very bytes; operators
are found by the names Flink gave them. What SQL operators do not support yet (import into a
statesource checkpoint, erasing keys) is refused, saying so.
"""

from __future__ import annotations

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
    IncompatibleCheckpointError,
    InvalidArgumentError,
    StateNotFoundError,
)
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.layouts.canonical import CANONICAL
from statesource.flink.operations.census import count_snapshot
from statesource.flink.operations.edit import erase_keys
from statesource.flink.operations.importer import import_flink
from statesource.flink.reader import FlinkCheckpoint
from statesource.format.reader import Checkpoint
from statesource.keygroups import assign_to_key_group
from statesource.schema import hashable_record
from statesource.types import SqlRowType, SqlType

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


def test_erasing_keys_of_a_sql_operator_is_refused(tmp_path):
    with pytest.raises(IncompatibleCheckpointError, match=r"keyed by Flink SQL rows"):
        erase_keys(str(SQL / "canonical"), str(tmp_path / "out"), JOIN, [("item-1",)])
    assert not (tmp_path / "out").exists()

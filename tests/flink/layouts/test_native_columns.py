"""Native key groups decoded column-wise, many at once, against the per-value decoder: the
same rows, every column and order, or a decline where the per-value decoder refuses.

The real-Flink native snapshots go through both decoders in test_columnar.py (every state
of every snapshot, and damaged copies); here generated key groups reach what those
snapshots lack: sections in any order, empty lists and maps, null map values, TTL lists,
TimeWindow namespaces, unequal key groups.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import statesource.flink.layouts.native as native_layout
import statesource.flink.layouts.native_columns as native_columns
from statesource.errors import StateSourceError
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.declarations import operator_meta, stored_converter
from statesource.flink.layouts.columnar import state_decoder
from statesource.flink.layouts.keyed import decode_native
from statesource.flink.layouts.native_columns import native_tables
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.serializers.base import flink_type
from statesource.flink.serializers.encoding import value_writer
from statesource.flink.serializers.primitives import (
    LONG_SERIALIZER,
    STRING_SERIALIZER,
    TIME_WINDOW,
    VOID_NAMESPACE,
)
from statesource.flink.serializers.tuples import TupleSerializer
from statesource.flink.statefiles.keyed_header import KeyedHeader
from statesource.flink.statefiles.state_meta_writer import keyed_state_info
from statesource.format.columns import RowEncoder, data_schema
from statesource.model import StateKind

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "flink"

STATES = (
    keyed_state_info("value", StateKind.VALUE, VOID_NAMESPACE,
                     {"value": TupleSerializer((STRING_SERIALIZER, LONG_SERIALIZER))}, False, 0),
    keyed_state_info("list", StateKind.LIST, VOID_NAMESPACE, {"element": STRING_SERIALIZER},
                     True, 1),
    keyed_state_info("map", StateKind.MAP, TIME_WINDOW,
                     {"user_key": STRING_SERIALIZER, "user_value": LONG_SERIALIZER}, False, 2),
)
HEADER = KeyedHeader(6, False, flink_type(STRING_SERIALIZER), STATES, 0)
META = operator_meta("op", 1, 128, HEADER)


def _schema(name: str) -> pa.Schema:
    return data_schema(META.keyed_key_type, META.keyed_state(name).declaration)


DECODERS = [state_decoder(HEADER, info, _schema(info.name), 1) for info in STATES]


def _stored(text: st.SearchStrategy[str]) -> list[st.SearchStrategy]:
    """A strategy of each state's stored values, by state id."""
    longs = st.integers(-(1 << 63), (1 << 63) - 1)
    return [st.tuples(text, longs),
            st.lists(st.tuples(text, longs), max_size=4),
            st.dictionaries(text, st.none() | longs, max_size=4)]


@st.composite
def key_groups(draw: Callable) -> list[tuple[int, list[tuple[int, list]], bytes]]:
    """Key groups of sections ``(state id, [(key, namespace, stored)])`` in any order, and
    bytes after them (which no reader of a state before them looks at)."""
    ascii_text = st.text(st.characters(max_codepoint=0x7F), max_size=5)
    text = draw(st.sampled_from([ascii_text, ascii_text, st.text(max_size=3)]))
    stored = _stored(text)
    windows = st.tuples(st.integers(-10, 10), st.integers(-10, 10))
    groups = []
    for key_group in sorted(draw(st.sets(st.integers(0, 127), min_size=1, max_size=24))):
        sections = []
        for state_id in draw(st.permutations(range(len(STATES))))[:draw(st.integers(1, 3))]:
            namespace = windows if state_id == 2 else st.none()
            entries = draw(st.lists(st.tuples(text, namespace, stored[state_id]), max_size=6))
            sections.append((state_id, entries))
        groups.append((key_group, sections, draw(st.sampled_from([b"", b"\xff", b"\x00\x02"]))))
    return groups


def _native_bytes(key_group: int, sections: list[tuple[int, list]]) -> bytes:
    w = BinaryWriter()
    w.i32(key_group)
    write_key = value_writer(HEADER.key)
    for state_id, entries in sections:
        info = STATES[state_id]
        write_namespace, write_value = value_writer(info.namespace), value_writer(info.value)
        w.i16(state_id)
        w.i32(len(entries))
        for key, namespace, stored in entries:
            write_namespace(w, namespace)
            write_key(w, key)
            write_value(w, _as_written(state_id, stored))
    return w.getvalue()


def _as_written(state_id: int, stored: object) -> object:
    """TTL list elements are ``(element, last-access timestamp)``."""
    return stored if state_id != 1 else [(e, ts) for e, ts in stored]  # type: ignore[attr-defined]


def _per_value(state_id: int, groups: list[int], data: list[bytes]) -> pa.Table | None:
    """The state's rows as the per-value decoder reads them; None where it refuses one."""
    info = STATES[state_id]
    convert = stored_converter(info)
    decoded = []
    try:
        for key_group, raw in zip(groups, data):
            found = decode_native(raw, "kg", 0, HEADER, key_group, (state_id,)).get(state_id)
            if found is not None and found.keys:
                stored = found.stored if convert is None else [convert(s) for s in found.stored]
                decoded.append((key_group, found.keys, found.namespaces, stored))
        encoder = RowEncoder(META.keyed_key_type, META.keyed_state(info.name).declaration, None)
        batches = [b for _, chunk, _ in encoder.encode(decoded) for b in chunk]
    except StateSourceError:
        return None
    return pa.Table.from_batches(batches, schema=_schema(info.name))


@settings(max_examples=150, deadline=None)
@given(groups=key_groups())
def test_generated_key_groups_read_as_value_by_value(groups):
    numbers = [key_group for key_group, _, _ in groups]
    data = [_native_bytes(key_group, sections) + tail for key_group, sections, tail in groups]
    for state_id in range(len(STATES)):
        expected = _per_value(state_id, numbers, data)
        with pytest.MonkeyPatch.context() as patch:  # lanes however unequal: generated ones are
            patch.setattr(native_columns, "MIN_LANES", 1)
            found = native_tables(DECODERS, state_id, numbers, data, False)
        if expected is None:
            assert found is None
            continue
        if found is None:
            assert not _ascii([sections for _, sections, _ in groups]), "declined ASCII text"
            continue
        assert len(found) == len(numbers)
        assert all(t.column("key_group").to_pylist() == [n] * t.num_rows
                   for t, n in zip(found, numbers))
        table = pa.concat_tables(found)
        assert table.schema == expected.schema
        assert table.equals(expected), (table.to_pylist()[:4], expected.to_pylist()[:4])


def _ascii(value: object) -> bool:
    """Whether every text in ``value`` is ASCII (the column decoders take no other)."""
    if isinstance(value, str):
        return value.isascii()
    if isinstance(value, dict):
        return _ascii(list(value.items()))
    return not isinstance(value, (list, tuple)) or all(_ascii(part) for part in value)


def test_unequal_key_groups_are_read_value_by_value():
    """One key group many times the size of the others: steps shared by one lane cost more
    than value by value, so the batch is declined (and read the same, value by value)."""
    small = (0, [(0, [("k", None, ("v", 1))])])
    big = (1, [(0, [(f"k{i}", None, ("v", i)) for i in range(400)])])
    groups = [small, big]
    data = [_native_bytes(n, sections) for n, sections in groups]
    assert native_tables(DECODERS, 0, [0, 1], data, False) is None
    assert native_tables(DECODERS, 0, [0] * 20, [data[0]] * 20, False) is not None


def test_a_null_flag_flink_never_writes_is_declined():
    """A map value's null flag other than 0 and 1 reads as null value by value, but differs
    in bytes from what Flink writes: declined, and read value by value."""
    numbers = list(range(20))
    data = [_native_bytes(n, [(2, [("k", (0, 1), {"a": None})])]) for n in numbers]
    assert data[0].endswith(b"a\x01")
    assert native_tables(DECODERS, 2, numbers, data, False) is not None
    data = [raw[:-1] + b"\x02" for raw in data]
    assert _per_value(2, numbers, data) is not None
    assert native_tables(DECODERS, 2, numbers, data, False) is None


@pytest.mark.parametrize("variant", ["mp256", "mp128-snappy"])
def test_native_fixtures_are_read_column_wise(monkeypatch, variant):
    """Not vacuous: every keyed and timer state of the real Flink native savepoints' main
    operator is read by the lanes (test_columnar compares what they read)."""
    read = []

    def counted(*args):  # type: ignore[no-untyped-def]
        found = native_tables(*args)
        read.append(found is not None)
        return found

    monkeypatch.setattr(native_layout, "native_tables", counted)
    checkpoint = FlinkCheckpoint.open(str(FIXTURES / variant / "native"))
    op = checkpoint.snapshot.operator("stateful")
    for info in checkpoint.snapshot.header(op).states:
        rows = sum(t.num_rows for t in checkpoint.read_keyed_state(info.name,
                                                                    operator="stateful"))
        assert read and all(read), (info.name, rows)
        read.clear()

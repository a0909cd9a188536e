"""SQL rows decoded column-wise equal the per-value decoder's rows, or hand the bytes back to it.

Rows of random types and values are written by the independent writer of
``tests/binary_rows_truth.py`` (Flink's ``BinaryRowWriter`` rendered from its sources), framed
as Flink's ``BinaryRowDataSerializer`` frames them (an int length, then the row), and decoded
both ways. The column decoder must give exactly the per-value decoder's values, as Arrow
columns of the state's schema; where it cannot (text beyond ASCII, a value out of bounds, a
lying offset) it raises ``NotColumnar``, and never returns other data.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from binary_rows_truth import write_row
from hypothesis import given, settings
from hypothesis import strategies as st
from test_sql_rows import _FIXED_ROOTS, _TIMESTAMPS, sql_type, values_of

from statesource.errors import CorruptCheckpointError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.serializers.binary_row_columns import row_columns
from statesource.flink.serializers.binary_rows import RowReader
from statesource.flink.serializers.columns import NotColumnar
from statesource.types import RowKind, SqlType

COLUMNAR_LEAVES = st.one_of(
    st.sampled_from(_FIXED_ROOTS + ["TIME_WITHOUT_TIME_ZONE"]).map(
        lambda r: (r, (3,) if r.startswith("TIME") else ())),
    st.tuples(st.sampled_from(["CHAR", "VARCHAR", "BINARY", "VARBINARY"]),
              st.integers(1, 2**31 - 1).map(lambda n: (n,))),
    st.integers(1, 18).flatmap(lambda p: st.integers(0, p).map(lambda s: ("DECIMAL", (p, s)))),
    st.tuples(st.sampled_from(_TIMESTAMPS), st.integers(0, 6).map(lambda p: (p,))))
"""The types the column decoder takes: everything but wide decimals, nested rows, RAW and
timestamps past microseconds."""


def _ascii(t: tuple[str, Any]) -> st.SearchStrategy[Any]:
    """Values of ``t``, text kept to ASCII (other text is the per-value decoder's)."""
    if t[0] in ("CHAR", "VARCHAR"):
        return st.none() | st.text(st.characters(max_codepoint=0x7F), max_size=12)
    return values_of(t)


def _row_type(types: list) -> tuple[pa.DataType, list[SqlType]]:
    sql = [sql_type(t) for t in types]
    fields = [("row_kind", pa.string())] + [(f"f{i}", t.arrow_type) for i, t in enumerate(sql)]
    return pa.struct(fields), sql


def _framed(rows: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray, bytes]:
    data = b"".join(struct.pack(">i", len(r)) + r for r in rows)
    starts = np.cumsum([0] + [4 + len(r) for r in rows])
    return (np.frombuffer(data, np.uint8), starts[:-1].astype(np.int64),
            np.full(len(rows), len(data), dtype=np.int64), data)


def _per_value(sql: list[SqlType], data: bytes, count: int) -> list[dict]:
    reader, r = RowReader(sql), BinaryReader(data, "rows")
    rows = []
    for _ in range(count):
        kind, values = reader.read(r)
        rows.append({"row_kind": kind.short_string,
                     **{f"f{i}": v for i, v in enumerate(values)}})
    return rows


@st.composite
def row_batches(draw: Any, ascii_only: bool = True) -> tuple[list, list[list], list[RowKind]]:
    types = draw(st.lists(COLUMNAR_LEAVES, min_size=1, max_size=6))
    values = _ascii if ascii_only else values_of
    batch = draw(st.lists(st.tuples(*map(values, types)).map(list), min_size=0, max_size=8))
    kinds = draw(st.lists(st.sampled_from(list(RowKind)), min_size=len(batch),
                          max_size=len(batch)))
    return types, batch, kinds


@settings(max_examples=300, deadline=None)
@given(row_batches())
def test_rows_decode_column_wise_as_value_by_value(batch: tuple[list, list[list], list]):
    types, values, kinds = batch
    arrow_type, sql = _row_type(types)
    rows = [write_row(types, v, k.byte_value) for v, k in zip(values, kinds)]
    buf, pos, limit, data = _framed(rows)
    decoder = row_columns(arrow_type, sql)
    assert decoder is not None
    column, ends = decoder.decode(buf, pos, limit)
    assert column.type == arrow_type
    assert column.to_pylist() == pa.array(_per_value(sql, data, len(rows)),
                                          type=arrow_type).to_pylist()
    assert ends.tolist() == [p + 4 + len(r) for p, r in zip(pos.tolist(), rows)]


@settings(max_examples=200, deadline=None)
@given(row_batches(ascii_only=False))
def test_text_beyond_ascii_goes_back_to_the_per_value_decoder(batch: tuple[list, list, list]):
    types, values, kinds = batch
    arrow_type, sql = _row_type(types)
    rows = [write_row(types, v, k.byte_value) for v, k in zip(values, kinds)]
    buf, pos, limit, data = _framed(rows)
    expected = pa.array(_per_value(sql, data, len(rows)), type=arrow_type).to_pylist()
    try:
        column, _ = row_columns(arrow_type, sql).decode(buf, pos, limit)
    except NotColumnar:
        assert any(isinstance(v, str) and not v.isascii() for row in values for v in row)
    else:
        assert column.to_pylist() == expected


def test_keys_are_the_fields_without_a_kind():
    sql = [SqlType("VARCHAR", length=2**31 - 1), SqlType("INTEGER")]
    key_type = pa.struct([("f0", pa.string()), ("f1", pa.int32())])
    rows = [write_row([("VARCHAR", (2**31 - 1,)), ("INTEGER", ())], ["user-long-name", 7]),
            write_row([("VARCHAR", (2**31 - 1,)), ("INTEGER", ())], ["ab", None])]
    buf, pos, limit, _ = _framed(rows)
    column, _ = row_columns(key_type, sql).decode(buf, pos, limit)
    assert column.to_pylist() == [{"f0": "user-long-name", "f1": 7}, {"f0": "ab", "f1": None}]


@pytest.mark.parametrize("sql", [
    [SqlType("DECIMAL", precision=19, scale=0)],
    [SqlType("TIMESTAMP_WITHOUT_TIME_ZONE", precision=9)],
    [SqlType("ROW", fields=(("a", SqlType("BIGINT")),))],
    [SqlType("RAW", java_class="java.lang.String")],
    [SqlType("ARRAY")],
])
def test_types_only_the_per_value_decoder_reads_have_no_column_decoder(sql):
    fields = [("row_kind", pa.string()), ("f0", pa.binary())]
    assert row_columns(pa.struct(fields), sql) is None


def test_an_arrow_type_other_than_the_rows_has_no_column_decoder():
    sql = [SqlType("BIGINT")]
    assert row_columns(pa.struct([("f0", pa.int32())]), sql) is None
    assert row_columns(pa.int64(), sql) is None


def _one_field(slot: bytes, tail: bytes = b"", header: bytes = bytes(8)) -> bytes:
    data = header + slot + tail
    return struct.pack(">i", len(data)) + data


LYING_ROWS = [
    ([SqlType("INTEGER")], struct.pack(">i", 64) + bytes(16)),
    ([SqlType("INTEGER")], _one_field(bytes(4))),
    ([SqlType("INTEGER")], _one_field(bytes(8), header=b"\x07" + bytes(7))),
    ([SqlType("VARCHAR")], _one_field(struct.pack("<q", 16 << 32 | 9), bytes(8))),
    ([SqlType("VARCHAR")], _one_field(struct.pack("<q", 4 << 32 | 2), bytes(8))),
    ([SqlType("VARCHAR")], _one_field(bytes(7) + b"\x88")),
    ([SqlType("DECIMAL", precision=2, scale=0)], _one_field(struct.pack("<q", 100))),
    ([SqlType("TIMESTAMP_WITHOUT_TIME_ZONE", precision=6)],
     _one_field(struct.pack("<q", 16 << 32 | 1), bytes(8))),
    ([SqlType("TIME_WITHOUT_TIME_ZONE")], _one_field(struct.pack("<q", 86_400_000))),
    ([SqlType("DATE")], _one_field(struct.pack("<q", 2_932_897))),
    ([SqlType("TIMESTAMP_WITHOUT_TIME_ZONE", precision=3)],
     _one_field(struct.pack("<q", -(1 << 62)))),
]
"""Rows whose bytes lie (lengths, kinds, offsets, inline sizes, digits, nanoseconds), or hold
what Python cannot (a date after 9999): the per-value decoder refuses each."""


@pytest.mark.parametrize(("sql", "data"), LYING_ROWS)
def test_lying_or_unrepresentable_rows_are_not_columnar(sql, data):
    fields = [("row_kind", pa.string())] + [(f"f{i}", t.arrow_type) for i, t in enumerate(sql)]
    buf = np.frombuffer(data, np.uint8)
    with pytest.raises(NotColumnar):
        row_columns(pa.struct(fields), sql).decode(buf, np.array([0]), np.array([len(data)]))


def test_a_key_of_an_unknown_row_kind_is_not_columnar():
    """Keys carry no ``row_kind`` column, yet the per-value decoder refuses a kind byte past
    ``-D`` in them too: the column decoder must not read such a key."""
    data = _one_field(struct.pack("<q", 5), header=b"\x09" + bytes(7))
    buf = np.frombuffer(data, np.uint8)
    with pytest.raises(CorruptCheckpointError, match="unknown row kind 9"):
        RowReader([SqlType("INTEGER")]).read(BinaryReader(data, "key"))
    with pytest.raises(NotColumnar):
        row_columns(pa.struct([("f0", pa.int32())]), [SqlType("INTEGER")]).decode(
            buf, np.array([0]), np.array([len(data)]))


def test_floats_keep_their_bits_column_wise():
    """NaN (of any payload), negative zero and infinities: the hypothesis tests above compare
    values, which NaN defeats, so here the bits of each slot are compared."""
    doubles = [struct.pack("<d", float("nan")), struct.pack("<Q", 0x7FF0_0000_0000_0001),
               struct.pack("<d", -0.0), struct.pack("<d", float("-inf"))]
    floats = [struct.pack("<f", float("nan")), struct.pack("<I", 0xFFC0_0001),
              struct.pack("<f", -0.0), struct.pack("<f", float("inf"))]
    rows = [bytes(8) + f.ljust(8, b"\0") + d for f, d in zip(floats, doubles)]
    framed = b"".join(struct.pack(">i", len(r)) + r for r in rows)
    buf = np.frombuffer(framed, np.uint8)
    pos = np.arange(len(rows)) * (4 + 24)
    sql = [SqlType("FLOAT"), SqlType("DOUBLE")]
    column, _ = row_columns(pa.struct([("row_kind", pa.string()), ("f0", pa.float32()),
                                       ("f1", pa.float64())]), sql).decode(
        buf, pos, np.full(len(rows), len(framed)))
    assert column.field("f0").buffers()[1].to_pybytes() == b"".join(floats)
    assert column.field("f1").buffers()[1].to_pybytes() == b"".join(doubles)

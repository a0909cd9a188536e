"""Flink SQL's binary rows and type snapshots, against writers built independently in the tests.

Random SQL types and rows are written by ``tests/binary_rows_truth.py`` (Flink's
``BinaryRowWriter`` rendered from its Java sources) and ``tests/java_objects.py`` (Java's
``ObjectOutputStream`` for Flink's ``LogicalType`` classes); statesource's reader must give the
values and types back exactly, its writer must write the same bytes, and its hash must be
murmur's by words. Hostile bytes (truncated snapshots, lengths and offsets that lie) must be
refused with ``CorruptCheckpointError`` naming the file and the offset.
"""

from __future__ import annotations

import datetime as dt
import json
import struct
from decimal import Decimal
from typing import Any

import pytest
from binary_rows_truth import hash_by_words, write_row
from hypothesis import given, settings
from hypothesis import strategies as st
from java_objects import logical_type_spec, serialize

from statesource.errors import (
    CorruptCheckpointError,
    IncompatibleCheckpointError,
    TypeMismatchError,
)
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.serializers.base import read_snapshot
from statesource.flink.serializers.binary_rows import RowReader
from statesource.flink.serializers.encoding import encode
from statesource.flink.serializers.logical_types import read_logical_type
from statesource.flink.serializers.primitives import SIMPLE
from statesource.flink.serializers.sql_rows import ROW_DATA, SqlRowFlinkType
from statesource.flink.serializers.sql_values import DECIMAL_DATA, STRING_DATA, TIMESTAMP_DATA
from statesource.keyjson import from_json, to_json
from statesource.schema import ValueSchema
from statesource.types import Row, RowKind, SqlRowType, SqlType
from statesource.types.binary_row import encode_row

SOURCE = "test-file"
UTC = dt.timezone.utc
_FIXED_ROOTS = ["BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "FLOAT", "DOUBLE", "DATE",
                "INTERVAL_YEAR_MONTH", "INTERVAL_DAY_TIME"]
_TIMESTAMPS = ["TIMESTAMP_WITHOUT_TIME_ZONE", "TIMESTAMP_WITH_LOCAL_TIME_ZONE"]


# -- random types, as (root, params) tuples the independent writers take -------------------

def _leaf_types() -> st.SearchStrategy[tuple[str, Any]]:
    return st.one_of(
        st.sampled_from(_FIXED_ROOTS).map(lambda r: (r, ())),
        st.tuples(st.sampled_from(["CHAR", "VARCHAR", "BINARY", "VARBINARY"]),
                  st.integers(1, 2**31 - 1).map(lambda n: (n,))),
        st.integers(1, 38).flatmap(lambda p: st.integers(0, p).map(
            lambda s: ("DECIMAL", (p, s)))),
        st.tuples(st.sampled_from([*_TIMESTAMPS, "TIME_WITHOUT_TIME_ZONE"]),
                  st.integers(0, 9).map(lambda p: (p,))),
        st.sampled_from(["java.lang.String", "org.apache.flink.table.api.dataview.MapView"]).map(
            lambda c: ("RAW", (c,))))


SQL_TYPES = st.recursive(
    _leaf_types(),
    lambda inner: st.lists(inner, min_size=1, max_size=4).map(
        lambda types: ("ROW", tuple((f"n{i}" if i % 2 else f"EXPR${i}", t)
                                    for i, t in enumerate(types)))),
    max_leaves=12)


def sql_type(t: tuple[str, Any]) -> SqlType:
    """statesource's SqlType of a test type tuple."""
    root, params = t
    if root in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
        return SqlType(root, length=params[0])
    if root == "DECIMAL":
        return SqlType(root, precision=params[0], scale=params[1])
    if root in (*_TIMESTAMPS, "TIME_WITHOUT_TIME_ZONE"):
        return SqlType(root, precision=params[0])
    if root == "ROW":
        return SqlType(root, fields=tuple((n, sql_type(f)) for n, f in params))
    if root == "RAW":
        return SqlType(root, java_class=params[0])
    return SqlType(root)


def java_spec(t: tuple[str, Any]) -> Any:
    root, params = t
    if root in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
        return logical_type_spec(root, length=params[0])
    if root == "DECIMAL":
        return logical_type_spec(root, precision=params[0], scale=params[1])
    if root in (*_TIMESTAMPS, "TIME_WITHOUT_TIME_ZONE"):
        return logical_type_spec(root, precision=params[0])
    if root == "ROW":
        return logical_type_spec(root, fields=tuple((n, java_spec(f)) for n, f in params))
    if root == "RAW":
        return logical_type_spec(root, java_class=params[0])
    return logical_type_spec(root)


def _millis_datetimes(**kwargs: Any) -> st.SearchStrategy[dt.datetime]:
    return st.datetimes(**kwargs).map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000))


def values_of(t: tuple[str, Any]) -> st.SearchStrategy[Any]:
    """Values of a type, in the shapes statesource reads them as (nullable: any may be None)."""
    root, params = t
    integral = {"TINYINT": 8, "SMALLINT": 16, "INTEGER": 32, "BIGINT": 64,
                "INTERVAL_YEAR_MONTH": 32, "INTERVAL_DAY_TIME": 64}
    if root in integral:
        bits = integral[root]
        value = st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    elif root == "BOOLEAN":
        value = st.booleans()
    elif root == "FLOAT":
        value = st.floats(width=32, allow_nan=False)
    elif root == "DOUBLE":
        value = st.floats(allow_nan=False)
    elif root == "DATE":
        value = st.dates()
    elif root == "TIME_WITHOUT_TIME_ZONE":
        value = st.integers(0, 86_399_999).map(
            lambda ms: (dt.datetime(2000, 1, 1) + dt.timedelta(milliseconds=ms)).time())
    elif root in ("CHAR", "VARCHAR"):
        value = st.text(max_size=12)
    elif root in ("BINARY", "VARBINARY", "RAW"):
        value = st.binary(max_size=12)
    elif root == "DECIMAL":
        p, s = params
        value = st.integers(-(10 ** p - 1), 10 ** p - 1).map(lambda n: Decimal(f"{n}E-{s}"))
    elif root in _TIMESTAMPS:
        zone = {} if root == _TIMESTAMPS[0] else {"timezones": st.just(UTC)}
        if params[0] > 6:
            value = st.fixed_dictionaries({
                "millisecond": st.integers(-(1 << 62), 1 << 62),
                "nano_of_millisecond": st.integers(0, 999_999)})
        elif params[0] > 3:
            value = st.datetimes(**zone)
        else:
            value = _millis_datetimes(**zone)
    else:
        value = st.fixed_dictionaries({n: values_of(f) for n, f in params})
    return st.none() | value


def shown(t: tuple[str, Any], value: Any) -> Any:
    """A value as statesource shows it: a nested row's field names as Avro allows them
    (``EXPR$0`` becomes ``EXPR_0``, docs/FLINK.md)."""
    root, params = t
    if root != "ROW" or value is None:
        return value
    return {name.replace("$", "_"): shown(f, value[name]) for name, f in params}


def shown_row(types: list, values: list) -> list:
    return [shown(t, v) for t, v in zip(types, values)]


def rows(min_size: int = 0) -> st.SearchStrategy[tuple[list, list]]:
    return st.lists(SQL_TYPES, min_size=min_size, max_size=6).flatmap(
        lambda types: st.tuples(st.just(types), st.tuples(*map(values_of, types)).map(list)))


def _reader(data: bytes) -> BinaryReader:
    return BinaryReader(data, SOURCE)


# -- rows ---------------------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(rows(), st.sampled_from(list(RowKind)))
def test_a_binary_row_reads_back_as_written(row: tuple[list, list], kind: RowKind):
    types, values = row
    data = write_row(types, values, kind.byte_value)
    r = _reader(struct.pack(">i", len(data)) + data + b"trailing")
    read_kind, read_values = RowReader([sql_type(t) for t in types]).read(r)
    assert (read_kind, read_values) == (kind, shown_row(types, values))
    assert r.pos == 4 + len(data)


@settings(max_examples=300, deadline=None)
@given(rows())
def test_statesource_writes_the_bytes_flink_writes(row: tuple[list, list]):
    types, values = row
    assert encode_row([sql_type(t) for t in types], shown_row(types, values)) == \
        write_row(types, values)


@settings(max_examples=200, deadline=None)
@given(rows(min_size=1))
def test_a_sql_key_hashes_as_its_binary_row(row: tuple[list, list]):
    types, values = row
    key_type = SqlRowType(tuple(sql_type(t) for t in types))
    key = tuple(shown_row(types, values))
    assert key_type.java_hash(key) == hash_by_words(write_row(types, values))
    assert key_type.from_arrow(key_type.to_arrow([key]))[0].fields == key


@settings(max_examples=200, deadline=None)
@given(rows(), st.sampled_from(list(RowKind)))
def test_a_row_data_value_encodes_to_the_bytes_flink_writes(row: tuple[list, list],
                                                            kind: RowKind):
    """What ``write_state`` writes of a SQL state's rows: given as read (a Row with its
    kind) or as a value column gives them (a dict of ``row_kind`` and ``f0``, ...)."""
    types, values = row
    flink_type = SqlRowFlinkType(ROW_DATA, [sql_type(t) for t in types], [])
    data = write_row(types, values, kind.byte_value)
    framed = struct.pack(">i", len(data)) + data
    assert encode(flink_type, Row(*shown_row(types, values), kind=kind)) == framed
    assert encode(flink_type, flink_type.to_value(flink_type.read(_reader(framed)))) == framed


def test_a_row_that_does_not_fit_its_types_is_refused_naming_it():
    flink_type = SqlRowFlinkType(ROW_DATA, [SqlType("BIGINT"), SqlType("VARCHAR", length=9)], [])
    with pytest.raises(TypeMismatchError, match=r"'x' \(str\) is not a valid BIGINT value"):
        encode(flink_type, {"row_kind": "+I", "f0": "x", "f1": "y"})
    with pytest.raises(TypeMismatchError, match=r"unknown row kind '\+X'"):
        encode(flink_type, {"row_kind": "+X", "f0": 1, "f1": "y"})


@settings(max_examples=100, deadline=None)
@given(rows(min_size=1))
def test_a_sql_key_spelled_in_json_is_the_same_key(row: tuple[list, list]):
    """What ``erase --key`` / ``--keys-file`` and the ``--json`` documents spell (keyjson):
    a key written out and read back encodes to the bytes Flink writes for it."""
    types, values = row
    key_type = SqlRowType(tuple(sql_type(t) for t in types))
    spelled = json.loads(json.dumps(to_json(key_type, tuple(shown_row(types, values)))))
    assert key_type.encode(from_json(key_type, spelled)) == write_row(types, values)


@settings(max_examples=200, deadline=None)
@given(SQL_TYPES)
def test_the_avro_and_arrow_of_a_sql_type_agree(t: tuple[str, Any]):
    declared = sql_type(t)
    assert ValueSchema.parse(declared.avro("Value")).arrow_type == declared.arrow_type


# -- the snapshot ---------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(SQL_TYPES, st.binary(max_size=8))
def test_a_java_serialized_logical_type_reads_to_its_end(t: tuple[str, Any], after: bytes):
    stream = serialize(java_spec(t))
    r = _reader(stream + after)
    assert read_logical_type(r) == sql_type(t)
    assert r.pos == len(stream)


def _row_data_snapshot(types: list[tuple[str, Any]]) -> bytes:
    w = BinaryWriter()
    w.utf(ROW_DATA)
    w.i32(3)
    w.i32(len(types))
    for t in types:
        w.raw(serialize(java_spec(t)))
    w.i32(1333245)  # the nested serializers: any snapshots, one per field
    w.i32(1)
    w.i32(len(types))
    for _ in types:
        SIMPLE["int"].write(w)
    return w.getvalue()


@settings(max_examples=100, deadline=None)
@given(rows())
def test_a_row_data_snapshot_types_its_rows(row: tuple[list, list]):
    types, values = row
    snapshot = _row_data_snapshot(types)
    data = write_row(types, values)
    r = _reader(snapshot + struct.pack(">i", len(data)) + data)
    found = read_snapshot(r)
    assert isinstance(found, SqlRowFlinkType)
    assert found.types == [sql_type(t) for t in types]
    assert list(found.read(r).fields) == shown_row(types, values) and r.at_end()


@pytest.mark.parametrize("cut", range(0, 600, 7))
def test_a_truncated_row_data_snapshot_is_corrupt(cut):
    snapshot = _row_data_snapshot([("VARCHAR", (5,)), ("DECIMAL", (20, 2)),
                                   ("ROW", (("a", ("INTEGER", ())),))])
    assert cut < len(snapshot)
    with pytest.raises(CorruptCheckpointError, match=f"{SOURCE}: .* byte offset"):
        read_snapshot(_reader(snapshot[:cut]))


def test_a_stream_that_is_not_java_serialization_is_corrupt():
    data = _row_data_snapshot([("INTEGER", ())])
    at = data.index(b"\xac\xed")
    broken = data[:at + 5] + b"\xff" + data[at + 6:]
    with pytest.raises(CorruptCheckpointError,
                       match=f"not a Java serialization stream that parses .* byte offset {at}$"):
        read_snapshot(_reader(broken))


def test_an_unknown_type_root_parses_and_its_values_are_refused():
    stream = serialize(logical_type_spec("ARRAY"))
    found = read_logical_type(_reader(stream))
    assert found.root == "ARRAY"
    with pytest.raises(IncompatibleCheckpointError, match="ARRAY"):
        RowReader([found])


# -- rows that lie ----------------------------------------------------------------------------

def _one_field(slot: bytes, tail: bytes = b"", header: bytes = bytes(8)) -> bytes:
    data = header + slot + tail
    return struct.pack(">i", len(data)) + data


@pytest.mark.parametrize(("types", "data", "fault"), [
    ([SqlType("INTEGER")], struct.pack(">i", 64) + bytes(16), "invalid binary row length 64"),
    ([SqlType("INTEGER")], _one_field(bytes(4)), "cannot be 12 bytes"),
    ([SqlType("INTEGER")], _one_field(bytes(8), header=b"\x07" + bytes(7)), "row kind 7"),
    ([SqlType("VARCHAR")], _one_field(struct.pack("<q", 16 << 32 | 9), bytes(8)), "outside"),
    ([SqlType("VARCHAR")], _one_field(struct.pack("<q", 4 << 32 | 2), bytes(8)), "outside"),
    ([SqlType("VARCHAR")], _one_field(bytes(7) + b"\x88"), "inline value of 8 bytes"),
    ([SqlType("DECIMAL", precision=20, scale=0)],
     _one_field(struct.pack("<q", 16 << 32 | 0), bytes(16)), "decimal of 0 bytes"),
    ([SqlType("DECIMAL", precision=2, scale=0)], _one_field(struct.pack("<q", 100)),
     "more digits"),
    ([SqlType("TIMESTAMP_WITHOUT_TIME_ZONE", precision=9)],
     _one_field(struct.pack("<q", 16 << 32 | 10 ** 6), bytes(8)), "nanoseconds"),
    ([SqlType("TIMESTAMP_WITHOUT_TIME_ZONE", precision=6)],
     _one_field(struct.pack("<q", 16 << 32 | 1), bytes(8)), "nanoseconds"),
    ([SqlType("TIME_WITHOUT_TIME_ZONE")], _one_field(struct.pack("<q", 86_400_000)),
     "not a time of day"),
    ([SqlType("ROW", fields=(("a", SqlType("BIGINT")),))],
     _one_field(struct.pack("<q", 16 << 32 | 8), bytes(8)), "cannot be 8 bytes"),
])
def test_lying_rows_are_corrupt(types, data, fault):
    with pytest.raises(CorruptCheckpointError, match=f"{SOURCE}: .*{fault}.* byte offset \\d+"):
        RowReader(types).read(BinaryReader(data, SOURCE, base=1000))


# -- values outside rows --------------------------------------------------------------------

def _value_type(snapshot_class: str, version: int, payload: bytes) -> Any:
    w = BinaryWriter()
    w.utf(snapshot_class)
    w.i32(version)
    w.raw(payload)
    return read_snapshot(_reader(w.getvalue()))


@given(st.text(max_size=20))
def test_string_data_reads_its_utf8(text: str):
    data = text.encode("utf-8")
    string = _value_type(STRING_DATA, 3, b"")
    assert string.read(_reader(struct.pack(">i", len(data)) + data)) == text
    assert encode(string, text) == struct.pack(">i", len(data)) + data


@given(st.integers(1, 38).flatmap(lambda p: st.tuples(
    st.just(p), st.integers(0, p), st.integers(-(10 ** p - 1), 10 ** p - 1))))
def test_decimal_data_reads_its_unscaled_value(case: tuple[int, int, int]):
    precision, scale, number = case
    if precision <= 18:
        data = struct.pack(">q", number)
    else:
        raw = number.to_bytes((number.bit_length() + 8) // 8 if number >= 0 else
                              ((~number).bit_length() + 8) // 8, "big", signed=True)
        data = struct.pack(">i", len(raw)) + raw
    decimal = _value_type(DECIMAL_DATA, 3, struct.pack(">ii", precision, scale))
    assert decimal.read(_reader(data)) == Decimal(f"{number}E-{scale}")
    assert encode(decimal, Decimal(f"{number}E-{scale}")) == data


@given(st.integers(0, 9), st.datetimes())
def test_timestamp_data_reads_its_two_parts(precision: int, value: dt.datetime):
    if precision <= 3:
        value = value.replace(microsecond=value.microsecond // 1000 * 1000)
    micros = (value - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)
    millis, nanos = micros // 1000, micros % 1000 * 1000
    data = struct.pack(">q", millis) + (b"" if precision <= 3 else struct.pack(">i", nanos))
    timestamp = _value_type(TIMESTAMP_DATA, 1, struct.pack(">i", precision))
    expected = {"millisecond": millis, "nano_of_millisecond": nanos} if precision > 6 else value
    assert timestamp.read(_reader(data)) == expected
    assert encode(timestamp, expected) == data

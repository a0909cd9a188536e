"""Tests of statesource.schema: Avro value schemas mapped to Arrow."""

from __future__ import annotations

import copy
import datetime as dt
import json
import pickle
import uuid
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

from statesource.errors import InvalidArgumentError, StateSourceError, TypeMismatchError
from statesource.schema import ValueSchema, arrow_field_for, value_schema

UTC = dt.timezone.utc


def ipc_roundtrip(array: pa.Array | pa.ChunkedArray, schema: ValueSchema) -> pa.ChunkedArray:
    """Write the array as column "v" of an Arrow IPC file in memory and read it back."""
    table = pa.Table.from_arrays([array], schema=pa.schema([arrow_field_for("v", schema)]))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return pa.ipc.open_file(sink.getvalue()).read_all().column("v")


def all_fields_nullable(t: pa.DataType) -> bool:
    if pa.types.is_struct(t):
        return all(
            t.field(i).nullable and all_fields_nullable(t.field(i).type)
            for i in range(t.num_fields)
        )
    if pa.types.is_map(t):  # the key field must be non-null in Arrow
        return t.item_field.nullable and all_fields_nullable(t.item_type)
    if pa.types.is_list(t):
        return t.value_field.nullable and all_fields_nullable(t.value_type)
    return True


def roundtrip(schema, values):
    vs = ValueSchema.parse(schema)
    # the vectorised path must take valid values without falling back
    vs._root.column(values, vs.nullable, 0)
    array = vs.to_arrow(values)
    assert array.type == vs.arrow_type
    return vs, vs.to_python(ipc_roundtrip(array, vs))


def ts(*args, tz=UTC):
    return dt.datetime(*args, tzinfo=tz)


RECORD = {
    "type": "record",
    "name": "User",
    "namespace": "com.example",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": ["null", "string"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": ["null", "double"]}},
        {
            "name": "address",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Address",
                    "fields": [
                        {"name": "city", "type": "string"},
                        {"name": "zip", "type": ["null", "int"]},
                    ],
                },
            ],
        },
        {"name": "home", "type": "Address"},
    ],
}
ADDRESS_T = pa.struct([pa.field("city", pa.string()), pa.field("zip", pa.int32())])
RECORD_T = pa.struct(
    [
        pa.field("id", pa.int64()),
        pa.field("name", pa.string()),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("attrs", pa.map_(pa.string(), pa.float64())),
        pa.field("address", ADDRESS_T),
        pa.field("home", ADDRESS_T),
    ]
)
RECORD_VALUES = [
    {
        "id": 1,
        "name": "ann",
        "tags": ["a", "b"],
        "attrs": {"x": 1.5, "y": None},
        "address": {"city": "Oslo", "zip": 150},
        "home": {"city": "Bergen", "zip": None},
    },
    {
        "id": -(2**63),
        "name": None,
        "tags": [],
        "attrs": {},
        "address": None,
        "home": {"city": "", "zip": 0},
    },
]

# (schema, arrow type, values): one row per mapping rule
MAPPING = [
    ("boolean", pa.bool_(), [True, False, True]),
    ("int", pa.int32(), [0, -(2**31), 2**31 - 1]),
    ("long", pa.int64(), [0, -(2**63), 2**63 - 1]),
    ({"type": "int", "java-class": "java.lang.Short"}, pa.int16(), [0, -(2**15), 2**15 - 1]),
    ({"type": "int", "java-class": "java.lang.Byte"}, pa.int8(), [0, -128, 127]),
    ("float", pa.float32(), [0.5, -1.25, float("inf"), 3.0]),
    ("double", pa.float64(), [0.1, -0.0, 1e308, float("-inf")]),
    ("bytes", pa.binary(), [b"", b"\x00\xff", b"abc"]),
    ("string", pa.string(), ["", "héllo", "日本", "\U0001f600"]),
    (
        {"type": "string", "java-class": "java.lang.Character"},
        pa.string(),
        ["a", "é", "\uffff", "日"],
    ),
    ({"type": "int", "java-class": "java.lang.Character"}, pa.string(), ["z"]),
    (RECORD, RECORD_T, RECORD_VALUES),
    ({"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}, pa.string(), ["GREEN", "RED"]),
    ({"type": "array", "items": "long"}, pa.list_(pa.int64()), [[1, 2], [], [3]]),
    (
        {"type": "map", "values": "string"},
        pa.map_(pa.string(), pa.string()),
        [{"a": "x", "b": "y"}, {}],
    ),
    ({"type": "fixed", "name": "Four", "size": 4}, pa.binary(4), [b"abcd", b"\x00\x00\x00\x00"]),
    (["null", "long"], pa.int64(), [None, 1, None]),
    (["string", "null"], pa.string(), ["a", None]),
    (
        {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
        pa.decimal128(10, 2),
        [Decimal("1.23"), Decimal("-99999999.99"), Decimal("0.00")],
    ),
    (
        {
            "type": "fixed",
            "name": "Dec",
            "size": 16,
            "logicalType": "decimal",
            "precision": 38,
            "scale": 0,
        },
        pa.decimal128(38, 0),
        [Decimal("9" * 38), Decimal("-" + "9" * 38)],
    ),
    (
        {"type": "string", "logicalType": "uuid"},
        pa.string(),
        ["123e4567-e89b-12d3-a456-426614174000"],
    ),
    (
        {"type": "int", "logicalType": "date"},
        pa.date32(),
        [dt.date(1970, 1, 1), dt.date(1, 1, 1), dt.date(9999, 12, 31)],
    ),
    (
        {"type": "int", "logicalType": "time-millis"},
        pa.time32("ms"),
        [dt.time(0, 0), dt.time(23, 59, 59, 999000)],
    ),
    (
        {"type": "long", "logicalType": "time-micros"},
        pa.time64("us"),
        [dt.time(23, 59, 59, 999999), dt.time(1)],
    ),
    (
        {"type": "long", "logicalType": "timestamp-millis"},
        pa.timestamp("ms", tz="UTC"),
        [ts(2020, 1, 1), ts(1969, 12, 31, 23, 59, 59, 999000)],
    ),
    (
        {"type": "long", "logicalType": "timestamp-micros"},
        pa.timestamp("us", tz="UTC"),
        [ts(2020, 1, 1, 0, 0, 0, 1), ts(1, 1, 1), ts(9999, 12, 31, 23, 59, 59, 999999)],
    ),
    (
        {"type": "long", "logicalType": "local-timestamp-millis"},
        pa.timestamp("ms"),
        [dt.datetime(2020, 5, 6, 7, 8, 9, 10000)],
    ),
    (
        {"type": "long", "logicalType": "local-timestamp-micros"},
        pa.timestamp("us"),
        [dt.datetime(2020, 5, 6, 7, 8, 9, 10)],
    ),
    (
        {"type": "long", "logicalType": "my-own-type"},
        pa.int64(),
        [5],
    ),  # unknown logical type: underlying type
    (
        {"type": "string", "java-class": "java.net.URI"},
        pa.string(),
        ["http://x"],
    ),  # unknown java-class: ignored
]


@pytest.mark.parametrize(
    "schema,arrow_type,values", MAPPING, ids=[json.dumps(m[0])[:60] for m in MAPPING]
)
def test_mapping_round_trip(schema, arrow_type, values):
    vs, back = roundtrip(schema, values)
    assert vs.arrow_type == arrow_type
    assert all_fields_nullable(vs.arrow_type)
    assert back == values
    assert [type(v) for v in back] == [type(v) for v in values]


@pytest.mark.parametrize(
    "schema,arrow_type,values", MAPPING, ids=[json.dumps(m[0])[:60] for m in MAPPING]
)
def test_mapping_nullable_variant(schema, arrow_type, values):
    if isinstance(schema, list):
        return
    vs, back = roundtrip(["null", schema], [None, *values, None])
    assert vs.arrow_type == arrow_type and vs.nullable
    assert back == [None, *values, None]


def test_nested_nullability_and_placeholders():
    # a null struct leaves placeholder nulls in its non-nullable children: not violations
    schema = {
        "type": "array",
        "items": [
            "null",
            {
                "type": "record",
                "name": "P",
                "fields": [
                    {"name": "a", "type": "long"},
                    {"name": "b", "type": {"type": "map", "values": "string"}},
                ],
            },
        ],
    }
    values = [[None, {"a": 1, "b": {"k": "v"}}, None], [], [None]]
    vs, back = roundtrip(schema, values)
    assert back == values
    with pytest.raises(TypeMismatchError, match=r"index 1 .*field '\[0\]\.a': null is not allowed"):
        vs.to_arrow([[], [{"a": None, "b": {}}]])


def test_every_arrow_field_is_nullable():
    vs = ValueSchema.parse(
        {
            "type": "record",
            "name": "R",
            "fields": [
                {
                    "name": "a",
                    "type": {
                        "type": "array",
                        "items": {
                            "type": "map",
                            "values": {
                                "type": "record",
                                "name": "S",
                                "fields": [{"name": "x", "type": "long"}],
                            },
                        },
                    },
                }
            ],
        }
    )
    assert all_fields_nullable(vs.arrow_type)
    assert arrow_field_for("value", vs).nullable
    assert vs.arrow_type.field("a").type.value_type.item_type.field("x").nullable


def test_record_field_order_and_names_kept():
    vs = ValueSchema.parse(
        {
            "type": "record",
            "name": "R",
            "fields": [
                {"name": "zeta", "type": "int"},
                {"name": "Alpha", "type": "int"},
                {"name": "_m", "type": "int"},
            ],
        }
    )
    assert [vs.arrow_type.field(i).name for i in range(3)] == ["zeta", "Alpha", "_m"]


def test_output_normalisation():
    # documented: UUID -> str, bytearray -> bytes, int -> float, aware -> UTC, Decimal scale
    u = uuid.UUID("123e4567-e89b-12d3-a456-426614174000")
    vs, back = roundtrip({"type": "string", "logicalType": "uuid"}, [u, str(u).upper()])
    assert back == [str(u), str(u).upper()]
    assert ValueSchema.parse("bytes").to_python(
        ValueSchema.parse("bytes").to_arrow([bytearray(b"ab")])
    ) == [b"ab"]
    vs = ValueSchema.parse("double")
    assert vs.to_python(vs.to_arrow([1, 2**53])) == [1.0, float(2**53)]
    vs = ValueSchema.parse({"type": "long", "logicalType": "timestamp-micros"})
    plus2 = dt.timezone(dt.timedelta(hours=2))
    (back,) = vs.to_python(vs.to_arrow([dt.datetime(2020, 1, 1, 12, tzinfo=plus2)]))
    assert back == dt.datetime(2020, 1, 1, 10, tzinfo=UTC) and back.tzinfo is UTC
    nested = ValueSchema.parse(
        {"type": "array", "items": {"type": "long", "logicalType": "timestamp-millis"}}
    )
    assert nested.to_python(nested.to_arrow([[ts(2020, 1, 1)]]))[0][0].tzinfo is UTC
    vs = ValueSchema.parse({"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2})
    back = vs.to_python(
        vs.to_arrow(
            [
                Decimal("1.5"),
                Decimal("0E+50"),
                Decimal("1.2300000000000000000000000000000000000000"),
            ]
        )
    )
    assert back == [Decimal("1.5"), 0, Decimal("1.23")]
    assert [str(d) for d in back] == ["1.50", "0.00", "1.23"]
    f32 = ValueSchema.parse("float")
    assert f32.to_python(f32.to_arrow([0.1])) == [
        float(np.float32(0.1))
    ]  # rounding to float32 is inherent


def test_record_missing_nullable_field_reads_back_as_none():
    vs = ValueSchema.parse(RECORD)
    value = dict(RECORD_VALUES[1])
    del value["name"], value["address"]
    (back,) = vs.to_python(vs.to_arrow([value]))
    assert back == {**value, "name": None, "address": None}


def test_numpy_and_other_inputs():
    long_ = ValueSchema.parse("long")
    assert long_.to_arrow(np.arange(5)).to_pylist() == [0, 1, 2, 3, 4]
    assert long_.to_arrow([np.int64(3), np.int32(4), 5]).to_pylist() == [3, 4, 5]
    assert long_.to_arrow(x for x in (1, 2)).to_pylist() == [1, 2]
    assert long_.to_arrow((7, 8)).to_pylist() == [7, 8]
    assert long_.to_arrow(pa.array([1, 2])).to_pylist() == [1, 2]
    assert long_.to_arrow([]).type == pa.int64()
    with pytest.raises(TypeMismatchError, match="index 0 .*got 1.0 \\(float\\)"):
        long_.to_arrow(np.array([1.0, 2.0]))
    with pytest.raises(TypeMismatchError, match="index 1 .*out of range for int"):
        ValueSchema.parse("int").to_arrow(np.array([1, 2**40]))
    assert ValueSchema.parse("double").to_arrow(np.array([1, 2])).to_pylist() == [1.0, 2.0]
    assert ValueSchema.parse("boolean").to_arrow(np.array([True, False])).to_pylist() == [
        True,
        False,
    ]
    for bad in ("abc", b"abc", {"a": 1}, 5, np.zeros((2, 2))):
        with pytest.raises(InvalidArgumentError):
            long_.to_arrow(bad)


def test_to_python_accepts_chunked_and_checks_type():
    vs = ValueSchema.parse({"type": "map", "values": "long"})
    chunked = pa.chunked_array([vs.to_arrow([{"a": 1}]), vs.to_arrow([{}])])
    assert vs.to_python(chunked) == [{"a": 1}, {}]
    with pytest.raises(TypeMismatchError, match="does not have the type"):
        vs.to_python(pa.array([1]))
    with pytest.raises(InvalidArgumentError):
        vs.to_python([1, 2])


# ---------------------------------------------------------------------------
# strictness: (schema, values, index of the first bad value, message fragment)
# ---------------------------------------------------------------------------
STRICT = [
    ("long", [1, True], 1, "expected int for long, got True (bool)"),
    ("long", [1, 1.5], 1, "got 1.5 (float)"),
    ("long", [1, "2"], 1, "got '2' (str)"),
    ("long", [1, None], 1, "null is not allowed: Avro type long is not a nullable union"),
    ("long", [2**63], 0, "out of range"),
    ("int", [0, 2**31], 1, "out of range for int [-2147483648, 2147483647]"),
    (
        {"type": "int", "java-class": "java.lang.Short"},
        [2**15],
        0,
        "out of range for int/java.lang.Short",
    ),
    (
        {"type": "int", "java-class": "java.lang.Byte"},
        [-129],
        0,
        "out of range for int/java.lang.Byte",
    ),
    ("boolean", [True, 1], 1, "expected bool for boolean, got 1 (int)"),
    ("boolean", [0], 0, "got 0 (int)"),
    ("double", [1.0, True], 1, "expected float for double, got True (bool)"),
    ("double", [1.0, "1"], 1, "got '1' (str)"),
    ("double", [2**53 + 1], 0, "not exactly representable as double"),
    ("float", [2**24 + 1], 0, "not exactly representable as float"),
    ("float", [Decimal("1")], 0, "got Decimal('1') (Decimal)"),
    ("string", ["a", b"b"], 1, "expected str for string, got b'b' (bytes)"),
    ("string", ["a", "\ud800"], 1, "lone surrogate"),
    ("string", [1], 0, "got 1 (int)"),
    ("bytes", [b"a", "b"], 1, "expected bytes for bytes, got 'b' (str)"),
    (
        {"type": "string", "java-class": "java.lang.Character"},
        ["a", "ab"],
        1,
        "not a single UTF-16 code unit",
    ),
    (
        {"type": "string", "java-class": "java.lang.Character"},
        ["\U0001f600"],
        0,
        "not a single UTF-16 code unit",
    ),
    (
        {"type": "string", "java-class": "java.lang.Character"},
        [""],
        0,
        "not a single UTF-16 code unit",
    ),
    (
        {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]},
        ["RED", "BLUE"],
        1,
        "'BLUE' (str) is not a symbol of enum Color (RED, GREEN)",
    ),
    (
        {"type": "fixed", "name": "Four", "size": 4},
        [b"abcd", b"abc"],
        1,
        "has 3 bytes, fixed Four(4) needs exactly 4",
    ),
    (
        {"type": "string", "logicalType": "uuid"},
        ["123e4567-e89b-12d3-a456-426614174000", "nope"],
        1,
        "is not a UUID",
    ),
    (
        {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2},
        [Decimal("1.234")],
        0,
        "more than 2 fractional digits",
    ),
    (
        {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2},
        [Decimal("1000")],
        0,
        "does not fit bytes/decimal(5, 2)",
    ),
    (
        {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2},
        [Decimal("NaN")],
        0,
        "not a finite decimal",
    ),
    (
        {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2},
        [1],
        0,
        "expected decimal.Decimal",
    ),
    (
        {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2},
        [1.5],
        0,
        "expected decimal.Decimal",
    ),
    (
        {"type": "int", "logicalType": "date"},
        [dt.date(2020, 1, 1), dt.datetime(2020, 1, 1)],
        1,
        "expected datetime.date (not datetime)",
    ),
    ({"type": "int", "logicalType": "date"}, ["2020-01-01"], 0, "expected datetime.date"),
    (
        {"type": "int", "logicalType": "time-millis"},
        [dt.time(1, 2, 3, 4)],
        0,
        "sub-millisecond precision",
    ),
    ({"type": "long", "logicalType": "time-micros"}, [dt.time(1, tzinfo=UTC)], 0, "has a tzinfo"),
    (
        {"type": "long", "logicalType": "timestamp-micros"},
        [ts(2020, 1, 1), dt.datetime(2020, 1, 1)],
        1,
        "is naive; long/timestamp-micros needs a timezone-aware datetime",
    ),
    (
        {"type": "long", "logicalType": "timestamp-micros"},
        [dt.date(2020, 1, 1)],
        0,
        "expected datetime.datetime",
    ),
    (
        {"type": "long", "logicalType": "timestamp-millis"},
        [ts(2020, 1, 1, 0, 0, 0, 1)],
        0,
        "sub-millisecond precision",
    ),
    (
        {"type": "long", "logicalType": "local-timestamp-micros"},
        [dt.datetime(2020, 1, 1), ts(2020, 1, 1)],
        1,
        "is timezone-aware; long/local-timestamp-micros needs a naive datetime",
    ),
    (
        {"type": "long", "logicalType": "local-timestamp-millis"},
        [dt.datetime(2020, 1, 1, 0, 0, 0, 999)],
        0,
        "sub-millisecond",
    ),
    (
        {"type": "array", "items": "long"},
        [[1], [1, True]],
        1,
        "field '[1]': expected int for long, got True",
    ),
    (
        {"type": "array", "items": "long"},
        [[1], "ab"],
        1,
        "expected list for array<long>, got 'ab' (str)",
    ),
    ({"type": "array", "items": "long"}, [[1, None]], 0, "field '[1]': null is not allowed"),
    (
        {"type": "map", "values": "long"},
        [{"a": 1}, {1: 1}],
        1,
        "field '[1]': expected str for a map key, got 1 (int)",
    ),
    ({"type": "map", "values": "long"}, [{"a": 1.5}], 0, "field '[\"a\"]': expected int for long"),
    ({"type": "map", "values": "long"}, [[("a", 1)]], 0, "expected dict for map<long>"),
    (
        RECORD,
        [RECORD_VALUES[0], {**RECORD_VALUES[0], "tags": ["a", 3]}],
        1,
        "field 'tags[1]': expected str for string, got 3",
    ),
    (
        RECORD,
        [{**RECORD_VALUES[0], "attrs": {"k": True}}],
        0,
        "field 'attrs[\"k\"]': expected float for double, got True",
    ),
    (
        RECORD,
        [{**RECORD_VALUES[0], "home": {"city": None, "zip": 1}}],
        0,
        "field 'home.city': null is not allowed: Avro type string is not a nullable union",
    ),
    (
        RECORD,
        [{**RECORD_VALUES[0], "home": {"city": "x", "zip": 1, "street": "y"}}],
        0,
        "field 'home': unknown field(s) 'street' for record com.example.Address",
    ),
    (
        RECORD,
        [{k: v for k, v in RECORD_VALUES[0].items() if k != "id"}],
        0,
        "missing field 'id' (not nullable) in record com.example.User",
    ),
    (RECORD, [RECORD_VALUES[0], None], 1, "null is not allowed: Avro type record com.example.User"),
    (RECORD, [(1, "a")], 0, "expected dict for record com.example.User"),
]


@pytest.mark.parametrize(
    "schema,values,index,fragment",
    STRICT,
    ids=[f"{json.dumps(s[0])[:40]}-{s[3][:30]}" for s in STRICT],
)
def test_to_arrow_rejects_with_index_and_path(schema, values, index, fragment):
    vs = ValueSchema.parse(schema)
    with pytest.raises(TypeMismatchError) as info:
        vs.to_arrow(values)
    message = str(info.value)
    assert f"value at index {index} does not match Avro schema" in message
    assert fragment in message
    assert isinstance(info.value, StateSourceError) and isinstance(info.value, TypeError)
    # validate() agrees on the value and reports the same problem
    for good in values[:index]:
        vs.validate(good)
    with pytest.raises(TypeMismatchError) as single:
        vs.validate(values[index])
    assert fragment in str(single.value)
    assert "does not match Avro schema" in str(single.value)


def test_validate_accepts_valid_values():
    """validate() accepts exactly what the column encoder keeps unchanged, and nothing else."""
    for schema, _, values in MAPPING:
        vs = ValueSchema.parse(schema)
        for v in values:
            vs.validate(v)  # raises on a mismatch
            assert vs.to_python(ipc_roundtrip(vs.to_arrow([v]), vs)) == [v], (schema, v)
        if not vs.nullable:
            with pytest.raises(TypeMismatchError, match="does not match Avro schema"):
                vs.validate(None)
    nullable = ValueSchema.parse(["null", "long"])
    nullable.validate(None)
    assert nullable.to_python(nullable.to_arrow([None])) == [None]
    with pytest.raises(TypeMismatchError):
        nullable.validate("1")


# ---------------------------------------------------------------------------
# schemas that cannot be mapped, or are not valid Avro
# ---------------------------------------------------------------------------
def nest(inner):
    """Put a schema fragment at field path 'user.tags[]'."""
    return {
        "type": "record",
        "name": "Outer",
        "fields": [
            {
                "name": "user",
                "type": {
                    "type": "record",
                    "name": "User",
                    "fields": [{"name": "tags", "type": {"type": "array", "items": inner}}],
                },
            }
        ],
    }


REJECTED = [
    ("null", '"null" is only supported as a branch of a nullable union'),
    ({"type": "null"}, '"null" is only supported as a branch'),
    (["null", "long", "string"], 'union ["null","long","string"] is not supported'),
    (["int", "string"], 'only a union of "null" and exactly one other type'),
    (["long"], 'union ["long"] is not supported'),
    (["null"], 'union ["null"] is not supported'),
    (["null", "null"], 'union ["null","null"] is not supported'),
    (["null", ["null", "long"]], "directly contains another union"),
    (
        nest(["int", "string", "null"]),
        'field \'user.tags[]\': union ["int","string","null"] is not supported',
    ),
    (nest({"type": "map", "values": "null"}), "field 'user.tags[]{}': \"null\" is only supported"),
    (
        {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]},
        "field 'next': recursive type 'Node' is not supported",
    ),
    (
        {
            "type": "record",
            "name": "T",
            "namespace": "n",
            "fields": [{"name": "kids", "type": {"type": "array", "items": "T"}}],
        },
        "field 'kids[]': recursive type 'n.T' is not supported",
    ),
    (
        {"type": "bytes", "logicalType": "decimal", "precision": 39, "scale": 2},
        "decimal precision 39 exceeds 38",
    ),
    (
        {"type": "fixed", "name": "F", "size": 4, "logicalType": "decimal", "precision": 10},
        "a fixed of 4 bytes holds at most 9",
    ),
    (
        {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 5},
        "0 <= scale <= precision",
    ),
    (
        {"type": "bytes", "logicalType": "decimal", "scale": 1},
        "decimal precision must be an integer",
    ),
    (
        {"type": "long", "logicalType": "decimal", "precision": 4},
        "logicalType decimal requires bytes or fixed, not long",
    ),
    ({"type": "long", "logicalType": "timestamp-nanos"}, "nanosecond timestamps are not supported"),
    (
        {"type": "long", "logicalType": "local-timestamp-nanos"},
        "nanosecond timestamps are not supported",
    ),
    (
        {"type": "fixed", "name": "D", "size": 12, "logicalType": "duration"},
        "duration logical type is not supported",
    ),
    ({"type": "bytes", "logicalType": "big-decimal"}, "big-decimal logical type is not supported"),
    ({"type": "long", "logicalType": "date"}, "logicalType date requires type int, not long"),
    (
        {"type": "int", "logicalType": "timestamp-millis"},
        "logicalType timestamp-millis requires type long, not int",
    ),
    (
        {"type": "fixed", "name": "U", "size": 16, "logicalType": "uuid"},
        "logicalType uuid is not supported on fixed",
    ),
    ({"type": "bytes", "logicalType": "uuid"}, "logicalType uuid is supported on string only"),
    (
        {"type": "long", "java-class": "java.lang.Short"},
        "java-class java.lang.Short requires type int, not long",
    ),
    (
        {"type": "string", "java-class": "java.lang.Byte"},
        "java-class java.lang.Byte requires type int",
    ),
    (
        {"type": "long", "java-class": "java.lang.Character"},
        "java.lang.Character requires type string or int",
    ),
    (
        {"type": "int", "logicalType": "date", "java-class": "java.lang.Short"},
        "cannot be combined with a logicalType",
    ),
    ("Foo", "unknown type 'Foo'"),
    (
        {"type": "array", "items": "com.example.Missing"},
        "field '[]': unknown type 'com.example.Missing'",
    ),
    ({"type": "array"}, "has no 'items'"),
    ({"type": "map"}, "has no 'values'"),
    ({"name": "x"}, "has no 'type'"),
    ({"type": {"type": "long"}}, "must be a type name"),
    ({"type": "error", "name": "E", "fields": []}, "unknown type 'error'"),
    (
        {
            "type": "record",
            "name": "R",
            "fields": [{"name": "a", "type": "int"}, {"name": "a", "type": "long"}],
        },
        "two fields named 'a'",
    ),
    ({"type": "record", "name": "R", "fields": [{"name": "a-b", "type": "int"}]}, "invalid name"),
    ({"type": "record", "name": "R", "fields": [{"name": "a"}]}, "field 'a': field has no 'type'"),
    ({"type": "record", "name": "1R", "fields": []}, "invalid name '1R'"),
    ({"type": "record", "name": "long", "fields": []}, "primitive type name"),
    (
        {
            "type": "record",
            "name": "R",
            "fields": [{"name": "a", "type": {"type": "enum", "name": "R", "symbols": ["X"]}}],
        },
        "named type 'R' is defined twice",
    ),
    ({"type": "enum", "name": "E", "symbols": ["A", "A"]}, "duplicate symbols"),
    ({"type": "enum", "name": "E", "symbols": ["1A"]}, "needs 'symbols'"),
    ({"type": "fixed", "name": "F"}, "needs 'size'"),
    ({"type": "fixed", "name": "F", "size": -1}, "needs 'size'"),
    (
        {"type": "record", "name": "R", "fields": [{"name": "a", "type": "long", "default": "x"}]},
        "is invalid: Default value <x> must match schema type: long",
    ),
    ({"type": "record", "name": "R", "fields": "a"}, "'fields' of record 'R' must be a list"),
]


@pytest.mark.parametrize("schema,fragment", REJECTED, ids=[json.dumps(r[0])[:60] for r in REJECTED])
def test_unmappable_schemas_are_rejected(schema, fragment):
    with pytest.raises(TypeMismatchError) as info:
        ValueSchema.parse(schema)
    message = str(info.value)
    assert fragment in message
    assert message.startswith("Avro schema ")  # names the schema
    with pytest.raises(TypeMismatchError):
        value_schema(schema)


def test_rejection_message_names_schema_and_part():
    with pytest.raises(TypeMismatchError) as info:
        ValueSchema.parse(json.dumps(nest(["int", "string"])))
    message = str(info.value)
    assert message.startswith('Avro schema {"type":"record","name":"Outer"')
    assert (
        'cannot be mapped to Arrow: field \'user.tags[]\': union ["int","string"] is not supported'
        in message
    )
    assert "nullable" in message


@pytest.mark.parametrize("bad", ['{"type": "long"', "[1, 2", 42, 1.5, None, b'"long"'])
def test_not_a_schema_is_an_invalid_argument(bad):
    with pytest.raises(InvalidArgumentError):
        ValueSchema.parse(bad)


# ---------------------------------------------------------------------------
# canonical form, equality, identity
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "schema", [s for s, _, _ in MAPPING] + [["null", RECORD], nest(["null", "int"])]
)
def test_canonical_form_round_trips(schema):
    vs = ValueSchema.parse(schema)
    text = json.dumps(vs.avro)
    again = ValueSchema.parse(json.loads(text))
    assert again == vs and hash(again) == hash(vs)
    assert again.avro == vs.avro
    assert again.arrow_type == vs.arrow_type
    assert ValueSchema.parse(text) == vs
    assert ValueSchema.parse(vs.json) == vs
    assert json.loads(vs.json) == vs.avro


def test_equivalent_schemas_are_equal():
    forms = [
        "long",
        " long ",
        '"long"',
        {"type": "long"},
        '{"type": "long", "doc": "x"}',
        {"type": "long", "logicalType": "unknown-thing"},
        {"type": "long", "custom": 1},
    ]
    parsed = [ValueSchema.parse(f) for f in forms]
    assert all(p == parsed[0] for p in parsed)
    assert len({*parsed}) == 1
    assert parsed[0].avro == "long"
    assert ValueSchema.parse(["null", "long"]) != ValueSchema.parse(
        ["long", "null"]
    )  # branch order is encoding
    assert ValueSchema.parse("long") != ValueSchema.parse("int")
    assert ValueSchema.parse("long") != "long"


def test_canonical_form_details():
    vs = ValueSchema.parse(
        {
            "type": "record",
            "name": "User",
            "namespace": "com.example",
            "doc": "d",
            "aliases": ["U"],
            "fields": [
                {
                    "name": "a",
                    "type": {"type": "enum", "name": "E", "symbols": ["X"], "default": "X"},
                    "doc": "x",
                    "order": "ignore",
                },
                {"name": "b", "type": "E"},
                {"name": "c", "type": {"type": "fixed", "name": "other.F", "size": 2}},
                {
                    "name": "d",
                    "type": {"type": "record", "name": "G", "namespace": "", "fields": []},
                },
                {"name": "e", "type": {"type": "bytes", "logicalType": "decimal", "precision": 3}},
                {"name": "f", "type": {"type": "string", "avro.java.string": "String"}},
                {"name": "g", "type": "G"},  # the null-namespace G, from inside com.example
            ],
        }
    )
    assert vs.avro == {
        "name": "com.example.User",
        "type": "record",
        "fields": [
            {"name": "a", "type": {"name": "com.example.E", "type": "enum", "symbols": ["X"]}},
            {"name": "b", "type": "com.example.E"},
            {"name": "c", "type": {"name": "other.F", "type": "fixed", "size": 2}},
            {"name": "d", "type": {"name": "G", "namespace": "", "type": "record", "fields": []}},
            {
                "name": "e",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 3, "scale": 0},
            },
            {"name": "f", "type": "string"},
            {"name": "g", "type": "G"},
        ],
    }
    assert list(vs.avro) == ["name", "type", "fields"]
    assert ValueSchema.parse(vs.avro) == vs
    # an empty record maps to an empty struct; references resolve through the canonical form
    assert vs.arrow_type.field("d").type == pa.struct([])


def test_named_type_used_nullable_and_not():
    schema = {
        "type": "record",
        "name": "R",
        "fields": [
            {
                "name": "a",
                "type": {"type": "record", "name": "P", "fields": [{"name": "x", "type": "int"}]},
            },
            {"name": "b", "type": ["null", "P"]},
        ],
    }
    vs, back = roundtrip(schema, [{"a": {"x": 1}, "b": None}, {"a": {"x": 2}, "b": {"x": 3}}])
    assert back == [{"a": {"x": 1}, "b": None}, {"a": {"x": 2}, "b": {"x": 3}}]
    with pytest.raises(TypeMismatchError, match="field 'a': null is not allowed"):
        vs.to_arrow([{"a": None, "b": None}])


def test_value_schema_is_immutable_hashable_picklable():
    vs = ValueSchema.parse(RECORD)
    with pytest.raises(AttributeError):
        vs.avro = "long"
    with pytest.raises(AttributeError):
        vs._json = "x"
    with pytest.raises(TypeError):
        ValueSchema("long")
    avro = vs.avro
    avro["fields"].clear()
    assert vs.avro["fields"]  # a fresh copy each time
    clone = pickle.loads(pickle.dumps(vs))
    assert clone == vs and clone.to_arrow(RECORD_VALUES).equals(vs.to_arrow(RECORD_VALUES))
    assert copy.deepcopy(vs) is vs
    assert {vs: 1}[ValueSchema.parse(json.dumps(RECORD))] == 1
    assert repr(ValueSchema.parse("long")) == 'ValueSchema("long")'


def test_value_schema_cache():
    assert value_schema("long") is value_schema("long")
    assert value_schema(dict(RECORD)) is value_schema(json.loads(json.dumps(RECORD)))
    vs = ValueSchema.parse("long")
    assert value_schema(vs) is vs and ValueSchema.parse(vs) is vs
    assert value_schema({"type": "long"}) == vs


def test_arrow_field_for():
    field = arrow_field_for("count", value_schema("long"))
    assert field == pa.field("count", pa.int64(), nullable=True)
    assert arrow_field_for("x", {"type": "int", "java-class": "java.lang.Short"}).type == pa.int16()
    with pytest.raises(InvalidArgumentError):
        arrow_field_for("", value_schema("long"))


def test_strings_are_never_large():
    vs = ValueSchema.parse({"type": "map", "values": {"type": "array", "items": "string"}})
    assert vs.arrow_type == pa.map_(pa.string(), pa.list_(pa.string()))
    assert vs.to_arrow([{"k": ["a"]}]).type == vs.arrow_type


def test_large_primitive_column_uses_vectorised_path(monkeypatch):
    # the Python per-value walk is the error path only: make it fail loudly
    from statesource.schema import converter

    def boom(*args):
        raise AssertionError("per-value path used on valid data")

    monkeypatch.setattr(converter, "raise_first_bad", boom)
    for schema, values in [
        ("long", list(range(100_000))),
        (["null", "string"], ["x", None] * 50_000),
        ("double", [0.5] * 100_000),
        (RECORD, RECORD_VALUES * 10_000),
    ]:
        vs = ValueSchema.parse(schema)
        assert len(vs.to_arrow(values)) == len(values)

"""Property tests of statesource.schema: generated values for nested schemas."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statesource.errors import TypeMismatchError
from statesource.schema import ValueSchema, arrow_field_for

UTC = dt.timezone.utc
SETTINGS = settings(
    max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)

DECIMAL = {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3}
INNER = {
    "type": "record",
    "name": "Inner",
    "fields": [
        {"name": "x", "type": ["null", "long"]},
        {"name": "s", "type": "string"},
        {"name": "f", "type": ["null", "float"]},
    ],
}
SCHEMAS = {
    # record with an array of maps with nullable record values, plus a reuse of the named type
    "record-array-map": {
        "type": "record",
        "name": "Top",
        "fields": [
            {
                "name": "items",
                "type": {"type": "array", "items": {"type": "map", "values": ["null", INNER]}},
            },
            {"name": "opt", "type": ["null", "Inner"]},
            {"name": "when", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
            {"name": "amount", "type": DECIMAL},
        ],
    },
    "nullable-nested-arrays": [
        "null",
        {"type": "array", "items": ["null", {"type": "array", "items": ["null", "int"]}]},
    ],
    "map-of-records": {
        "type": "map",
        "values": {
            "type": "record",
            "name": "V",
            "fields": [
                {
                    "name": "color",
                    "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]},
                },
                {"name": "id", "type": {"type": "fixed", "name": "Id", "size": 3}},
                {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}]},
                {"name": "blob", "type": "bytes"},
                {"name": "small", "type": {"type": "int", "java-class": "java.lang.Short"}},
                {"name": "ch", "type": {"type": "string", "java-class": "java.lang.Character"}},
                {"name": "ok", "type": "boolean"},
                {"name": "at", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
            ],
        },
    },
    "nullable-double": ["null", "double"],
    "nullable-uuid": ["null", {"type": "string", "logicalType": "uuid"}],
    "time-micros": {"type": "long", "logicalType": "time-micros"},
}


def strategy(schema, named=None, nullable=False):
    """Valid Python values for a canonical Avro schema."""
    named = {} if named is None else named
    if isinstance(schema, list):
        other = next(b for b in schema if b != "null")
        return strategy(other, named, nullable=True)
    inner = _strategy(schema, named)
    return st.one_of(st.none(), inner) if nullable else inner


def _strategy(schema, named):
    if isinstance(schema, str):
        if schema in named:
            return named[schema]
        return {
            "boolean": st.booleans(),
            "int": st.integers(-(2**31), 2**31 - 1),
            "long": st.integers(-(2**63), 2**63 - 1),
            "float": st.floats(width=32, allow_nan=False),
            "double": st.floats(allow_nan=False),
            "bytes": st.binary(max_size=8),
            "string": st.text(max_size=8),
        }[schema]
    t, logical = schema["type"], schema.get("logicalType")
    if logical == "decimal":
        p, s = schema["precision"], schema["scale"]
        limit = Decimal(10) ** (p - s) - Decimal(1).scaleb(-s)
        return st.decimals(
            min_value=-limit, max_value=limit, places=s, allow_nan=False, allow_infinity=False
        )
    if logical == "timestamp-micros":
        return st.datetimes(timezones=st.sampled_from([UTC, dt.timezone(dt.timedelta(hours=-5))]))
    if logical == "local-timestamp-millis":
        return st.datetimes().map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000))
    if logical == "date":
        return st.dates()
    if logical == "time-micros":
        return st.times()
    if logical == "uuid":
        return st.uuids().map(str)
    if schema.get("java-class") == "java.lang.Short":
        return st.integers(-(2**15), 2**15 - 1)
    if schema.get("java-class") == "java.lang.Character":
        return st.characters(max_codepoint=0xFFFF, exclude_categories=["Cs"])
    if t == "record":
        fields = {}
        result = st.fixed_dictionaries(fields)
        for f in schema["fields"]:
            fields[f["name"]] = strategy(f["type"], named)
        named[schema["name"]] = result
        return result
    if t == "enum":
        named[schema["name"]] = result = st.sampled_from(schema["symbols"])
        return result
    if t == "fixed":
        named[schema["name"]] = result = st.binary(min_size=schema["size"], max_size=schema["size"])
        return result
    if t == "array":
        return st.lists(strategy(schema["items"], named), max_size=4)
    if t == "map":
        return st.dictionaries(st.text(max_size=4), strategy(schema["values"], named), max_size=3)
    return _strategy(t, named)


def ipc_roundtrip(array, vs):
    table = pa.Table.from_arrays([array], schema=pa.schema([arrow_field_for("v", vs)]))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return pa.ipc.open_stream(sink.getvalue()).read_all().column("v")


def column_strategy(vs):
    return st.lists(strategy(vs.avro), max_size=12)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_generated_values_round_trip(name):
    vs = ValueSchema.parse(SCHEMAS[name])

    @SETTINGS
    @given(values=column_strategy(vs))
    def check(values):
        array = vs.to_arrow(values)
        assert array.type == vs.arrow_type
        assert vs.to_python(ipc_roundtrip(array, vs)) == values
        # the vectorised path and the checked per-value path build the same array
        checked = pa.array(
            [vs._root.check_nullable(v, vs.nullable) for v in values], type=vs.arrow_type
        )
        assert vs._root.column(values, vs.nullable, 0).equals(checked)
        for v in values:
            vs.validate(v)

    check()


JUNK = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=3)
    | st.binary(max_size=3)
    | st.dates(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=6,
)


def mutate(value, data):
    """Replace one random part of a valid value by junk (which may happen to be valid)."""
    if isinstance(value, dict) and value and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sorted(value)))
        return {**value, key: mutate(value[key], data)}
    if isinstance(value, list) and value and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(value) - 1))
        return value[:i] + [mutate(value[i], data)] + value[i + 1 :]
    return data.draw(JUNK)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_to_arrow_and_validate_agree_on_bad_values(name):
    vs = ValueSchema.parse(SCHEMAS[name])

    @SETTINGS
    @given(values=column_strategy(vs), data=st.data())
    def check(values, data):
        if values:
            i = data.draw(st.integers(0, len(values) - 1))
            values = values[:i] + [mutate(values[i], data)] + values[i + 1 :]
        first_bad = None
        for index, v in enumerate(values):
            try:
                vs.validate(v)
            except TypeMismatchError:
                first_bad = index
                break
        if (
            first_bad is None
        ):  # e.g. junk that happens to be valid, a record missing only nullable fields
            expected = pa.array(
                [vs._root.check_nullable(v, vs.nullable) for v in values], type=vs.arrow_type
            )
            assert vs.to_arrow(values).equals(expected)
        else:
            with pytest.raises(
                TypeMismatchError, match=f"value at index {first_bad} does not match"
            ):
                vs.to_arrow(values)

    check()


@SETTINGS
@given(st.lists(st.one_of(st.integers(-(2**63), 2**63 - 1), st.none())))
def test_nullable_long_column(values):
    vs = ValueSchema.parse(["null", "long"])
    assert vs.to_python(vs.to_arrow(values)) == values


def test_canonical_json_of_generated_schemas_is_stable():
    for schema in SCHEMAS.values():
        vs = ValueSchema.parse(json.dumps(schema))
        assert ValueSchema.parse(json.loads(json.dumps(vs.avro))).json == vs.json

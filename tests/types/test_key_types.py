"""Key types: their names, their Arrow and Avro forms, and their pickles."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from key_strategies import VALUES
from statesource.errors import InvalidArgumentError, TypeMismatchError
from statesource.types import Row, RowKind, key_type, parse_type


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("String", "string"),
        ("Tuple2<String, Long>", "tuple<string,long>"),
        ("row<bytes, row<int>>", "row<bytes,row<int>>"),
        ("Character", "char"),
    ],
)
def test_type_names_parse_to_canonical_form(text, canonical):
    assert parse_type(text).name == canonical
    assert parse_type(canonical) == parse_type(text)


@pytest.mark.parametrize("text", ["str", "tuple", "tuple<>", "tuple3<int,int>", "row<int", "int>"])
def test_bad_type_names_are_reported(text):
    with pytest.raises(InvalidArgumentError, match="type"):
        parse_type(text)


def test_tuple_with_byte_array_field_is_rejected():
    with pytest.raises(TypeMismatchError, match="identity"):
        parse_type("tuple<bytes>")


def as_rows(declared, value):
    """A key with every tuple standing for a row turned into a Row, as a reader returns it."""
    if value is None or not hasattr(declared, "fields"):
        return value
    fields = value.fields if isinstance(value, Row) else value
    typed = tuple(as_rows(t, f) for t, f in zip(declared.fields, fields))
    if declared.name.startswith("row"):
        return Row(*typed, kind=value.kind if isinstance(value, Row) else RowKind.INSERT)
    return typed


@pytest.mark.parametrize("type_name", sorted(VALUES))
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_arrow_round_trip_of_every_key_type(type_name, data):
    declared = parse_type(type_name)
    keys = data.draw(st.lists(VALUES[type_name], max_size=10))
    restored = declared.from_arrow(declared.to_arrow(keys))
    if type_name == "float":
        keys = [float(pa.array([k], pa.float32())[0].as_py()) for k in keys]
    keys = [as_rows(declared, k) for k in keys]
    assert [declared.java_hash(k) for k in restored] == [declared.java_hash(k) for k in keys]
    assert repr(restored) == repr(keys)  # repr: NaN != NaN, yet must survive the trip


@pytest.mark.parametrize("type_name", ["tuple<tuple<int,long>,string>",
                                       "row<row<int>,tuple<int>,tuple<int>>"])
def test_nested_composites_are_valid_avro_value_types(type_name):
    from statesource.schema import ValueSchema

    declared = parse_type(type_name)
    schema = ValueSchema.parse(declared.to_avro())
    assert schema.arrow_type.num_fields == declared.arrow_type.num_fields


def test_primitive_types_unpickle_as_themselves():
    """Spark ships key types to its tasks by pickling; code compares primitives by identity."""
    import pickle

    from statesource.types import BYTE, CHAR, DOUBLE, LONG, STRING, VOID

    for data_type in (STRING, LONG, BYTE, CHAR, DOUBLE, VOID):
        assert pickle.loads(pickle.dumps(data_type)) is data_type
    composite = key_type("row<string,tuple<int,boolean>>")
    assert pickle.loads(pickle.dumps(composite)) == composite

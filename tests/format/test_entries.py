"""Entry boundaries follow Java's ``equals``, checked against plain-Python models.

Independent truth: Java's documented equality. ``Double.equals`` / ``Float.equals``
compare ``doubleToLongBits`` / ``floatToIntBits`` (``tests/java_bits.py``, built on
``struct``), ``Objects.equals`` takes two nulls as equal, and a null Tuple or Row
field differs from a Tuple or Row whose own fields are all null.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from java_bits import NAN, NEGATIVE_NAN, OTHER_NAN, java_double_bits, java_float_bits

from statesource.errors import TypeMismatchError
from statesource.format.columns import canonical_column
from statesource.format.entries import (
    entry_starts,
    equal_or_both_null,
    java_equality_columns,
    row_changes,
)
from statesource.types import Row, RowKind, parse_type

LEAVES = {
    pa.float64(): st.sampled_from([NAN, OTHER_NAN, NEGATIVE_NAN, 0.0, -0.0, 1.5, math.inf]),
    pa.float32(): st.sampled_from([NAN, 0.0, -0.0, 1.5, -math.inf]),
    pa.int32(): st.integers(-2, 2),
    pa.string(): st.sampled_from(["", "a", "b"]),
    pa.binary(): st.sampled_from([b"", b"x"]),
}
ARROW_TYPES = st.recursive(
    st.sampled_from(list(LEAVES)),
    lambda inner: st.lists(inner, min_size=1, max_size=3).map(
        lambda types: pa.struct([(f"f{i}", t) for i, t in enumerate(types)])),
    max_leaves=5)


def arrow_values(arrow_type: pa.DataType) -> st.SearchStrategy:
    if pa.types.is_struct(arrow_type):
        fields = st.fixed_dictionaries({f.name: arrow_values(f.type) for f in arrow_type})
        return st.none() | fields
    return st.none() | LEAVES[arrow_type]


def java_identity(value, arrow_type: pa.DataType):
    """A value equal to another's exactly when Java's ``equals`` holds of the two."""
    if value is None:
        return None
    if pa.types.is_struct(arrow_type):
        return tuple(java_identity(value[f.name], f.type) for f in arrow_type)
    if arrow_type == pa.float64():
        return ("double", java_double_bits(value))
    if arrow_type == pa.float32():
        return ("float", java_float_bits(value))
    return value


def model_starts(identities: list) -> list[int]:
    """Where each run of equal identities starts, plus the row count."""
    return [row for row in range(len(identities))
            if row == 0 or identities[row] != identities[row - 1]] + [len(identities)]


@st.composite
def runs(draw, values: st.SearchStrategy, rows: int) -> list:
    """``rows`` values from a small pool, so that equal and Java-equal neighbours are common."""
    pool = draw(st.lists(values, min_size=1, max_size=4))
    return [pool[i] for i in draw(st.lists(st.integers(0, len(pool) - 1), min_size=rows,
                                           max_size=rows))]


def chunked(column: pa.Array, data: st.DataObject) -> pa.ChunkedArray:
    cut = data.draw(st.integers(0, len(column)))
    return pa.chunked_array([column.slice(0, cut), column.slice(cut)], column.type)


@settings(max_examples=300, deadline=None)
@given(key_type=ARROW_TYPES, namespace_type=st.none() | ARROW_TYPES,
       rows=st.integers(0, 25), data=st.data())
def test_entry_starts_against_a_model_of_java_equality(key_type, namespace_type, rows, data):
    keys = data.draw(runs(arrow_values(key_type), rows))
    namespaces = ([None] * rows if namespace_type is None
                  else data.draw(runs(arrow_values(namespace_type), rows)))
    namespace_type = namespace_type or pa.null()
    expected = model_starts([(java_identity(k, key_type), java_identity(n, namespace_type))
                             for k, n in zip(keys, namespaces)])
    key_column = pa.array(keys, key_type)
    namespace_column = pa.array(namespaces, namespace_type)
    assert entry_starts(key_column, namespace_column).tolist() == expected
    assert entry_starts(chunked(key_column, data),
                        chunked(namespace_column, data)).tolist() == expected


DECLARED_VALUES = {
    "double": LEAVES[pa.float64()],
    "float": st.sampled_from([NAN, 0.0, -0.0, 0.1, 0.1 + 2.0 ** -56, 1e300, math.inf]),
    "tuple<double,string>": st.tuples(st.none() | LEAVES[pa.float64()],
                                      st.none() | LEAVES[pa.string()]),
    "row<float,tuple<double,int>>": st.builds(
        lambda fields, kind: Row(*fields, kind=kind),
        st.tuples(st.none() | st.sampled_from([NAN, -0.0, 0.0]),
                  st.none() | st.tuples(st.none() | LEAVES[pa.float64()],
                                        st.none() | st.integers(0, 1))),
        st.sampled_from([RowKind.INSERT, RowKind.DELETE])),
    "timewindow": st.tuples(st.integers(0, 1), st.integers(1, 2)),
    "void": st.none(),
}


@settings(max_examples=200, deadline=None)
@given(key_name=st.sampled_from([n for n in DECLARED_VALUES if n not in ("timewindow", "void")]),
       namespace_name=st.sampled_from(list(DECLARED_VALUES)), rows=st.integers(0, 20),
       data=st.data())
def test_readers_regroup_rows_as_the_python_key_forms_compare(key_name, namespace_name, rows,
                                                              data):
    """The Arrow boundaries equal those of the decoded keys' Java-equality forms
    (:mod:`statesource.keyequality`), which readers once compared value by value."""
    key_type, namespace_type = parse_type(key_name), parse_type(namespace_name)
    keys = key_type.to_arrow(data.draw(runs(DECLARED_VALUES[key_name], rows)))
    namespaces = namespace_type.to_arrow(data.draw(runs(DECLARED_VALUES[namespace_name], rows)))
    decoded = list(zip(canonical_column(key_type, key_type.from_arrow(keys)),
                       canonical_column(namespace_type, namespace_type.from_arrow(namespaces))))
    assert entry_starts(keys, namespaces).tolist() == model_starts(decoded)


def test_hand_picked_boundaries():
    doubles = pa.array([NAN, OTHER_NAN, 0.0, -0.0, -0.0, None, None, 1.0])
    assert entry_starts(doubles, pa.nulls(8)).tolist() == [0, 2, 3, 5, 7, 8]
    nested = pa.struct([("f0", pa.string()), ("f1", pa.struct([("f0", pa.int32())]))])
    keys = pa.array([{"f0": "a", "f1": None}, {"f0": "a", "f1": {"f0": None}},
                     {"f0": "a", "f1": {"f0": None}}, {"f0": "a", "f1": None}], nested)
    assert entry_starts(keys, pa.nulls(4)).tolist() == [0, 1, 3, 4]
    assert entry_starts(pa.array([], pa.int64()), pa.nulls(0)).tolist() == [0]


def test_equality_columns_of_a_nested_struct():
    nested = pa.struct([("f0", pa.float32()), ("f1", pa.struct([("f0", pa.float64())]))])
    column = pa.array([{"f0": -0.0, "f1": None}, {"f0": NAN, "f1": {"f0": NAN}}], nested)
    columns = java_equality_columns("key", pa.chunked_array([column]))
    assert list(columns) == ["key.f0", "key.f1.f0", "key.f1"]
    assert columns["key.f0"].to_pylist() == [java_float_bits(-0.0), 0x7FC00000]
    assert columns["key.f1.f0"].to_pylist() == [None, 0x7FF8000000000000]
    assert columns["key.f1"].to_pylist() == [False, True]
    assert java_equality_columns("namespace", pa.nulls(2)) == {}


def test_row_changes_and_null_safe_equality():
    left, right = pa.array([1, None, None, 2]), pa.array([1, None, 3, 3])
    assert equal_or_both_null(left, right).tolist() == [True, True, False, False]
    columns = [pa.array([1, 1, 1, 2]), pa.array(["a", "a", "b", "b"])]
    assert row_changes(columns).tolist() == [False, True, True]
    assert row_changes([pa.array([7])]).tolist() == []


def test_floating_point_columns_need_float32_or_float64():
    with pytest.raises(TypeMismatchError, match="float32 or float64, not float16"):
        java_equality_columns("key", pa.array(np.array([1.0], dtype=np.float16)))

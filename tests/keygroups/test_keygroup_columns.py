"""Key groups of Arrow columns (the Python path of flink_key_group / flink_operator_index)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from golden_columns import golden_tables
from golden_vectors import rows
from statesource.errors import InvalidArgumentError, TypeMismatchError
from statesource.keygroups import assign_to_key_group
from statesource.keygroups.columns import (
    key_groups_of_column,
    key_type_of_arrow,
    operator_indexes_of_columns,
)
from statesource.types import Row, RowKind, parse_type


def test_golden_key_groups_of_every_key_type():
    tables = golden_tables()
    assert len(tables) == 15
    for golden in tables:
        table = golden.table
        computed = key_groups_of_column(table["key"].combine_chunks(),
                                        table["max_parallelism"].combine_chunks())
        assert computed.equals(table["expected"].combine_chunks()), golden.key_type
    skipped = {g.key_type: g.skipped for g in tables if g.skipped}
    assert set(skipped) <= {"String", "Character"}, skipped  # only lone surrogates


def test_golden_operator_indexes():
    golden = rows("operator_index.csv")
    column = {name: pa.array([int(r[name]) for r in golden], pa.int32())
              for name in ("key_group", "max_parallelism", "parallelism", "operator_index")}
    computed = operator_indexes_of_columns(column["key_group"], column["max_parallelism"],
                                           column["parallelism"])
    assert computed.equals(column["operator_index"])


def test_types_implied_by_arrow_columns():
    assert key_type_of_arrow(pa.int16()).name == "short"
    assert key_type_of_arrow(pa.struct([("a", pa.string()), ("b", pa.int64())])).name == \
        "tuple<string,long>"
    nested = pa.struct([("row_kind", pa.string()), ("f0", pa.binary()),
                        ("f1", pa.struct([("f0", pa.int32())]))])
    assert key_type_of_arrow(nested).name == "row<bytes,tuple<int>>"
    with pytest.raises(TypeMismatchError, match="date32.*cannot be a Flink key"):
        key_type_of_arrow(pa.date32())


def test_nulls_give_null_and_struct_names_do_not_matter():
    keys = pa.array(["alice", None, "bob"])
    assert key_groups_of_column(keys, pa.array([128, 128, None])).to_pylist() == [116, None, None]
    named = pa.struct([("x", pa.string()), ("y", pa.int64())])
    tuples = pa.array([{"x": "a", "y": 1}, None], named)
    expected = assign_to_key_group(("a", 1), parse_type("tuple<string,long>"), 128)
    assert key_groups_of_column(tuples, pa.array([128, 128])).to_pylist() == [expected, None]


def test_bad_arguments_name_the_value():
    keys = pa.array(["a", "b"])
    with pytest.raises(InvalidArgumentError, match=r"max parallelism 0 is outside \[1, 32768\]"):
        key_groups_of_column(keys, pa.array([128, 0]))
    with pytest.raises(TypeMismatchError, match="max parallelism must be an int, got 1.5"):
        key_groups_of_column(keys, pa.array([1.5, 2.0]))
    with pytest.raises(TypeMismatchError, match="bytes cannot be a key type"):
        key_groups_of_column(pa.array([b"x"]), pa.array([128]))
    with pytest.raises(InvalidArgumentError,
                       match=r"parallelism 5 is outside \[1, 4\] \(the max parallelism\)"):
        operator_indexes_of_columns(pa.array([0]), pa.array([4]), pa.array([5]))
    with pytest.raises(InvalidArgumentError,
                       match=r"key group 4 is outside \[0, 3\] for max parallelism 4"):
        operator_indexes_of_columns(pa.array([1, 4]), pa.array([4, 4]), pa.array([2, 2]))
    with pytest.raises(InvalidArgumentError, match="unknown row kind None"):
        key_groups_of_column(pa.array([{"row_kind": None, "f0": 1}]), pa.array([128]))


ints = st.integers(-(2**31), 2**31 - 1)
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
inner = st.tuples(st.one_of(st.none(), texts), st.one_of(st.none(), ints))
kinds = st.sampled_from(list(RowKind))
NESTED = parse_type("row<string,tuple<string,int>,row<double,bytes>>")


@st.composite
def nested_rows(draw):
    doubles = st.floats(allow_nan=True, allow_infinity=True)
    innermost = Row(draw(st.one_of(st.none(), doubles)),
                    draw(st.one_of(st.none(), st.binary(max_size=6))), kind=draw(kinds))
    return Row(draw(st.one_of(st.none(), texts)), draw(st.one_of(st.none(), inner)),
               draw(st.one_of(st.none(), st.just(innermost))), kind=draw(kinds))


@settings(max_examples=60, deadline=None)
@given(st.lists(nested_rows(), min_size=1, max_size=20), st.sampled_from([1, 128, 4096, 32768]))
def test_nested_composites_match_the_scalar_reference(keys, max_parallelism):
    column = NESTED.to_arrow(keys)
    expected = [assign_to_key_group(k, NESTED, max_parallelism) for k in keys]
    computed = key_groups_of_column(column, pa.array([max_parallelism] * len(keys)))
    assert computed.to_pylist() == expected

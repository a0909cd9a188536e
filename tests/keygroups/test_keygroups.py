"""Key-group properties that follow from Flink's documented algorithms."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from key_strategies import TEXT, VALUES
from statesource.errors import InvalidArgumentError, TypeMismatchError
from statesource.keygroups import (
    EMPTY_RANGE,
    KeyGroupRange,
    assign_to_key_group,
    default_max_parallelism,
    key_group_range_for_operator,
    key_groups,
    operator_index_for_key_group,
    operator_indexes,
)
from statesource.types import Row, RowKind, key_type, parse_type

MAX_PARALLELISMS = st.integers(min_value=1, max_value=32768)


@st.composite
def parallelisms(draw):
    max_parallelism = draw(MAX_PARALLELISMS)
    return max_parallelism, draw(st.integers(min_value=1, max_value=min(max_parallelism, 600)))


@settings(max_examples=200, deadline=None)
@given(parallelisms())
def test_subtask_ranges_tile_all_key_groups_in_order(config):
    max_parallelism, parallelism = config
    expected_start = 0
    for index in range(parallelism):
        owned = key_group_range_for_operator(max_parallelism, parallelism, index)
        assert owned.start == expected_start
        expected_start = owned.end + 1
        for key_group in {owned.start, owned.end, (owned.start + owned.end) // 2}:
            assert operator_index_for_key_group(max_parallelism, parallelism, key_group) == index
    assert expected_start == max_parallelism


def test_hand_computed_ranges_from_flinks_formula():
    ranges = [key_group_range_for_operator(128, 3, i) for i in range(3)]
    assert ranges == [KeyGroupRange(0, 42), KeyGroupRange(43, 85), KeyGroupRange(86, 127)]
    assert [operator_index_for_key_group(128, 3, kg) for kg in (42, 43, 85, 86)] == [0, 1, 1, 2]


def test_default_max_parallelism_bounds():
    assert default_max_parallelism(1) == 128
    assert default_max_parallelism(100) == 256  # 150 rounds up to 256
    assert default_max_parallelism(30000) == 32768


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: key_group_range_for_operator(0, 1, 0), "max parallelism 0"),
        (lambda: key_group_range_for_operator(32769, 1, 0), "max parallelism 32769"),
        (lambda: key_group_range_for_operator(128, 129, 0), "parallelism 129"),
        (lambda: key_group_range_for_operator(128, 4, 4), "operator index 4"),
        (lambda: operator_index_for_key_group(128, 4, 128), "key group 128"),
        (lambda: default_max_parallelism(0), "parallelism 0"),
    ],
)
def test_invalid_parallelism_names_the_value(call, message):
    with pytest.raises(InvalidArgumentError, match=message):
        call()


@settings(max_examples=200, deadline=None)
@given(parallelisms(), st.data())
def test_vectorised_operator_indexes_equal_the_scalar_ones(config, data):
    max_parallelism, parallelism = config
    groups = data.draw(st.lists(st.integers(0, max_parallelism - 1), max_size=30))
    dtype = data.draw(st.sampled_from([np.int16, np.int32, np.int64]).filter(
        lambda t: max_parallelism <= np.iinfo(t).max))
    computed = operator_indexes(max_parallelism, parallelism, np.array(groups, dtype=dtype))
    assert computed.dtype == np.int32
    assert computed.tolist() == [operator_index_for_key_group(max_parallelism, parallelism, kg)
                                 for kg in groups]


def test_vectorised_operator_indexes_do_not_wrap_narrow_columns():
    """Key group times parallelism (up to 32767 * 32768) is far beyond an int16 column's range."""
    groups = np.array([0, 16383, 16384, 32767], dtype=np.int16)
    assert operator_indexes(32768, 32768, groups).tolist() == [0, 16383, 16384, 32767]
    assert operator_indexes(32768, 3, groups).tolist() == [0, 1, 1, 2]


@pytest.mark.parametrize(
    ("max_parallelism", "parallelism", "groups", "message"),
    [
        (0, 1, [0], r"max parallelism 0 is outside \[1, 32768\]"),
        (128, 129, [0], r"parallelism 129 is outside \[1, 128\] \(the max parallelism\)"),
        (128, True, [0], "parallelism must be an int, got True"),
        (128, 4, [3, 128, -1], r"key group 128 is outside \[0, 127\] for max parallelism 128"),
        (128, 4, [-1], r"key group -1 is outside \[0, 127\]"),
    ],
)
def test_vectorised_operator_indexes_check_like_the_scalar(max_parallelism, parallelism, groups,
                                                           message):
    with pytest.raises(InvalidArgumentError, match=message):
        operator_indexes(max_parallelism, parallelism, np.array(groups))
    with pytest.raises(InvalidArgumentError, match=message):
        for key_group in groups:
            operator_index_for_key_group(max_parallelism, parallelism, key_group)


def test_key_group_range_value_type():
    owned = KeyGroupRange(3, 7)
    assert len(owned) == 5 and list(owned) == [3, 4, 5, 6, 7]
    assert 3 in owned and 7 in owned and 8 not in owned
    assert owned.intersection(KeyGroupRange(6, 10)) == KeyGroupRange(6, 7)
    assert owned.intersection(KeyGroupRange(8, 10)) == EMPTY_RANGE
    assert len(EMPTY_RANGE) == 0 and list(EMPTY_RANGE) == []
    with pytest.raises(InvalidArgumentError, match=r"\[5, 2\]"):
        KeyGroupRange(5, 2)


@pytest.mark.parametrize("type_name", sorted(VALUES))
@settings(max_examples=60, deadline=None)
@given(data=st.data(), max_parallelism=MAX_PARALLELISMS)
def test_bulk_path_equals_scalar_path(type_name, data, max_parallelism):
    declared = parse_type(type_name)
    keys = data.draw(st.lists(VALUES[type_name], max_size=30))
    scalar = [assign_to_key_group(key, declared, max_parallelism) for key in keys]
    assert key_groups(keys, declared, max_parallelism).tolist() == scalar


@settings(max_examples=100, deadline=None)
@given(st.lists(TEXT.filter(lambda s: s.isascii()), max_size=40), st.integers(0, 5))
def test_bulk_path_reads_sliced_arrow_strings(keys, offset):
    declared = parse_type("string")
    column = pa.array(["pad"] * offset + keys, pa.string()).slice(offset)
    scalar = [assign_to_key_group(key, declared, 128) for key in keys]
    assert key_groups(column, declared, 128).tolist() == scalar
    assert key_groups(column.cast(pa.large_string()), declared, 128).tolist() == scalar


@pytest.mark.parametrize(
    ("type_name", "bad_key", "message"),
    [
        ("int", True, "True"),
        ("int", 2**31, "out of range"),
        ("long", "7", "'7'"),
        ("char", "ab", "one UTF-16 code unit"),
        ("tuple<string,long>", ("a",), "2 fields"),
        ("double", 1, "1"),
    ],
)
def test_keys_are_never_guessed_into_another_type(type_name, bad_key, message):
    declared = parse_type(type_name)
    with pytest.raises(TypeMismatchError, match=message):
        assign_to_key_group(bad_key, declared, 128)
    with pytest.raises(TypeMismatchError, match=message):
        key_groups([bad_key], declared, 128)


def test_null_keys_are_rejected():
    with pytest.raises(TypeMismatchError, match="index 1"):
        key_groups(["a", None], parse_type("string"), 128)
    with pytest.raises(TypeMismatchError, match="nulls"):
        key_groups(pa.array(["a", None]), parse_type("string"), 128)


@pytest.mark.parametrize("type_name", ["int", "long", "short", "byte", "float", "double",
                                       "boolean"])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_bulk_path_reads_typed_arrow_columns(type_name, data):
    declared = parse_type(type_name)
    keys = data.draw(st.lists(VALUES[type_name], max_size=30))
    scalar = [assign_to_key_group(key, declared, 4096) for key in keys]
    assert key_groups(pa.array(keys, declared.arrow_type), declared, 4096).tolist() == scalar


def test_arrow_column_that_overflows_the_declared_type_is_rejected():
    with pytest.raises(TypeMismatchError, match="int64 column is not a valid int"):
        key_groups(pa.array([2**40], pa.int64()), parse_type("int"), 128)


@pytest.mark.parametrize("type_name", ["tuple<string,int>", "row<long,string>"])
def test_bulk_key_groups_of_arrow_struct_keys_equal_the_scalar_ones(type_name):
    composite = key_type(type_name)
    values = ([("a", 1), ("b", None), ("", -5)] if type_name.startswith("tuple")
              else [Row(1, "x"), Row(2, None, kind=RowKind.DELETE)])
    expected = [assign_to_key_group(v, composite, 128) for v in values]
    assert key_groups(composite.to_arrow(values), composite, 128).tolist() == expected

"""Keys are equal exactly when Java's ``equals`` says so, on every path.

Independent truth: Java's documented rules. ``Double.equals`` compares
``doubleToLongBits`` (one canonical NaN, ``-0.0 != 0.0``), ``Float.equals``
``floatToIntBits`` of the value cast to float, ``Row.equals`` the kind and the
fields (a plain tuple given for a ``row<...>`` key is an INSERT row). The models
key dicts by those bit patterns (``tests/java_bits.py``), never by Python floats.
"""

from __future__ import annotations

import math
import pickle
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from java_bits import NAN, NEGATIVE_NAN, OTHER_NAN, java_double_bits, java_float_bits

from statesource.checkpointing import CheckpointWriter, SubtaskBackends
from statesource.checkpointing.restore import restore_keyed_backend
from statesource.errors import TypeMismatchError
from statesource.format.reader import Checkpoint
from statesource.keyequality import NAN as CANONICAL_NAN
from statesource.keyequality import java_double, java_float, key_canonicalizer
from statesource.keyequality import java_float_bits as column_bits
from statesource.state import ManualClock
from statesource.state.descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)
from statesource.state.keyed_backend import KeyedStateBackend
from statesource.types import Row, RowKind, parse_type


def single_group(key_type: str) -> KeyedStateBackend:
    """Max parallelism 1: every key shares key group 0, so only equality separates keys."""
    return KeyedStateBackend(key_type, 1, clock=ManualClock(0))


# --- hand-computed cases ----------------------------------------------------------------------


def test_every_nan_double_key_is_one_key():
    backend = single_group("double")
    value = backend.get_state(ValueStateDescriptor("v", "long"))
    backend.set_current_key(NAN)
    value.update(1)
    for nan in (float("nan"), OTHER_NAN, NEGATIVE_NAN, NAN):
        backend.set_current_key(nan)
        assert value.value() == 1
    assert len(backend._tables["v"]) == 1


def test_zero_and_negative_zero_are_two_keys():
    backend = single_group("double")
    value = backend.get_state(ValueStateDescriptor("v", "long"))
    backend.set_current_key(0.0)
    value.update(1)
    backend.set_current_key(-0.0)
    assert value.value() is None
    value.update(2)
    backend.set_current_key(0.0)
    assert value.value() == 1
    assert len(backend._tables["v"]) == 2


def test_float_keys_match_after_rounding_to_float32():
    """0.1 and 0.1 + 2**-56 are two doubles but the same Java float."""
    backend = single_group("float")
    value = backend.get_state(ValueStateDescriptor("v", "long"))
    close = 0.1 + 2.0 ** -56
    assert close != 0.1 and java_float_bits(close) == java_float_bits(0.1)
    backend.set_current_key(0.1)
    value.update(1)
    backend.set_current_key(close)
    assert value.value() == 1
    backend.set_current_key(-0.0)
    assert value.value() is None
    backend.set_current_key(1e300)  # (float) 1e300 is Infinity
    value.update(3)
    backend.set_current_key(math.inf)
    assert value.value() == 3
    assert len(backend._tables["v"]) == 2


def test_plain_tuple_row_key_is_the_insert_row():
    backend = single_group("row<long,string>")
    value = backend.get_state(ValueStateDescriptor("v", "long"))
    backend.set_current_key((1, "a"))
    value.update(1)
    backend.set_current_key(Row(1, "a"))
    assert value.value() == 1
    backend.set_current_key(Row(1, "a", kind=RowKind.DELETE))
    assert value.value() is None
    assert len(backend._tables["v"]) == 1


def test_floats_inside_composite_keys_and_namespaces():
    backend = single_group("tuple<double,string>")
    value = backend.get_state(ValueStateDescriptor("v", "long", namespace_type="double"))
    backend.set_current_namespace(NAN)
    backend.set_current_key((NAN, "x"))
    value.update(1)
    backend.set_current_key((OTHER_NAN, "x"))
    backend.set_current_namespace(float("nan"))
    assert value.value() == 1
    backend.set_current_namespace(-0.0)
    value.update(2)
    backend.set_current_namespace(0.0)
    assert value.value() is None
    backend.set_current_key((-0.0, "x"))
    backend.set_current_namespace(NAN)
    assert value.value() is None
    assert len(backend._tables["v"]) == 2


def test_nested_row_fields_are_canonical():
    backend = single_group("row<row<double>,long>")
    value = backend.get_state(ValueStateDescriptor("v", "long"))
    backend.set_current_key(((NAN,), 1))
    value.update(7)
    backend.set_current_key(Row(Row(OTHER_NAN), 1))
    assert value.value() == 7


# --- strings Arrow cannot store ----------------------------------------------------------------


@pytest.mark.parametrize("text", ["a\ud800", "\udfff", "\ud83d\ude00"])
def test_unstorable_string_key_is_refused_at_the_call(tmp_path, text):
    backend = KeyedStateBackend("string", 128)
    value = backend.get_state(ValueStateDescriptor("v", "long"))
    for _ in range(2):  # the second call would be served from the key-group cache
        with pytest.raises(TypeMismatchError, match="surrogate"):
            backend.set_current_key(text)
    with pytest.raises(TypeMismatchError, match="surrogate"):
        KeyedStateBackend("tuple<string,long>", 128).set_current_key((text, 1))
    backend.set_current_key("fine")
    value.update(1)
    with pytest.raises(TypeMismatchError):
        backend.get_state(ValueStateDescriptor("s", "string")).update(text)
    info = CheckpointWriter(str(tmp_path)).write(1, {"op": [SubtaskBackends(keyed=backend)]})
    assert info.checkpoint_id == 1


def test_unstorable_char_and_namespace_are_refused():
    with pytest.raises(TypeMismatchError, match="surrogate"):
        KeyedStateBackend("char", 128).set_current_key("\ud800")
    backend = KeyedStateBackend("long", 128)
    value = backend.get_state(ValueStateDescriptor("v", "long", namespace_type="string"))
    backend.set_current_key(1)
    backend.set_current_namespace("\ud800")
    with pytest.raises(TypeMismatchError, match="surrogate"):
        value.update(1)


# --- through a checkpoint and back -------------------------------------------------------------


def test_checkpoint_and_restore_keep_java_key_identity(tmp_path):
    backend = single_group("double")
    events = backend.get_state(ListStateDescriptor("events", "long"))
    pages = backend.get_state(MapStateDescriptor("pages", "string", "long"))
    for key, base in [(NAN, 10), (0.0, 20), (-0.0, 30), (OTHER_NAN, 40)]:
        backend.set_current_key(key)
        events.add_all([base, base + 1])
        pages.put(f"p{base}", base)
    CheckpointWriter(str(tmp_path)).write(1, {"op": [SubtaskBackends(keyed=backend)]})
    checkpoint = Checkpoint.open(str(tmp_path))
    (table,) = checkpoint.read_keyed_state("events")
    keys = Counter(java_double_bits(k) for k in table.column("key").to_pylist())
    assert keys == {java_double_bits(NAN): 4, 0: 2, java_double_bits(-0.0): 2}
    restored = restore_keyed_backend(checkpoint, 0, 1)
    events = restored.get_state(ListStateDescriptor("events", "long"))
    pages = restored.get_state(MapStateDescriptor("pages", "string", "long"))
    expected = [(NAN, [10, 11, 40, 41], {"p10": 10, "p40": 40}),
                (0.0, [20, 21], {"p20": 20}), (-0.0, [30, 31], {"p30": 30})]
    for key, elements, entries in expected:
        restored.set_current_key(key)
        assert events.get() == elements and dict(pages.items()) == entries
    assert len(restored._tables["events"]) == 3


def test_row_key_as_tuple_and_row_is_one_row_in_the_checkpoint(tmp_path):
    backend = single_group("row<long,string>")
    value = backend.get_state(ValueStateDescriptor("v", "long"))
    backend.set_current_key((1, "a"))
    value.update(1)
    backend.set_current_key(Row(1, "a"))
    value.update(2)
    CheckpointWriter(str(tmp_path)).write(1, {"op": [SubtaskBackends(keyed=backend)]})
    tables = list(Checkpoint.open(str(tmp_path)).read_keyed_state("v"))
    assert sum(t.num_rows for t in tables) == 1
    assert tables[0].column("value").to_pylist() == [2]


# --- columns of floats, compared by their bits --------------------------------------------------

DOUBLES = st.sampled_from([NAN, OTHER_NAN, NEGATIVE_NAN, 0.0, -0.0, 1.5, -1.5, math.inf,
                           0.1, 0.1 + 2.0 ** -56, 1e300, 5e-324])


def test_column_bits_of_hand_computed_values():
    doubles = np.array([1.0, -0.0, 0.0, NAN, OTHER_NAN, NEGATIVE_NAN, -math.inf])
    assert column_bits(doubles).dtype == np.int64
    assert column_bits(doubles).tolist() == [
        0x3FF0000000000000, -(2**63), 0, 0x7FF8000000000000, 0x7FF8000000000000,
        0x7FF8000000000000, -0x0010000000000000]
    floats = np.array([1.0, -0.0, 0.0, NAN, -math.inf], dtype=np.float32)
    payload_nan = np.array([0x7FC00001, -1], dtype=np.int32).view(np.float32)
    assert column_bits(floats).dtype == np.int32
    assert column_bits(floats).tolist() == [0x3F800000, -(2**31), 0, 0x7FC00000, -0x00800000]
    assert column_bits(payload_nan).tolist() == [0x7FC00000, 0x7FC00000]


def test_column_bits_need_floating_point():
    with pytest.raises(TypeMismatchError, match="float32 or float64, not int64"):
        column_bits(np.array([1, 2]))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(DOUBLES, st.floats()), max_size=30))
def test_column_bits_against_javas_rules(values):
    doubles = np.array(values, dtype=np.float64)
    assert column_bits(doubles).tolist() == [java_double_bits(v) for v in values]
    with np.errstate(over="ignore", invalid="ignore"):  # signalling NaNs, beyond float range
        floats = doubles.astype(np.float32)
    assert column_bits(floats).tolist() == [java_float_bits(v) for v in values]


# --- against a model with Java's equality ------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(key_type=st.sampled_from(["double", "float"]),
       operations=st.lists(st.tuples(DOUBLES, st.integers(0, 3)), max_size=40))
def test_float_keys_against_a_model_keyed_by_java_bits(key_type, operations):
    bits = java_double_bits if key_type == "double" else java_float_bits
    backend = KeyedStateBackend(key_type, 4, clock=ManualClock(0))
    value = backend.get_state(ValueStateDescriptor("v", "long"))
    model: dict[int, int] = {}
    for key, written in operations:
        backend.set_current_key(key)
        assert value.value() == model.get(bits(key))
        if written:
            value.update(written)
            model[bits(key)] = written
        else:
            value.clear()
            model.pop(bits(key), None)
    assert len(backend._tables["v"]) == len(model)


@settings(max_examples=60, deadline=None)
@given(operations=st.lists(st.tuples(DOUBLES, st.sampled_from(["a", "b"]), st.booleans(),
                                     st.integers(1, 3)), max_size=30))
def test_row_keys_against_a_model_keyed_by_java_equality(operations):
    backend = KeyedStateBackend("row<double,string>", 2, clock=ManualClock(0))
    value = backend.get_state(ValueStateDescriptor("v", "long"))
    model: dict[tuple[int, str], int] = {}
    for number, text, as_row, written in operations:
        backend.set_current_key(Row(number, text) if as_row else (number, text))
        java_key = (java_double_bits(number), text)
        assert value.value() == model.get(java_key)
        value.update(written)
        model[java_key] = written
    assert len(backend._tables["v"]) == len(model)


def test_canonical_forms_are_stable_under_canonicalising_and_pickling():
    """A NaN key hashes by identity, so every path must yield the one NaN object."""
    for make in (java_double, java_float):
        assert make(NAN) is CANONICAL_NAN and make(make(OTHER_NAN)) is CANONICAL_NAN
    assert pickle.loads(pickle.dumps(java_double(NAN))) is CANONICAL_NAN
    negative_zero = pickle.loads(pickle.dumps(java_double(-0.0)))
    assert negative_zero == java_double(-0.0) and negative_zero != java_double(0.0)
    row = key_canonicalizer(parse_type("row<double,string>"), validate=False)
    once = row(Row(NAN, "a"))
    assert once == (CANONICAL_NAN, "a") and row(once) == once and hash(row(once)) == hash(once)

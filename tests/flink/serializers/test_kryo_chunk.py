"""POJOs with Kryo collection fields transcoded column-wise: exactly the per-value fast path.

A chunk of a POJO state's values (the kryo fixture's ``KryoJob$Profile``: a Kryo ``Map``
field, a String, a Kryo ``List`` field, a long) is read by numpy in lockstep; every value it
takes must be the per-value path's bytes (itself checked against the exact path and both
real Flinks: test_kryo_transcode.py), with the same element classes recorded, and every
value it does not take (other element classes, nulls inside a field, non-ASCII text, cut,
grown or flipped bytes, a key twice) must go to the per-value path, which takes it or
leaves it to the exact path.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_kryo_columns import one_by_one
from test_kryo_transcode import (
    ELEMENTS,
    ODD_ELEMENTS,
    _collection_classes,
    _fixture_states,
    _pojo,
    _profiles,
    mutated,
)

from flink_fixture_checks import FIXTURES
from statesource.flink.operations.reencode_pairs import state_pairs
from statesource.flink.serializers import kryo_classes as jdk
from statesource.flink.serializers.kryo_chunk import MAX_ITEMS, _copied
from statesource.flink.serializers.kryo_classes import JavaObject
from statesource.flink.serializers.kryo_columns import COLUMNS, Values, batched
from statesource.flink.serializers.kryo_migration import reading_type
from statesource.flink.serializers.kryo_transcode import Fallback, transcoder
from statesource.flink.snapshot.directory import FlinkSnapshot

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def profile():
    return _fixture_states()["profile"].value


def _paths(declared, map_value: bool = False):
    """The chunk path (with the per-value path for what it leaves) and the per-value path,
    each over its own reading type (whose collection fields record classes), and the calls
    the chunk path made of the per-value one."""
    per_value_reading, chunk_reading = (reading_type(declared, "state 'p'") for _ in "ab")
    fast, chunk_fast = (transcoder(r, map_value, False) for r in
                        (per_value_reading, chunk_reading))
    calls: list[bytes] = []

    def each(value: bytes, path=fast) -> bytes | None:
        try:
            return path(value)
        except Fallback:
            return None

    def counted(value: bytes) -> bytes | None:
        calls.append(value)
        return each(value, chunk_fast)
    return (batched(chunk_reading, map_value, False, counted), chunk_reading, each,
            per_value_reading, calls)


@SETTINGS
@given(st.data(), st.lists(st.one_of(_profiles(ELEMENTS), _profiles(ODD_ELEMENTS)),
                           min_size=COLUMNS, max_size=2 * COLUMNS))
def test_a_chunk_is_what_the_per_value_path_gives(profile, data, profiles):
    """Random POJOs, some cut, grown or flipped: each value's bytes and the classes
    recorded are the per-value path's."""
    values = [_pojo(profile, *p) for p in profiles]
    values = [mutated(data, v) if data.draw(st.integers(0, 4)) == 0 else v for v in values]
    batch, chunk_reading, each, per_value_reading, _ = _paths(profile)
    assert one_by_one(batch, values) == [each(v) for v in values]
    assert _collection_classes(chunk_reading) == _collection_classes(per_value_reading)


@SETTINGS
@given(st.lists(_profiles(st.one_of(
    st.sampled_from(["ab", "tag", "x" * 62]).map(lambda t: JavaObject(jdk.STRING, t)),
    st.integers(-(1 << 63), (1 << 63) - 1).map(lambda n: JavaObject(jdk.LONG, n)),
    st.integers(-(1 << 31), (1 << 31) - 1).map(lambda n: JavaObject(jdk.INTEGER, n)))),
    min_size=COLUMNS, max_size=2 * COLUMNS), st.booleans())
def test_the_common_shapes_are_taken_without_the_per_value_path(profile, profiles, map_value):
    """Strings of 2 to 62 ASCII characters, Longs and Integers, in a value or a map
    state: every value whose map keys are distinct Strings and whose name is ASCII is
    taken column-wise."""
    values = [(b"\x00" if map_value else b"") + _pojo(profile, *p) for p in profiles]
    batch, _, each, _, calls = _paths(profile, map_value)
    assert one_by_one(batch, values) == [each(v) for v in values]
    odd = [value for value, p in zip(values, profiles) if not (p[1] or "").isascii() or (
        p[0] is not None and (any(k.java_class != jdk.STRING for k, _ in p[0].content)
                              or len({k.content for k, _ in p[0].content}) < len(p[0].content)))]
    assert calls == odd


def test_a_key_twice_and_more_items_than_the_cap_go_to_the_per_value_path(profile):
    text = JavaObject(jdk.STRING, "ab")
    twice = _pojo(profile, JavaObject("java.util.HashMap", [(text, text), (text, text)]),
                  "n", None, 1)
    many = _pojo(profile, None, "n", JavaObject(
        "java.util.ArrayList", [text] * (MAX_ITEMS + 1)), 1)
    plain = _pojo(profile, None, "n", JavaObject("java.util.ArrayList", [text]), 1)
    batch, _, each, _, calls = _paths(profile)
    values = [twice, many] + [plain] * COLUMNS
    assert one_by_one(batch, values) == [each(v) for v in values]
    assert calls == [twice, many]


def test_the_fixture_states_are_taken_whole():
    """Every value of the fixture's POJO and UUID states (a real Flink 1.20's bytes)."""
    snapshot = FlinkSnapshot.open(str(FIXTURES / "kryo" / "flink-1.20" / "canonical"))
    for op in snapshot.operators:
        header = snapshot.header(op)
        for info in header.states if header is not None else ():
            if info.name not in ("profile", "last_uuid"):
                continue
            values = Values.of([v for *_, group in state_pairs(snapshot, op, {info.name})
                                for v in group.listed()])
            batch, _, each, _, calls = _paths(info.value)
            written, left = batch(values)
            assert calls == [] and not len(left), info.name
            assert written.listed() == [each(v) for v in values.listed()]


def test_values_in_any_order_are_read_column_wise(profile):
    """Values whose ranges do not follow each other (none of the scan's do) are read as
    well: each value's parts are placed by its own offsets."""
    text = JavaObject(jdk.STRING, "ab")
    values = [_pojo(profile, None, f"n{index}", JavaObject("java.util.ArrayList", [text]), 1)
              for index in range(COLUMNS)]
    forwards = Values.of(values)
    backwards = Values(forwards.data, forwards.starts[::-1].copy(), forwards.ends[::-1].copy())
    batch, _, each, _, calls = _paths(profile)
    written, left = batch(backwards)
    assert not len(left) and written.listed() == [each(v) for v in values[::-1]]
    assert calls == []


def test_copies_past_2_gib_land_where_they_are_written():
    """A key group (or what its values become) of more than 2 GiB: the chunk's copies are
    indexed past int32 (zeros allocated lazily: only the pages touched are memory)."""
    big = (1 << 31) + 64
    data, out = np.zeros(big, np.uint8), np.zeros(big, np.uint8)
    data[big - 40:big - 36] = [1, 2, 3, 4]
    _copied(out, np.array([big - 20]), data, np.array([big - 40]), np.array([4]))
    assert out[big - 20:big - 16].tolist() == [1, 2, 3, 4]
    assert not out[:big - 20].any()

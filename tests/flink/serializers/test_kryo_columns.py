"""Kryo 2 ``UUID`` values transcoded column-wise: exactly what the per-value fast path gives.

A chunk of a ``UUID`` state's values (Chill's two zigzag varlongs after the class and a
new object's marker) is read by numpy; every value it takes must be the per-value path's
bytes (itself checked against the exact path: test_kryo_transcode.py), and every value it
does not take (another class, a reference, a cut or grown value, a non-minimal varlong)
must be given to the per-value path, which leaves faults to the exact path.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kryo_truth import AVRO_DUMMY
from test_kryo_transcode import _zigzag

from statesource.flink.serializers import columns, kryo_columns
from statesource.flink.serializers.columns import NotColumnar
from statesource.flink.serializers.kryo import KRYO_SNAPSHOT, KryoType
from statesource.flink.serializers.kryo_columns import COLUMNS, Values, batched
from statesource.flink.serializers.kryo_migration import Kryo2Value
from statesource.flink.serializers.kryo_transcode import Fallback, transcoder

LONGS = st.one_of(st.integers(-(1 << 63), (1 << 63) - 1), st.integers(-200, 200),
                  st.sampled_from([-(1 << 63), (1 << 63) - 1, 1 << 55, -(1 << 56)]))
UUIDS = st.tuples(LONGS, LONGS).map(
    lambda pair: b"\x54\x01" + _zigzag(pair[0], 64) + _zigzag(pair[1], 64))
ODD = st.one_of(
    st.binary(max_size=22),
    UUIDS.map(lambda v: v[:-1]), UUIDS.map(lambda v: v + b"\x00"),
    st.just(b"\x54\x02"), st.just(b"\x54\x01" + b"\x80\x00" + b"\x02"),
    st.just(b"\x54\x01" + b"\x80" * 8 + b"\x00" + b"\x02"),
    st.just(b"\x54\x01" + b"\xff" * 9 + b"\xff" * 9),
    LONGS.map(lambda n: b"\x09" + _zigzag(n, 64)))
"""Cut or grown values, non-minimal varlongs, a back reference, a Long, any bytes."""


def _paths(declared: str = "java.util.UUID"):
    kryo = KryoType(KRYO_SNAPSHOT, declared, (declared, AVRO_DUMMY), "")
    part = Kryo2Value(kryo)
    fast = transcoder(part, False, False)
    assert fast is not None
    calls: list[bytes] = []

    def each(value: bytes) -> bytes | None:
        calls.append(value)
        try:
            return fast(value)
        except Fallback:
            return None
    return part, each, calls


def one_by_one(batch, values: list[bytes]) -> list[bytes | None]:
    """What ``batch`` makes of ``values``, a value each (None: left to the exact path)."""
    written, left = batch(Values.of(values))
    out: list[bytes | None] = list(written.listed())
    for index in left.tolist():
        assert out[index] == b""
        out[index] = None
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(UUIDS, UUIDS, UUIDS, ODD), min_size=COLUMNS, max_size=3 * COLUMNS))
def test_a_chunk_is_what_the_per_value_path_gives(values):
    part, each, calls = _paths()
    expected = [each(value) for value in values]
    calls.clear()
    assert one_by_one(batched(part, False, False, each), values) == expected
    left = list(calls)  # what the columns did not take: none the per-value path takes
    assert all(value[:2] != b"\x54\x01" or each(value) is None for value in left)


@given(st.lists(UUIDS, min_size=COLUMNS, max_size=2 * COLUMNS))
def test_whole_uuids_are_taken_without_the_per_value_path(values):
    part, each, calls = _paths()
    one_by_one(batched(part, False, False, each), values)
    assert calls == []


@pytest.mark.parametrize("map_value, list_elements", [(True, False), (False, True)])
def test_map_and_list_states_and_small_chunks_go_value_by_value(map_value, list_elements):
    part, each, calls = _paths()
    values = [b"\x00\x54\x01\x02\x04"] * COLUMNS
    one_by_one(batched(part, map_value, list_elements, each), values)
    assert len(calls) == COLUMNS
    calls.clear()
    one_by_one(batched(part, False, False, each), [b"\x54\x01\x02\x04"] * (COLUMNS - 1))
    assert len(calls) == COLUMNS - 1


def test_a_chunk_partly_taken_is_not_joined_into_one_arrow_buffer(monkeypatch):
    """Values taken column-wise and by value are handed on as ranges, in their order: not
    joined by ``columns.gather``, which refuses 2 GiB or more (a key group's re-encoded
    values can be), as it does here for any size."""
    def refusing(*_):
        raise NotColumnar
    monkeypatch.setattr(columns, "gather", refusing)
    monkeypatch.setattr(kryo_columns, "gather", refusing, raising=False)
    part, each, _ = _paths()
    values = [b"\x54\x01\x02\x04", b"\x54\x02"] * COLUMNS
    expected = [each(value) for value in values]
    assert one_by_one(batched(part, False, False, each), values) == expected

"""``section_body`` frames a state's pairs as :class:`KeyGroupFramer` frames them.

``section_body`` builds its bytes in one join (``migrate`` frames every re-encoded pair so);
the framer, pair by pair, is what every other writer uses and what real Flinks restore. The
section is the framer's key group without its state id and end marker. Both ways a section
is framed (pair by pair for a few pairs, column by column for many) are also checked against
the format written out here independently of either.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from statesource.errors import InvalidArgumentError
from statesource.flink.layouts.canonical_writer import (
    KeyGroupFramer,
    key_group_prefix,
    section_body,
    section_columns,
    section_revalued,
)

PAIRS = st.lists(st.tuples(st.binary(max_size=12), st.binary(max_size=12)), max_size=6)


@given(st.sampled_from([128, 129, 32768]).flatmap(
    lambda top: st.tuples(st.just(top), st.integers(0, top - 1))), PAIRS)
def test_a_section_is_the_framers_key_group_without_its_id_and_end(parallelism, pairs):
    max_parallelism, key_group = parallelism
    body = section_body(key_group, max_parallelism, pairs)
    if not pairs:
        assert body == b""
        return
    framer = KeyGroupFramer(key_group, max_parallelism)
    for key_tail, value in pairs:
        framer.add(0, key_tail, value)
    assert body == framer.getvalue()[2:-2]


def framed(prefix: bytes, pairs: list[tuple[bytes, bytes]]) -> bytes:
    """The section as Flink's canonical format describes it, written out pair by pair: a
    big-endian int of the composite key's length, the key (prefix, then tail), a big-endian
    int of the value's length, the value; the last key's first byte with 0x80 set."""
    out = bytearray()
    for index, (key_tail, value) in enumerate(pairs):
        key = bytearray(prefix + key_tail)
        if index == len(pairs) - 1:
            key[0] |= 0x80
        out += len(key).to_bytes(4, "big") + key + len(value).to_bytes(4, "big") + value
    return bytes(out)


SOME = st.binary(max_size=3) | st.integers(250, 300).map(bytes)  # lengths past a byte
MANY = st.lists(st.tuples(st.binary(max_size=3), SOME), min_size=65, max_size=100)
"""More pairs than are framed one by one (lengths repeat, as keys' and values' do)."""


@given(st.sampled_from([128, 32768]).flatmap(
    lambda top: st.tuples(st.just(top), st.integers(0, top - 1))),
    st.lists(st.tuples(st.binary(max_size=4), SOME), max_size=3) | MANY, st.booleans())
def test_a_section_frames_few_and_many_pairs_as_the_format_says(parallelism, pairs, lazily):
    """Both ways a section is framed (pair by pair for few, by columns for many), from a
    list of pairs, any iterable of them or the keys and values as columns, with one- and
    two-byte prefixes and empty keys and values."""
    max_parallelism, key_group = parallelism
    prefix = key_group.to_bytes(1 if max_parallelism <= 128 else 2, "big")
    expected = framed(prefix, pairs)
    given_pairs = iter(pairs) if lazily else pairs
    assert section_body(key_group, max_parallelism, given_pairs) == expected
    keys, values = [key for key, _ in pairs], [value for _, value in pairs]
    assert section_columns(key_group, max_parallelism, keys, values) == expected


def test_columns_of_other_lengths_are_refused():
    with pytest.raises(InvalidArgumentError, match="3 keys and 2 values in key group 5"):
        section_columns(5, 128, [b"a"] * 3, [b"b"] * 2)


@given(st.sampled_from([128, 32768]).flatmap(
    lambda top: st.tuples(st.just(top), st.integers(0, top - 1))),
    st.lists(st.tuples(st.binary(max_size=4), SOME, SOME), min_size=1, max_size=3) | MANY.map(
        lambda pairs: [(key, value, value[::-1] + b"x") for key, value in pairs]),
    st.binary(max_size=5))
def test_a_section_revalued_keeps_the_keys_framed_and_frames_the_new_values(
        parallelism, triples, before):
    """A canonical key group's section (after other bytes) with each value replaced: the
    section of the same keys and the new values."""
    max_parallelism, key_group = parallelism
    prefix = key_group_prefix(key_group, max_parallelism)
    source = framed(prefix, [(key, old) for key, old, _ in triples])
    data = before + source
    pair_starts, key_ends, at = [], [], len(before)
    for key, old, _ in triples:
        pair_starts.append(at)
        key_ends.append(at + 4 + len(prefix) + len(key))
        at = key_ends[-1] + 4 + len(old)
    new = [value for _, _, value in triples]
    assert section_revalued(data, pair_starts, key_ends, new) == framed(
        prefix, [(key, value) for key, _, value in triples])

"""``section_body`` frames a state's pairs as :class:`KeyGroupFramer` frames them.

``section_body`` builds its bytes in one join (``migrate`` frames every re-encoded pair so);
the framer, pair by pair, is what every other writer uses and what real Flinks restore. The
section is the framer's key group without its state id and end marker.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from statesource.flink.layouts.canonical_writer import KeyGroupFramer, section_body

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

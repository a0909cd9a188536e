"""The Flink reader's framing checks, against key groups built by hand from Flink's layout.

A canonical key group is: per state its id (u16), then ``(key, value)`` pairs with
int32 lengths whose key starts with the key-group prefix, the last pair of a state
flagged in the key's first bit, and ``0xFFFF`` to end. A native key group starts
with its own id (int32).
"""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from statesource.errors import CorruptCheckpointError
from statesource.flink.binary.snappy import decompress
from statesource.flink.layouts.keyed import canonical_sections, native_key_group_reader
from statesource.flink.statefiles.keyed_header import KeyedHeader


def canonical(key_group: int, prefix_bytes: int,
              states: dict[int, list[tuple[bytes, bytes]]]) -> bytes:
    out = bytearray()
    for state_id, pairs in states.items():
        out += struct.pack(">H", state_id)
        for index, (key, value) in enumerate(pairs):
            full = bytearray(key_group.to_bytes(prefix_bytes, "big") + key)
            if index == len(pairs) - 1:
                full[0] |= 0x80
            out += struct.pack(">i", len(full)) + full + struct.pack(">i", len(value)) + value
    return bytes(out + b"\xff\xff")


STATES = {0: [(b"k1", b"v1"), (b"k2", b"v2")], 3: [(b"k3", b"")]}


@pytest.mark.parametrize("prefix_bytes", [1, 2])
def test_canonical_sections_give_back_the_pairs(prefix_bytes):
    sections = canonical_sections(canonical(5, prefix_bytes, STATES), "kg", 0, 5,
                                  prefix_bytes, compressed=False)
    prefix = (5).to_bytes(prefix_bytes, "big")
    assert {s.state_id: s.pairs for s in sections} == {
        state: [(prefix + k, v) for k, v in pairs] for state, pairs in STATES.items()}


def test_a_key_shorter_than_its_key_group_prefix_is_refused():
    data = struct.pack(">H", 0) + struct.pack(">i", 1) + b"\x85" + struct.pack(">i", 0) \
        + b"\xff\xff"
    assert canonical_sections(data, "kg", 0, 5, 1, compressed=False)[0].pairs == [(b"\x05", b"")]
    with pytest.raises(CorruptCheckpointError, match="invalid key length 1"):
        canonical_sections(data, "kg", 0, 5, 2, compressed=False)


def test_bytes_after_the_end_marker_are_refused():
    with pytest.raises(CorruptCheckpointError, match="bytes after the end of the key group"):
        canonical_sections(canonical(5, 2, STATES) + b"\x00", "kg", 0, 5, 2, compressed=False)


def test_an_entry_of_another_key_group_is_refused():
    with pytest.raises(CorruptCheckpointError, match="entry of key group 6 in key group 5"):
        canonical_sections(canonical(6, 2, STATES), "kg", 0, 5, 2, compressed=False)


def test_a_native_key_group_must_start_with_its_own_id():
    header = KeyedHeader(6, False, None, (), 0)  # type: ignore[arg-type]
    data = struct.pack(">i", 7) + b"rest"
    assert native_key_group_reader(data, "kg", 0, 7, header).pos == 4
    with pytest.raises(CorruptCheckpointError, match="expected key group 8, found 7"):
        native_key_group_reader(data, "kg", 0, 8, header)


def test_a_full_64_kib_snappy_block_is_accepted():
    text = bytes(range(256)) * 256  # 65,536 bytes, the most one frame's block may hold
    block = pa.compress(text, codec="snappy", asbytes=True)
    assert decompress(block) == text
    with pytest.raises(CorruptCheckpointError, match="exceeds a frame's 65536"):
        decompress(pa.compress(text + b"!", codec="snappy", asbytes=True))

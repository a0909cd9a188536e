"""Snappy framing, checked against hand-built streams, an independent compressor and CRC-32C."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statesource.errors import CorruptCheckpointError
from statesource.flink.binary.snappy import (
    STREAM_IDENTIFIER,
    crc32c,
    decompress,
    masked_crc32c,
    unframe,
)


def test_crc32c_check_value():
    assert crc32c(b"123456789") == 0xE3069283  # the standard CRC-32C check value
    assert crc32c(b"") == 0


def _bitwise_crc32c(data: bytes) -> int:
    """CRC-32C bit by bit, straight from its definition (reflected, polynomial 0x82F63B78)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=3000) | st.integers(0, 140_000).map(lambda n: bytes(
    (i * 131 + n) % 251 for i in range(n))))
def test_crc32c_by_numpy_is_the_bitwise_crc(data):
    """Lengths around the block (256) and piece (64 KiB) sizes included."""
    assert crc32c(data) == _bitwise_crc32c(data)


def _chunk(kind: int, payload: bytes, uncompressed: bytes) -> bytes:
    body = masked_crc32c(uncompressed).to_bytes(4, "little") + payload
    return bytes([kind]) + len(body).to_bytes(3, "little") + body


# "abcd" as a literal, then a 1-byte-offset copy of 8 bytes at offset 4 (overlapping),
# then a 2-byte-offset copy of 2 bytes at offset 12: "abcdabcdabcdab"
BLOCK = bytes([14, 3 << 2]) + b"abcd" + bytes([((8 - 4) << 2) | 1, 4]) + \
    bytes([((2 - 1) << 2) | 2]) + (12).to_bytes(2, "little")
TEXT = b"abcdabcdabcdab"


def test_block_with_literal_and_overlapping_copies():
    assert decompress(BLOCK) == TEXT


def test_frames_of_two_streams_concatenate():
    stream = STREAM_IDENTIFIER + _chunk(0, BLOCK, TEXT) + _chunk(1, b"xyz", b"xyz")
    assert unframe(stream + stream, "f") == (TEXT + b"xyz") * 2


def test_checksum_mismatch_names_offset():
    bad = bytearray(STREAM_IDENTIFIER + _chunk(1, b"xyz", b"xyz"))
    bad[-1] ^= 1
    with pytest.raises(CorruptCheckpointError, match="f: Snappy chunk checksum mismatch at byte"
                                                     " offset 110"):
        unframe(bytes(bad), "f", base=100)


def test_copy_before_the_start_is_corrupt():
    with pytest.raises(CorruptCheckpointError, match="invalid Snappy block"):
        decompress(bytes([4, 0b000_000_01, 9]))


def test_a_block_larger_than_a_frame_is_refused_before_decoding():
    with pytest.raises(CorruptCheckpointError, match="exceeds a frame's 65536"):
        decompress(bytes([0x80, 0x80, 0x08]))  # claims 131072 bytes


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(max_size=70_000), min_size=1, max_size=4))
def test_frames_of_an_independent_compressor_round_trip(pieces):
    """Chunks compressed by pyarrow's Snappy codec (as xerial's framing stores them)."""
    frames = [STREAM_IDENTIFIER]
    for piece in pieces:
        for start in range(0, len(piece), 65536):
            chunk = piece[start:start + 65536]
            frames.append(_chunk(0, pa.compress(chunk, codec="snappy", asbytes=True), chunk))
    assert unframe(b"".join(frames), "f") == b"".join(pieces)

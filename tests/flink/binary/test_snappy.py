"""Snappy framing, checked against hand-built streams, an independent compressor and CRC-32C;
and streams written as xerial's ``SnappyFramedOutputStream`` writes them for Flink, walked
here chunk by chunk with pyarrow's Snappy and the CRC from its definition."""

from __future__ import annotations

import random

import cramjam
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statesource.errors import CorruptCheckpointError
from statesource.flink.binary.crc32c import crc32c, masked_crc32c
from statesource.flink.binary.snappy import (
    STREAM_IDENTIFIER,
    decompress,
    frame,
    frame_chunks,
    unframe,
)


def test_crc32c_check_value():
    assert crc32c(b"123456789") == 0xE3069283  # the standard CRC-32C check value
    assert crc32c(b"") == 0


def _bitwise_step(crc: int) -> int:
    """One byte's worth of CRC-32C, bit by bit from its definition (reflected, 0x82F63B78)."""
    for _ in range(8):
        crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc


_TABLE = [_bitwise_step(byte) for byte in range(256)]


def _reference_crc32c(data: bytes) -> int:
    """CRC-32C from the definition: each byte's step is the bitwise one, tabulated."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _reference_masked(data: bytes) -> int:
    """Snappy's framing format: ``((crc >> 15) | (crc << 17)) + 0xa282ead8``, in 32 bits."""
    crc = _reference_crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def test_the_reference_is_the_bitwise_definition():
    crc = 0xFFFFFFFF
    for byte in b"123456789":
        crc = _bitwise_step(crc ^ byte)
    assert crc ^ 0xFFFFFFFF == _reference_crc32c(b"123456789") == 0xE3069283


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=3000) | st.integers(0, 140_000).map(lambda n: bytes(
    (i * 131 + n) % 251 for i in range(n))))
def test_crc32c_is_the_reference_crc(data):
    assert crc32c(data) == _reference_crc32c(data)
    assert crc32c(memoryview(data)) == crc32c(bytearray(data)) == crc32c(data)
    assert masked_crc32c(data) == _reference_masked(data)


def _chunk(kind: int, payload: bytes, uncompressed: bytes) -> bytes:
    body = _reference_masked(uncompressed).to_bytes(4, "little") + payload
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


def test_a_corrupt_chunk_names_its_offset_in_the_file():
    good = _chunk(0, BLOCK, TEXT)
    bad = bytearray(good)
    bad[8 + 1] = 60 << 2  # the literal's tag: now 61 literal bytes, past the block's end
    block_at = 1000 + len(STREAM_IDENTIFIER) + len(good) + 8  # type, length, CRC before it
    with pytest.raises(CorruptCheckpointError, match=r"f: invalid Snappy block \(.*\) at byte"
                                                     rf" offset {block_at}$"):
        unframe(STREAM_IDENTIFIER + good + bytes(bad), "f", base=1000)


def test_unverified_frames_skip_only_the_checksum():
    bad = bytearray(STREAM_IDENTIFIER + _chunk(0, BLOCK, TEXT))
    bad[len(STREAM_IDENTIFIER) + 4] ^= 1  # the stored CRC
    assert unframe(bytes(bad), "f", verify=False) == TEXT
    with pytest.raises(CorruptCheckpointError, match="checksum mismatch"):
        unframe(bytes(bad), "f")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 10_000))
def test_hostile_frames_are_refused_as_corrupt_or_decoded(noise, base):
    """Whatever follows a stream identifier, unframing either decodes it or refuses it as
    corrupt, naming the file and an offset inside the range."""
    data = STREAM_IDENTIFIER + noise
    try:
        unframe(data, "f", base=base)
    except CorruptCheckpointError as error:
        offset = int(str(error).rsplit(" ", 1)[1])
        assert str(error).startswith("f: ") and base <= offset <= base + len(data)


@settings(max_examples=100, deadline=None)
@given(st.binary(min_size=1, max_size=3000), st.data())
def test_every_flipped_byte_of_a_chunk_is_caught(piece, data):
    """A stored chunk's CRC covers its bytes: a flip in the CRC or the data is refused, never
    returned. (Its type byte is not covered: a flip there may make it a skippable chunk.)"""
    frame = bytearray(STREAM_IDENTIFIER + _chunk(1, piece, piece))
    position = data.draw(st.integers(len(STREAM_IDENTIFIER) + 4, len(frame) - 1))
    frame[position] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CorruptCheckpointError):
        unframe(bytes(frame), "f")


def _varint(data: bytes) -> int:
    """A raw Snappy block's preamble: its uncompressed length."""
    value = shift = 0
    for byte in data:
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value
        shift += 7
    raise AssertionError("unterminated preamble")


def _walked(chunks: bytes) -> list[tuple[int, bytes, int]]:
    """(type, uncompressed bytes, stored length) of each chunk, decoded independently: every
    checksum checked against the CRC-32C of the definition, blocks by pyarrow's Snappy."""
    found, pos = [], 0
    while pos < len(chunks):
        kind, length = chunks[pos], int.from_bytes(chunks[pos + 1:pos + 4], "little")
        crc = int.from_bytes(chunks[pos + 4:pos + 8], "little")
        body = chunks[pos + 8:pos + 4 + length]
        assert len(body) == length - 4 and kind in (0, 1)
        plain = (pa.decompress(body, decompressed_size=_varint(body), codec="snappy",
                               asbytes=True) if kind == 0 else body)
        assert crc == _reference_masked(plain)
        found.append((kind, plain, len(body)))
        pos += 4 + length
    return found


_INPUTS = (st.binary(max_size=3000)
           | st.integers(0, 200_000).map(lambda n: bytes((i * 7) % 13 for i in range(n)))
           | st.integers(0, 140_000).map(lambda n: bytes((i * i * 131 + i) % 251
                                                         for i in range(n))))


@settings(max_examples=60, deadline=None)
@given(_INPUTS)
def test_written_streams_are_framed_as_flink_frames_them(data):
    """The identifier, then a chunk per 64 KiB (the last shorter, none empty), compressed
    only where the block is at most 0.85 of the chunk, each with its masked CRC-32C."""
    stream = frame(data)
    assert stream.startswith(STREAM_IDENTIFIER)
    chunks = _walked(stream[len(STREAM_IDENTIFIER):])
    assert b"".join(plain for _, plain, _ in chunks) == data
    sizes = [len(plain) for _, plain, _ in chunks]
    assert sizes == [65536] * (len(data) // 65536) + ([len(data) % 65536] if len(data) % 65536
                                                       else [])
    for kind, plain, stored in chunks:
        if kind == 0:
            assert stored <= 0.85 * len(plain)
        else:
            assert stored == len(plain)
            assert len(cramjam.snappy.compress_raw(plain)) > 0.85 * len(plain)
    assert unframe(stream, "f") == data


@settings(max_examples=30, deadline=None)
@given(st.lists(_INPUTS, max_size=4))
def test_flushed_pieces_concatenate_into_one_stream(pieces):
    """Operator state: one identifier, then each piece's chunks as a flush writes them, stored
    or compressed; read back whole, and piece by piece from its offset."""
    for compress in (True, False):
        framed = [frame_chunks(piece, compress) for piece in pieces]
        assert unframe(STREAM_IDENTIFIER + b"".join(framed), "f") == b"".join(pieces)
        for piece, chunks in zip(pieces, framed):
            walked = _walked(chunks)
            assert b"".join(plain for _, plain, _ in walked) == piece
            assert compress or all(kind == 1 for kind, _, _ in walked)


def test_incompressible_and_compressible_chunks():
    noise = random.Random(7).randbytes(70_000)
    kinds = [kind for kind, _, _ in _walked(frame(noise + bytes(70_000))[10:])]
    assert kinds == [1, 0, 0]  # 64 KiB of noise; 4 KiB of noise, then zeros; zeros
    assert frame(b"") == STREAM_IDENTIFIER

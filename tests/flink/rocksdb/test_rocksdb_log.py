"""RocksDB's log framing, against logs built here from its documentation (``db/log_format.h``,
the wiki's "Write Ahead Log File Format"), and RocksDB's integer encodings."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statesource.errors import CorruptCheckpointError
from statesource.flink.rocksdb.coding import Place, signed_varint, varint, varint32
from statesource.flink.rocksdb.log import records

BLOCK = 32768


def _bitwise_step(crc: int) -> int:
    for _ in range(8):
        crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc


_TABLE = [_bitwise_step(byte) for byte in range(256)]


def _crc(data: bytes) -> int:
    """Masked CRC-32C from the definition (reflected polynomial 0x82F63B78), a byte's bitwise
    steps tabulated; masked as RocksDB's ``crc32c::Mask``."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def test_the_reference_crc_has_the_check_value():
    assert _crc(b"123456789") == ((((0xE3069283 >> 15) | (0xE3069283 << 17)) & 0xFFFFFFFF)
                                  + 0xA282EAD8) & 0xFFFFFFFF


def written(payloads: list[bytes], recyclable_number: int | None = None) -> bytes:
    """A log of ``payloads``: fragments never cross a 32 KiB block, block tails too short
    for a header are zero-filled; recyclable headers carry the log number."""
    header = 7 if recyclable_number is None else 11
    out = bytearray()
    for payload in payloads:
        first, rest = True, payload
        while True:
            left = BLOCK - len(out) % BLOCK
            if left < header:
                out += bytes(left)
                left = BLOCK
            piece, rest = rest[:left - header], rest[left - header:]
            kind = (1 if not rest else 2) if first else (4 if not rest else 3)
            extra = b""
            if recyclable_number is not None:
                kind += 4
                extra = recyclable_number.to_bytes(4, "little")
            covered = bytes([kind]) + extra + piece
            out += (_crc(covered).to_bytes(4, "little") + len(piece).to_bytes(2, "little")
                    + covered)
            first = False
            if not rest:
                break
    return bytes(out)


payload_lists = st.lists(st.binary(max_size=200) | st.integers(0, 70_000).map(
    lambda n: bytes(i % 251 for i in range(n))), max_size=6)


@settings(max_examples=60, deadline=None)
@given(payload_lists, st.booleans())
def test_records_come_back_whole_across_blocks(payloads, recyclable):
    log = written(payloads, 9 if recyclable else None)
    assert [payload for _, payload in records(log, "MANIFEST-000009", 9)] == payloads


def test_a_recycled_record_of_an_older_log_ends_the_log():
    log = written([b"new"], 9) + written([b"old"], 3)
    assert [payload for _, payload in records(log, "m", 9)] == [b"new"]


@settings(max_examples=200, deadline=None)
@given(payload_lists.filter(lambda p: 0 < sum(map(len, p)) < 20_000), st.data())
def test_damage_to_a_log_is_refused(payloads, data):
    log = bytearray(written(payloads))
    position = data.draw(st.integers(0, len(log) - 1))
    log[position] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CorruptCheckpointError, match=r"^m: .* at byte offset \d+$"):
        list(records(bytes(log), "m"))


def test_a_record_damaged_into_padding_is_refused():
    """Type 0 with length 0 reads as the zero-filled end of a block; a real one is all zeros."""
    log = bytearray(written([b"abc", b""]))
    log[10 + 6] = 0  # the empty record's type: its header now reads as padding but its CRC
    with pytest.raises(CorruptCheckpointError, match="type 0 that is not padding at byte"
                                                     " offset 10"):
        list(records(bytes(log), "m"))


def test_a_log_cut_inside_a_record_is_refused():
    log = written([bytes(40_000)])
    with pytest.raises(CorruptCheckpointError, match="the log ends inside a record"):
        list(records(log[:BLOCK], "m"))
    with pytest.raises(CorruptCheckpointError, match="truncated log record header"):
        list(records(log[:-len(log) + 3], "m"))


def _encoded(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append((value & 0x7F) | (0x80 if value >= 0x80 else 0))
        value >>= 7
        if not out[-1] & 0x80:
            return bytes(out)


@given(st.integers(0, 2**64 - 1), st.binary(max_size=4))
def test_varints_read_what_leb128_writes(value, tail):
    data = _encoded(value) + tail
    assert varint(data, 0, len(data), Place("f", 0), "v") == (value, len(_encoded(value)))
    zigzag = (value >> 1) ^ -(value & 1)
    assert signed_varint(data, 0, len(data), Place("f", 0), "v")[0] == zigzag


@given(st.integers(2**32, 2**64 - 1) | st.integers(0, 2**32 - 1))
def test_a_varint32_beyond_32_bits_is_refused(value):
    data = _encoded(value)
    if value < 2**32:
        assert varint32(data, 0, len(data), Place("f", 0), "v")[0] == value
    else:
        with pytest.raises(CorruptCheckpointError, match="^f: .* at byte offset 10$"):
            varint32(data, 0, len(data), Place("f", 10), "v")


def test_truncated_and_overlong_varints_are_refused():
    with pytest.raises(CorruptCheckpointError, match="truncated or overlong varint"):
        varint(b"\x80\x80", 0, 2, Place("f", 0), "v")
    with pytest.raises(CorruptCheckpointError, match="truncated or overlong varint"):
        varint(b"\x80" * 10 + b"\x01", 0, 11, Place("f", 0), "v")

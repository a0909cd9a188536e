"""The Flink writers on hand-built input: exact bytes, what real files do not hold, and refusals.

Real files are written back byte for byte in test_flink_round_trips.py; here
each writer meets the cases no real snapshot at hand has (absolute paths,
master and raw states, finished operators, modified UTF-8 corner cases), and
every value it must refuse, with an error naming that value.
"""

from __future__ import annotations

import pytest

from statesource.errors import InvalidArgumentError
from statesource.flink.binary import BinaryReader, decode_modified_utf8
from statesource.flink.binary_writer import BinaryWriter, encode_modified_utf8

# -- binary writer -------------------------------------------------------------------------


def test_integers_are_big_endian_and_read_back():
    w = BinaryWriter()
    w.u8(255)
    w.boolean(True)
    w.i16(-2)
    w.u16(0xFFFF)
    w.i32(-(1 << 31))
    w.i64((1 << 63) - 1)
    w.length_prefixed(b"ab")
    assert len(w) == 1 + 1 + 2 + 2 + 4 + 8 + 6
    data = w.getvalue()
    assert data[:6] == bytes.fromhex("ff01fffeffff")
    r = BinaryReader(data, "test")
    assert (r.u8(), r.boolean(), r.i16(), r.u16(), r.i32(), r.i64()) == (
        255, True, -2, 0xFFFF, -(1 << 31), (1 << 63) - 1)
    assert r.take(r.i32()) == b"ab" and r.at_end()


@pytest.mark.parametrize("method, value", [
    ("u8", 256), ("u8", -1), ("i16", 1 << 15), ("u16", -1), ("i32", 1 << 31),
    ("i32", -(1 << 31) - 1), ("i64", 1 << 63)])
def test_a_value_too_wide_for_its_field_is_refused(method, value):
    with pytest.raises(InvalidArgumentError, match=str(value)):
        getattr(BinaryWriter(), method)(value)


def test_write_utf_is_javas_modified_utf8():
    w = BinaryWriter()
    w.utf("a\0\u00e9\u20ac\U0001F600")
    # NUL as c0 80; the emoji as its surrogate pair, three bytes per unit (what Java writes)
    body = bytes.fromhex("61" "c080" "c3a9" "e282ac" "eda0bd" "edb880")
    assert w.getvalue() == len(body).to_bytes(2, "big") + body
    assert BinaryReader(w.getvalue(), "test").utf() == "a\0\u00e9\u20ac\U0001F600"


def test_a_lone_surrogate_is_written_back_as_read():
    text = decode_modified_utf8(bytes.fromhex("eda080"))
    assert text == "\ud800"
    assert encode_modified_utf8(text) == bytes.fromhex("eda080")


@pytest.mark.parametrize("text, fits", [
    ("x" * 65535, True), ("x" * 65536, False), ("\u00e9" * 32767, True),
    ("\u00e9" * 32768, False)])
def test_write_utf_refuses_more_than_65535_encoded_bytes(text, fits):
    w = BinaryWriter()
    if fits:
        w.utf(text)
        assert len(w) == 2 + len(text.encode("utf-8"))
    else:
        with pytest.raises(InvalidArgumentError, match="65536 encoded bytes"):
            w.utf(text)

"""Version edits and compressed blocks: decoded as RocksDB's documentation encodes them, and
any bytes at all either decoded or refused, with no other exception."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statesource.errors import CorruptCheckpointError, UnsupportedFormatVersionError
from statesource.flink.rocksdb.coding import Place
from statesource.flink.rocksdb.compression import BZIP2, LZ4, NONE, SNAPPY, ZLIB, ZSTD, decompress
from statesource.flink.rocksdb.version_edit import NewFile, decode_edit


def _v(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


def _s(data: bytes) -> bytes:
    return _v(len(data)) + data


def test_an_edit_decodes_field_by_field():
    smallest, largest = b"a" + bytes(8), b"z" + bytes(8)
    record = (_v(200) + _v(3)  # column family 3
              + _v(1) + _s(b"leveldb.BytewiseComparator")
              + _v(2) + _v(17) + _v(3) + _v(99) + _v(4) + _v(1234)  # log, next file, last seq
              + _v(6) + _v(0) + _v(12)  # file 12 deleted from level 0
              + _v(103) + _v(1) + _v(13) + _v(4096) + _s(smallest) + _s(largest) + _v(5)
              + _v(9) + _v(5) + _s(_v(77)) + _v(16) + _s(b"\x01") + _v(1)  # fields, terminated
              + _v(8193) + _s(b"db-id")  # an ignorable tag from a newer release
              + _v(8196) + _v(5) + _v(2) + _v(1000) + _v(1)  # a WAL addition, unprefixed
              + _v(300) + _v(0))  # the last edit of an atomic group
    edit = decode_edit(record, Place("MANIFEST-000001", 40))
    assert (edit.column_family, edit.comparator, edit.log_number, edit.next_file_number,
            edit.last_sequence) == (3, "leveldb.BytewiseComparator", 17, 99, 1234)
    assert edit.deleted_files == [(0, 12)]
    assert edit.new_files == [NewFile(1, 13, 4096, smallest, largest, 5, 9)]
    assert edit.atomic_group_remaining == 0


def test_what_an_edit_must_not_hold_is_refused():
    place = Place("MANIFEST-000001", 40)
    with pytest.raises(CorruptCheckpointError, match="unknown version edit tag 77 .* offset 40"):
        decode_edit(_v(77), place)
    must_understand = _v(103) + _v(1) + _v(13) + _v(1) + _s(b"") + _s(b"") + _v(1) + _v(1)
    with pytest.raises(CorruptCheckpointError, match="field 70 that must be understood"):
        decode_edit(must_understand + _v(70) + _s(b"x") + _v(1), place)
    with pytest.raises(UnsupportedFormatVersionError, match=r"db_paths\[2\]"):
        decode_edit(must_understand + _v(65) + _s(b"\x02") + _v(1), place)
    with pytest.raises(UnsupportedFormatVersionError, match="blob files"):
        decode_edit(_v(400), place)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=120))
def test_any_edit_record_is_decoded_or_refused(record):
    try:
        decode_edit(record, Place("m", 0))
    except (CorruptCheckpointError, UnsupportedFormatVersionError) as error:
        assert str(error).startswith("m: ")


@settings(max_examples=500, deadline=None)
@given(st.sampled_from([NONE, SNAPPY, ZLIB, BZIP2, LZ4, ZSTD]), st.binary(max_size=80))
def test_any_compressed_block_is_decoded_or_refused(kind, block):
    try:
        decompress(kind, memoryview(block), Place("t.sst", 0), window_bits=-14)
    except CorruptCheckpointError as error:
        assert str(error).startswith("t.sst: ")


def test_an_unknown_compression_type_is_named():
    with pytest.raises(UnsupportedFormatVersionError, match="XPRESS"):
        decompress(6, memoryview(b"x"), Place("t.sst", 0))
    with pytest.raises(UnsupportedFormatVersionError, match=r"custom \(0x85\)"):
        decompress(0x85, memoryview(b"x"), Place("t.sst", 0))
    with pytest.raises(CorruptCheckpointError, match="unknown compression type 0x9"):
        decompress(9, memoryview(b"x"), Place("t.sst", 0))

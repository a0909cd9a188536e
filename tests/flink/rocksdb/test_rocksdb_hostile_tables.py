"""Damaged SST files are refused as corrupt, naming the file; never misread where a checksum
covers the damage, and never answered with another exception where none does."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocksdict_files import TableOptions, write_table
from statesource.errors import CorruptCheckpointError, UnsupportedFormatVersionError
from statesource.flink.binary.crc32c import masked_crc32c
from statesource.flink.rocksdb import SstFile

ROWS = {b"key-%03d" % i: (b"value %d " % i) * (i % 5) for i in range(40)} | {b"gone": None}


def read_all(data: bytes) -> tuple:
    """Everything a reader takes from a table: its entries, range deletions, properties."""
    table = SstFile(data, "bad.sst")
    return list(table.entries()), table.range_deletions(), table.properties


@pytest.fixture(scope="module", params=[
    TableOptions(compression="snappy", format_version=5, checksum="crc32c", block_size=128),
    TableOptions(compression="none", format_version=6, checksum="xxh3", block_size=128,
                 partitioned_index=True),
    TableOptions(compression="zstd", format_version=4, checksum="xxhash64", block_size=200,
                 hash_index=True),
], ids=["v5-crc32c-snappy", "v6-xxh3-partitioned", "v4-xxhash64-zstd"])
def small_table(request, tmp_path_factory) -> bytes:
    return write_table(tmp_path_factory.mktemp("t") / "t.sst", ROWS, request.param).read_bytes()


def test_every_truncation_is_refused(small_table):
    original = read_all(small_table)
    assert len(original[0]) == len(ROWS)
    for length in range(len(small_table)):
        with pytest.raises(CorruptCheckpointError, match="^bad.sst: "):
            read_all(small_table[:length])


def test_every_flipped_byte_is_refused_or_changes_nothing(small_table):
    """Checksums cover every block; below format_version 6 the footer's padding is not
    covered, and flipping it (or turning the checksum type off) changes nothing read."""
    original = read_all(small_table)
    refused = 0
    for position in range(len(small_table)):
        for flip in (0x01, 0x80):
            damaged = bytearray(small_table)
            damaged[position] ^= flip
            try:
                again = read_all(bytes(damaged))
            except CorruptCheckpointError as error:
                assert str(error).startswith("bad.sst: ")
                refused += 1
                continue
            assert again == original, f"byte {position} ^ {flip:#x} misread silently"
    assert refused > 0.9 * 2 * len(small_table)


UNCHECKED = TableOptions(compression="none", format_version=5, checksum="no_checksum",
                         block_size=128, restart_interval=2)


@pytest.fixture(scope="module")
def unchecked_table(tmp_path_factory) -> bytes:
    """No checksums and no compression: only the structural checks stand between damage and
    a misreading, so every damage reaches them."""
    return write_table(tmp_path_factory.mktemp("u") / "u.sst", ROWS, UNCHECKED).read_bytes()


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_random_damage_without_checksums_raises_nothing_but_a_refusal(unchecked_table, data):
    damaged = bytearray(unchecked_table)
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(damaged) - 1))
        damaged[position] = data.draw(st.integers(0, 255))
    try:
        read_all(bytes(damaged))
    except (CorruptCheckpointError, UnsupportedFormatVersionError) as error:
        assert str(error).startswith("bad.sst: ")


def _first_data_block(table: bytes) -> tuple[int, int]:
    handle = SstFile(table, "t").data_blocks[0].handle
    return handle.offset, handle.size


def test_a_restart_count_beyond_the_block_is_refused(unchecked_table):
    offset, size = _first_data_block(unchecked_table)
    damaged = bytearray(unchecked_table)
    struct.pack_into("<I", damaged, offset + size - 4, 1000)
    with pytest.raises(CorruptCheckpointError, match=rf"1000 restart points do not fit .* at"
                                                     rf" byte offset {offset + size - 4}"):
        read_all(bytes(damaged))


def test_a_restart_point_off_an_entry_is_refused(unchecked_table):
    offset, size = _first_data_block(unchecked_table)
    restarts = struct.unpack_from("<I", unchecked_table, offset + size - 4)[0]
    assert restarts > 1
    damaged = bytearray(unchecked_table)
    second = offset + size - 4 - 4 * restarts + 4
    struct.pack_into("<I", damaged, second, struct.unpack_from("<I", damaged, second)[0] + 1)
    with pytest.raises(CorruptCheckpointError, match="restart point inside an entry"):
        read_all(bytes(damaged))


def _with_index_entry(table: bytes, number: int, handle: tuple[int, int]) -> bytes:
    """``table`` with the block handle of index entry ``number`` replaced by ``handle``,
    encoded in as many bytes as the one it replaces."""
    sst = SstFile(table, "t")
    index = sst.footer.index
    assert index is not None
    block = table[index.offset:index.offset + index.size]
    entry = sst.data_blocks[number]
    encoded = _varint(entry.handle.offset) + _varint(entry.handle.size)
    at = block.index(entry.separator + encoded) + len(entry.separator)
    offset, size = handle
    replacement = _varint(offset) + _varint(size)
    assert len(replacement) == len(encoded)
    return table[:index.offset + at] + replacement + table[index.offset + at + len(encoded):]


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def test_an_index_pointing_past_the_file_is_refused(unchecked_table):
    last = SstFile(unchecked_table, "t").data_blocks[-1].handle
    assert 0x80 <= last.offset < 0x4000 and last.size < 0x80  # 2 bytes, 1 byte
    past = _with_index_entry(unchecked_table, -1, (0x3FFF, last.size))
    with pytest.raises(CorruptCheckpointError, match=rf"data block of {last.size} bytes runs"
                                                     r" past the end .* at byte offset 16383"):
        read_all(past)


def test_a_wrong_block_size_in_the_index_is_refused(unchecked_table):
    offset, size = _first_data_block(unchecked_table)
    for wrong in (size - 9, size + 20):
        with pytest.raises(CorruptCheckpointError, match="^bad.sst: "):
            read_all(_with_index_entry(unchecked_table, 0, (offset, wrong)))


def test_a_checksum_mismatch_names_the_block(tmp_path):
    table = write_table(tmp_path / "c.sst", ROWS, TableOptions(compression="none")).read_bytes()
    offset, size = _first_data_block(table)
    damaged = bytearray(table)
    damaged[offset + 3] ^= 0x10
    with pytest.raises(CorruptCheckpointError, match=rf"^bad.sst: data block checksum mismatch"
                                                     rf" \(crc32c\) at byte offset {offset}$"):
        read_all(bytes(damaged))
    # and the checksum is RocksDB's masked CRC-32C of the block and its type byte
    stored = struct.unpack_from("<I", table, offset + size + 1)[0]
    assert stored == masked_crc32c(table[offset:offset + size + 1])


def test_a_compressed_block_claiming_more_than_it_can_hold_is_refused_unread(tmp_path):
    """A Snappy block of a few bytes claiming a gigabyte is refused before any buffer of that
    size exists (Snappy expands at most about 21 times)."""
    from statesource.flink.rocksdb.coding import Place
    from statesource.flink.rocksdb.compression import LZ4, SNAPPY, ZSTD, decompress

    claim = _varint(1 << 29)
    for kind, block in ((SNAPPY, claim + b"\x00" * 8), (LZ4, claim + b"\x00" * 8),
                        (ZSTD, claim + b"\x28\xb5\x2f\xfd" + bytes(8))):
        with pytest.raises(CorruptCheckpointError, match="more than it can hold"):
            decompress(kind, memoryview(block), Place("bad.sst", 100))


def test_other_files_are_named_for_what_they_are(tmp_path):
    with pytest.raises(CorruptCheckpointError, match=r"^x: not an SST file \(magic number"):
        SstFile(bytes(100), "x")
    plain = bytes(100) + (0x8242229663BF9564).to_bytes(8, "little")
    with pytest.raises(UnsupportedFormatVersionError, match="^x: a plain table"):
        SstFile(plain, "x")
    with pytest.raises(CorruptCheckpointError, match="too short to be an SST file"):
        SstFile(b"", Path("x").name)

"""SST files written by a real RocksDB read back entry for entry, whatever their table options."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rocksdict import SstFileWriter

from rocksdict_files import CHECKSUMS, TableOptions, table_options, write_table
from statesource.errors import UnsupportedFormatVersionError
from statesource.flink.rocksdb import SstFile, keys

values = st.binary(max_size=300) | st.builds(lambda part, times: part * times,
                                              st.binary(min_size=1, max_size=8),
                                              st.integers(1, 400))
rows_of = st.dictionaries(st.binary(max_size=24), st.none() | values, min_size=1, max_size=150)


def expected_entries(rows: dict[bytes, bytes | None]) -> list[tuple[bytes, int, int, bytes]]:
    """What ``SstFileWriter`` stores: every key once, in bytewise order, at sequence 0."""
    return [(key, 0, keys.DELETION if value is None else keys.VALUE, value or b"")
            for key, value in sorted(rows.items())]


@settings(max_examples=150, deadline=None)
@given(rows_of, table_options)
def test_every_entry_reads_back_under_any_table_options(rows, options):
    with tempfile.TemporaryDirectory() as directory:
        path = write_table(Path(directory) / "t.sst", rows, options)
        table = SstFile(path.read_bytes(), str(path))
        assert list(table.entries()) == expected_entries(rows)
        assert table.footer.format_version == options.format_version
        assert table.footer.checksum_type == CHECKSUMS.index(options.checksum)
        assert table.range_deletions() == []
        assert table.properties.num_entries == len(rows)
        assert table.properties.num_deletions == sum(v is None for v in rows.values())
        assert table.properties.comparator == keys.BYTEWISE_COMPARATOR
        assert table.bytewise


def test_blocks_larger_than_the_block_size_and_partitioned_indexes(tmp_path):
    """Values of 200 KB make one block each; a partitioned index with many partitions."""
    rows = {b"big-%03d" % i: bytes([i]) * 200_000 for i in range(5)}
    rows |= {b"small-%05d" % i: b"%d" % i for i in range(3000)}
    for options in (TableOptions(compression="zstd", partitioned_index=True, block_size=256),
                    TableOptions(compression="lz4", format_version=6, checksum="xxh3"),
                    TableOptions(compression="none", format_version=2, checksum="xxhash64")):
        path = write_table(tmp_path / "big.sst", rows, options)
        table = SstFile(path.read_bytes(), str(path))
        assert list(table.entries()) == expected_entries(rows)
        assert len(table.data_blocks) == table.properties.num_data_blocks > 5


def test_the_properties_name_what_rocksdb_recorded(tmp_path):
    path = write_table(tmp_path / "p.sst", {b"a": b"1", b"b": None},
                       TableOptions(compression="zstd", format_version=4))
    properties = SstFile(path.read_bytes(), str(path)).properties
    assert (properties.num_entries, properties.num_deletions, properties.format_version) == (
        2, 1, 4)
    assert properties.compression == "ZSTD"
    assert properties.column_family_name == ""  # SstFileWriter knows no column family
    assert properties.external_version == 2 and properties.global_seqno == 0
    assert properties.index_value_is_delta_encoded == 1  # format_version >= 4


def test_an_ingested_table_takes_its_global_sequence_number(tmp_path):
    """Ingested files keep 0 in their keys; the MANIFEST's sequence number applies."""
    path = write_table(tmp_path / "g.sst", {b"a": b"1", b"b": None}, TableOptions())
    table = SstFile(path.read_bytes(), str(path), largest_seqno=41)
    assert [(key, sequence) for key, sequence, _, _ in table.entries()] == [(b"a", 41),
                                                                            (b"b", 41)]


def test_dictionary_compression_is_refused_by_name(tmp_path):
    """ZSTD with a trained dictionary (``max_dict_bytes``): Flink never sets it."""
    options = TableOptions(compression="zstd").rocksdb()
    options.set_compression_options(-14, 32767, 0, 16384)
    options.set_zstd_max_train_bytes(100 * 16384)
    writer = SstFileWriter(options=options)
    writer.open(str(tmp_path / "d.sst"))
    for i in range(20_000):
        writer[b"k%06d" % i] = b"a repeated value %d" % (i % 100)
    writer.finish()
    with pytest.raises(UnsupportedFormatVersionError, match="^d.sst: .*with a dictionary"):
        SstFile((tmp_path / "d.sst").read_bytes(), "d.sst")

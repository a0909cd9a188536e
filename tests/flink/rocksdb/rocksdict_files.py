"""SST files and database directories written by a real RocksDB (rocksdict's, RocksDB 9.x).

The tables tests/flink/rocksdb/ reads back are made here with every table option that
matters to a reader: compression, ``format_version`` (2 to 6), checksum type, block size,
restart intervals, index type (binary search or partitioned) and data block index (binary
search, or with a hash index).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st
from rocksdict import (
    BlockBasedIndexType,
    BlockBasedOptions,
    ChecksumType,
    DataBlockIndexType,
    DBCompressionType,
    Options,
    SstFileWriter,
)

COMPRESSIONS = ("none", "snappy", "zlib", "bz2", "lz4", "lz4hc", "zstd")
CHECKSUMS = ("no_checksum", "crc32c", "xxhash", "xxhash64", "xxh3")  # RocksDB's type 0 to 4


@dataclass(frozen=True)
class TableOptions:
    """The options of one table's writer."""

    compression: str = "snappy"
    format_version: int = 5
    checksum: str = "crc32c"
    block_size: int = 4096
    restart_interval: int = 16
    index_restart_interval: int = 1
    partitioned_index: bool = False
    hash_index: bool = False

    def rocksdb(self) -> Options:
        """rocksdict's options for these (raw bytes keys, RocksDB's bytewise order)."""
        options = Options(raw_mode=True)
        options.set_compression_type(getattr(DBCompressionType, self.compression)())
        table = BlockBasedOptions()
        table.set_format_version(self.format_version)
        table.set_checksum_type(getattr(ChecksumType, self.checksum)())
        table.set_block_size(self.block_size)
        table.set_block_restart_interval(self.restart_interval)
        table.set_index_block_restart_interval(self.index_restart_interval)
        if self.partitioned_index:
            table.set_index_type(BlockBasedIndexType.two_level_index_search())
            table.set_metadata_block_size(64)  # several partitions even for small tables
        if self.hash_index:
            table.set_data_block_index_type(DataBlockIndexType.binary_and_hash())
        options.set_block_based_table_factory(table)
        return options


table_options = st.builds(
    TableOptions,
    compression=st.sampled_from(COMPRESSIONS),
    format_version=st.integers(2, 6),
    checksum=st.sampled_from(CHECKSUMS),
    block_size=st.sampled_from([64, 256, 1024, 4096]),
    restart_interval=st.integers(1, 20),
    index_restart_interval=st.integers(1, 6),
    partitioned_index=st.booleans(),
    hash_index=st.booleans(),
)


def write_table(path: Path, rows: dict[bytes, bytes | None], options: TableOptions) -> Path:
    """An SST file of ``rows`` (None: a deletion) made by ``SstFileWriter``: every entry with
    sequence number 0, in key order."""
    writer = SstFileWriter(options=options.rocksdb())
    writer.open(str(path))
    for key in sorted(rows):
        value = rows[key]
        if value is None:
            del writer[key]
        else:
            writer[key] = value
    writer.finish()
    return path

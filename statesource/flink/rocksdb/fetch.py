"""Fetching one block of a table: its bounds, its checksum, then its decompression.

A block handle comes from the footer, the metaindex or an index, all of which a damaged
file can get wrong, so the handle is checked against the file first (every block ends,
trailer included, before the footer), then the trailer's checksum against the stored
bytes and their compression type byte (``VerifyBlockChecksum`` in RocksDB's
``table/block_based/reader_common.cc``), and only then is anything decompressed. A table
held as a :class:`~.coding.RangedFile` (a lookup's) is read block by block.
"""

from __future__ import annotations

from statesource.flink.rocksdb import checksums
from statesource.flink.rocksdb.coding import Place, RangedFile, TableData, corrupt
from statesource.flink.rocksdb.compression import decompress
from statesource.flink.rocksdb.footer import BLOCK_TRAILER_BYTES, BlockHandle, Footer


def read_block(data: TableData, handle: BlockHandle, footer: Footer, source: str, what: str,
               window_bits: int = -14) -> tuple[bytes, Place]:
    """The uncompressed contents of the block at ``handle`` of the table ``data``, and the
    place that names a position in them: a file offset if the block was stored as it is,
    else the block's offset and the position in its decompressed contents."""
    offset, size = handle
    if offset + size + BLOCK_TRAILER_BYTES > footer.offset:
        raise corrupt(source, offset, f"{what} of {size} bytes runs past the end of the"
                                      f" table's blocks (byte {footer.offset})")
    if isinstance(data, RangedFile):  # one read of the block and its trailer
        whole = memoryview(data[offset:offset + size + BLOCK_TRAILER_BYTES])
        covered, trailer = whole[:size + 1], whole[size + 1:]
    else:
        covered = memoryview(data)[offset:offset + size + 1]  # the block and its type byte
        trailer = memoryview(data)[offset + size + 1:offset + size + BLOCK_TRAILER_BYTES]
    stored = int.from_bytes(trailer, "little")
    if not checksums.stored_matches(footer.checksum_type, covered, stored,
                                    footer.base_context_checksum, offset):
        raise corrupt(source, offset, f"{what} checksum mismatch"
                                      f" ({checksums.NAMES[footer.checksum_type]})")
    kind = covered[size]
    contents = decompress(kind, covered[:size], Place(source, offset), window_bits)
    return contents, Place(source, offset, f"the decompressed {what}" if kind else None)

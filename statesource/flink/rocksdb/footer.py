"""The footer of a block-based table: the fixed-size tail that says where everything else is.

Read from RocksDB's ``table/format.cc`` (``Footer::DecodeFrom``); the last 53 bytes are:

- a checksum type (1 byte: :mod:`~statesource.flink.rocksdb.checksums`);
- 40 bytes that, up to ``format_version`` 5, hold the metaindex and index block handles
  (two varint pairs, zero-padded); from version 6 they hold the extended magic
  ``3e 00 7a 00``, a checksum of the whole footer (computed with this field zeroed, plus the
  context of the footer's own offset), the file's ``base_context_checksum``, the size of
  the metaindex block (which ends right before the footer), 16 unchecked bytes and 8 that
  must be zero; the index block is then found through the metaindex;
- ``format_version`` (``uint32``) and the magic number ``0x88e241b785f4cff7`` (``uint64``).

Older tables (``format_version`` 0 and 1, RocksDB before 4.6) and the plain and cuckoo
table formats are recognised by their magic numbers and refused by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from statesource.errors import UnsupportedFormatVersionError
from statesource.flink.rocksdb import checksums
from statesource.flink.rocksdb.coding import Place, TableData, corrupt, fixed32, varint

BLOCK_BASED_MAGIC = 0x88E241B785F4CFF7
_OTHER_MAGICS = {0xDB4775248B80FB57: "a block-based table of format_version 0 or 1 (RocksDB"
                                     " before 4.6), which statesource does not read",
                 0x8242229663BF9564: "a plain table, not a block-based one",
                 0x4F3418EB7A8F13B8: "a plain table, not a block-based one",
                 0x926789D0C5F17873: "a cuckoo table, not a block-based one"}
FOOTER_BYTES = 1 + 40 + 4 + 8
BLOCK_TRAILER_BYTES = 5  # compression type, checksum
MIN_FORMAT_VERSION, MAX_FORMAT_VERSION = 2, 7
_EXTENDED_MAGIC = b"\x3e\x00\x7a\x00"


class BlockHandle(NamedTuple):
    """Where a block's stored bytes are: ``size`` excludes the 5-byte trailer after them."""

    offset: int
    size: int


@dataclass(frozen=True)
class Footer:
    """What the footer of one table says."""

    format_version: int
    checksum_type: int
    base_context_checksum: int  # 0 below format_version 6
    metaindex: BlockHandle
    index: BlockHandle | None  # None from format_version 6: the metaindex names it
    offset: int  # where the footer starts: every block ends before it


def read_footer(data: TableData, source: str) -> Footer:
    """The footer of the table ``data`` (the whole file), checked before it is believed."""
    size = len(data)
    if size < FOOTER_BYTES:
        raise corrupt(source, 0, f"a file of {size} bytes is too short to be an SST file")
    offset = size - FOOTER_BYTES
    place = Place(source, offset)
    footer = bytes(data[offset:])
    magic = int.from_bytes(footer[-8:], "little")
    if magic != BLOCK_BASED_MAGIC:
        if magic in _OTHER_MAGICS:
            raise UnsupportedFormatVersionError(f"{source}: {_OTHER_MAGICS[magic]}")
        raise place.error(FOOTER_BYTES - 8, f"not an SST file (magic number {magic:#018x})")
    version = fixed32(footer, FOOTER_BYTES - 12, FOOTER_BYTES, place, "format_version")
    if not MIN_FORMAT_VERSION <= version <= MAX_FORMAT_VERSION:
        raise place.error(FOOTER_BYTES - 12, f"corrupt or unsupported format_version {version}"
                          f" (statesource reads {MIN_FORMAT_VERSION} to {MAX_FORMAT_VERSION})")
    kind = footer[0]
    if kind not in checksums.NAMES:
        raise place.error(0, f"corrupt or unsupported checksum type {kind}")
    if version >= 6:
        return _extended(footer, version, kind, offset, place)
    metaindex, pos = decode_handle(footer, 1, 41, place, "metaindex handle")
    index, _ = decode_handle(footer, pos, 41, place, "index handle")
    return Footer(version, kind, 0, metaindex, index, offset)


def _extended(footer: bytes, version: int, kind: int, offset: int, place: Place) -> Footer:
    if footer[1:5] != _EXTENDED_MAGIC:
        raise place.error(1, f"bad extended magic {footer[1:5].hex()}")
    stored = fixed32(footer, 5, 9, place, "footer checksum")
    base = fixed32(footer, 9, 13, place, "base context checksum")
    if base == 0:
        raise place.error(9, "invalid base context checksum 0")
    zeroed = footer[:5] + bytes(4) + footer[9:]
    if not checksums.stored_matches(kind, zeroed, stored, base, offset):
        raise place.error(5, "footer checksum mismatch")
    if footer[33:41] != bytes(8):
        raise UnsupportedFormatVersionError(
            f"{place.source}: the footer uses a RocksDB feature newer than statesource reads"
            f" (reserved bytes set at byte offset {offset + 33})")
    metaindex_size = fixed32(footer, 13, 17, place, "metaindex size")
    start = offset - BLOCK_TRAILER_BYTES - metaindex_size
    if start < 0:
        raise place.error(13, f"metaindex of {metaindex_size} bytes starts before the file")
    return Footer(version, kind, base, BlockHandle(start, metaindex_size), None, offset)


def decode_handle(data: bytes, pos: int, end: int, place: Place, what: str
                  ) -> tuple[BlockHandle, int]:
    """A block handle (varint64 offset, varint64 size): in a footer, a metaindex or an index."""
    offset, pos = varint(data, pos, end, place, f"{what} offset")
    size, pos = varint(data, pos, end, place, f"{what} size")
    return BlockHandle(offset, size), pos

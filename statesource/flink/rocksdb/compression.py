"""Decompressing one block of a block-based table, whatever its trailer's type byte says.

Since table ``format_version`` 2 a compressed block is, by type (``util/compression.cc``):

- Snappy (1): a raw Snappy block, whose own preamble gives the uncompressed length;
- zlib (2), bzip2 (3), LZ4 and LZ4HC (4, 5), ZSTD (7, and 0x40, an old name of it): a
  varint32 uncompressed length, then a raw deflate stream (a zlib or gzip one if the
  column family set positive ``window_bits``), a bzip2 stream, a raw LZ4 block, or a
  ZSTD frame.

The length a block claims is checked before any buffer of that size is made: against
:data:`MAX_BLOCK_BYTES`, and against the most the codec can expand the bytes actually
there (Snappy about 21x, LZ4 about 255x, deflate 1032x, ZSTD 32768x: a 4-byte RLE block
of 128 KiB); bzip2 has no useful bound, so only the ceiling holds it. The codec then
writes into exactly that many bytes, and must fill them. Snappy, LZ4 and ZSTD are
cramjam's; deflate and bzip2 the standard library's.
"""

from __future__ import annotations

import bz2
import zlib

import cramjam

from statesource.errors import UnsupportedFormatVersionError
from statesource.flink.rocksdb.coding import Place, varint32

NONE, SNAPPY, ZLIB, BZIP2, LZ4, LZ4HC, XPRESS, ZSTD, ZSTD_NOT_FINAL = 0, 1, 2, 3, 4, 5, 6, 7, 0x40
NAMES = {NONE: "none", SNAPPY: "Snappy", ZLIB: "zlib", BZIP2: "bzip2", LZ4: "LZ4", LZ4HC: "LZ4HC",
         XPRESS: "XPRESS", ZSTD: "ZSTD", ZSTD_NOT_FINAL: "ZSTD"}
MAX_BLOCK_BYTES = 1 << 30
"""No block of a table Flink writes comes near this; a claim beyond it is refused unread."""

_EXPANSION = {SNAPPY: (24, 64), LZ4: (256, 64), LZ4HC: (256, 64), ZLIB: (1032, 1024),
              ZSTD: (32768, 1024), ZSTD_NOT_FINAL: (32768, 1024)}
"""Per codec, (factor, slack): no valid block of n bytes expands past ``factor * n + slack``."""


def decompress(kind: int, data: memoryview, place: Place, window_bits: int = -14) -> bytes:
    """The uncompressed contents of a block stored as ``data`` with compression ``kind``.

    ``window_bits`` is the column family's zlib setting (``rocksdb.compression_options``):
    negative for raw deflate, RocksDB's default.
    """
    if kind == NONE:
        return bytes(data)
    if kind not in _EXPANSION and kind != BZIP2:
        name = NAMES.get(kind, f"custom ({kind:#x})" if kind >= 0x80 else None)
        if name is None:
            raise place.error(len(data), f"unknown compression type {kind:#x}")
        raise UnsupportedFormatVersionError(
            f"{place.source}: a block at byte offset {place.offset} is compressed with {name},"
            " which statesource cannot decompress (it reads Snappy, zlib, bzip2, LZ4 and ZSTD)")
    if kind == SNAPPY:  # the length preamble is part of the Snappy block
        start = 0
        expected, _ = varint32(data, 0, len(data), place, "Snappy length preamble")
    else:
        expected, start = varint32(data, 0, len(data), place, "uncompressed block size")
    payload = data[start:]
    _check_claim(kind, expected, len(payload), place)
    try:
        if kind == ZLIB:
            return _inflate(payload, expected, window_bits, place)
        if kind == BZIP2:
            return _bunzip(payload, expected, place)
        out = bytearray(expected)
        if kind == SNAPPY:
            written = cramjam.snappy.decompress_raw_into(payload, out)
        elif kind in (LZ4, LZ4HC):
            written = cramjam.lz4.decompress_block_into(payload, out)
        else:
            written = cramjam.zstd.decompress_into(payload, out)
    except cramjam.DecompressionError as error:
        raise place.error(start, f"invalid {NAMES[kind]} block ({error})") from None
    if written != expected:
        raise place.error(start, f"{NAMES[kind]} block holds {written} bytes, not the"
                                 f" {expected} it claims")
    return bytes(out)


def _check_claim(kind: int, expected: int, stored: int, place: Place) -> None:
    factor, slack = _EXPANSION.get(kind, (0, 0))
    if expected > MAX_BLOCK_BYTES or (factor and expected > factor * stored + slack):
        raise place.error(0, f"{NAMES[kind]} block of {stored} bytes claims {expected}"
                             " uncompressed, more than it can hold")


def _inflate(payload: memoryview, expected: int, window_bits: int, place: Place) -> bytes:
    wbits = -15 if window_bits < 0 else (31 if window_bits > 15 else 15)
    inflater = zlib.decompressobj(wbits)
    try:
        out = inflater.decompress(payload, expected)
    except zlib.error as error:
        raise place.error(0, f"invalid zlib block ({error})") from None
    if len(out) != expected or not inflater.eof or inflater.unconsumed_tail:
        raise place.error(0, f"zlib block does not hold the {expected} bytes it claims")
    return out


def _bunzip(payload: memoryview, expected: int, place: Place) -> bytes:
    unzipper = bz2.BZ2Decompressor()
    try:
        out = unzipper.decompress(payload, expected)
    except (OSError, ValueError) as error:
        raise place.error(0, f"invalid bzip2 block ({error})") from None
    if len(out) != expected or not unzipper.eof:
        raise place.error(0, f"bzip2 block does not hold the {expected} bytes it claims")
    return out

"""CRC-32C (Castagnoli) and its masked form, the checksums of Snappy frames and RocksDB files.

The arithmetic is the ``crc32c`` package's (hardware instructions where the CPU has them, about
13 GB/s; a table-driven C fallback elsewhere): a CRC computed in Python, even vectorised by
numpy, ran near 100 MB/s and dominated every compressed read. What stays here is the one rule
both formats add on top, the *mask*: a CRC stored next to the data it covers is rotated and
offset, so that a CRC of bytes that themselves hold CRCs does not degenerate (xerial's
``SnappyFramedOutputStream`` and RocksDB's ``crc32c::Mask`` use the same constant).
"""

from __future__ import annotations

from crc32c import crc32c as _crc32c

_MASK_DELTA = 0xA282EAD8


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C of ``data`` (initial value and final inversion 0xFFFFFFFF, check value
    0xE3069283 for ``b"123456789"``)."""
    return _crc32c(data)


def masked_crc32c(data: bytes | bytearray | memoryview) -> int:
    """The masked CRC-32C of ``data``, as a Snappy chunk or a RocksDB block or log record
    stores it: the CRC rotated right by 15 bits, plus a constant."""
    crc = _crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF

"""CRC-32C (Castagnoli, the checksum of Snappy's frames) by numpy, not a Python loop per byte.

The byte-at-a-time algorithm is ``crc = T[(crc ^ b) & 0xFF] ^ (crc >> 8)``. Without the
initial value and the final inversion, the CRC is linear over XOR: a message's CRC is
the XOR of each byte's table entry advanced by the number of bytes after it, where
advancing by one byte is ``S(c) = T[c & 0xFF] ^ (c >> 8)``, itself linear. So:

- within blocks of :data:`BLOCK` bytes, every byte's contribution is one lookup in a
  table of ``S^d(T[b])`` by distance ``d`` to the block's end, XORed together per block;
- each block's CRC is advanced past the blocks after it by a linear map, applied as four
  byte-indexed lookups, and the blocks' results XORed together;
- the initial value's effect, advanced by the message's length, is added the same way.

Leading zero bytes add nothing to the linear part, so a message is zero-padded at the
front to whole blocks. Messages longer than :data:`PIECE` are taken piece by piece.
"""

from __future__ import annotations

import functools

import numpy as np

POLYNOMIAL = 0x82F63B78
BLOCK = 256
PIECE = 1 << 16
_BLOCKS = PIECE // BLOCK
_U32 = np.uint32


def _table() -> np.ndarray:
    crc = np.arange(256, dtype=_U32)
    for _ in range(8):
        crc = np.where(crc & 1, (crc >> _U32(1)) ^ _U32(POLYNOMIAL), crc >> _U32(1))
    return crc.astype(_U32)


class _Tables:
    """Everything the vectorised CRC looks up, built once on first use (about 2.3 MB)."""

    def __init__(self) -> None:
        table = self.table = _table()

        def advance(values: np.ndarray) -> np.ndarray:
            return table[values & _U32(0xFF)] ^ (values >> _U32(8))

        # by_distance[d, b] = S^d(T[b]) for d < BLOCK
        rows = [table]
        for _ in range(BLOCK - 1):
            rows.append(advance(rows[-1]))
        self.by_distance = np.stack(rows[::-1])  # row k: a byte k bytes into a block
        # A linear map on 32 bits as four 256-entry tables, one per byte of its input.
        basis = (np.arange(256, dtype=_U32)[None, :] << (_U32(8) * np.arange(4, dtype=_U32)
                                                         [:, None])).astype(_U32)
        shifts = [basis]
        for _ in range(BLOCK):
            shifts.append(advance(shifts[-1]))
        self.short = np.stack(shifts)  # short[r]: S^r, r <= BLOCK
        blocks = [basis, shifts[BLOCK]]
        for _ in range(_BLOCKS - 1):
            blocks.append(_apply(blocks[1], blocks[-1]))
        self.long = np.stack(blocks)  # long[m]: S^(BLOCK * m), m <= _BLOCKS


def _apply(linear: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The linear map ``linear`` (four byte tables) of every value in ``values``."""
    return (linear[0][values & _U32(0xFF)] ^ linear[1][(values >> _U32(8)) & _U32(0xFF)] ^
            linear[2][(values >> _U32(16)) & _U32(0xFF)] ^ linear[3][values >> _U32(24)])


@functools.cache
def _tables() -> _Tables:
    return _Tables()


def _advance(tables: _Tables, crc: int, length: int) -> int:
    """``S^length(crc)``: a CRC state carried past ``length`` more bytes' worth of zeros."""
    value = np.array([crc], dtype=_U32)
    blocks, rest = divmod(length, BLOCK)
    value = _apply(tables.short[rest], value)
    while blocks:
        step = min(blocks, _BLOCKS)
        value = _apply(tables.long[step], value)
        blocks -= step
    return int(value[0])


def _linear(tables: _Tables, piece: np.ndarray) -> int:
    """The CRC of ``piece`` (at most :data:`PIECE` bytes) without initial value or inversion."""
    blocks = -(-len(piece) // BLOCK)
    padded = np.zeros(blocks * BLOCK, dtype=np.uint8)
    padded[len(padded) - len(piece):] = piece
    grid = padded.reshape(blocks, BLOCK)
    per_block = np.bitwise_xor.reduce(
        tables.by_distance[np.arange(BLOCK), grid], axis=1)
    # Block j is followed by (blocks - 1 - j) blocks.
    after = blocks - 1 - np.arange(blocks)
    linear = tables.long[after]
    moved = (linear[np.arange(blocks), 0, per_block & _U32(0xFF)] ^
             linear[np.arange(blocks), 1, (per_block >> _U32(8)) & _U32(0xFF)] ^
             linear[np.arange(blocks), 2, (per_block >> _U32(16)) & _U32(0xFF)] ^
             linear[np.arange(blocks), 3, per_block >> _U32(24)])
    return int(np.bitwise_xor.reduce(moved))


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C of ``data`` (initial value and final inversion 0xFFFFFFFF, as Snappy's)."""
    tables = _tables()
    buf = np.frombuffer(data, dtype=np.uint8)
    crc = 0xFFFFFFFF
    for start in range(0, len(buf), PIECE):
        piece = buf[start:start + PIECE]
        crc = _advance(tables, crc, len(piece)) ^ _linear(tables, piece)
    return crc ^ 0xFFFFFFFF

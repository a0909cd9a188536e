"""Flink's snapshot compression: xerial Snappy *framed* streams.

With ``execution.checkpointing.snapshot-compression`` Flink wraps key-group data
in ``SnappyFramedOutputStream``: a stream identifier chunk (``ff 06 00 00
sNaPpY``), then chunks of a type byte, a 3-byte little-endian length, a masked
CRC-32C of the uncompressed bytes and the (raw Snappy compressed or stored)
data. Consecutive streams simply follow one another, so a key group's bytes are
the concatenation of every data chunk in its byte range.

The framing is walked here, chunk by chunk, so that a bad chunk is named by its
offset; each chunk's Snappy block is decompressed by ``cramjam`` and its checksum
computed by the ``crc32c`` package. (cramjam's own framed decoder is no faster on
Flink's 64 KiB chunks, and could not say where a stream breaks.)

Streams are written (:func:`frame`) as Flink's ``SnappyStreamCompressionDecorator``
writes them, the same in Flink 1.x and 2.x: xerial's ``SnappyFramedOutputStream`` with
64 KiB blocks and a minimum compression ratio of 0.85. The stream identifier first, then
one chunk per 64 KiB of input (the last one shorter), each compressed unless its Snappy
block is more than 0.85 of its length, in which case the chunk is stored as it is. The
blocks are ``cramjam``'s (Rust's ``snap``), not the C++ Snappy library's: their bytes may
differ, but every Snappy decoder reads both.
"""

from __future__ import annotations

import cramjam

from statesource.errors import CorruptCheckpointError
from statesource.flink.binary.crc32c import masked_crc32c

STREAM_IDENTIFIER = b"\xff\x06\x00\x00sNaPpY"
MAX_CHUNK = 1 << 16
MIN_COMPRESSION_RATIO = 0.85
"""A chunk is stored compressed only where its Snappy block is at most this share of it."""
_COMPRESSED, _STORED, _IDENTIFIER, _PADDING = 0x00, 0x01, 0xFF, 0xFE


def frame(data: bytes | bytearray | memoryview) -> bytes:
    """``data`` as one framed stream (the stream identifier, then its chunks), as Flink
    compresses a key group."""
    return STREAM_IDENTIFIER + frame_chunks(data)


def frame_chunks(data: bytes | bytearray | memoryview, compress: bool = True) -> bytes:
    """``data`` as chunks of a framed stream, without the identifier: a chunk per 64 KiB,
    compressed where Snappy saves more than 15 % (``compress`` False: every chunk stored),
    each headed by its type, length and the masked CRC-32C of its uncompressed bytes. What a
    flushed stream writes (Flink flushes one per operator-state element); nothing for no
    bytes."""
    view = memoryview(data)
    out = bytearray()
    for start in range(0, len(view), MAX_CHUNK):
        chunk = view[start:start + MAX_CHUNK]
        kind, body = _STORED, chunk
        if compress:
            block = cramjam.snappy.compress_raw(chunk)
            if len(block) / len(chunk) <= MIN_COMPRESSION_RATIO:
                kind, body = _COMPRESSED, memoryview(block)
        out.append(kind)
        out += (len(body) + 4).to_bytes(3, "little")
        out += masked_crc32c(chunk).to_bytes(4, "little")
        out += body
    return bytes(out)


def unframe(data: bytes | memoryview, source: str, base: int = 0, verify: bool = True) -> bytes:
    """The uncompressed bytes of every framed stream in ``data`` (file ``source`` at ``base``)."""
    view = memoryview(data)
    out = bytearray()
    pos, end = 0, len(view)
    while pos < end:
        if pos + 4 > end:
            raise _corrupt(source, base + pos, "truncated chunk header")
        kind = view[pos]
        length = view[pos + 1] | (view[pos + 2] << 8) | (view[pos + 3] << 16)
        body = pos + 4
        if body + length > end:
            raise _corrupt(source, base + pos, f"chunk of {length} bytes runs past the range")
        if kind == _IDENTIFIER:
            if view[body:body + length] != b"sNaPpY":
                raise _corrupt(source, base + pos, "bad Snappy stream identifier")
        elif kind in (_COMPRESSED, _STORED):
            if length < 4:
                raise _corrupt(source, base + pos, "chunk too short for its checksum")
            expected = int.from_bytes(view[body:body + 4], "little")
            payload = view[body + 4:body + length]
            if kind == _STORED:
                chunk: bytearray | memoryview = payload
            else:
                chunk = _decompressed(payload, source, base + body + 4)
            if verify and masked_crc32c(chunk) != expected:
                raise _corrupt(source, base + pos, "Snappy chunk checksum mismatch")
            out += chunk
        elif kind < 0x80:
            raise _corrupt(source, base + pos, f"unknown Snappy chunk type {kind:#x}")
        pos = body + length
    return bytes(out)


def decompress(data: bytes | memoryview, source: str = "<snappy>", base: int = 0) -> bytes:
    """One raw Snappy block of a framed stream (at most 64 KiB uncompressed)."""
    return bytes(_decompressed(memoryview(data), source, base))


def _decompressed(data: memoryview, source: str, base: int) -> bytearray:
    """The block's length preamble checked against a frame's limit *before* that many bytes
    are allocated, then the block decompressed into them (cramjam checks it fills them)."""
    expected, shift, pos = 0, 0, 0
    while True:
        if pos >= len(data) or shift > 28:
            raise _corrupt(source, base + pos, "bad Snappy length preamble")
        byte = data[pos]
        pos += 1
        expected |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
    if expected > MAX_CHUNK:
        raise _corrupt(source, base, f"Snappy block of {expected} bytes exceeds a frame's"
                                     f" {MAX_CHUNK}")
    out = bytearray(expected)
    try:
        written = cramjam.snappy.decompress_raw_into(data, out)
    except cramjam.DecompressionError as error:
        raise _corrupt(source, base, f"invalid Snappy block ({error})") from None
    if written != expected:
        raise _corrupt(source, base, f"Snappy block of {written} bytes, not {expected}")
    return out


def _corrupt(source: str, offset: int, what: str) -> CorruptCheckpointError:
    return CorruptCheckpointError(f"{source}: {what} at byte offset {offset}")

"""RocksDB's integer encodings (``util/coding.h``), read with every bound checked.

RocksDB writes little-endian fixed-width integers, LEB128 varints (7 bits a byte, low
groups first, the high bit saying another byte follows) and zigzag-signed varints, and
length-prefixed strings. Every reader here takes the buffer, a position and the end of
the region it may read, and returns the value with the next position, or raises
:class:`~statesource.errors.CorruptCheckpointError` naming the file and the offset: a
file is untrusted, so a length is checked against what is left before anything is sliced.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable

from statesource.errors import CorruptCheckpointError

Buffer = bytes | bytearray | memoryview | mmap.mmap
"""The bytes of a whole file: read into memory, or mapped (``mmap``) when it is local."""



class RangedFile:
    """A file read range by range where it is sliced, not whole: what a lookup, which needs a
    few blocks of a table, holds it as. ``read(offset, length)`` returns those bytes."""

    def __init__(self, size: int, read: Callable[[int, int], bytes]) -> None:
        self.size = size
        self._read = read

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, where: slice) -> bytes:
        start, stop, _ = where.indices(self.size)
        return self._read(start, stop - start) if stop > start else b""


TableData = Buffer | RangedFile
"""A table's bytes: a whole file's, or read range by range."""

MAX_VARINT32_BYTES = 5
MAX_VARINT64_BYTES = 10


def corrupt(source: str, offset: int, what: str) -> CorruptCheckpointError:
    """The one shape of every refusal here: the file, what is wrong, the byte offset."""
    return CorruptCheckpointError(f"{source}: {what} at byte offset {offset}")


class Place:
    """Where bytes being decoded came from, so that an error names the file and the offset.

    A block's bytes may have been decompressed: then an offset inside them is not one in the
    file, and the error gives both the block's file offset and the position in its contents.
    """

    __slots__ = ("source", "offset", "inside")

    def __init__(self, source: str, offset: int, inside: str | None = None) -> None:
        self.source = source
        self.offset = offset
        self.inside = inside

    def error(self, position: int, what: str) -> CorruptCheckpointError:
        """An error at ``position`` of the bytes this place holds."""
        if self.inside is None:
            return corrupt(self.source, self.offset + position, what)
        return corrupt(self.source, self.offset,
                       f"{what} (byte {position} of {self.inside})")


def varint(data: Buffer, pos: int, end: int, place: Place, what: str,
           limit_bytes: int = MAX_VARINT64_BYTES) -> tuple[int, int]:
    """The varint at ``pos`` (at most ``limit_bytes`` long, ending before ``end``)."""
    result, shift, start = 0, 0, pos
    while True:
        if pos >= end or pos - start >= limit_bytes:
            raise place.error(start, f"truncated or overlong varint ({what})")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
    if limit_bytes == MAX_VARINT32_BYTES and result > 0xFFFFFFFF:
        raise place.error(start, f"varint32 out of range ({what})")
    if result > 0xFFFFFFFFFFFFFFFF:
        raise place.error(start, f"varint64 out of range ({what})")
    return result, pos


def varint32(data: Buffer, pos: int, end: int, place: Place, what: str) -> tuple[int, int]:
    """A varint RocksDB writes as ``uint32_t`` (lengths, counts, tags)."""
    return varint(data, pos, end, place, what, MAX_VARINT32_BYTES)


def signed_varint(data: Buffer, pos: int, end: int, place: Place, what: str
                  ) -> tuple[int, int]:
    """A zigzag-encoded ``int64`` (``GetVarsignedint64``): 0, -1, 1, -2 ... as 0, 1, 2, 3 ..."""
    raw, pos = varint(data, pos, end, place, what)
    return (raw >> 1) ^ -(raw & 1), pos


def fixed32(data: Buffer, pos: int, end: int, place: Place, what: str) -> int:
    """The little-endian ``uint32`` at ``pos``."""
    if pos + 4 > end:
        raise place.error(pos, f"truncated {what}")
    return int.from_bytes(data[pos:pos + 4], "little")


def fixed64(data: Buffer, pos: int, end: int, place: Place, what: str) -> int:
    """The little-endian ``uint64`` at ``pos``."""
    if pos + 8 > end:
        raise place.error(pos, f"truncated {what}")
    return int.from_bytes(data[pos:pos + 8], "little")


def length_prefixed(data: Buffer, pos: int, end: int, place: Place, what: str
                    ) -> tuple[bytes, int]:
    """A varint32 length, then that many bytes (checked against ``end`` before slicing)."""
    length, start = varint32(data, pos, end, place, f"length of {what}")
    if start + length > end:
        raise place.error(pos, f"{what} of {length} bytes runs past the end")
    return bytes(data[start:start + length]), start + length

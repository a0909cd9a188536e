"""A bounds-checked big-endian reader over the bytes of one Flink file.

Flink writes every header and value with Java's ``DataOutputStream``: big-endian
integers, ``writeUTF`` strings (a u16 length and "modified UTF-8"), and its own
``StringValue`` encoding for ``String`` values. Files on disk are untrusted, so
every read checks the bounds first and a short or malformed read raises
:class:`~statesource.errors.CorruptCheckpointError` naming the file and the
offset, instead of an ``IndexError`` or ``struct.error`` from deep inside.
"""

from __future__ import annotations

import struct

from statesource.errors import CorruptCheckpointError

# Java's DataOutput layouts: big-endian, as Flink writes every number.
JAVA_SHORT = struct.Struct(">h")
JAVA_USHORT = struct.Struct(">H")
JAVA_INT = struct.Struct(">i")
JAVA_LONG = struct.Struct(">q")
JAVA_FLOAT = struct.Struct(">f")
JAVA_DOUBLE = struct.Struct(">d")
INT_AT = JAVA_INT.unpack_from
_LONG_AT = JAVA_LONG.unpack_from


class BinaryReader:
    """Sequential reads from ``data`` (a slice of file ``source`` starting at ``base``).

    ``base`` is only used to report absolute file offsets in errors.
    """

    __slots__ = ("data", "pos", "end", "source", "base")

    def __init__(self, data: bytes | memoryview, source: str, base: int = 0,
                 pos: int = 0, end: int | None = None) -> None:
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end
        self.source = source
        self.base = base

    def error(self, what: str, at: int | None = None) -> CorruptCheckpointError:
        offset = self.base + (self.pos if at is None else at)
        return CorruptCheckpointError(f"{self.source}: {what} at byte offset {offset}")

    def remaining(self) -> int:
        return self.end - self.pos

    def at_end(self) -> bool:
        return self.pos >= self.end

    def take(self, count: int) -> bytes:
        if count < 0 or self.pos + count > self.end:
            raise self.error(f"truncated: needs {count} bytes, {self.end - self.pos} left")
        start = self.pos
        self.pos += count
        return bytes(self.data[start:self.pos])

    def skip(self, count: int) -> None:
        if count < 0 or self.pos + count > self.end:
            raise self.error(f"truncated: needs {count} bytes, {self.end - self.pos} left")
        self.pos += count

    def _unpack(self, fmt: struct.Struct) -> int | float:
        if self.pos + fmt.size > self.end:
            raise self.error(f"truncated: needs {fmt.size} bytes, {self.end - self.pos} left")
        value = fmt.unpack_from(self.data, self.pos)[0]
        self.pos += fmt.size
        return value

    def u8(self) -> int:
        if self.pos >= self.end:
            raise self.error("truncated: needs 1 byte, 0 left")
        value = self.data[self.pos]
        self.pos += 1
        return value

    def i8(self) -> int:
        value = self.u8()
        return value - 256 if value > 127 else value

    def boolean(self) -> bool:
        return self.u8() != 0

    def i16(self) -> int:
        return int(self._unpack(JAVA_SHORT))

    def u16(self) -> int:
        return int(self._unpack(JAVA_USHORT))

    def i32(self) -> int:
        pos = self.pos
        if pos + 4 > self.end:
            raise self.error(f"truncated: needs 4 bytes, {self.end - pos} left")
        self.pos = pos + 4
        return int(INT_AT(self.data, pos)[0])

    def i64(self) -> int:
        pos = self.pos
        if pos + 8 > self.end:
            raise self.error(f"truncated: needs 8 bytes, {self.end - pos} left")
        self.pos = pos + 8
        return int(_LONG_AT(self.data, pos)[0])

    def f32(self) -> float:
        return float(self._unpack(JAVA_FLOAT))

    def f64(self) -> float:
        return float(self._unpack(JAVA_DOUBLE))

    def count(self, what: str, limit: int | None = None) -> int:
        """A non-negative int count, checked against what is left (each item >= 1 byte)."""
        at = self.pos
        value = self.i32()
        bound = self.end - self.pos if limit is None else limit
        if value < 0 or value > bound:
            raise self.error(f"invalid {what} {value}", at)
        return value

    def utf(self) -> str:
        """Java ``readUTF``: a u16 byte length, then modified UTF-8."""
        at = self.pos
        raw = self.take(self.u16())
        try:
            return decode_modified_utf8(raw)
        except ValueError:
            raise self.error("invalid modified UTF-8 string", at) from None

    def flink_string(self) -> str | None:
        """Flink's ``StringValue.readString``: varint (length + 1), then UTF-16 units as varints."""
        at = self.pos
        length = self.varint()
        if length == 0:
            return None
        length -= 1
        data, pos = self.data, self.pos
        if pos + length <= self.end:
            chunk = bytes(data[pos:pos + length])
            if chunk.isascii():
                self.pos = pos + length
                return chunk.decode("ascii")
        units = []
        for _ in range(length):
            unit = self.u8()
            if unit >= 0x80:
                unit &= 0x7F
                shift = 7
                while True:
                    following = self.u8()
                    if following < 0x80:
                        unit |= following << shift
                        break
                    unit |= (following & 0x7F) << shift
                    shift += 7
            if unit > 0xFFFF:
                raise self.error("invalid character in string", at)
            units.append(unit)
        return struct.pack(f"<{len(units)}H", *units).decode("utf-16-le", "surrogatepass")

    def varint(self) -> int:
        """Flink's 7-bit varint (low group first, high bit = more)."""
        value = 0
        shift = 0
        while True:
            byte = self.u8()
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7
            if shift > 35:
                raise self.error("invalid variable-length integer")


def decode_modified_utf8(raw: bytes) -> str:
    """Java's modified UTF-8 (NUL as ``c0 80``, supplementary characters as surrogate pairs)."""
    if raw.isascii():
        return raw.decode("ascii")
    units: list[int] = []
    i, n = 0, len(raw)
    while i < n:
        a = raw[i]
        if a < 0x80:
            units.append(a)
            i += 1
        elif a >> 5 == 0b110 and i + 1 < n:
            units.append(((a & 0x1F) << 6) | (raw[i + 1] & 0x3F))
            i += 2
        elif a >> 4 == 0b1110 and i + 2 < n:
            units.append(((a & 0x0F) << 12) | ((raw[i + 1] & 0x3F) << 6) | (raw[i + 2] & 0x3F))
            i += 3
        else:
            raise ValueError("invalid modified UTF-8")
    return struct.pack(f"<{len(units)}H", *units).decode("utf-16-le", "surrogatepass")

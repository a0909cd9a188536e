"""A big-endian writer of the bytes of one Flink file: the counterpart of :mod:`reader`.

Flink reads what Java's ``DataOutputStream`` wrote: big-endian integers and
floats, ``writeUTF`` strings (a u16 byte length, then "modified UTF-8"), and
Flink's own ``StringValue`` strings and 7-bit varints. Every value is checked
against the width it is written in, because a value that silently wrapped
would make a file Flink reads without complaint but restores wrongly; a string
too long for ``writeUTF`` (over 65535 encoded bytes) is refused, as Java
refuses it, and so is a float beyond a Java ``float``'s range. Every NaN is
written as Java's ``floatToIntBits`` and ``doubleToLongBits`` write NaN: the
one canonical NaN.
"""

from __future__ import annotations

import struct

from statesource.errors import InvalidArgumentError
from statesource.flink.binary.reader import (
    JAVA_DOUBLE,
    JAVA_FLOAT,
    JAVA_INT,
    JAVA_LONG,
    JAVA_SHORT,
    JAVA_USHORT,
)

_FLOAT_NAN = JAVA_INT.pack(0x7FC00000)
_DOUBLE_NAN = JAVA_LONG.pack(0x7FF8000000000000)
UTF_LIMIT = 0xFFFF
STRING_LIMIT = (1 << 31) - 2
"""The most UTF-16 units of a ``StringValue`` (its length plus one is a Java int)."""


def _check(value: int, low: int, high: int, what: str) -> None:
    if not low <= value <= high:
        raise InvalidArgumentError(f"{value} does not fit in a {what} ({low} .. {high})")


class BinaryWriter:
    """Appends big-endian values to a growing buffer; :meth:`getvalue` returns the bytes."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = bytearray()

    def __len__(self) -> int:
        """Bytes written so far: the offset of the next value."""
        return len(self._buffer)

    def getvalue(self) -> bytes:
        return bytes(self._buffer)

    def raw(self, data: bytes) -> None:
        """Bytes as they are (no length: the caller frames them)."""
        self._buffer += data

    def u8(self, value: int) -> None:
        _check(value, 0, 0xFF, "byte")
        self._buffer.append(value)

    def boolean(self, value: bool) -> None:
        self._buffer.append(1 if value else 0)

    def i16(self, value: int) -> None:
        _check(value, -(1 << 15), (1 << 15) - 1, "short")
        self._buffer += JAVA_SHORT.pack(value)

    def u16(self, value: int) -> None:
        _check(value, 0, 0xFFFF, "unsigned short")
        self._buffer += JAVA_USHORT.pack(value)

    def i32(self, value: int) -> None:
        _check(value, -(1 << 31), (1 << 31) - 1, "int")
        self._buffer += JAVA_INT.pack(value)

    def i64(self, value: int) -> None:
        _check(value, -(1 << 63), (1 << 63) - 1, "long")
        self._buffer += JAVA_LONG.pack(value)

    def f32(self, value: float) -> None:
        """A Java ``float`` (``value`` rounded to float32, as a Java cast rounds it)."""
        if value != value:
            self._buffer += _FLOAT_NAN
            return
        try:
            self._buffer += JAVA_FLOAT.pack(value)
        except OverflowError:
            raise InvalidArgumentError(f"{value!r} does not fit in a float") from None

    def f64(self, value: float) -> None:
        self._buffer += _DOUBLE_NAN if value != value else JAVA_DOUBLE.pack(value)

    def varint(self, value: int) -> None:
        """Flink's unsigned 7-bit varint: the low seven bits first, the high bit = more follow."""
        _check(value, 0, (1 << 63) - 1, "varint")
        while value >= 0x80:
            self._buffer.append(value & 0x7F | 0x80)
            value >>= 7
        self._buffer.append(value)

    def flink_string(self, text: str | None) -> None:
        """Flink's ``StringValue.writeString``: a varint of the UTF-16 length plus one (0 for
        null), then each UTF-16 unit as a varint (a lone surrogate as it is)."""
        if text is None:
            self._buffer.append(0)
            return
        if text.isascii():
            if len(text) > STRING_LIMIT:
                raise InvalidArgumentError(f"a string of {len(text)} characters is too long")
            self.varint(len(text) + 1)
            self._buffer += text.encode("ascii")
            return
        raw = text.encode("utf-16-be", "surrogatepass")
        if len(raw) // 2 > STRING_LIMIT:
            raise InvalidArgumentError(f"a string of {len(raw) // 2} UTF-16 units is too long")
        self.varint(len(raw) // 2 + 1)
        out = self._buffer
        for (unit,) in JAVA_USHORT.iter_unpack(raw):
            if unit < 0x80:
                out.append(unit)
            elif unit < 0x4000:
                out += bytes((unit & 0x7F | 0x80, unit >> 7))
            else:
                out += bytes((unit & 0x7F | 0x80, unit >> 7 & 0x7F | 0x80, unit >> 14))

    def length_prefixed(self, data: bytes) -> None:
        """An int length, then the bytes (a ``byte[]`` as Flink frames one)."""
        self.i32(len(data))
        self._buffer += data

    def utf(self, text: str) -> None:
        """Java ``writeUTF``: a u16 byte length, then modified UTF-8."""
        encoded = encode_modified_utf8(text)
        if len(encoded) > UTF_LIMIT:
            raise InvalidArgumentError(
                f"string of {len(encoded)} encoded bytes is too long for Java's writeUTF (at most"
                f" {UTF_LIMIT}): {text[:60]!r}...")
        self._buffer += JAVA_USHORT.pack(len(encoded))
        self._buffer += encoded


def encode_modified_utf8(text: str) -> bytes:
    """Java's modified UTF-8: UTF-16 units, NUL as ``c0 80``, no 4-byte sequences.

    A character outside the BMP is its surrogate pair, each unit three bytes;
    a lone surrogate (which :func:`binary.decode_modified_utf8` may return) is
    written back as it came.
    """
    if text.isascii() and "\0" not in text:
        return text.encode("ascii")
    raw = text.encode("utf-16-be", "surrogatepass")
    out = bytearray()
    for (unit,) in struct.iter_unpack(">H", raw):
        if 0 < unit < 0x80:
            out.append(unit)
        elif unit < 0x800:
            out += bytes((0xC0 | unit >> 6, 0x80 | unit & 0x3F))
        else:
            out += bytes((0xE0 | unit >> 12, 0x80 | unit >> 6 & 0x3F, 0x80 | unit & 0x3F))
    return bytes(out)

"""Reading Flink 1.x's Kryo 2.24 bytes of JDK values: the untrusted half of ``migrate``.

A Flink 1.x ``KryoSerializer`` value is ``writeClassAndObject`` with reference tracking on
(Flink leaves Kryo's default): a varint class (0 null, 1 a class name, else a registered
id + 2), a reference marker (1 a new object, n >= 2 the object numbered n - 2 in this value)
before every object but the boxed primitives, then the object as Kryo 2.24's default
serializer (or Chill's, for ``UUID``) writes it. Kryo 2's ``Output`` is big-endian.

The bytes come from a file statesource did not write, so every length is checked against
what is left before anything is allocated, nesting is bounded, and everything Kryo itself
never writes (a non-minimal varint, a string in another encoding than Kryo's writer picks,
a boolean byte of 2, a reference to a half-read object or to one of another class) is
refused as corrupt, naming the file and offset: what is re-encoded is exactly what Flink
1.x would have read.
"""

from __future__ import annotations

import re
import struct

from statesource.errors import IncompatibleCheckpointError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.serializers.kryo_classes import (
    BIG_DECIMAL,
    BIG_INTEGER,
    BOOLEAN,
    BYTE,
    CHARACTER,
    COLLECTIONS,
    DATE,
    DOUBLE,
    ENUMS,
    FLOAT,
    INTEGER,
    LONG,
    MAPS,
    SHORT,
    SORTED,
    STRING,
    UUID,
    WRAPPERS,
    JavaObject,
    KryoRegistry,
    unsupported,
)

MAX_DEPTH = 100
"""Deeper nesting is refused: no state of JDK collections nests so, and it bounds recursion."""
NULL, NOT_NULL, NAME = 0, 1, 1
_PENDING = object()
_ASCII = re.compile(rb"[\x00-\x7f]*[\x80-\xff]")
"""An ASCII string of Kryo's: unflagged bytes up to the one flagged last."""


def zigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def varint_size(value: int) -> int:
    """Bytes of Kryo's unsigned varint of ``value`` (>= 0)."""
    size = 1
    while value >= 0x80 and size < 9:
        value >>= 7
        size += 1
    return size


def kryo2_string(text: str) -> bytes:
    """Kryo 2.24's ``writeString`` of a non-null string (one char per UTF-16 unit)."""
    count = len(text)
    if count == 0:
        return b"\x81"
    if 1 < count < 64 and text.isascii():
        data = bytearray(text.encode("ascii"))
        data[-1] |= 0x80
        return bytes(data)
    return utf8_length(count + 1) + kryo_chars(text)


def big_integer_size(value: int) -> int:
    """Bytes of Java's minimal two's complement (``BigInteger.toByteArray``) of ``value``:
    Python's ``bit_length`` of a negative number counts one bit more than Java's
    ``bitLength`` at -2^(8k-1) (-128 is one byte, not two)."""
    return ((value if value >= 0 else ~value).bit_length() + 8) // 8


def utf8_length(value: int) -> bytes:
    """Kryo's length of a UTF-8 string: 6 bits and the 0x80 flag first, then 7 bits a byte."""
    out = bytearray([(value & 0x3F) | 0x80 | (0x40 if value >> 6 else 0)])
    value >>= 6
    while value:
        out.append((value & 0x7F) | (0x80 if value >> 7 else 0))
        value >>= 7
    return bytes(out)


def kryo_chars(text: str) -> bytes:
    """Each UTF-16 unit in one to three bytes, as both Kryos write them."""
    out = bytearray()
    for char in text:
        c = ord(char)
        if c <= 0x7F:
            out.append(c)
        elif c > 0x7FF:
            out += bytes((0xE0 | c >> 12 & 0x0F, 0x80 | c >> 6 & 0x3F, 0x80 | c & 0x3F))
        else:
            out += bytes((0xC0 | c >> 6 & 0x1F, 0x80 | c & 0x3F))
    return bytes(out)


class Kryo2Reader:
    """One Flink 1.x Kryo value's reader: ``read(r)`` once per value (names and references
    are per value, as Flink's Kryo resets after each)."""

    def __init__(self, registry: KryoRegistry, where: str) -> None:
        self.registry = registry
        self.readable = registry.readable
        self.where = where

    def read(self, r: BinaryReader) -> JavaObject | None:
        self.names: dict[int, str] = {}
        self.objects: list[object] = []
        return self._class_and_object(r, 0)

    # -- primitives -------------------------------------------------------------------------

    def _varint(self, r: BinaryReader, limit: int = 5) -> int:
        at = pos = r.pos
        data, end = r.data, r.end
        if pos < end and data[pos] < 0x80:  # one byte: most class ids, markers and sizes
            r.pos = pos + 1
            return data[pos]
        value = shift = 0
        for index in range(limit):
            if pos >= end:
                raise r.error("truncated: needs 1 byte, 0 left")
            byte = data[pos]
            pos += 1
            if index == 8:  # a varlong's ninth byte holds eight bits
                value |= byte << 56
                break
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
        else:
            raise r.error("invalid Kryo varint", at)
        r.pos = pos
        if varint_size(value) != pos - at or (limit == 5 and value >> 32):
            raise r.error("non-minimal or oversized Kryo varint", at)
        return value

    def _int(self, r: BinaryReader) -> int:
        return zigzag(self._varint(r))

    def _long(self, r: BinaryReader, positive: bool = False) -> int:
        raw = self._varint(r, 9)
        value = raw if positive else zigzag(raw)
        return value - (1 << 64) if value >= 1 << 63 else value

    def _string(self, r: BinaryReader) -> str:
        at = r.pos
        first = r.u8()
        if first & 0x80 == 0:  # ASCII, the last byte flagged
            found = _ASCII.match(r.data, at, r.end)
            if found is None:
                raise r.error("truncated Kryo string", at)
            end = found.end()
            if end - at >= 64:  # Kryo 2 writes 2 to 63 ASCII characters so, others as UTF-8
                raise r.error("a string Kryo does not write so", at)
            raw = bytearray(r.data[at:end])
            raw[-1] &= 0x7F
            r.pos = end
            return raw.decode("ascii")
        r.pos = at
        count = self._utf8_length(r)
        if count == 0:
            raise r.error("a null String after its class", at)
        count -= 1
        if count > r.remaining():
            raise r.error(f"invalid Kryo string length {count}", at)
        text = self._chars(r, count)
        if kryo2_string(text) != bytes(r.data[at:r.pos]):
            raise r.error("a string Kryo does not write so", at)
        return text

    def _utf8_length(self, r: BinaryReader) -> int:
        at = r.pos
        first = r.u8()
        value = first & 0x3F
        if first & 0x40:
            shift = 6
            for _ in range(4):
                byte = r.u8()
                value |= (byte & 0x7F) << shift
                if byte < 0x80:
                    break
                shift += 7
            else:
                raise r.error("invalid Kryo string length", at)
        return value

    def _chars(self, r: BinaryReader, count: int) -> str:
        chars = []
        for _ in range(count):
            at = r.pos
            b = r.u8()
            if b < 0x80:
                chars.append(b)
            elif b >> 5 == 0b110:
                chars.append((b & 0x1F) << 6 | self._continuation(r))
            elif b >> 4 == 0b1110:
                chars.append((b & 0x0F) << 12 | self._continuation(r) << 6 | self._continuation(r))
            else:
                raise r.error("invalid character in Kryo string", at)
        return "".join(map(chr, chars))

    def _continuation(self, r: BinaryReader) -> int:
        at = r.pos
        b = r.u8()
        if b >> 6 != 0b10:
            raise r.error("invalid character in Kryo string", at)
        return b & 0x3F

    # -- objects ----------------------------------------------------------------------------

    def _class(self, r: BinaryReader) -> str | None:
        at = r.pos
        if at < r.end and r.data[at] < 0x80:  # one byte: the common case, without a call
            tag = r.data[at]
            r.pos = at + 1
        else:
            tag = self._varint(r)
        if tag == NULL:
            return None
        if tag != NAME:
            known = self.readable.get(tag - 2)
            if known is not None:
                return known
            return self.registry.class_of(tag - 2, f"{self.where}, byte offset {r.base + at}")
        name_id = self._varint(r)
        known = self.names.get(name_id)
        if known is not None:
            return known
        if name_id != len(self.names):
            raise r.error(f"Kryo class name reference {name_id} to no name", at)
        name = self._string(r)
        self.names[name_id] = name
        return name

    def _class_and_object(self, r: BinaryReader, depth: int) -> JavaObject | None:
        at = r.pos
        java_class = self._class(r)
        if java_class is None:
            return None
        if depth > MAX_DEPTH:
            raise IncompatibleCheckpointError(
                f"{self.where}: Kryo values nested deeper than {MAX_DEPTH}")
        if java_class in WRAPPERS:
            return JavaObject(java_class, self._wrapper(r, java_class))
        marker_at = r.pos
        if marker_at < r.end and r.data[marker_at] == NOT_NULL:  # a new object: the common case
            r.pos = marker_at + 1
            marker = NOT_NULL
        else:
            marker = self._varint(r)
        if marker == NULL:
            raise r.error("a null reference after a class", marker_at)
        if marker != NOT_NULL:
            index = marker - 2
            if index >= len(self.objects):
                raise r.error(f"Kryo reference {index} to no object", marker_at)
            found = self.objects[index]
            if found is _PENDING or not isinstance(found, JavaObject):
                raise IncompatibleCheckpointError(
                    f"{self.where}, byte offset {r.base + marker_at}: a Kryo value that"
                    " contains itself, which statesource does not re-encode")
            if found.java_class != java_class:
                raise r.error(f"Kryo reference {index} to a {found.java_class}, not a"
                              f" {java_class}", marker_at)
            return found
        slot = len(self.objects)
        self.objects.append(_PENDING)
        value = self._object(r, java_class, depth, at)
        self.objects[slot] = value
        return value

    def _wrapper(self, r: BinaryReader, java_class: str) -> object:
        at = r.pos
        if java_class == INTEGER:
            return self._int(r)
        if java_class == LONG:
            return self._long(r)
        if java_class == BOOLEAN:
            flag = r.u8()
            if flag > 1:
                raise r.error(f"invalid Kryo boolean {flag}", at)
            return flag == 1
        if java_class == BYTE:
            return r.i8()
        if java_class == SHORT:
            return r.i16()
        if java_class == CHARACTER:
            return r.u16()
        if java_class == FLOAT:
            return struct.unpack(">I", r.take(4))[0]
        assert java_class == DOUBLE
        return struct.unpack(">Q", r.take(8))[0]

    def _object(self, r: BinaryReader, java_class: str, depth: int, at: int) -> JavaObject:
        if java_class == STRING:
            return JavaObject(java_class, self._string(r))
        if java_class == UUID:  # Chill's UUIDSerializer: two signed varlongs
            return JavaObject(java_class, (self._long(r), self._long(r)))
        if java_class == DATE:
            return JavaObject(java_class, self._long(r, positive=True))
        if java_class == BIG_INTEGER:
            return JavaObject(java_class, self._big_integer(r))
        if java_class == BIG_DECIMAL:
            unscaled = self._big_integer(r)
            return JavaObject(java_class, (unscaled, self._int(r)))
        if java_class in ENUMS:
            ordinal_at = r.pos
            ordinal = self._varint(r) - 1
            if not 0 <= ordinal < ENUMS[java_class]:
                raise r.error(f"{java_class} has no constant of ordinal {ordinal}", ordinal_at)
            return JavaObject(java_class, ordinal)
        if java_class in COLLECTIONS or java_class in MAPS:
            return self._container(r, java_class, depth)
        raise unsupported(java_class, f"{self.where}, byte offset {r.base + at}")

    def _big_integer(self, r: BinaryReader) -> int:
        at = r.pos
        length = self._varint(r)
        if length == 0:
            raise r.error("a null BigInteger after its class", at)
        length -= 1
        if length == 0 or length > r.remaining():
            raise r.error(f"invalid BigInteger length {length}", at)
        raw = r.take(length)
        value = int.from_bytes(raw, "big", signed=True)
        if big_integer_size(value) != length:  # toByteArray is minimal
            raise r.error("a BigInteger Kryo does not write so", at)
        return value

    def _container(self, r: BinaryReader, java_class: str, depth: int) -> JavaObject:
        value = JavaObject(java_class, [])
        if java_class in SORTED:
            at = r.pos
            if self._class_and_object(r, depth + 1) is not None:
                raise IncompatibleCheckpointError(
                    f"{self.where}, byte offset {r.base + at}: a {java_class} with a"
                    " comparator, which statesource does not re-encode")
        at = r.pos
        size = self._varint(r)
        per_item = 2 if java_class in MAPS else 1
        if size * per_item > r.remaining():
            raise r.error(f"invalid {java_class} size {size}", at)
        items = value.content
        for _ in range(size):
            item = self._class_and_object(r, depth + 1)
            items.append((item, self._class_and_object(r, depth + 1))
                         if java_class in MAPS else item)
        return value

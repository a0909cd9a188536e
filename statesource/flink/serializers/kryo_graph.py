"""Kryo 2 objects to Kryo 5 bytes without Java objects: the fast path's Kryo part.

What :mod:`~statesource.flink.serializers.kryo_transcode` compiles for a ``KryoSerializer``
value: the class and each object read from Kryo 2's bytes and written as Kryo 5's, mostly
as slices of the input (see there for what changes between the two). Anything it does not
know to be Kryo 2's own bytes raises :class:`Fallback`: the value is the exact path's.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable

from statesource.flink.serializers import kryo_classes as jdk
from statesource.flink.serializers.kryo2 import MAX_DEPTH, big_integer_size, utf8_length
from statesource.flink.serializers.kryo5 import flagged, varint

Body = Callable[[bytes, int, int, list[str]], tuple[int, bytes]]
"""A Kryo object after its class: (value, offset, depth, class names met) to the offset
after it and its Kryo 5 bytes (reference marker included, where Kryo 5 writes one)."""
ASCII = re.compile(rb"[\x00-\x7f]*[\x80-\xff]")
"""A string in Kryo's ASCII form: unflagged bytes up to the one flagged last."""
UNFLAG = bytes(b & 0x7F for b in range(256))
"""``bytes.translate`` table clearing the flag of the last byte of a string."""
ONE = [bytes((b,)) for b in range(256)]
_UUID = struct.Struct("<qq")
_UNREFERENCED = frozenset({*jdk.WRAPPERS, *jdk.ENUMS})


class Fallback(Exception):
    """This value is the exact path's to re-encode or to refuse."""


def varint_at(data: bytes, pos: int, limit: int) -> tuple[int, int]:
    """Kryo's unsigned varint of at most ``limit`` bytes (5: an int, 9: a long, whose
    ninth byte holds eight bits), as Kryo writes it (minimal), and the offset after it."""
    first = data[pos]
    if first < 0x80:
        return first, pos + 1
    last = pos + 1
    while data[last] >= 0x80 and last - pos < 8:
        last += 1
    if last - pos >= limit or data[last] == 0:
        raise Fallback
    value = 0
    for index, part in enumerate(data[pos:last + 1]):
        value |= (part & 0x7F) << 7 * index if index < 8 else part << 56
    if limit == 5 and value >> 32:
        raise Fallback
    return value, last + 1


def zigzag_long(raw: int) -> int:
    return (raw >> 1) ^ -(raw & 1)


def ascii_end(data: bytes, pos: int) -> int:
    """Where a string in Kryo's ASCII form at ``pos`` ends, as Kryo 2 writes one (2 to 63
    characters)."""
    found = ASCII.match(data, pos)
    if found is None or found.end() - pos >= 64:
        raise Fallback
    return found.end()


def ascii_string(data: bytes, pos: int) -> tuple[int, bytes]:
    """A non-null Kryo 2 string of ASCII text (else :class:`Fallback`): the offset after it
    and its characters."""
    first = data[pos]
    if first < 0x80:
        end = ascii_end(data, pos)
        return end, data[pos:end].translate(UNFLAG)
    at = pos + 1  # the UTF-8 form: a length + 1 of 6 bits, flagged, then 7 bits a byte
    if first & 0x40:
        while data[at] >= 0x80:
            at += 1
            if at - pos > 4:
                raise Fallback
        at += 1
    value = first & 0x3F | sum((byte & 0x7F) << 6 + 7 * index
                               for index, byte in enumerate(data[pos + 1:at]))
    count = value - 1
    text = data[at:at + count]
    if (count < 0 or len(text) != count or not text.isascii() or 1 < count < 64
            or utf8_length(value) != data[pos:at]):
        raise Fallback  # a null, non-ASCII text, or not as Kryo 2 writes it
    return at + count, text


class KryoGraph:
    """The transcoder of one ``KryoSerializer``'s values (its registrations)."""

    def __init__(self, registry: jdk.KryoRegistry) -> None:
        self.by_tag = {class_id + 2: name for class_id, name in registry.readable.items()}
        self.registered = frozenset(registry.ids.values())
        self.bodies: dict[str, Body] = {
            jdk.STRING: self._string, jdk.UUID: self._uuid, jdk.DATE: self._date,
            jdk.BIG_INTEGER: self._big_integer, jdk.BIG_DECIMAL: self._big_decimal,
            jdk.INTEGER: self._copied(5), jdk.LONG: self._copied(9), jdk.BOOLEAN: self.boolean,
            jdk.BYTE: self._byte, jdk.SHORT: self._reversed(2), jdk.CHARACTER: self._reversed(2),
            jdk.FLOAT: self._reversed(4), jdk.DOUBLE: self._reversed(8)}
        for name, count in jdk.ENUMS.items():
            self.bodies[name] = self._enum(count)
        for name in jdk.COLLECTIONS:
            self.bodies[name] = self._collection(name in jdk.SORTED)
        for name in jdk.MAPS:
            self.bodies[name] = self._map(name in jdk.SORTED)

    def value(self, data: bytes, pos: int) -> tuple[int, bytes | None]:
        """A whole Kryo value (``writeClassAndObject``): names are per value."""
        pos, java_class, tag, body = self.object(data, pos, 0, [])
        return pos, None if java_class is None else tag + body

    def java_class(self, data: bytes, pos: int, names: list[str]) -> tuple[int, str | None]:
        """A class (None: a null), as Kryo 2 writes it and Kryo 5 the same bytes."""
        tag = data[pos]
        if tag >= 0x80:
            tag, after = varint_at(data, pos, 5)
        else:
            after = pos + 1
        if tag == 0:
            return after, None
        if tag != 1:
            known = self.by_tag.get(tag)
            if known is None:
                raise Fallback
            return after, known
        name_id, after = varint_at(data, after, 5)
        if name_id < len(names):
            return after, names[name_id]
        if name_id != len(names) or data[after] >= 0x80:
            raise Fallback
        end, text = ascii_string(data, after)
        name = text.decode("ascii")
        if name in self.registered:  # Kryo 5 writes it by its id
            raise Fallback
        names.append(name)
        return end, name

    def object(self, data: bytes, pos: int, depth: int, names: list[str]
               ) -> tuple[int, str | None, bytes, bytes]:
        """One ``writeClassAndObject``: the offset after it, its class, the class's bytes
        and the object's (a null: None, its byte, nothing)."""
        after, java_class = self.java_class(data, pos, names)
        if java_class is None:
            return after, None, b"\x00", b""
        body = self.bodies.get(java_class)
        if body is None or depth > MAX_DEPTH:
            raise Fallback
        end, written = body(data, after, depth, names)
        return end, java_class, data[pos:after], written

    # -- objects after their class -----------------------------------------------------------

    @staticmethod
    def marker(data: bytes, pos: int) -> int:
        """A new object's reference marker (a back reference is the exact path's)."""
        if data[pos] != 1:
            raise Fallback
        return pos + 1

    def _string(self, data: bytes, pos: int, depth: int, names: list[str]) -> tuple[int, bytes]:
        start = self.marker(data, pos)
        first = data[start]
        if first < 0x80:
            end = ascii_end(data, start)
            if end - start <= 32:
                return end, data[pos:end]
            return end, (b"\x01" + flagged(True, end - start + 1)
                         + data[start:end].translate(UNFLAG))
        end, _ = ascii_string(data, start)  # Kryo's UTF-8 form: the same bytes in Kryo 5
        return end, data[pos:end]

    def _uuid(self, data: bytes, pos: int, depth: int, names: list[str]) -> tuple[int, bytes]:
        most, at = varint_at(data, self.marker(data, pos), 9)
        least, end = varint_at(data, at, 9)
        return end, b"\x01" + _UUID.pack(zigzag_long(most), zigzag_long(least))

    def _date(self, data: bytes, pos: int, depth: int, names: list[str]) -> tuple[int, bytes]:
        end = varint_at(data, self.marker(data, pos), 9)[1]
        return end, data[pos:end]

    def _big_integer(self, data: bytes, pos: int, depth: int, names: list[str]
                     ) -> tuple[int, bytes]:
        end = self._unscaled(data, self.marker(data, pos))
        return end, data[pos:end]

    def _big_decimal(self, data: bytes, pos: int, depth: int, names: list[str]
                     ) -> tuple[int, bytes]:
        end = varint_at(data, self._unscaled(data, self.marker(data, pos)), 5)[1]
        return end, data[pos:end]

    @staticmethod
    def _unscaled(data: bytes, pos: int) -> int:
        """A BigInteger's length + 1 and minimal two's complement: the offset after it."""
        length, at = varint_at(data, pos, 5)
        end = at + length - 1
        if length < 2 or end > len(data):
            raise Fallback
        if big_integer_size(int.from_bytes(data[at:end], "big", signed=True)) != length - 1:
            raise Fallback
        return end

    def _enum(self, count: int) -> Body:
        def body(data: bytes, pos: int, depth: int, names: list[str]) -> tuple[int, bytes]:
            at = self.marker(data, pos)
            ordinal, end = varint_at(data, at, 5)
            if not 1 <= ordinal <= count:
                raise Fallback
            return end, data[at:end]  # Kryo 5 writes no reference marker before an enum
        return body

    @staticmethod
    def _copied(limit: int) -> Body:
        """A varint (an Integer's, ``limit`` 5; a Long's, 9): the same bytes in Kryo 5."""
        def body(data: bytes, pos: int, depth: int, names: list[str]) -> tuple[int, bytes]:
            first = data[pos]
            if first < 0x80:
                return pos + 1, ONE[first]
            end = varint_at(data, pos, limit)[1]
            return end, data[pos:end]
        return body

    @staticmethod
    def boolean(data: bytes, pos: int, depth: int, names: list[str]) -> tuple[int, bytes]:
        flag = data[pos]
        if flag > 1:
            raise Fallback
        return pos + 1, ONE[flag]

    @staticmethod
    def _byte(data: bytes, pos: int, depth: int, names: list[str]) -> tuple[int, bytes]:
        return pos + 1, ONE[data[pos]]

    @staticmethod
    def _reversed(width: int) -> Body:
        """A fixed-size number: big-endian in Kryo 2, little-endian in Kryo 5."""
        def body(data: bytes, pos: int, depth: int, names: list[str]) -> tuple[int, bytes]:
            end = pos + width
            if end > len(data):
                raise Fallback
            return end, data[pos:end][::-1]
        return body

    def sized(self, data: bytes, pos: int, sorted_: bool, per_item: int) -> tuple[int, int]:
        """A collection's or map's marker, null comparator (sorted ones) and size, checked
        against the bytes left: the size and where the items start."""
        at = self.marker(data, pos)
        if sorted_:
            if data[at] != 0:  # a comparator
                raise Fallback
            at += 1
        size, at = varint_at(data, at, 5)
        if per_item * size > len(data) - at:
            raise Fallback
        return size, at

    def _collection(self, sorted_: bool) -> Body:
        comparator = b"\x00" if sorted_ else b""

        def body(data: bytes, pos: int, depth: int, names: list[str]) -> tuple[int, bytes]:
            size, at = self.sized(data, pos, sorted_, 1)
            if not size:
                return at, b"\x01\x01" + comparator
            items = []
            read = self.object
            for _ in range(size):
                at, java_class, tag, written = read(data, at, depth + 1, names)
                items.append((java_class, tag, written))
            classes = {item[0] for item in items}
            null = None in classes
            classes.discard(None)
            if len(classes) > 1:
                return at, b"".join([b"\x01", flagged(False, size + 1), comparator,
                                     *(tag + written for _, tag, written in items)])
            head = [b"\x01", flagged(True, size + 1), comparator]
            if not classes:
                return at, b"".join([*head, b"\x00"])
            java_class = next(iter(classes))
            tag = next(tag for element, tag, _ in items if element is not None)
            if not null:
                return at, b"".join([*head, tag, b"\x00", *(item[2] for item in items)])
            marked = java_class in _UNREFERENCED
            return at, b"".join([*head, tag, b"\x01", *(
                b"\x00" if element is None else b"\x01" + written if marked else written
                for element, _, written in items)])
        return body

    def _map(self, sorted_: bool) -> Body:
        comparator = b"\x00" if sorted_ else b""

        def body(data: bytes, pos: int, depth: int, names: list[str]) -> tuple[int, bytes]:
            size, at = self.sized(data, pos, sorted_, 2)
            out = [b"\x01", varint(size + 1), comparator]
            read = self.object
            for _ in range(2 * size):
                at, _, tag, written = read(data, at, depth + 1, names)
                out += (tag, written)
            return at, b"".join(out)
        return body

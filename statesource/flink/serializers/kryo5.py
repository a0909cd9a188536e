"""Writing JDK values as Flink 2.x's ``KryoSerializer`` writes them (Kryo 5.6).

The counterpart of :mod:`statesource.flink.serializers.kryo2`: a :class:`JavaObject` read
from Kryo 2 bytes is written as Kryo 5's ``writeClassAndObject``, with Flink 2.x's class
ids (:class:`~statesource.flink.serializers.kryo_classes.KryoRegistry`). What changed from
Kryo 2.24: fixed-size numbers are little-endian; ``UUID`` is two fixed longs (Kryo's own
serializer, not Chill's varlongs); enums have no reference marker; strings of 33 to 63
ASCII characters are written as UTF-8 strings; collections write their size + 1, flagged
when every element has one class, which is then written once before the elements; maps
write their size + 1 and sorted ones their comparator after it.
"""

from __future__ import annotations

import struct

from statesource.flink.serializers import kryo_classes as jdk
from statesource.flink.serializers.kryo2 import big_integer_size, kryo_chars, utf8_length
from statesource.flink.serializers.kryo_classes import JavaObject, KryoRegistry

_UNREFERENCED = frozenset({*jdk.WRAPPERS, *jdk.ENUMS})
"""Kryo 5 writes no reference marker before these (``MapReferenceResolver.useReferences``)."""


_ONE_BYTE = [bytes((value,)) for value in range(0x80)]


def varint(value: int) -> bytes:
    """Kryo's unsigned varint (a varlong's ninth byte holds eight bits)."""
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80 and len(out) < 8:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def signed(value: int, bits: int) -> bytes:
    """A zigzag varint (``writeInt(v, false)``, ``writeVarLong(v, false)``)."""
    return varint(((value << 1) ^ (value >> (bits - 1))) & ((1 << bits) - 1))


def kryo5_string(text: str) -> bytes:
    """Kryo 5's ``writeString`` of a non-null string."""
    count = len(text)
    if count == 0:
        return b"\x81"
    if 1 < count <= 32 and text.isascii():
        data = bytearray(text.encode("ascii"))
        data[-1] |= 0x80
        return bytes(data)
    return flagged(True, count + 1) + kryo_chars(text)


def flagged(flag: bool, value: int) -> bytes:
    """``writeVarIntFlag``: the flag in bit 8, 6 bits and a continuation bit, then varint."""
    head = utf8_length(value)
    return bytes([head[0] & 0x7F | (0x80 if flag else 0)]) + head[1:]


class Kryo5Writer:
    """One Flink 2.x ``KryoSerializer``'s writer: ``write(value)`` gives one value's bytes."""

    def __init__(self, registry: KryoRegistry) -> None:
        self.registry = registry
        self.tags = {name: varint(class_id + 2) for class_id, name in registry.ids.items()}
        """Each registered class's tag: its id + 2."""

    def write(self, value: JavaObject | None) -> bytes:
        self.out = bytearray()
        self.names: dict[str, int] = {}
        self.written: dict[int, int] = {}
        self._class_and_object(value)
        return bytes(self.out)

    def _class(self, java_class: str) -> None:
        tag = self.tags.get(java_class)
        if tag is not None:
            self.out += tag
            return
        self.out.append(1)
        name_id = self.names.get(java_class)
        if name_id is not None:
            self.out += varint(name_id)
            return
        self.names[java_class] = len(self.names)
        self.out += varint(self.names[java_class])
        data = bytearray(java_class.encode("ascii"))  # writeAscii: JDK names are ASCII
        data[-1] |= 0x80
        self.out += data

    def _reference(self, value: JavaObject) -> bool:
        """The reference marker; True when ``value`` was written before (a reference)."""
        if value.java_class in _UNREFERENCED:
            return False
        known = self.written.get(id(value))
        if known is not None:
            self.out += varint(known + 2)
            return True
        self.written[id(value)] = len(self.written)
        self.out.append(1)
        return False

    def _class_and_object(self, value: JavaObject | None) -> None:
        if value is None:
            self.out.append(0)
            return
        self._class(value.java_class)
        self._object(value)

    def _object(self, value: JavaObject) -> None:
        """``writeObject``: the reference marker, then the object's bytes."""
        if not self._reference(value):
            self._content(value)

    def _object_or_null(self, value: JavaObject | None) -> None:
        if value is None:
            self.out.append(0)
        elif value.java_class in _UNREFERENCED:
            self.out.append(1)
            self._content(value)
        else:
            self._object(value)

    def _content(self, value: JavaObject) -> None:
        java_class, content, out = value.java_class, value.content, self.out
        if java_class == jdk.STRING:
            out += kryo5_string(content)
        elif java_class == jdk.INTEGER:
            out += signed(content, 32)
        elif java_class == jdk.LONG:
            out += signed(content, 64)
        elif java_class == jdk.BOOLEAN:
            out.append(1 if content else 0)
        elif java_class == jdk.BYTE:
            out += struct.pack("<b", content)
        elif java_class == jdk.SHORT:
            out += struct.pack("<h", content)
        elif java_class == jdk.CHARACTER:
            out += struct.pack("<H", content)
        elif java_class == jdk.FLOAT:
            out += struct.pack("<I", content)
        elif java_class == jdk.DOUBLE:
            out += struct.pack("<Q", content)
        elif java_class == jdk.UUID:
            out += struct.pack("<qq", *content)
        elif java_class == jdk.DATE:
            out += varint(content)
        elif java_class == jdk.BIG_INTEGER:
            self._big_integer(content)
        elif java_class == jdk.BIG_DECIMAL:
            self._big_integer(content[0])
            out += signed(content[1], 32)
        elif java_class in jdk.ENUMS:
            out += varint(content + 1)
        elif java_class in jdk.COLLECTIONS:
            self._collection(value)
        else:
            self._map(value)

    def _big_integer(self, number: int) -> None:
        data = number.to_bytes(big_integer_size(number), "big", signed=True)
        self.out += varint(len(data) + 1) + data

    def _collection(self, value: JavaObject) -> None:
        items = value.content
        header = value.java_class in jdk.SORTED
        if not items:
            self.out.append(1)
            if header:
                self.out.append(0)  # the null comparator
            return
        classes = {item.java_class for item in items if item is not None}
        same = len(classes) <= 1
        self.out += flagged(same, len(items) + 1)
        if header:
            self.out.append(0)
        if not same:
            for item in items:
                self._class_and_object(item)
            return
        if not classes:  # every element null
            self.out.append(0)
            return
        self._class(classes.pop())
        has_null = any(item is None for item in items)
        self.out.append(1 if has_null else 0)
        for item in items:
            if has_null:
                self._object_or_null(item)
            else:
                assert item is not None
                self._object(item)

    def _map(self, value: JavaObject) -> None:
        entries = value.content
        self.out += varint(len(entries) + 1) if entries else b"\x01"
        if value.java_class in jdk.SORTED:
            self.out.append(0)  # the null comparator
        for key, item in entries:
            self._class_and_object(key)
            self._class_and_object(item)

"""Kryo 2 bytes to Flink 2.x bytes without Java objects: ``migrate``'s fast path.

The exact path (:mod:`~statesource.flink.serializers.kryo2` reads a value into
:class:`~statesource.flink.serializers.kryo_classes.JavaObject` s,
:mod:`~statesource.flink.serializers.kryo5` writes them) costs some 15 µs a value, most of a
migration's time. Yet most of Kryo 5's bytes are Kryo 2's: class tags and names (the same
ids on both sides), varints (``Integer``, ``Long``, ``Date``, an enum's ordinal),
``BigInteger`` and ``BigDecimal``, and strings of up to 32 ASCII characters or in Kryo's
UTF-8 form. What changes is small: the byte order of fixed-size numbers, ``UUID``'s two
varlongs (two fixed longs in Kryo 5), no reference marker before an enum, the header of a
collection (its class once when all elements share it), a string of 33 to 63 ASCII
characters, and a POJO's collection field (2.x's list, set or map serializer). So
:func:`transcoder` compiles, once per state, a function from a value's 1.x bytes to its
2.x bytes that copies slices of what stays and writes only what changes.

It takes only what it knows to be Kryo 2's own bytes, and gives exactly what the exact path
gives for them. Anything else raises :class:`Fallback`, and the value goes the exact path,
which re-encodes it or names the fault: a back reference, a class by name that is not one
of the handled JDK classes (or is a registered one), a non-ASCII string, a null or a
``Float``/``Double`` inside a POJO's collection field, a duplicate map key there, a
non-minimal varint, a flag byte other than 0 or 1, bytes that run past the value. So no
fault is reported from here, and nothing is accepted here that the exact path refuses.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, TypeVar

from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.serializers import kryo_classes as jdk
from statesource.flink.serializers.base import FlinkType
from statesource.flink.serializers.kryo5 import varint
from statesource.flink.serializers.kryo_graph import (
    ONE,
    UNFLAG,
    Fallback,
    KryoGraph,
    ascii_end,
    ascii_string,
    varint_at,
    zigzag_long,
)
from statesource.flink.serializers.kryo_migration import (
    FIELD_CLASSES,
    Kryo2Collection,
    Kryo2Value,
)
from statesource.flink.serializers.pojo import PojoFlinkType, java_string_order
from statesource.flink.serializers.primitives import PrimitiveType

Part = Callable[[bytes, int], tuple[int, "bytes | None"]]
"""One part of a value at an offset: the offset after it and its 2.x bytes (None: a null,
which its owner writes as its own null flag)."""
T = TypeVar("T")
LIST_DELIMITER = 0x2C
_LONG, _INT = struct.Struct(">q"), struct.Struct(">i")
_TEXT_HEADS = [b"\x00" + bytes((count,)) for count in range(0x80)]
"""A collection element's null flag and a short String's length + 1 (Flink's varint)."""
_SMALL_LONGS = [b"\x00" + _LONG.pack(zigzag_long(raw)) for raw in range(0x80)]
"""A collection element's null flag and a Long of one varint byte, as 2.x writes it."""


def _flink_varint(value: int) -> bytes:
    """Flink's 7-bit varint (``StringValue``'s length + 1)."""
    w = BinaryWriter()
    w.varint(value)
    return w.getvalue()


_ELEMENT_TAGS = {jdk.BASE_IDS[name] + 2: name for name in (
    jdk.STRING, jdk.LONG, jdk.INTEGER, jdk.SHORT, jdk.BYTE, jdk.BOOLEAN)}
"""The class tags a POJO collection field's elements are handled for here (ids Flink
registers itself: the same in every registry)."""
_STRING_TAG, _LONG_TAG = jdk.BASE_IDS[jdk.STRING] + 2, jdk.BASE_IDS[jdk.LONG] + 2


def heads(graph: KryoGraph, accepted: frozenset[str]) -> list[tuple[bytes, bool]]:
    """The bytes of each accepted class as the first class of a value (by id where
    registered, else by name, the value's first), and whether it is sorted."""
    found = []
    for name in sorted(accepted):
        tag = next((varint(t) for t, n in graph.by_tag.items() if n == name), None)
        head = tag or b"\x01\x00" + name[:-1].encode("ascii") + ONE[ord(name[-1]) | 0x80]
        found.append((head, name in jdk.SORTED))
    return found


def _collection_field(node: Kryo2Collection) -> Part:
    """A POJO's Kryo 2 ``List``, ``Set`` or ``Map`` field as 2.x's nullable list, set or map
    serializer writes it, each element as the serializer of its class (the classes met are
    recorded in ``node``, which refuses the state unless there is one per role)."""
    graph = KryoGraph(node.registry)
    tags, string_tag, long_tag = _ELEMENT_TAGS, _STRING_TAG, _LONG_TAG
    accepted = FIELD_CLASSES[node.kind]
    known_heads = heads(graph, accepted)
    is_map = node.kind == "map"
    classes = node.classes

    def element(data: bytes, pos: int) -> tuple[int, str, bytes, Any]:
        """An element's end, class, Flink bytes (its null flag first) and identity as a
        map key."""
        tag = data[pos]
        java_class = tags.get(tag)
        if java_class is None:
            raise Fallback  # a null, or a class the exact path decides on
        pos += 1
        if java_class == jdk.STRING:
            end, text = ascii_string(data, graph.marker(data, pos))
            count = len(text) + 1
            length = ONE[count] if count < 0x80 else _flink_varint(count)
            return end, java_class, b"\x00" + length + text, text
        if java_class == jdk.LONG or java_class == jdk.INTEGER:
            long = java_class == jdk.LONG
            raw, end = varint_at(data, pos, 9 if long else 5)
            number = zigzag_long(raw)
            return end, java_class, b"\x00" + (_LONG if long else _INT).pack(number), number
        if java_class == jdk.BOOLEAN:
            end, written = graph.boolean(data, pos, 0, [])
            return end, java_class, b"\x00" + written, written == b"\x01"
        width = 2 if java_class == jdk.SHORT else 1
        if pos + width > len(data):
            raise Fallback
        return pos + width, java_class, b"\x00" + data[pos:pos + width], None

    def text(data: bytes, at: int) -> int:
        """Where an element that is ASCII text of Kryo's ASCII form ends (0: another one)."""
        if data[at] != string_tag or data[at + 1] != 1 or data[at + 2] >= 0x80:
            return 0
        return ascii_end(data, at + 2)

    elements, keys, values = classes["element"], classes["key"], classes["value"]

    def listed(data: bytes, at: int, size: int, out: list[bytes]) -> int:
        for _ in range(size):
            end = text(data, at)
            if end:  # the common element, inline: its null flag, length + 1, characters
                out += (_TEXT_HEADS[end - at - 1], data[at + 2:end].translate(UNFLAG))
                elements.add(jdk.STRING)
                at = end
                continue
            at, element_class, written, _ = element(data, at)
            elements.add(element_class)
            out.append(written)
        return at

    def mapped(data: bytes, at: int, size: int, out: list[bytes]) -> int:
        seen = set()
        for _ in range(size):
            end = text(data, at)
            if end:
                key: Any = data[at + 2:end].translate(UNFLAG)
                out += (_TEXT_HEADS[end - at - 1], key)
                keys.add(jdk.STRING)
                at = end
            else:
                at, key_class, written, key = element(data, at)
                keys.add(key_class)
                out.append(written)
            if key is None or key in seen:  # a Short or Byte key, or one seen: exact path
                raise Fallback
            seen.add(key)
            if data[at] == long_tag and data[at + 1] < 0x80:  # a small Long, inline
                out.append(_SMALL_LONGS[data[at + 1]])
                values.add(jdk.LONG)
                at += 2
                continue
            at, value_class, written, _ = element(data, at)
            values.add(value_class)
            out.append(written)
        return at

    items, per_item = (mapped, 2) if is_map else (listed, 1)

    def part(data: bytes, pos: int) -> tuple[int, bytes | None]:
        for known, is_sorted in known_heads:  # the common case: the class's bytes as expected
            if data.startswith(known, pos):
                at, sorted_ = pos + len(known), is_sorted
                break
        else:
            at, java_class = graph.java_class(data, pos, [])
            if java_class is None:
                return at, None
            if java_class not in accepted:
                raise Fallback
            sorted_ = java_class in jdk.SORTED
        size, at = graph.sized(data, at, sorted_, per_item)
        out = [b"\x00", _INT.pack(size)]
        at = items(data, at, size, out)
        return at, b"".join(out)
    return part


def _flink_string(data: bytes, pos: int) -> tuple[int, bytes | None]:
    """A POJO's String field (Flink's ``StringValue``) of ASCII text with a minimal length:
    its bytes as they are (None: a null)."""
    first = data[pos]
    if first == 0:
        return pos + 1, None
    if first < 0x80:
        start, count = pos + 1, first - 1
    else:
        second = data[pos + 1]
        if not 0 < second < 0x80:
            raise Fallback
        start, count = pos + 2, (first & 0x7F | second << 7) - 1
    end = start + count
    if end > len(data) or not data[start:end].isascii():
        raise Fallback
    return end, data[pos:end]


def _fixed(width: int) -> Part:
    def part(data: bytes, pos: int) -> tuple[int, bytes | None]:
        end = pos + width
        if end > len(data):
            raise Fallback
        return end, data[pos:end]
    return part


def _boolean_field(data: bytes, pos: int) -> tuple[int, bytes | None]:
    flag = data[pos]
    if flag > 1:  # read as true, written as 1
        raise Fallback
    return pos + 1, ONE[flag]


def _floating(width: int) -> Part:
    """A Double or Float field: its bytes, unless a NaN or infinity (a NaN is written back
    as Java's canonical one)."""
    exponent = 0xF0 if width == 8 else 0x80

    def part(data: bytes, pos: int) -> tuple[int, bytes | None]:
        end = pos + width
        if end > len(data) or (data[pos] & 0x7F == 0x7F and data[pos + 1] >= exponent):
            raise Fallback
        return end, data[pos:end]
    return part


def pojo_fields(node: PojoFlinkType, field_of: Callable[[FlinkType], T | None]
                ) -> list[T] | None:
    """The parts of a POJO's fields, in the order 1.x and 2.x write them (None where the
    field names are not in the order 2.x writes them, or a field has no part)."""
    names = [name for name, _ in node.fields]
    if names != sorted(names, key=java_string_order):
        return None
    fields = [field_of(field) for _, field in node.fields]
    if any(field is None for field in fields):
        return None
    return [field for field in fields if field is not None]


def _pojo(node: PojoFlinkType) -> Part | None:
    parts = pojo_fields(node, _field)
    if parts is None:
        return None

    def part(data: bytes, pos: int) -> tuple[int, bytes | None]:
        if data[pos] != 2:  # a POJO that is not null and of the declared class
            raise Fallback
        out = [b"\x02"]
        pos += 1
        for read in parts:
            flag = data[pos]
            if flag == 1:
                out.append(b"\x01")
                pos += 1
                continue
            if flag:
                raise Fallback
            pos, written = read(data, pos + 1)
            out += (b"\x01",) if written is None else (b"\x00", written)
        return pos, b"".join(out)
    return part


def _field(field: FlinkType) -> Part | None:
    """A POJO field's part: Kryo ones transcoded, primitive ones kept as they are."""
    if isinstance(field, Kryo2Collection):
        return _collection_field(field)
    if isinstance(field, Kryo2Value):
        return KryoGraph(field.registry).value
    if isinstance(field, PrimitiveType):
        name = field.data_type().name
        if name == "string":
            return _flink_string
        if name == "boolean":
            return _boolean_field
        width = {"long": 8, "int": 4, "short": 2, "byte": 1}.get(name)
        if width is not None:
            return _fixed(width)
        if name in ("double", "float"):
            return _floating(8 if name == "double" else 4)
    return None


def transcoder(part_type: FlinkType, map_value: bool, list_elements: bool
               ) -> Callable[[bytes], bytes] | None:
    """The fast path of one state's values, whose parts ``part_type`` reads (a map state's
    value has a null flag first, a list state's elements are separated by commas): a
    value's 2.x bytes, else :class:`Fallback`. None where the shape has no fast path."""
    if isinstance(part_type, Kryo2Value):
        read: Part | None = KryoGraph(part_type.registry).value
    elif isinstance(part_type, PojoFlinkType):
        read = _pojo(part_type)
    else:
        read = None
    if read is None:
        return None
    transcode = read

    def value(data: bytes) -> bytes:
        try:
            start = 1 if map_value else 0
            pos, written = transcode(data, start)
            if written is None:
                raise Fallback
            out = [data[:start], written]
            while list_elements and pos < len(data):
                if data[pos] != LIST_DELIMITER:
                    raise Fallback
                pos, written = transcode(data, pos + 1)
                if written is None:
                    raise Fallback
                out += (b",", written)
        except IndexError:
            raise Fallback from None
        if pos != len(data):
            raise Fallback
        return b"".join(out)
    return value


MEMO_SIZE = 1 << 16
"""Values a fast path remembers the 2.x bytes of (many states hold few distinct values: a
small map, an enum, a flag); forgotten all at once when full."""


def remembering(fast: Callable[[bytes], bytes]) -> Callable[[bytes], bytes | None]:
    """``fast`` with a memory of the values it took, and None for a value it leaves to
    the exact path (a value met again is bytes met again: its 2.x bytes, and the classes
    it records, are those of its first time)."""
    memo: dict[bytes, bytes] = {}

    def transcoded(value: bytes) -> bytes | None:
        known = memo.get(value)
        if known is not None:
            return known
        try:
            written = fast(value)
        except Fallback:
            return None
        if len(memo) >= MEMO_SIZE:
            memo.clear()
        memo[value] = written
        return written
    return transcoded

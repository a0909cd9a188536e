"""Java's ``hashCode`` arithmetic for the values a Flink key can hold, bit for bit.

A key's key group is a murmur hash of its Java ``hashCode``, so every rule here
must give exactly what the JVM gives: Java's ``int`` arithmetic wraps at 32
bits, floats hash their IEEE bits, strings their UTF-16 code units. Each
function takes a value already validated against its declared type; which rule
applies to a value is decided by that type (:mod:`statesource.types`), never by
the Python value.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

_INT32_MAX = 2**31 - 1
_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF


def to_int32(value: int) -> int:
    """Wrap an arbitrary Python int into Java's signed 32-bit range."""
    value &= _MASK32
    return value - (1 << 32) if value > _INT32_MAX else value


def long_hash(value: int) -> int:
    """``Long.hashCode``: the two 32-bit halves of the two's complement bits, xor-ed."""
    bits = value & _MASK64
    return to_int32(bits ^ (bits >> 32))


def string_hash(text: str) -> int:
    """``String.hashCode``: ``31 * h + unit`` over the UTF-16 code units."""
    units = text.encode("ascii") if text.isascii() else _utf16_units(text)
    h = 0
    for unit in units:
        h = (31 * h + unit) & _MASK32
    return to_int32(h)


def _utf16_units(text: str) -> memoryview:
    """The UTF-16 code units Java would hold for ``text`` (lone surrogates kept)."""
    return memoryview(text.encode("utf-16-le", "surrogatepass")).cast("H")


def boolean_hash(value: bool) -> int:
    """``Boolean.hashCode``: two arbitrary primes chosen by the JDK."""
    return 1231 if value else 1237


def float_hash(value: float) -> int:
    """``Float.hashCode`` of a Python float rounded to float32, as a Java cast would."""
    if value != value:
        return 0x7FC00000  # floatToIntBits maps every NaN to the canonical one
    try:
        packed = struct.pack("<f", value)
    except OverflowError:
        packed = struct.pack("<f", float("inf") if value > 0 else float("-inf"))
    return struct.unpack("<i", packed)[0]


def double_hash(value: float) -> int:
    """``Double.hashCode``: ``Long.hashCode`` of the IEEE bits."""
    if value != value:
        bits = 0x7FF8000000000000  # doubleToLongBits canonicalises NaN
    else:
        bits = struct.unpack("<Q", struct.pack("<d", value))[0]
    return to_int32(bits ^ (bits >> 32))


def byte_array_hash(data: bytes | bytearray) -> int:
    """``Arrays.hashCode(byte[])``: by content, each byte taken as a signed Java byte."""
    h = 1
    for b in data:
        h = (31 * h + (b - 256 if b > 127 else b)) & _MASK32
    return to_int32(h)


def tuple_hash(field_hashes: Iterable[int]) -> int:
    """Flink ``TupleN.hashCode``: folds ``31 * h + field`` from 0; a null field counts 0."""
    h = 0
    for field in field_hashes:
        h = 31 * h + field
    return to_int32(h)


def row_element(field_hash: int | None, is_row: bool) -> int:
    """One field's share of a Flink ``Row``'s deep hash.

    A null field gives 0, a nested Row its own deep hash, and any other value
    ``31 + hashCode`` (``Arrays.deepHashCode`` of the one-element array the
    field is wrapped in).
    """
    if field_hash is None:
        return 0
    return field_hash if is_row else 31 + field_hash


def row_hash(kind_byte: int, elements: Iterable[int]) -> int:
    """Flink ``Row.hashCode``: ``31 * kind + Arrays.hashCode(elements)``.

    ``elements`` are the fields' shares from :func:`row_element`; ``kind_byte``
    is the byte value of the row's ``RowKind``.
    """
    h = 1
    for element in elements:
        h = 31 * h + element
    return to_int32(31 * kind_byte + h)


def time_window_hash(start: int, end: int) -> int:
    """Flink's ``TimeWindow.hashCode``: ``MathUtils.longToIntWithBitMixing(start + end)``."""
    mixed = (start + end) & 0xFFFFFFFFFFFFFFFF
    for multiplier in (0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53):
        mixed = ((mixed ^ (mixed >> 33)) * multiplier) & 0xFFFFFFFFFFFFFFFF
    return to_int32(mixed ^ (mixed >> 33))

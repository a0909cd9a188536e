"""Flink's serializers without parameters: the primitives, ``String``, ``byte[]``, and the
namespaces of windows (``VoidNamespace``, ``GlobalWindow``, ``TimeWindow``).

Each is a ``SimpleTypeSerializerSnapshot``: its class name and version 3, no payload. Their
values:

- ``String``: Flink's ``StringValue`` layout, a varint of the length in UTF-16 units plus
  one (0 is null), then each unit as a varint (a character beyond the BMP is its surrogate
  pair; a lone surrogate is written as it is);
- ``Long``, ``Integer``, ``Short``, ``Byte``, ``Character``: big-endian, of their width;
  ``Boolean`` one byte; ``Float`` and ``Double`` big-endian IEEE 754 with every NaN
  written as Java's ``floatToIntBits`` / ``doubleToLongBits`` canonical NaN, ``-0.0``
  kept; ``byte[]``: an int length and the bytes;
- ``VoidNamespace`` and ``GlobalWindow`` one zero byte; ``TimeWindow`` two longs.

One table (:data:`_SIMPLE`) says, per snapshot class, its statesource type, its length,
how a value reads, encodes and decodes column-wise. PyFlink's ``ByteArrayWrapper`` (the
pickled keys of its maps) reads as ``byte[]`` but is never derived from a declared type.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from statesource.errors import InvalidArgumentError, TypeMismatchError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.serializers.base import (
    REFUSED,
    FlinkSerializer,
    FlinkType,
    refusal,
    register,
)
from statesource.flink.serializers.columns import (
    Decoder,
    NotColumnar,
    Positions,
    all_ascii,
    be_ints,
    check,
    fixed_end,
    flag,
    gather,
    ranges_array,
)
from statesource.flink.serializers.encoding import (
    BYTES_LIKE,
    LONG_MAX,
    LONG_MIN,
    Encoder,
    Write,
    misfit,
    not_null,
)
from statesource.types import (
    BOOLEAN,
    BYTE,
    BYTES,
    CHAR,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    SHORT,
    STRING,
    TIMEWINDOW,
    VOID,
    DataType,
)

_BASE = "org.apache.flink.api.common.typeutils.base."
_WINDOWS = "org.apache.flink.streaming.api.windowing.windows."
_SIMPLE_VERSION = 3
BYTE_ARRAY_WRAPPER = ("org.apache.flink.streaming.api.utils.ByteArrayWrapperSerializer"
                      "$ByteArrayWrapperSerializerSnapshot")
GLOBAL_WINDOW_SNAPSHOT = _WINDOWS + "GlobalWindow$Serializer$GlobalWindowSerializerSnapshot"


class PrimitiveType(FlinkType):
    """A serializer without parameters, read: all it knows is in its entry of :data:`_SIMPLE`."""

    def __init__(self, serializer: str) -> None:
        simple = _SIMPLE[serializer]
        self.serializer = serializer
        self._type = simple.data_type
        self.length = simple.length
        # The reader itself as an instance attribute, shadowing the method below: one call
        # less per value, which is most of the cost of decoding primitives. (Nothing else of
        # the entry is kept: a type is pickled to Spark's tasks, its writers are closures.)
        self.__dict__["read"] = simple.read

    def read(self, r: BinaryReader) -> Any:  # replaced per instance in __init__
        raise NotImplementedError

    def data_type(self) -> DataType:
        return self._type

    def encoder(self) -> Encoder:
        simple = _SIMPLE[self.serializer]
        return Encoder(simple.name, simple.write)

    def column_decoder(self, arrow_type: pa.DataType) -> Decoder | None:
        make = _SIMPLE[self.serializer].column
        return None if make is None else make()

    def declared(self) -> FlinkSerializer:
        return SimpleSerializer(self.serializer)


@dataclass(frozen=True)
class SimpleSerializer(FlinkSerializer):
    """A serializer without parameters: its snapshot is its class name and version 3."""

    snapshot_class: str

    def __post_init__(self) -> None:
        if self.snapshot_class in REFUSED:
            raise TypeMismatchError(refusal(self.snapshot_class))
        if self.snapshot_class not in SIMPLE_CLASSES:
            raise InvalidArgumentError(
                f"{self.snapshot_class} is not a parameterless Flink serializer snapshot"
                f" statesource writes; known: {', '.join(sorted(SIMPLE_CLASSES))}")

    def write(self, w: BinaryWriter) -> None:
        w.utf(self.snapshot_class)
        w.i32(_SIMPLE_VERSION)


# -- reading values ---------------------------------------------------------------------------

def _read_char(r: BinaryReader) -> str:
    return chr(r.u16())


def _read_void(r: BinaryReader) -> None:
    r.u8()


def _read_window(r: BinaryReader) -> tuple[int, int]:
    return (r.i64(), r.i64())


def _read_bytes(r: BinaryReader) -> bytes:
    return r.take(r.count("byte array length"))


# -- encoding values ------------------------------------------------------------------------

def _integral(bits: int, name: str) -> Write:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    put = {8: lambda w, v: w.u8(v & 0xFF), 16: BinaryWriter.i16, 32: BinaryWriter.i32,
           64: BinaryWriter.i64}[bits]

    def write(w: BinaryWriter, value: Any) -> None:
        if type(value) is not int:
            raise not_null(value, name, "an int")
        if not low <= value <= high:
            raise misfit(value, name, f"out of range {low} .. {high}")
        put(w, value)
    return write


def _floating(put: Callable[[BinaryWriter, float], None], exact: int, name: str) -> Write:
    """Floats; also an int the type holds exactly, as statesource's value schemas accept."""
    def write(w: BinaryWriter, value: Any) -> None:
        if type(value) is not float:
            if type(value) is not int or not -exact <= value <= exact:
                raise not_null(value, name, "a float")
            value = float(value)
        try:
            put(w, value)
        except InvalidArgumentError:
            raise misfit(value, name, "too large for a Java float") from None
    return write


def _write_string(w: BinaryWriter, value: Any) -> None:
    if value is not None and type(value) is not str:
        raise misfit(value, "String", "expected a str")
    try:
        w.flink_string(value)
    except InvalidArgumentError as error:
        raise misfit(value, "String", str(error)) from None


def _write_char(w: BinaryWriter, value: Any) -> None:
    if type(value) is not str or len(value) != 1 or ord(value) > 0xFFFF:
        raise not_null(value, "Character", "a str of one UTF-16 code unit")
    w.u16(ord(value))


def _write_boolean(w: BinaryWriter, value: Any) -> None:
    if type(value) is not bool:
        raise not_null(value, "Boolean", "a bool")
    w.boolean(value)


def _write_bytes(w: BinaryWriter, value: Any) -> None:
    if not isinstance(value, BYTES_LIKE):
        raise not_null(value, "byte[]", "bytes")
    w.length_prefixed(bytes(value))


def _void(name: str) -> Write:
    def write(w: BinaryWriter, value: Any) -> None:
        if value is not None:
            raise misfit(value, name, f"the only {name} is None")
        w.u8(0)
    return write


def _write_window(w: BinaryWriter, value: Any) -> None:
    if isinstance(value, Mapping) and set(value) == {"start", "end"}:
        value = (value["start"], value["end"])
    if (not isinstance(value, tuple) or len(value) != 2
            or any(type(v) is not int or not LONG_MIN <= v <= LONG_MAX for v in value)):
        raise not_null(value, "TimeWindow", "(start, end), two longs")
    w.i64(value[0])
    w.i64(value[1])


# -- decoding values column-wise ------------------------------------------------------------

class Fixed(Decoder):
    """A big-endian number of fixed width, as an Arrow array of ``arrow_type``."""

    def __init__(self, dtype: str, arrow_type: pa.DataType,
                 convert: Callable[[np.ndarray], np.ndarray] | None = None) -> None:
        self.dtype = np.dtype(dtype)
        self.arrow_type = arrow_type
        self.convert = convert

    def decode(self, buf: np.ndarray, pos: Positions, limit: Positions
               ) -> tuple[pa.Array, Positions]:
        end = fixed_end(pos, self.dtype.itemsize, limit)
        values = be_ints(buf, pos, self.dtype)
        if self.convert is not None:
            values = self.convert(values)
        return pa.array(values, self.arrow_type), end

    def skip(self, buf: np.ndarray, pos: Positions, limit: Positions) -> Positions:
        if self.convert is not None:  # its values are checked too
            return super().skip(buf, pos, limit)
        return fixed_end(pos, self.dtype.itemsize, limit)


class Void(Decoder):
    """VoidNamespace and GlobalWindow: one byte, no value."""

    arrow_type = pa.null()

    def decode(self, buf: np.ndarray, pos: Positions, limit: Positions
               ) -> tuple[pa.Array, Positions]:
        return pa.nulls(len(pos)), self.skip(buf, pos, limit)

    def skip(self, buf: np.ndarray, pos: Positions, limit: Positions) -> Positions:
        end = fixed_end(pos, 1, limit)
        check(buf[pos] == 0)
        return end


def _varint(buf: np.ndarray, pos: Positions, limit: Positions) -> tuple[np.ndarray, Positions]:
    """Flink's 7-bit varints (low group first) at ``pos``, and the positions after them."""
    check(pos < limit)
    byte = buf[pos].astype(np.int64)
    value = byte & 0x7F
    end = pos + 1
    more = byte >= 0x80
    shift = 7
    while more.any():
        if shift > 28:
            raise NotColumnar
        at = end[more]
        check(at < limit[more])
        byte = buf[at].astype(np.int64)
        check(byte != 0)  # a trailing zero group: another encoding of a shorter varint
        value[more] |= (byte & 0x7F) << shift
        end[more] += 1
        more[more] = byte >= 0x80
        shift += 7
    return value, end


class FlinkString(Decoder):
    """Flink's ``StringValue``: varint (length + 1, 0 for null), then the UTF-16 units as
    varints; ASCII text, where each unit is its byte, is decoded here."""

    arrow_type = pa.string()

    def decode(self, buf: np.ndarray, pos: Positions, limit: Positions
               ) -> tuple[pa.Array, Positions]:
        start, lengths, present = self._text(buf, pos, limit)
        return (ranges_array(pa.string(), buf, start, lengths, present, ascii_only=True),
                start + lengths)

    def skip(self, buf: np.ndarray, pos: Positions, limit: Positions) -> Positions:
        start, lengths, _ = self._text(buf, pos, limit)
        check(all_ascii(gather(buf, start, lengths)[0]))
        return start + lengths

    @staticmethod
    def _text(buf: np.ndarray, pos: Positions, limit: Positions
              ) -> tuple[Positions, np.ndarray, np.ndarray]:
        """Where each text's bytes start, how many there are, and which are not null."""
        encoded, start = _varint(buf, pos, limit)
        present = encoded > 0
        lengths = np.where(present, encoded - 1, 0)
        check(start + lengths <= limit)
        return start, lengths, present


class Bytes(Decoder):
    """``byte[]``: an int length, then the bytes."""

    arrow_type = pa.binary()

    def decode(self, buf: np.ndarray, pos: Positions, limit: Positions
               ) -> tuple[pa.Array, Positions]:
        check(pos + 4 <= limit)
        lengths = be_ints(buf, pos, np.dtype(np.int32)).astype(np.int64)
        start = pos + 4
        end = start + lengths
        check((lengths >= 0) & (end <= limit))
        return ranges_array(pa.binary(), buf, start, lengths), end


class Char(Decoder):
    """A Java ``char`` (u16) as a one-character string; ASCII ones are decoded here."""

    arrow_type = pa.string()

    def decode(self, buf: np.ndarray, pos: Positions, limit: Positions
               ) -> tuple[pa.Array, Positions]:
        end = pos + 2
        check(end <= limit)
        units = be_ints(buf, pos, np.dtype(np.uint16))
        check(units < 0x80)
        offsets = np.arange(len(pos) + 1, dtype=np.int32)
        array = pa.Array.from_buffers(pa.string(), len(pos), [
            None, pa.py_buffer(offsets), pa.py_buffer(units.astype(np.uint8))])
        return array, end


class TimeWindow(Decoder):
    """``TimeWindow``: start and end, two longs."""

    arrow_type = pa.struct([pa.field("start", pa.int64()), pa.field("end", pa.int64())])

    def decode(self, buf: np.ndarray, pos: Positions, limit: Positions
               ) -> tuple[pa.Array, Positions]:
        end = self.skip(buf, pos, limit)
        start_values = pa.array(be_ints(buf, pos, np.dtype(np.int64)))
        end_values = pa.array(be_ints(buf, pos + 8, np.dtype(np.int64)))
        return pa.StructArray.from_arrays([start_values, end_values],
                                          fields=list(self.arrow_type)), end

    def skip(self, buf: np.ndarray, pos: Positions, limit: Positions) -> Positions:
        return fixed_end(pos, 16, limit)


# -- the serializers ------------------------------------------------------------------------

class _Simple(NamedTuple):
    """What statesource knows of one serializer without parameters."""

    data_type: DataType
    length: int
    read: Callable[[BinaryReader], Any]
    name: str
    """How errors name its values."""
    write: Write
    column: Callable[[], Decoder] | None
    """Its column decoder (None: its values are decoded one by one)."""


_SIMPLE: dict[str, _Simple] = {
    _BASE + "StringSerializer$StringSerializerSnapshot":
        _Simple(STRING, -1, BinaryReader.flink_string, "String", _write_string, FlinkString),
    _BASE + "LongSerializer$LongSerializerSnapshot":
        _Simple(LONG, 8, BinaryReader.i64, "Long", _integral(64, "Long"),
                lambda: Fixed("i8", pa.int64())),
    _BASE + "IntSerializer$IntSerializerSnapshot":
        _Simple(INT, 4, BinaryReader.i32, "Integer", _integral(32, "Integer"),
                lambda: Fixed("i4", pa.int32())),
    _BASE + "ShortSerializer$ShortSerializerSnapshot":
        _Simple(SHORT, 2, BinaryReader.i16, "Short", _integral(16, "Short"),
                lambda: Fixed("i2", pa.int16())),
    _BASE + "ByteSerializer$ByteSerializerSnapshot":
        _Simple(BYTE, 1, BinaryReader.i8, "Byte", _integral(8, "Byte"),
                lambda: Fixed("i1", pa.int8())),
    _BASE + "BooleanSerializer$BooleanSerializerSnapshot":
        _Simple(BOOLEAN, 1, BinaryReader.boolean, "Boolean", _write_boolean,
                lambda: Fixed("u1", pa.bool_(), flag)),
    _BASE + "CharSerializer$CharSerializerSnapshot":
        _Simple(CHAR, 2, _read_char, "Character", _write_char, Char),
    _BASE + "DoubleSerializer$DoubleSerializerSnapshot":
        _Simple(DOUBLE, 8, BinaryReader.f64, "Double",
                _floating(BinaryWriter.f64, 1 << 53, "Double"), lambda: Fixed("f8", pa.float64())),
    _BASE + "FloatSerializer$FloatSerializerSnapshot":
        _Simple(FLOAT, 4, BinaryReader.f32, "Float",
                _floating(BinaryWriter.f32, 1 << 24, "Float"), lambda: Fixed("f4", pa.float32())),
    _BASE + "array.BytePrimitiveArraySerializer$BytePrimitiveArraySerializerSnapshot":
        _Simple(BYTES, -1, _read_bytes, "byte[]", _write_bytes, Bytes),
    BYTE_ARRAY_WRAPPER: _Simple(BYTES, -1, _read_bytes, "byte[]", _write_bytes, Bytes),
    "org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot":
        _Simple(VOID, 1, _read_void, "VoidNamespace", _void("VoidNamespace"), Void),
    GLOBAL_WINDOW_SNAPSHOT:
        _Simple(VOID, 1, _read_void, "GlobalWindow", _void("GlobalWindow"), Void),
    _WINDOWS + "TimeWindow$Serializer$TimeWindowSerializerSnapshot":
        _Simple(TIMEWINDOW, 16, _read_window, "TimeWindow", _write_window, TimeWindow),
}
SIMPLE_CLASSES = frozenset(_SIMPLE) - {BYTE_ARRAY_WRAPPER}
"""The serializers without parameters statesource writes."""


def _read_snapshot(name: str, r: BinaryReader, version: int) -> FlinkType:
    return PrimitiveType(name)


_WRAPPER_REFUSED = ("PyFlink wraps pickled map keys in it, and no statesource type says that"
                    " bytes are a pickle")
for _snapshot_class in _SIMPLE:
    register(_snapshot_class, _read_snapshot,
             _WRAPPER_REFUSED if _snapshot_class == BYTE_ARRAY_WRAPPER else None)

SIMPLE: dict[str, SimpleSerializer] = {
    simple.data_type.name: SimpleSerializer(snapshot_class)
    for snapshot_class, simple in _SIMPLE.items()
    if snapshot_class in SIMPLE_CLASSES - {GLOBAL_WINDOW_SNAPSHOT}}
"""The serializer of each primitive statesource type (and ``void``, ``timewindow``), by name."""
LONG_SERIALIZER = SIMPLE["long"]
STRING_SERIALIZER = SIMPLE["string"]
VOID_NAMESPACE = SIMPLE["void"]
TIME_WINDOW = SIMPLE["timewindow"]
GLOBAL_WINDOW = SimpleSerializer(GLOBAL_WINDOW_SNAPSHOT)
"""The namespace serializer of windows assigned by ``GlobalWindows`` (no statesource type)."""

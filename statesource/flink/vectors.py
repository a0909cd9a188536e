"""Flink serializers decoded column-wise: one numpy pass per field over every value at once.

The canonical framing (:mod:`framing`) tells where each value starts and where
its frame ends; a :class:`Decoder` reads the value of one serializer at all
those positions together and hands back an Arrow array and the positions just
after each value. Only what is common is decoded here: String (ASCII; other
text goes back to :mod:`serializers`), the primitives and their boxed forms,
``byte[]``, VoidNamespace, TimeWindow, Nullable, Tuple and POJO. A serializer
with no decoder here, or an Arrow type other than the one the state's schema
declares, leaves its state to the per-value decoder (:func:`decoder_for`
answers None).

Decoders check every read against the end of its frame; what does not fit
raises :class:`NotColumnar`, and the key group is decoded again by the
per-value decoder, which names the fault and its offset. So this module never
reports corruption itself, and never returns data the per-value decoder would
refuse.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from statesource.flink.flink_type import FlinkType
from statesource.flink.framing import be_ints
from statesource.flink.serializers import (
    NullableType,
    PojoFlinkType,
    TupleFlinkType,
)

Positions = np.ndarray


class NotColumnar(Exception):
    """These bytes need the per-value decoder: a fault to name, or a value it alone reads."""


def check(condition: np.ndarray | bool) -> None:
    if not np.all(condition):
        raise NotColumnar


class Decoder:
    """Reads values of one serializer at many positions at once."""

    arrow_type: pa.DataType

    def decode(self, buf: np.ndarray, pos: Positions, limit: Positions
               ) -> tuple[pa.Array, Positions]:
        """The values at ``pos`` (each within ``limit``), and the positions after them."""
        raise NotImplementedError


class Fixed(Decoder):
    """A big-endian number of fixed width, as an Arrow array of ``arrow_type``."""

    def __init__(self, dtype: str, arrow_type: pa.DataType,
                 convert: Callable[[np.ndarray], np.ndarray] | None = None) -> None:
        self.dtype = np.dtype(dtype)
        self.arrow_type = arrow_type
        self.convert = convert

    def decode(self, buf: np.ndarray, pos: Positions, limit: Positions
               ) -> tuple[pa.Array, Positions]:
        end = pos + self.dtype.itemsize
        check(end <= limit)
        values = be_ints(buf, pos, self.dtype)
        if self.convert is not None:
            values = self.convert(values)
        return pa.array(values, self.arrow_type), end


class Void(Decoder):
    """VoidNamespace and GlobalWindow: one byte, no value."""

    arrow_type = pa.null()

    def decode(self, buf: np.ndarray, pos: Positions, limit: Positions
               ) -> tuple[pa.Array, Positions]:
        end = pos + 1
        check(end <= limit)
        return pa.nulls(len(pos)), end


def gather(buf: np.ndarray, starts: Positions, lengths: np.ndarray) -> tuple[np.ndarray,
                                                                             np.ndarray]:
    """The bytes of every range ``[start, start + length)`` joined, and the int32 offsets."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total >= 1 << 31:
        raise NotColumnar
    index = np.repeat(starts - offsets[:-1], lengths) + np.arange(total, dtype=np.int64)
    return buf[index], offsets.astype(np.int32)


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
        encoded, start = _varint(buf, pos, limit)
        present = encoded > 0
        lengths = np.where(present, encoded - 1, 0)
        end = start + lengths
        check(end <= limit)
        data, offsets = gather(buf, start, lengths)
        check(data.size == 0 or data.max() < 0x80)
        validity = None if present.all() else pa.py_buffer(np.packbits(present,
                                                                       bitorder="little"))
        array = pa.Array.from_buffers(pa.string(), len(pos),
                                      [validity, pa.py_buffer(offsets), pa.py_buffer(data)])
        return array, end


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
        data, offsets = gather(buf, start, lengths)
        array = pa.Array.from_buffers(pa.binary(), len(pos),
                                      [None, pa.py_buffer(offsets), pa.py_buffer(data)])
        return array, end


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


def decode_some(decoder: Decoder, buf: np.ndarray, pos: Positions, limit: Positions,
                present: np.ndarray) -> tuple[pa.Array, Positions]:
    """Values at the ``present`` positions only, nulls elsewhere (positions there kept)."""
    chosen = np.flatnonzero(present)
    values, ends = decoder.decode(buf, pos[chosen], limit[chosen])
    after = pos.copy()
    after[chosen] = ends
    if len(chosen) == len(pos):
        return values, after
    index = np.cumsum(present) - 1
    taken = values.take(pa.array(np.maximum(index, 0), mask=~present))
    return taken, after


class Nullable(Decoder):
    """``NullableSerializer``: a null flag, then the value or ``padding`` bytes."""

    def __init__(self, inner: Decoder, padding: int) -> None:
        self.inner = inner
        self.padding = padding
        self.arrow_type = inner.arrow_type

    def decode(self, buf: np.ndarray, pos: Positions, limit: Positions
               ) -> tuple[pa.Array, Positions]:
        check(pos < limit)
        present = buf[pos] == 0
        values, after = decode_some(self.inner, buf, pos + 1, limit, present)
        after[~present] += self.padding
        check(after <= limit)
        return values, after


class Struct(Decoder):
    """Fields one after another (a Tuple; a POJO's fields each behind a null flag)."""

    def __init__(self, arrow_type: pa.StructType, fields: list[Decoder], flagged: bool,
                 pojo_flags: bool) -> None:
        self.arrow_type = arrow_type
        self.fields = fields
        self.flagged = flagged
        self.pojo_flags = pojo_flags

    def decode(self, buf: np.ndarray, pos: Positions, limit: Positions
               ) -> tuple[pa.Array, Positions]:
        if self.pojo_flags:
            check(pos < limit)
            # A null POJO, or a subclass of it, is the per-value decoder's to read or refuse.
            check(buf[pos] == 2)
            pos = pos + 1
        children = []
        for field in self.fields:
            if self.flagged:
                check(pos < limit)
                values, pos = decode_some(field, buf, pos + 1, limit, buf[pos] == 0)
            else:
                values, pos = field.decode(buf, pos, limit)
            children.append(values)
        return pa.StructArray.from_arrays(children, fields=list(self.arrow_type)), pos


class TimeWindow(Decoder):
    """``TimeWindow``: start and end, two longs."""

    arrow_type = pa.struct([pa.field("start", pa.int64()), pa.field("end", pa.int64())])

    def decode(self, buf: np.ndarray, pos: Positions, limit: Positions
               ) -> tuple[pa.Array, Positions]:
        end = pos + 16
        check(end <= limit)
        start_values = pa.array(be_ints(buf, pos, np.dtype(np.int64)))
        end_values = pa.array(be_ints(buf, pos + 8, np.dtype(np.int64)))
        return pa.StructArray.from_arrays([start_values, end_values],
                                          fields=list(self.arrow_type)), end


_BASE = "org.apache.flink.api.common.typeutils.base."
_FIXED: dict[str, Callable[[], Decoder]] = {
    _BASE + "LongSerializer$LongSerializerSnapshot": lambda: Fixed("i8", pa.int64()),
    _BASE + "IntSerializer$IntSerializerSnapshot": lambda: Fixed("i4", pa.int32()),
    _BASE + "ShortSerializer$ShortSerializerSnapshot": lambda: Fixed("i2", pa.int16()),
    _BASE + "ByteSerializer$ByteSerializerSnapshot": lambda: Fixed("i1", pa.int8()),
    _BASE + "BooleanSerializer$BooleanSerializerSnapshot":
        lambda: Fixed("u1", pa.bool_(), lambda v: v != 0),
    _BASE + "DoubleSerializer$DoubleSerializerSnapshot": lambda: Fixed("f8", pa.float64()),
    _BASE + "FloatSerializer$FloatSerializerSnapshot": lambda: Fixed("f4", pa.float32()),
    _BASE + "CharSerializer$CharSerializerSnapshot": Char,
    _BASE + "StringSerializer$StringSerializerSnapshot": FlinkString,
    _BASE + "array.BytePrimitiveArraySerializer$BytePrimitiveArraySerializerSnapshot": Bytes,
    "org.apache.flink.streaming.api.utils.ByteArrayWrapperSerializer"
    "$ByteArrayWrapperSerializerSnapshot": Bytes,
    "org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot":
        Void,
    "org.apache.flink.streaming.api.windowing.windows.GlobalWindow$Serializer"
    "$GlobalWindowSerializerSnapshot": Void,
    "org.apache.flink.streaming.api.windowing.windows.TimeWindow$Serializer"
    "$TimeWindowSerializerSnapshot": TimeWindow,
}


def decoder_for(flink_type: FlinkType, arrow_type: pa.DataType) -> Decoder | None:
    """A column decoder of ``flink_type`` giving exactly ``arrow_type``, or None."""
    decoder = _decoder(flink_type, arrow_type)
    return decoder if decoder is not None and decoder.arrow_type == arrow_type else None


def _decoder(flink_type: FlinkType, arrow_type: pa.DataType) -> Decoder | None:
    make = _FIXED.get(flink_type.serializer)
    if make is not None:
        return make()
    if isinstance(flink_type, NullableType):
        inner = decoder_for(flink_type.inner, arrow_type)
        return None if inner is None else Nullable(inner, flink_type.padding)
    if isinstance(flink_type, (TupleFlinkType, PojoFlinkType)):
        if not isinstance(arrow_type, pa.StructType) or \
                arrow_type.num_fields != len(flink_type.fields):
            return None
        pojo = isinstance(flink_type, PojoFlinkType)
        if isinstance(flink_type, PojoFlinkType):
            names = [name for name, _ in flink_type.fields]
            types = [field for _, field in flink_type.fields]
        else:
            names = [f"f{i}" for i in range(len(flink_type.fields))]
            types = list(flink_type.fields)
        if names != [field.name for field in arrow_type]:
            return None
        fields = [decoder_for(t, arrow_type.field(i).type) for i, t in enumerate(types)]
        if any(f is None for f in fields):
            return None
        return Struct(arrow_type, [f for f in fields if f is not None], pojo, pojo)
    return None

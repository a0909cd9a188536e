"""Flink serializers decoded column-wise: one numpy pass per field over every value at once.

The canonical framing (:mod:`framing`) tells where each value starts and where
its frame ends; a :class:`Decoder` reads the value of one serializer at all
those positions together and hands back an Arrow array and the positions just
after each value. Only what is common is decoded here: String (ASCII; other
text goes back to :mod:`serializers`), the primitives and their boxed forms,
``byte[]``, VoidNamespace, TimeWindow, Nullable, Tuple, Row and POJO. A serializer
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
    RowFlinkType,
    TupleFlinkType,
)
from statesource.types import RowKind

Positions = np.ndarray


class NotColumnar(Exception):
    """These bytes need the per-value decoder: a fault to name, or a value it alone reads."""


def check(condition: np.ndarray | bool) -> None:
    if not (condition.all() if isinstance(condition, np.ndarray) else condition):
        raise NotColumnar


class Decoder:
    """Reads values of one serializer at many positions at once."""

    arrow_type: pa.DataType

    def decode(self, buf: np.ndarray, pos: Positions, limit: Positions
               ) -> tuple[pa.Array, Positions]:
        """The values at ``pos`` (each within ``limit``), and the positions after them."""
        raise NotImplementedError

    def skip(self, buf: np.ndarray, pos: Positions, limit: Positions) -> Positions:
        """The positions after the values at ``pos``, checked as :meth:`decode` checks them
        (where values are not framed, finding their ends is most of reading them)."""
        return self.decode(buf, pos, limit)[1]


def fixed_end(pos: Positions, width: int, limit: Positions) -> Positions:
    """The positions ``width`` bytes after ``pos``, each within its ``limit``."""
    end = pos + width
    check(end <= limit)
    return end


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


def ranges_array(arrow_type: pa.DataType, buf: np.ndarray, starts: Positions,
                 lengths: np.ndarray, present: np.ndarray | None = None,
                 ascii_only: bool = False) -> pa.Array:
    """A string or binary array of the byte ranges (null where not ``present``); with
    ``ascii_only``, text with any byte above 0x7F is not taken."""
    data, offsets = gather(buf, starts, lengths)
    check(not ascii_only or _ascii(data))
    validity = None if present is None or present.all() else \
        pa.py_buffer(np.packbits(present, bitorder="little"))
    return pa.Array.from_buffers(arrow_type, len(starts),
                                 [validity, pa.py_buffer(offsets), pa.py_buffer(data)])


def _ascii(data: np.ndarray) -> bool:
    return data.size == 0 or bool(data.max() < 0x80)


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
        check(_ascii(gather(buf, start, lengths)[0]))
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


def skip_some(decoder: Decoder, buf: np.ndarray, pos: Positions, limit: Positions,
              present: np.ndarray) -> Positions:
    """The positions after the values at the ``present`` positions (elsewhere: kept)."""
    chosen = np.flatnonzero(present)
    after = pos.copy()
    after[chosen] = decoder.skip(buf, pos[chosen], limit[chosen])
    return after


def _read(decoder: Decoder, buf: np.ndarray, pos: Positions, limit: Positions,
          present: np.ndarray | None, keep: bool) -> tuple[pa.Array | None, Positions]:
    """The values (``keep``: else None) at the ``present`` positions (None: all), and the
    positions after them: a decode, or a skip where only the ends are wanted."""
    if present is None:
        return decoder.decode(buf, pos, limit) if keep else (None,
                                                              decoder.skip(buf, pos, limit))
    if keep:
        return decode_some(decoder, buf, pos, limit, present)
    return None, skip_some(decoder, buf, pos, limit, present)


class Nullable(Decoder):
    """``NullableSerializer``: a null flag, then the value or ``padding`` bytes."""

    def __init__(self, inner: Decoder, padding: int) -> None:
        self.inner = inner
        self.padding = padding
        self.arrow_type = inner.arrow_type

    def decode(self, buf: np.ndarray, pos: Positions, limit: Positions
               ) -> tuple[pa.Array, Positions]:
        values, after = self._value(buf, pos, limit, True)
        assert values is not None
        return values, after

    def skip(self, buf: np.ndarray, pos: Positions, limit: Positions) -> Positions:
        return self._value(buf, pos, limit, False)[1]

    def _value(self, buf: np.ndarray, pos: Positions, limit: Positions, keep: bool
               ) -> tuple[pa.Array | None, Positions]:
        check(pos < limit)
        present = ~_flag(buf[pos])
        values, after = _read(self.inner, buf, pos + 1, limit, present, keep)
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
        children, pos = self._fields(buf, pos, limit, True)
        return pa.StructArray.from_arrays(children, fields=list(self.arrow_type)), pos

    def skip(self, buf: np.ndarray, pos: Positions, limit: Positions) -> Positions:
        return self._fields(buf, pos, limit, False)[1]

    def _fields(self, buf: np.ndarray, pos: Positions, limit: Positions, keep: bool
                ) -> tuple[list[pa.Array | None], Positions]:
        if self.pojo_flags:
            check(pos < limit)
            # A null POJO, or a subclass of it, is the per-value decoder's to read or refuse.
            check(buf[pos] == 2)
            pos = pos + 1
        children = []
        for field in self.fields:
            present = None
            if self.flagged:
                check(pos < limit)
                present = ~_flag(buf[pos])
                pos = pos + 1
            values, pos = _read(field, buf, pos, limit, present, keep)
            children.append(values)
        return children, pos


_ROW_KINDS = pa.array([kind.short_string for kind in sorted(RowKind, key=lambda k: k.byte_value)])


class RowDecoder(Decoder):
    """``RowSerializer``: a null mask (its first two bits the row kind, where the snapshot
    says so), then the fields that are not null; as a struct of ``row_kind`` and the fields."""

    def __init__(self, arrow_type: pa.StructType, fields: list[Decoder],
                 kind_in_mask: bool) -> None:
        self.arrow_type = arrow_type
        self.fields = fields
        self.kind_in_mask = kind_in_mask
        self.bits = len(fields) + (2 if kind_in_mask else 0)

    def decode(self, buf: np.ndarray, pos: Positions, limit: Positions
               ) -> tuple[pa.Array, Positions]:
        width = (self.bits + 7) // 8
        check(pos + width <= limit)
        mask = buf[pos[:, None] + np.arange(width)] if len(pos) else \
            np.empty((0, width), np.uint8)
        every = np.unpackbits(mask, axis=1).astype(bool)
        check(~every[:, self.bits:])  # the mask's unused bits, zero as Flink writes them
        bits = every[:, :self.bits]
        kinds = np.zeros(len(pos), dtype=np.int64)
        if self.kind_in_mask:
            kinds = bits[:, 0].astype(np.int64) | (bits[:, 1].astype(np.int64) << 1)
            bits = bits[:, 2:]
        children = [_ROW_KINDS.take(pa.array(kinds))]
        pos = pos + width
        for index, field in enumerate(self.fields):
            values, pos = decode_some(field, buf, pos, limit, ~bits[:, index])
            children.append(values)
        return pa.StructArray.from_arrays(children, fields=list(self.arrow_type)), pos


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


def _flag(values: np.ndarray) -> np.ndarray:
    """Booleans and null flags as Flink writes them, 0 or 1: any other byte reads the same
    to the per-value decoder but differs in bytes, which would tell equal map keys apart."""
    check(values <= 1)
    return values != 0


_BASE = "org.apache.flink.api.common.typeutils.base."
_FIXED: dict[str, Callable[[], Decoder]] = {
    _BASE + "LongSerializer$LongSerializerSnapshot": lambda: Fixed("i8", pa.int64()),
    _BASE + "IntSerializer$IntSerializerSnapshot": lambda: Fixed("i4", pa.int32()),
    _BASE + "ShortSerializer$ShortSerializerSnapshot": lambda: Fixed("i2", pa.int16()),
    _BASE + "ByteSerializer$ByteSerializerSnapshot": lambda: Fixed("i1", pa.int8()),
    _BASE + "BooleanSerializer$BooleanSerializerSnapshot":
        lambda: Fixed("u1", pa.bool_(), _flag),
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
    if isinstance(flink_type, RowFlinkType):
        names = ["row_kind", *(f"f{i}" for i in range(len(flink_type.fields)))]
        if not isinstance(arrow_type, pa.StructType) or \
                [field.name for field in arrow_type] != names or \
                arrow_type.field(0).type != pa.string():
            return None
        row_fields = [decoder_for(t, arrow_type.field(i + 1).type)
                      for i, t in enumerate(flink_type.fields)]
        if any(f is None for f in row_fields):
            return None
        return RowDecoder(arrow_type, [f for f in row_fields if f is not None],
                          flink_type.kind_in_mask)
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

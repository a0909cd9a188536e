"""Flink serializers decoded column-wise: what every family's column decoder shares.

The canonical framing (:mod:`~statesource.flink.layouts.framing`) tells where each value
starts and where its frame ends; a :class:`Decoder` reads the value of one serializer at
all those positions together and hands back an Arrow array and the positions just after
each value. A family offers its decoder itself (:meth:`FlinkType.column_decoder`); only
what is common has one: String (ASCII; other text goes back to the per-value decoder), the
primitives and their boxed forms, ``byte[]``, VoidNamespace, TimeWindow, Nullable, Tuple,
Row and POJO. This module holds what they share. A serializer with no column decoder, or
an Arrow type other than the one the state's schema declares, leaves its state to the
per-value decoder (:func:`decoder_for` answers None).

Decoders check every read against the end of its frame; what does not fit raises
:class:`NotColumnar`, and the key group is decoded again by the per-value decoder, which
names the fault and its offset. So no column decoder reports corruption itself, and none
returns data the per-value decoder would refuse.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import pyarrow as pa

Positions = np.ndarray


_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def be_ints(buf: np.ndarray, positions: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The big-endian numbers of ``dtype`` at ``positions`` of ``buf``, as native ones (one
    gather per byte, shifted into place: cheaper than gathering rows of bytes)."""
    width = dtype.itemsize
    unsigned = _UNSIGNED[width]
    value = buf[positions].astype(unsigned)
    for index in range(1, width):
        value <<= unsigned(8)
        value |= buf[positions + index]
    return value.view(dtype)


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
    check(not ascii_only or all_ascii(data))
    validity = None if present is None or present.all() else \
        pa.py_buffer(np.packbits(present, bitorder="little"))
    return pa.Array.from_buffers(arrow_type, len(starts),
                                 [validity, pa.py_buffer(offsets), pa.py_buffer(data)])


def all_ascii(data: np.ndarray) -> bool:
    return data.size == 0 or bool(data.max() < 0x80)


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


def read_some(decoder: Decoder, buf: np.ndarray, pos: Positions, limit: Positions,
              present: np.ndarray | None, keep: bool) -> tuple[pa.Array | None, Positions]:
    """The values (``keep``: else None) at the ``present`` positions (None: all), and the
    positions after them: a decode, or a skip where only the ends are wanted."""
    if present is None:
        return decoder.decode(buf, pos, limit) if keep else (None,
                                                              decoder.skip(buf, pos, limit))
    if keep:
        return decode_some(decoder, buf, pos, limit, present)
    return None, skip_some(decoder, buf, pos, limit, present)


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
                present = ~flag(buf[pos])
                pos = pos + 1
            values, pos = read_some(field, buf, pos, limit, present, keep)
            children.append(values)
        return children, pos


def flag(values: np.ndarray) -> np.ndarray:
    """Booleans and null flags as Flink writes them, 0 or 1: any other byte reads the same
    to the per-value decoder but differs in bytes, which would tell equal map keys apart."""
    check(values <= 1)
    return values != 0


class Columnar(Protocol):
    """What :func:`decoder_for` takes: a serializer that may have a column decoder (every
    :class:`~statesource.flink.serializers.base.FlinkType`, which builds on this module)."""

    def column_decoder(self, arrow_type: pa.DataType) -> Decoder | None: ...


def struct_decoder(arrow_type: pa.DataType, names: list[str], types: Sequence[Columnar],
                   pojo: bool) -> Decoder | None:
    """A :class:`Struct` of fields ``names`` of ``types`` giving ``arrow_type``, or None."""
    if not isinstance(arrow_type, pa.StructType) or arrow_type.num_fields != len(types):
        return None
    if names != [field.name for field in arrow_type]:
        return None
    fields = [decoder_for(t, arrow_type.field(i).type) for i, t in enumerate(types)]
    if any(f is None for f in fields):
        return None
    return Struct(arrow_type, [f for f in fields if f is not None], pojo, pojo)


def decoder_for(flink_type: Columnar, arrow_type: pa.DataType) -> Decoder | None:
    """A column decoder of ``flink_type`` giving exactly ``arrow_type``, or None."""
    decoder = flink_type.column_decoder(arrow_type)
    return decoder if decoder is not None and decoder.arrow_type == arrow_type else None

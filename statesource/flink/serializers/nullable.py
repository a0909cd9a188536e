"""Flink's ``NullableSerializer``: a null flag before a value whose serializer takes no nulls.

Its snapshot is a composite of outer version 2 whose outer payload is the padding (an int:
the bytes a null takes after its flag, so that a fixed-length serializer stays fixed), nesting
the wrapped serializer. A value is a null flag, then the value, or for a null ``padding``
zero bytes.

Flink 2.x wraps the lists and maps its type extraction finds (POJO fields, ``TypeHint``s),
and their elements, map keys and the like, in it. Its Avro type is the wrapped one: where a
value may be null, the enclosing record, list or map says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from statesource.errors import InvalidArgumentError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.serializers.base import (
    FlinkSerializer,
    FlinkType,
    check_serializer,
    composite,
    register,
    write_composite,
)
from statesource.flink.serializers.columns import (
    Decoder,
    Positions,
    check,
    decoder_for,
    flag,
    read_some,
)
from statesource.flink.serializers.encoding import NULL_FLAG, PRESENT_FLAG, Encoder, encoder_of


@dataclass(frozen=True)
class NullableSerializer(FlinkSerializer):
    """Flink's ``NullableSerializer``: a null flag before the value (``padding`` bytes after a
    null keep a fixed length; Flink's type extraction pads nothing).

    Flink 2.x's type extraction (a POJO's fields, ``TypeHint``) makes a ``List<T>``
    ``Nullable(List(Nullable(T)))``, a ``Map<K, V>`` ``Nullable(Map(Nullable(K), V))`` and a
    ``Set<T>`` ``Nullable(Set(T))``: see
    :func:`~statesource.flink.serializers.mapping.extracted_list` and the like.
    """

    inner: FlinkSerializer
    padding: int = 0
    snapshot_class = ("org.apache.flink.api.java.typeutils.runtime.NullableSerializer"
                      "$NullableSerializerSnapshot")

    def __post_init__(self) -> None:
        check_serializer(self.inner, "a nullable value")
        if isinstance(self.inner, NullableSerializer):
            raise InvalidArgumentError("a nullable serializer is not wrapped twice (Flink does"
                                       " not)")
        if type(self.padding) is not int or not 0 <= self.padding <= 0x7FFFFFFF:
            raise InvalidArgumentError(f"null padding {self.padding!r} is not a byte count")

    def write(self, w: BinaryWriter) -> None:
        write_composite(w, self.snapshot_class, 2, [self.inner],
                        lambda out: out.i32(self.padding))


def nullable(serializer: FlinkSerializer) -> FlinkSerializer:
    """``serializer`` wrapped as Flink's ``NullableSerializer.wrap`` does (never twice)."""
    return serializer if isinstance(serializer, NullableSerializer) else NullableSerializer(
        serializer)


class NullableType(FlinkType):
    """``NullableSerializer``: a null flag, then the value (or, for a null, the padding)."""

    def __init__(self, serializer: str, inner: FlinkType, padding: int) -> None:
        self.serializer = serializer
        self.inner = inner
        self.padding = padding

    def read(self, r: BinaryReader) -> Any:
        if r.boolean():
            r.take(self.padding)
            return None
        return self.inner.read(r)

    def read_whole(self, r: BinaryReader) -> Any:
        if r.boolean():
            r.take(self.padding)
            return None
        return self.inner.read_whole(r)

    def avro(self) -> Any:
        return self.inner.avro()

    def to_value(self, value: Any) -> Any:
        return None if value is None else self.inner.to_value(value)

    def describe(self) -> str:
        return f"nullable {self.inner.describe()}"

    def encoder(self) -> Encoder:
        """A null flag, then the value; a null is followed by ``padding`` zero bytes (Flink
        pads a null of a fixed-length serializer to its length)."""
        inner = encoder_of(self.inner)
        padding = bytes(self.padding)
        write_inner = inner.write

        def write(w: BinaryWriter, value: Any) -> None:
            if value is None:
                w.u8(NULL_FLAG)
                w.raw(padding)
                return
            w.u8(PRESENT_FLAG)
            write_inner(w, value)
        return Encoder(inner.name, write)

    def column_decoder(self, arrow_type: pa.DataType) -> Decoder | None:
        inner = decoder_for(self.inner, arrow_type)
        return None if inner is None else Nullable(inner, self.padding)

    def declared(self) -> FlinkSerializer:
        return NullableSerializer(self.inner.declared(), self.padding)


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
        present = ~flag(buf[pos])
        values, after = read_some(self.inner, buf, pos + 1, limit, present, keep)
        after[~present] += self.padding
        check(after <= limit)
        return values, after


def _padding(r: BinaryReader, version: int) -> int:
    """The bytes a null takes after its flag (to keep a fixed length)."""
    padding = r.i32()
    if padding < 0:
        raise r.error(f"negative null padding {padding}", r.pos - 4)
    return padding


register(NullableSerializer.snapshot_class,
         composite(lambda n, x, s: NullableType(n, s[0], x), _padding, arity=1))

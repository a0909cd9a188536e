"""Flink's ``TupleSerializer``: ``Tuple1`` .. ``Tuple25`` (or a subclass of one).

Its snapshot is a composite of outer version 2 whose outer payload is the tuple class,
nesting the fields' serializers. A value is its fields in order, none null (Flink tuples
hold no nulls). statesource types it as a ``tuple<...>`` key type, as an Avro record of
fields ``f0``, ``f1``, ... for values, and decodes it column-wise as a struct.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from statesource.errors import InvalidArgumentError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.serializers.base import (
    FlinkSerializer,
    FlinkType,
    check_serializer,
    composite,
    record_schema,
    register,
    write_composite,
)
from statesource.flink.serializers.columns import Decoder, struct_decoder
from statesource.flink.serializers.encoding import (
    Encoder,
    encoder_of,
    fields_of,
    misfit,
    write_part,
)
from statesource.types import DataType, TupleType

MAX_TUPLE_ARITY = 25
"""Flink's largest tuple class, ``Tuple25``."""


@dataclass(frozen=True)
class TupleSerializer(FlinkSerializer):
    """Flink's ``TupleSerializer`` of ``Tuple1`` .. ``Tuple25`` (or a subclass, ``tuple_class``)."""

    fields: tuple[FlinkSerializer, ...]
    tuple_class: str | None = None
    snapshot_class = "org.apache.flink.api.java.typeutils.runtime.TupleSerializerSnapshot"

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))
        if not 1 <= len(self.fields) <= MAX_TUPLE_ARITY:
            raise InvalidArgumentError(
                f"a Flink tuple has 1 to {MAX_TUPLE_ARITY} fields, not {len(self.fields)}")
        for i, serializer in enumerate(self.fields):
            check_serializer(serializer, f"tuple field f{i}")

    @property
    def java_class(self) -> str:
        return self.tuple_class or f"org.apache.flink.api.java.tuple.Tuple{len(self.fields)}"

    def write(self, w: BinaryWriter) -> None:
        write_composite(w, self.snapshot_class, 2, self.fields,
                        lambda out: out.utf(self.java_class))


class TupleFlinkType(FlinkType):
    """``TupleSerializer``: the fields in order (Flink tuples hold no nulls)."""

    def __init__(self, serializer: str, tuple_class: str, fields: list[FlinkType]) -> None:
        self.serializer = serializer
        self.tuple_class = tuple_class
        self.fields = fields
        lengths = [f.length for f in fields]
        self.length = -1 if -1 in lengths else sum(lengths)

    def read(self, r: BinaryReader) -> tuple[Any, ...]:
        return tuple(f.read(r) for f in self.fields)

    def data_type(self) -> DataType:
        return TupleType(tuple(f.data_type() for f in self.fields))

    def avro(self) -> Any:
        return record_schema(f"Tuple{len(self.fields)}", [(f"f{i}", f) for i, f in
                                                          enumerate(self.fields)])

    def to_value(self, value: Any) -> Any:
        return {f"f{i}": None if v is None else f.to_value(v)
                for i, (f, v) in enumerate(zip(self.fields, value))}

    def encoder(self) -> Encoder:
        fields = [encoder_of(f) for f in self.fields]
        name = f"Tuple{len(fields)}<{', '.join(f.name for f in fields)}>"
        writes = [f.write for f in fields]

        def write(w: BinaryWriter, value: Any) -> None:
            for index, (write_field, field) in enumerate(
                    zip(writes, fields_of(value, len(writes), name))):
                if field is None:
                    raise misfit(value, name,
                                 f"field f{index} is null: Flink tuples hold no nulls")
                write_part(w, write_field, field, "field f{} of {}", index, name)
        return Encoder(name, write)

    def column_decoder(self, arrow_type: pa.DataType) -> Decoder | None:
        return struct_decoder(arrow_type, [f"f{i}" for i in range(len(self.fields))],
                              list(self.fields), pojo=False)

    def declared(self) -> FlinkSerializer:
        fields = tuple(f.declared() for f in self.fields)
        default = TupleSerializer(fields)
        return default if self.tuple_class == default.java_class else TupleSerializer(
            fields, self.tuple_class)


def _tuple_class(r: BinaryReader, version: int) -> str:
    return r.utf()


register(TupleSerializer.snapshot_class,
         composite(lambda n, x, s: TupleFlinkType(n, x, s), _tuple_class))

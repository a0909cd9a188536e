"""Flink's ``RowSerializer`` (``Types.ROW``): rows of fields, each may be null, with a kind.

Its snapshot is a composite nesting the fields' serializers (field names are not in it);
the outer version says whether rows carry their ``RowKind``: version 4 writes a boolean
(``supportsRowKind``), version 3 (Flink 1.11 to 1.13) always had the row kind and writes
nothing, older versions never had it. Flink 2.x writes version 4, and every ``RowTypeInfo``
serializer carries the kind.

A row is a null mask (the row kind in its first two bits, low bit first, where the
serializer carries it; then a bit per field), then the fields that are not null.
statesource types it as a ``row<...>`` key type, or for values as an Avro record of
``row_kind`` and fields ``f0``, ``f1``, ...; column-wise, a struct of the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from statesource.errors import IncompatibleCheckpointError
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
from statesource.flink.serializers.columns import (
    Decoder,
    Positions,
    check,
    decode_some,
    decoder_for,
)
from statesource.flink.serializers.encoding import (
    Encoder,
    encoder_of,
    fields_of,
    misfit,
    write_part,
)
from statesource.types import DataType, Row, RowKind, RowType

_ROW_KINDS = {kind.byte_value: kind for kind in RowKind}
_BY_KIND_NAME = {kind.short_string: kind for kind in RowKind}
_KIND_NAMES = pa.array([kind.short_string
                        for kind in sorted(RowKind, key=lambda k: k.byte_value)])


@dataclass(frozen=True)
class RowSerializer(FlinkSerializer):
    """Flink's ``RowSerializer``: field serializers only (field names are not in the snapshot).

    ``row_kind`` is Flink's ``supportsRowKind``: rows carry their ``RowKind`` in the
    null mask, as every ``RowTypeInfo`` serializer of Flink 2.x does.
    """

    fields: tuple[FlinkSerializer, ...]
    row_kind: bool = True
    snapshot_class = ("org.apache.flink.api.java.typeutils.runtime.RowSerializer"
                      "$RowSerializerSnapshot")

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))
        for i, serializer in enumerate(self.fields):
            check_serializer(serializer, f"row field f{i}")

    def write(self, w: BinaryWriter) -> None:
        write_composite(w, self.snapshot_class, 4, self.fields,
                        lambda out: out.boolean(self.row_kind))


class RowFlinkType(FlinkType):
    """``RowSerializer``: a null mask (with the row kind in its first two bits), then fields."""

    def __init__(self, serializer: str, fields: list[FlinkType], kind_in_mask: bool) -> None:
        self.serializer = serializer
        self.fields = fields
        self.kind_in_mask = kind_in_mask
        self._bits = len(fields) + (2 if kind_in_mask else 0)

    def read(self, r: BinaryReader) -> Row:
        mask = r.take((self._bits + 7) // 8)
        bits = [(mask[i // 8] >> (7 - i % 8)) & 1 for i in range(self._bits)]
        kind = RowKind.INSERT
        if self.kind_in_mask:
            kind = _ROW_KINDS[bits[0] | (bits[1] << 1)]
            bits = bits[2:]
        values = [None if null else f.read(r) for f, null in zip(self.fields, bits)]
        return Row(*values, kind=kind)

    def data_type(self) -> DataType:
        return RowType(tuple(f.data_type() for f in self.fields))

    def avro(self) -> Any:
        return self.data_type().to_avro() if self._keyable() else record_schema(
            "Row", [(f"f{i}", f) for i, f in enumerate(self.fields)], row_kind=True)

    def _keyable(self) -> bool:
        try:
            self.data_type()
        except IncompatibleCheckpointError:
            return False
        return True

    def to_value(self, value: Any) -> Any:
        fields = {f"f{i}": None if v is None else f.to_value(v)
                  for i, (f, v) in enumerate(zip(self.fields, value.fields))}
        return {"row_kind": value.kind.short_string, **fields}

    def encoder(self) -> Encoder:
        fields = [encoder_of(f) for f in self.fields]
        name = f"Row<{', '.join(f.name for f in fields)}>"
        writes = [f.write for f in fields]
        with_kind = self.kind_in_mask
        bits = len(fields) + (2 if with_kind else 0)
        mask_bytes = (bits + 7) // 8

        def write(w: BinaryWriter, value: Any) -> None:
            kind = _row_kind(value, name)
            values = fields_of(value.fields if isinstance(value, Row) else value, len(writes),
                               name, ("row_kind",))
            if not with_kind and kind is not RowKind.INSERT:
                raise misfit(value, name, "this serializer (legacy mode) has no row kind: only"
                                          " INSERT rows")
            # the first bit is the kind's low bit, the second its high bit
            mask = (kind.byte_value & 1) << 1 | kind.byte_value >> 1 if with_kind else 0
            for field in values:
                mask = mask << 1 | (field is None)
            w.raw((mask << (mask_bytes * 8 - bits)).to_bytes(mask_bytes, "big"))
            for index, (write_field, field) in enumerate(zip(writes, values)):
                if field is not None:
                    write_part(w, write_field, field, "field f{} of {}", index, name)
        return Encoder(name, write)

    def column_decoder(self, arrow_type: pa.DataType) -> Decoder | None:
        names = ["row_kind", *(f"f{i}" for i in range(len(self.fields)))]
        if not isinstance(arrow_type, pa.StructType) or \
                [field.name for field in arrow_type] != names or \
                arrow_type.field(0).type != pa.string():
            return None
        row_fields = [decoder_for(t, arrow_type.field(i + 1).type)
                      for i, t in enumerate(self.fields)]
        if any(f is None for f in row_fields):
            return None
        return RowDecoder(arrow_type, [f for f in row_fields if f is not None],
                          self.kind_in_mask)

    def declared(self) -> FlinkSerializer:
        return RowSerializer(tuple(f.declared() for f in self.fields), self.kind_in_mask)


def _row_kind(value: Any, name: str) -> RowKind:
    if isinstance(value, Row):
        return value.kind
    if isinstance(value, Mapping) and "row_kind" in value:
        kind = value["row_kind"]
        found = _BY_KIND_NAME.get(kind) if isinstance(kind, str) else kind
        if not isinstance(found, RowKind):
            raise misfit(value, name, f"unknown row kind {kind!r}; expected one of"
                                      f" {', '.join(_BY_KIND_NAME)}")
        return found
    return RowKind.INSERT


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
        children = [_KIND_NAMES.take(pa.array(kinds))]
        pos = pos + width
        for index, field in enumerate(self.fields):
            values, pos = decode_some(field, buf, pos, limit, ~bits[:, index])
            children.append(values)
        return pa.StructArray.from_arrays(children, fields=list(self.arrow_type)), pos


def _supports_row_kind(r: BinaryReader, version: int) -> bool:
    """Whether rows carry their kind in the null mask (``supportsRowKind``).

    Outer version 4 writes the flag; version 3 (Flink 1.11 to 1.13) always had the row
    kind and writes nothing; older versions never had it.
    """
    if version >= 4:
        return r.boolean()
    return version == 3


register(RowSerializer.snapshot_class,
         composite(lambda n, x, s: RowFlinkType(n, s, x), _supports_row_kind))

"""The key type of Flink SQL operators: a row of SQL fields, hashed as ``BinaryRowData``.

A SQL operator keys its state by a ``BinaryRowData`` of the grouping, join or partition
columns. Its Java ``hashCode`` is the murmur hash of the row's bytes
(:func:`~statesource.types.binary_row.binary_row_hash`), not a fold of its fields' hashes as a
Flink ``Row`` has: so :class:`SqlRowType` hashes a key by writing its bytes as Flink does
(:func:`~statesource.types.binary_row.encode_row`), and key groups, point lookups and
subtasks of SQL keys come out as Flink's.

A key is a :class:`~statesource.types.Row` of its field values (a tuple, or a dict by field
name, is taken too), and a struct of fields ``f0``, ``f1``, ... in Arrow: the snapshot does not
name the key's columns. Keys carry no row kind: Flink's key projections write every key as
an insert.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from statesource.errors import IncompatibleCheckpointError
from statesource.types.binary_row import binary_row_hash, encode_row, row_values
from statesource.types.composites import Row
from statesource.types.datatype import DataType
from statesource.types.java_hash import to_int32
from statesource.types.sql import SqlType, record_avro


class SqlRowType(DataType):
    """A SQL operator's key: a row of ``fields`` (SQL types), named ``f0`` .. ``fN-1``."""

    def __init__(self, fields: tuple[SqlType, ...]) -> None:
        if not fields:  # Flink's EmptyRowDataKeySelector: its operator fails alone
            raise IncompatibleCheckpointError(
                "a Flink SQL key row without fields (the single key of an aggregation without"
                " GROUP BY, or of another query with no key) is not read by statesource")
        for field in fields:
            field.check_supported()
        self.fields = tuple(fields)
        self.names = [f"f{i}" for i in range(len(fields))]
        self.name = "sqlrow<" + ", ".join(f.describe() for f in fields) + ">"

    def __reduce__(self) -> tuple[Any, tuple[tuple[SqlType, ...]]]:
        return SqlRowType, (self.fields,)

    def encode(self, value: Any) -> bytes:
        """The key's ``BinaryRowData`` bytes, as Flink's key projection writes them."""
        return encode_row(self.fields, row_values(value, self.names))

    def java_hash(self, value: Any) -> int:
        return to_int32(binary_row_hash(self.encode(value)))

    @property
    def arrow_type(self) -> pa.DataType:
        return pa.struct([pa.field(name, field.arrow_type)
                          for name, field in zip(self.names, self.fields)])

    def to_avro(self) -> Any:
        return record_avro("SqlKey", self.names, list(self.fields))

    def to_arrow(self, values: list[Any]) -> pa.Array:
        return pa.array([None if v is None else dict(zip(self.names, row_values(v, self.names)))
                         for v in values], type=self.arrow_type)

    def from_arrow(self, column: pa.Array | pa.ChunkedArray) -> list[Any]:
        return [None if v is None else Row(*(v[name] for name in self.names))
                for v in column.to_pylist()]

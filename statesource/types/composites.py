"""Flink's composite key types, ``tuple<...>`` and ``row<...>``, and the ``Row`` value.

A composite type hashes as Flink's ``TupleN`` or ``Row`` does (folding its
fields' hashes, see :mod:`~statesource.types.java_hash`), maps to an Arrow struct
of fields ``f0``..``fN-1`` (a Row adds its ``row_kind`` first) and to an Avro
record, and converts nested tuples and Rows to and from Arrow.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from statesource.errors import InvalidArgumentError, TypeMismatchError
from statesource.types.datatype import DataType
from statesource.types.java_hash import row_element, row_hash, tuple_hash


class RowKind(enum.Enum):
    """Flink's ``RowKind``: its byte value is part of a Row's hashCode."""

    INSERT = ("+I", 0)
    UPDATE_BEFORE = ("-U", 1)
    UPDATE_AFTER = ("+U", 2)
    DELETE = ("-D", 3)

    def __init__(self, short_string: str, byte_value: int) -> None:
        self.short_string = short_string
        self.byte_value = byte_value

    @classmethod
    def from_short_string(cls, text: str) -> RowKind:
        for kind in cls:
            if kind.short_string == text:
                return kind
        raise InvalidArgumentError(
            f"unknown row kind {text!r}; expected one of {[k.short_string for k in cls]}"
        )


@dataclass(frozen=True)
class Row:
    """A Flink ``Row`` key value: positional fields plus a row kind.

    A plain tuple given where a ``row<...>`` is declared is read as an INSERT row.
    """

    fields: tuple[Any, ...]
    kind: RowKind = RowKind.INSERT

    def __init__(self, *fields: Any, kind: RowKind = RowKind.INSERT) -> None:
        object.__setattr__(self, "fields", tuple(fields))
        object.__setattr__(self, "kind", kind)

    def __repr__(self) -> str:
        return f"Row({', '.join(map(repr, self.fields))}, kind={self.kind.short_string})"


class _CompositeType(DataType):
    """Shared shape of Tuple and Row: an ordered list of field types named f0..fN-1."""

    _keyword: str

    def __init__(self, fields: tuple[DataType, ...]) -> None:
        if not fields:
            raise InvalidArgumentError(f"a {self._keyword} needs at least one field type")
        self.fields = fields
        self.name = f"{self._keyword}<{','.join(f.name for f in fields)}>"

    def _field_values(self, value: Any) -> tuple[Any, ...]:
        if not isinstance(value, tuple) or len(value) != len(self.fields):
            raise self._mismatch(value, f"expected a tuple of {len(self.fields)} fields")
        return value

    def _plain(self, value: Any) -> Any:
        """``value`` as nested tuples in the struct's field order, for pyarrow."""
        raise NotImplementedError

    def _typed(self, fields: dict[str, Any]) -> Any:
        """The inverse of :meth:`_plain`, from the dict pyarrow returns."""
        raise NotImplementedError

    def to_arrow(self, values: list[Any]) -> pa.Array:
        return pa.array([None if v is None else self._plain(v) for v in values],
                        type=self.arrow_type)

    def from_arrow(self, column: pa.Array | pa.ChunkedArray) -> list[Any]:
        return [None if v is None else self._typed(v) for v in column.to_pylist()]

    def _plain_fields(self, fields: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(
            f if f is None or not isinstance(t, _CompositeType) else t._plain(f)
            for t, f in zip(self.fields, fields)
        )

    def _typed_fields(self, fields: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(
            fields[f"f{i}"] if fields[f"f{i}"] is None or not isinstance(t, _CompositeType)
            else t._typed(fields[f"f{i}"])
            for i, t in enumerate(self.fields)
        )

    def _field_struct(self) -> list[pa.Field]:
        return [pa.field(f"f{i}", t.arrow_type) for i, t in enumerate(self.fields)]

    @property
    def _record_name(self) -> str:
        """The name of the top-level Avro record (``Tuple2``, ``Row``)."""
        raise NotImplementedError

    def to_avro(self) -> Any:
        return self._avro_record(self._record_name)

    def _avro_record(self, record_name: str) -> dict[str, Any]:
        """A record named by its path (``Tuple2_f0``...): Avro forbids defining a name twice."""
        fields = []
        for i, t in enumerate(self.fields):
            field_type = (t._avro_record(f"{record_name}_f{i}") if isinstance(t, _CompositeType)
                          else t.to_avro())
            fields.append({"name": f"f{i}", "type": ["null", field_type]})
        if isinstance(self, RowType):
            fields.insert(0, {"name": "row_kind", "type": "string", "default": "+I"})
        return {"type": "record", "name": record_name, "fields": fields}


class TupleType(_CompositeType):
    """Flink ``TupleN``: hashCode folds ``31 * h + h(field)``, a null field counting 0."""

    _keyword = "tuple"

    def __init__(self, fields: tuple[DataType, ...]) -> None:
        for field in fields:
            if not field.usable_as_key:
                raise TypeMismatchError(
                    f"tuple field type {field.name} hashes by identity in Java and cannot be"
                    " part of a key; use a row<...> for byte[] fields"
                )
        super().__init__(fields)

    def java_hash(self, value: Any) -> int:
        return tuple_hash(
            0 if field is None else field_type.java_hash(field)
            for field_type, field in zip(self.fields, self._field_values(value))
        )

    @property
    def arrow_type(self) -> pa.DataType:
        return pa.struct(self._field_struct())

    def _plain(self, value: Any) -> Any:
        return self._plain_fields(value)

    def _typed(self, fields: dict[str, Any]) -> Any:
        return self._typed_fields(fields)

    @property
    def _record_name(self) -> str:
        return f"Tuple{len(self.fields)}"


class RowType(_CompositeType):
    """Flink ``Row``: ``31 * kind + Arrays.hashCode(deep field hashes)``.

    Each non-null field contributes ``31 + h`` (``Arrays.deepHashCode`` of a
    one-element array), a nested Row its own deep hash, and a null field 0.
    """

    _keyword = "row"

    def java_hash(self, value: Any) -> int:
        if isinstance(value, Row):
            kind, fields = value.kind, value.fields
        else:
            kind, fields = RowKind.INSERT, value
        return row_hash(kind.byte_value, (
            row_element(None if field is None else field_type.java_hash(field),
                        isinstance(field_type, RowType))
            for field_type, field in zip(self.fields, self._field_values(fields))
        ))

    @property
    def arrow_type(self) -> pa.DataType:
        return pa.struct([pa.field("row_kind", pa.string()), *self._field_struct()])

    def _plain(self, value: Any) -> Any:
        if isinstance(value, Row):
            return (value.kind.short_string, *self._plain_fields(value.fields))
        return (RowKind.INSERT.short_string, *self._plain_fields(value))

    def _typed(self, fields: dict[str, Any]) -> Any:
        kind = RowKind.from_short_string(fields["row_kind"])
        return Row(*self._typed_fields(fields), kind=kind)

    @property
    def _record_name(self) -> str:
        return "Row"

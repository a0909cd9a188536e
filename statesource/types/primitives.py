"""The primitive types (``string``, ``int``, ..., ``void``, ``timewindow``), one instance each.

Each checks that a Python value is a valid value of the Java type (no coercion:
``True`` is not an int, an int is not a float) and hands the value to the
matching Java ``hashCode`` rule of :mod:`~statesource.types.java_hash`.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from statesource.types.datatype import DataType
from statesource.types.java_hash import (
    boolean_hash,
    byte_array_hash,
    double_hash,
    float_hash,
    long_hash,
    string_hash,
    time_window_hash,
)

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


class _Primitive(DataType):
    """A type with one instance: unpickling (a Spark task) resolves to that instance."""

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return primitive, (self.name,)


class _IntegralType(_Primitive):
    def __init__(self, name: str, bits: int, arrow: pa.DataType, avro: Any) -> None:
        self.name = name
        self._low, self._high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        self._arrow = arrow
        self._avro = avro

    def java_hash(self, value: Any) -> int:
        if type(value) is not int:  # bool is an int subclass; it is never a number here
            raise self._mismatch(value)
        if not self._low <= value <= self._high:
            raise self._mismatch(value, f"out of range [{self._low}, {self._high}]")
        return value

    @property
    def arrow_type(self) -> pa.DataType:
        return self._arrow

    def to_avro(self) -> Any:
        return self._avro


class _LongType(_IntegralType):
    def __init__(self) -> None:
        super().__init__("long", 64, pa.int64(), "long")

    def java_hash(self, value: Any) -> int:
        return long_hash(super().java_hash(value))


class _StringType(_Primitive):
    name = "string"

    def java_hash(self, value: Any) -> int:
        if type(value) is not str:
            raise self._mismatch(value)
        return string_hash(value)

    @property
    def arrow_type(self) -> pa.DataType:
        return pa.string()

    def to_avro(self) -> Any:
        return "string"



class _CharType(_Primitive):
    name = "char"

    def java_hash(self, value: Any) -> int:
        if type(value) is not str or len(value) != 1 or ord(value) > 0xFFFF:
            raise self._mismatch(value, "a char is a string of one UTF-16 code unit")
        return ord(value)

    @property
    def arrow_type(self) -> pa.DataType:
        return pa.string()

    def to_avro(self) -> Any:
        return {"type": "string", "java-class": "java.lang.Character"}


class _BooleanType(_Primitive):
    name = "boolean"

    def java_hash(self, value: Any) -> int:
        if type(value) is not bool:
            raise self._mismatch(value)
        return boolean_hash(value)

    @property
    def arrow_type(self) -> pa.DataType:
        return pa.bool_()

    def to_avro(self) -> Any:
        return "boolean"


class _FloatType(_Primitive):
    """Java ``float``: Python floats are rounded to float32, as a Java cast would."""

    name = "float"

    def java_hash(self, value: Any) -> int:
        if type(value) is not float:
            raise self._mismatch(value)
        return float_hash(value)

    @property
    def arrow_type(self) -> pa.DataType:
        return pa.float32()

    def to_avro(self) -> Any:
        return "float"


class _DoubleType(_Primitive):
    name = "double"

    def java_hash(self, value: Any) -> int:
        if type(value) is not float:
            raise self._mismatch(value)
        return double_hash(value)

    @property
    def arrow_type(self) -> pa.DataType:
        return pa.float64()

    def to_avro(self) -> Any:
        return "double"


class _BytesType(_Primitive):
    """``byte[]``: hashed by content (``Arrays.hashCode``), as Row does; never a key alone."""

    name = "bytes"
    usable_as_key = False

    def java_hash(self, value: Any) -> int:
        if not isinstance(value, (bytes, bytearray)):
            raise self._mismatch(value)
        return byte_array_hash(value)

    @property
    def arrow_type(self) -> pa.DataType:
        return pa.binary()

    def to_avro(self) -> Any:
        return "bytes"


class _VoidType(_Primitive):
    """The namespace of states that have none (Flink's ``VoidNamespace``): always None."""

    name = "void"
    usable_as_key = False

    def java_hash(self, value: Any) -> int:
        if value is not None:
            raise self._mismatch(value, "the void namespace is always None")
        return 0

    @property
    def arrow_type(self) -> pa.DataType:
        return pa.null()

    def to_arrow(self, values: list[Any]) -> pa.Array:
        return pa.nulls(len(values))

    def to_avro(self) -> Any:
        return "null"


class _TimeWindowType(_Primitive):
    """Flink's ``TimeWindow`` namespace: ``(start, end)`` in epoch milliseconds."""

    name = "timewindow"

    def java_hash(self, value: Any) -> int:
        if (not isinstance(value, tuple) or len(value) != 2
                or any(type(v) is not int or not _INT64_MIN <= v <= _INT64_MAX for v in value)):
            raise self._mismatch(value, "a time window is a tuple (start, end) of two longs")
        return time_window_hash(*value)

    @property
    def arrow_type(self) -> pa.DataType:
        return pa.struct([pa.field("start", pa.int64()), pa.field("end", pa.int64())])

    def to_arrow(self, values: list[Any]) -> pa.Array:
        return pa.array([None if v is None else {"start": v[0], "end": v[1]} for v in values],
                        type=self.arrow_type)

    def from_arrow(self, column: pa.Array | pa.ChunkedArray) -> list[Any]:
        return [None if v is None else (v["start"], v["end"]) for v in column.to_pylist()]

    def to_avro(self) -> Any:
        return {"type": "record", "name": "TimeWindow",
                "fields": [{"name": "start", "type": "long"}, {"name": "end", "type": "long"}]}


STRING: DataType = _StringType()
INT: DataType = _IntegralType("int", 32, pa.int32(), "int")
LONG: DataType = _LongType()
SHORT: DataType = _IntegralType(
    "short", 16, pa.int16(), {"type": "int", "java-class": "java.lang.Short"}
)
BYTE: DataType = _IntegralType(
    "byte", 8, pa.int8(), {"type": "int", "java-class": "java.lang.Byte"}
)
BOOLEAN: DataType = _BooleanType()
CHAR: DataType = _CharType()
FLOAT: DataType = _FloatType()
DOUBLE: DataType = _DoubleType()
BYTES: DataType = _BytesType()
VOID: DataType = _VoidType()
TIMEWINDOW: DataType = _TimeWindowType()

_BY_NAME: dict[str, DataType] = {t.name: t for t in (STRING, INT, LONG, SHORT, BYTE, BOOLEAN,
                                                     CHAR, FLOAT, DOUBLE, BYTES, VOID,
                                                     TIMEWINDOW)}


def primitive(name: str) -> DataType:
    """The one instance of primitive type ``name``: what unpickling resolves to, so that a
    type shipped to a Spark task is still ``STRING`` (code compares primitives by identity)."""
    return _BY_NAME[name]

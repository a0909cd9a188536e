"""The type vocabulary shared by keys, state values and checkpoint metadata.

A key's key group depends on its *Java* ``hashCode``, and the same Python
value hashes differently as a Java ``int``, ``long`` or ``short``. So a key type
is always declared, never guessed from a Python value, and the declared type
alone decides how a value is hashed, validated and stored.

Types are written as short strings that also serve as their canonical form in
checkpoint metadata: ``string``, ``int``, ``long``, ``short``, ``byte``,
``boolean``, ``char``, ``float``, ``double``, ``bytes``, ``tuple<t1,...,tN>`` and
``row<t1,...,tN>``, plus ``void``, the type of the namespace of states that
have none, and ``timewindow``, Flink's ``TimeWindow`` namespace of window
states. Java spellings are accepted on input (``Integer``, ``Character``,
``byte[]``, ``Tuple2<String,Long>``). ``bytes`` is only valid
inside a Row: a bare array key has an identity ``hashCode`` in Java, which is
why Flink rejects it, and inside a Tuple it would hash by identity as well.
"""

from __future__ import annotations

import enum
import re
import struct
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from statesource.errors import InvalidArgumentError, TypeMismatchError

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_MASK32 = 0xFFFFFFFF


def to_int32(value: int) -> int:
    """Wrap an arbitrary Python int into Java's signed 32-bit range."""
    value &= _MASK32
    return value - (1 << 32) if value > _INT32_MAX else value


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


class DataType:
    """One declared type: how values of it hash in Java, validate and map to Arrow."""

    name: str
    usable_as_key: bool = True

    def java_hash(self, value: Any) -> int:
        """The value's Java ``hashCode``, as a signed 32-bit int."""
        raise NotImplementedError

    def validate(self, value: Any) -> None:
        """Raise :class:`TypeMismatchError` unless ``value`` is a valid value of this type."""
        self.java_hash(value)

    @property
    def arrow_type(self) -> pa.DataType:
        raise NotImplementedError

    def to_avro(self) -> Any:
        """The Avro schema that declares this type as a state value."""
        raise NotImplementedError

    def to_arrow(self, values: list[Any]) -> pa.Array:
        """An Arrow column of ``values`` (already validated)."""
        return pa.array(values, type=self.arrow_type)

    def from_arrow(self, column: pa.Array | pa.ChunkedArray) -> list[Any]:
        """The Python values of an Arrow column written by :meth:`to_arrow`."""
        return column.to_pylist()

    def __repr__(self) -> str:
        return self.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DataType) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def _mismatch(self, value: Any, why: str = "") -> TypeMismatchError:
        detail = f": {why}" if why else ""
        return TypeMismatchError(
            f"{value!r} ({type(value).__name__}) is not a valid {self.name}{detail}"
        )


class _IntegralType(DataType):
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
        bits = super().java_hash(value) & 0xFFFFFFFFFFFFFFFF
        return to_int32(bits ^ (bits >> 32))


class _StringType(DataType):
    name = "string"

    def java_hash(self, value: Any) -> int:
        if type(value) is not str:
            raise self._mismatch(value)
        units = value.encode("ascii") if value.isascii() else _utf16_units(value)
        h = 0
        for unit in units:
            h = (31 * h + unit) & _MASK32
        return to_int32(h)

    @property
    def arrow_type(self) -> pa.DataType:
        return pa.string()

    def to_avro(self) -> Any:
        return "string"


def _utf16_units(text: str) -> memoryview:
    """The UTF-16 code units Java would hold for ``text`` (lone surrogates kept)."""
    return memoryview(text.encode("utf-16-le", "surrogatepass")).cast("H")


class _CharType(DataType):
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


class _BooleanType(DataType):
    name = "boolean"

    def java_hash(self, value: Any) -> int:
        if type(value) is not bool:
            raise self._mismatch(value)
        return 1231 if value else 1237

    @property
    def arrow_type(self) -> pa.DataType:
        return pa.bool_()

    def to_avro(self) -> Any:
        return "boolean"


class _FloatType(DataType):
    """Java ``float``: Python floats are rounded to float32, as a Java cast would."""

    name = "float"

    def java_hash(self, value: Any) -> int:
        if type(value) is not float:
            raise self._mismatch(value)
        if value != value:
            return 0x7FC00000  # floatToIntBits maps every NaN to the canonical one
        try:
            packed = struct.pack("<f", value)
        except OverflowError:
            packed = struct.pack("<f", float("inf") if value > 0 else float("-inf"))
        return struct.unpack("<i", packed)[0]

    @property
    def arrow_type(self) -> pa.DataType:
        return pa.float32()

    def to_avro(self) -> Any:
        return "float"


class _DoubleType(DataType):
    name = "double"

    def java_hash(self, value: Any) -> int:
        if type(value) is not float:
            raise self._mismatch(value)
        if value != value:
            bits = 0x7FF8000000000000  # doubleToLongBits canonicalises NaN
        else:
            bits = struct.unpack("<Q", struct.pack("<d", value))[0]
        return to_int32(bits ^ (bits >> 32))

    @property
    def arrow_type(self) -> pa.DataType:
        return pa.float64()

    def to_avro(self) -> Any:
        return "double"


class _BytesType(DataType):
    """``byte[]``: hashed by content (``Arrays.hashCode``), as Row does; never a key alone."""

    name = "bytes"
    usable_as_key = False

    def java_hash(self, value: Any) -> int:
        if not isinstance(value, (bytes, bytearray)):
            raise self._mismatch(value)
        h = 1
        for b in value:
            h = (31 * h + (b - 256 if b > 127 else b)) & _MASK32
        return to_int32(h)

    @property
    def arrow_type(self) -> pa.DataType:
        return pa.binary()

    def to_avro(self) -> Any:
        return "bytes"


class _VoidType(DataType):
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


class _TimeWindowType(DataType):
    """Flink's ``TimeWindow`` namespace: ``(start, end)`` in epoch milliseconds.

    Its ``hashCode`` bit-mixes ``start + end`` (``MathUtils.longToIntWithBitMixing``).
    """

    name = "timewindow"

    def java_hash(self, value: Any) -> int:
        if (not isinstance(value, tuple) or len(value) != 2
                or any(type(v) is not int or not _INT64_MIN <= v <= _INT64_MAX for v in value)):
            raise self._mismatch(value, "a time window is a tuple (start, end) of two longs")
        mixed = (value[0] + value[1]) & 0xFFFFFFFFFFFFFFFF
        for multiplier in (0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53):
            mixed = ((mixed ^ (mixed >> 33)) * multiplier) & 0xFFFFFFFFFFFFFFFF
        return to_int32(mixed ^ (mixed >> 33))

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
        h = 0
        for field_type, field in zip(self.fields, self._field_values(value)):
            h = 31 * h + (0 if field is None else field_type.java_hash(field))
        return to_int32(h)

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
        h = 1
        for field_type, field in zip(self.fields, self._field_values(fields)):
            if field is None:
                element = 0
            elif isinstance(field_type, RowType):
                element = field_type.java_hash(field)
            else:
                element = 31 + field_type.java_hash(field)
            h = 31 * h + element
        return to_int32(31 * kind.byte_value + h)

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

_PRIMITIVES: dict[str, DataType] = {
    t.name: t
    for t in (STRING, INT, LONG, SHORT, BYTE, BOOLEAN, CHAR, FLOAT, DOUBLE, BYTES, VOID,
              TIMEWINDOW)
}
_ALIASES = {"integer": "int", "character": "char", "byte[]": "bytes"}
_TOKEN = re.compile(r"\s*([A-Za-z0-9_\[\]]+|[<>,])")


def parse_type(text: str | DataType) -> DataType:
    """Parse a type string such as ``tuple<string,long>`` (Java spellings accepted)."""
    if isinstance(text, DataType):
        return text
    if not isinstance(text, str):
        raise InvalidArgumentError(f"a type is declared as a string, got {text!r}")
    tokens = _TOKEN.findall(text)
    if "".join(tokens) != re.sub(r"\s+", "", text) or not tokens:
        raise InvalidArgumentError(f"cannot parse type {text!r}")
    parsed, rest = _parse_tokens(text, tokens)
    if rest:
        raise InvalidArgumentError(f"cannot parse type {text!r}: unexpected {''.join(rest)!r}")
    return parsed


def _parse_tokens(text: str, tokens: list[str]) -> tuple[DataType, list[str]]:
    head, rest = tokens[0].lower(), tokens[1:]
    head = _ALIASES.get(head, head)
    composite = re.fullmatch(r"(tuple|row)(\d*)", head)
    if composite is None:
        if head not in _PRIMITIVES:
            raise InvalidArgumentError(
                f"cannot parse type {text!r}: unknown type {tokens[0]!r}; known:"
                f" {', '.join(sorted(_PRIMITIVES))}, tuple<...>, row<...>"
            )
        return _PRIMITIVES[head], rest
    if not rest or rest[0] != "<":
        raise InvalidArgumentError(
            f"cannot parse type {text!r}: {tokens[0]} needs field types, as {head}<...>"
        )
    fields: list[DataType] = []
    rest = rest[1:]
    while True:
        if not rest:
            raise InvalidArgumentError(f"cannot parse type {text!r}: missing '>'")
        field, rest = _parse_tokens(text, rest)
        fields.append(field)
        if rest and rest[0] == ",":
            rest = rest[1:]
            continue
        if rest and rest[0] == ">":
            break
        raise InvalidArgumentError(f"cannot parse type {text!r}: expected ',' or '>'")
    arity = composite.group(2)
    if arity and int(arity) != len(fields):
        raise InvalidArgumentError(
            f"cannot parse type {text!r}: {tokens[0]} lists {len(fields)} field types"
        )
    cls = TupleType if composite.group(1) == "tuple" else RowType
    return cls(tuple(fields)), rest[1:]


def key_type(text: str | DataType) -> DataType:
    """Parse a type and check that Flink accepts it as a key type."""
    parsed = parse_type(text)
    if parsed is VOID:
        raise TypeMismatchError("void cannot be a key type: it is the type of empty namespaces")
    if not parsed.usable_as_key:
        raise TypeMismatchError(
            f"{parsed.name} cannot be a key type: Java arrays hash by identity, so Flink"
            " rejects them as keys; wrap the bytes in a row<bytes>"
        )
    return parsed

"""Avro value schemas of keyed state and their Arrow mapping.

Every state declares the type of its values as an Avro schema. A
:class:`ValueSchema` validates the schema (with our own checks and with
fastavro), keeps a canonical form of it for the checkpoint metadata, maps it
to one Arrow type, and converts Python values to Arrow arrays and back.
A schema that cannot be mapped raises :class:`~statesource.errors.TypeMismatchError`
when it is parsed, naming the schema and the offending part.
The schema is read by :mod:`~statesource.schema.avro_parsing` and values are
converted by the nodes of :mod:`~statesource.schema.converter`; this module is
the public face of both.

Mapping
-------
Python values: what ``to_arrow``/``validate`` accept -> what ``to_python`` returns.

| Avro                                | Arrow                       | Python value                 |
|-------------------------------------|-----------------------------|------------------------------|
| boolean                             | bool                        | bool                         |
| int                                 | int32                       | int                          |
| int, java-class java.lang.Short     | int16                       | int                          |
| int, java-class java.lang.Byte      | int8                        | int                          |
| long                                | int64                       | int                          |
| float                               | float32                     | float (1)                    |
| double                              | float64                     | float (1)                    |
| bytes                               | binary                      | bytes, bytearray -> bytes    |
| string                              | utf8 (never large_utf8)     | str                          |
| string, java-class ...Character (2) | utf8                        | str of one UTF-16 code unit  |
| record                              | struct (same fields, order) | dict of the fields (3)       |
| enum                                | utf8                        | str, one of the symbols      |
| array                               | list (item field "item")    | list, tuple -> list          |
| map                                 | map<utf8, value>            | dict with str keys           |
| fixed                               | fixed_size_binary(size)     | bytes of exactly size bytes  |
| ["null", X] or [X, "null"]          | Arrow type of X             | None or a value of X         |
| decimal on bytes or fixed, p <= 38  | decimal128(p, s)            | finite Decimal that fits (4) |
| uuid on string                      | utf8                        | str (5), uuid.UUID -> str    |
| date on int                         | date32                      | date (not datetime)          |
| time-millis on int                  | time32[ms]                  | naive time, whole ms (6)     |
| time-micros on long                 | time64[us]                  | naive time                   |
| timestamp-millis on long            | timestamp[ms, tz=UTC]       | aware datetime, whole ms (7) |
| timestamp-micros on long            | timestamp[us, tz=UTC]       | aware datetime (7)           |
| local-timestamp-millis on long      | timestamp[ms]               | naive datetime, whole ms (6) |
| local-timestamp-micros on long      | timestamp[us]               | naive datetime               |

(1) Also an int the float type holds exactly (abs <= 2**24 for float, 2**53
for double), read back as float. A float written as float32 reads back rounded
to float32. numpy scalars are accepted wherever the Python type is.
(2) ``{"type": "string", "java-class": "java.lang.Character"}``; also on int,
as Avro's Java reflect writes ``char``. A BMP character, not a surrogate.
(3) Exactly the declared fields; a missing nullable field is taken as None
and reads back as a key holding None.
(4) Read back with exactly s fractional digits: ``Decimal("1.5")`` in scale 2
reads back as ``Decimal("1.50")`` (equal by ``==``).
(5) The 8-4-4-4-12 hex text form, returned as given.
(6) Sub-millisecond parts are rejected, never truncated.
(7) Any time zone on input; read back as ``tzinfo=datetime.timezone.utc``;
``-millis`` also needs whole milliseconds (6).

Rejected: a bare ``"null"``; any other union (more branches, no ``null``,
a single branch); recursive named types; decimal with precision > 38 (or more
than a fixed of its size holds); the known Avro logical types this mapping does
not support (``timestamp-nanos``, ``local-timestamp-nanos``, ``duration``,
``big-decimal``) and known logical types on the wrong underlying type (the spec
says to ignore those, but silently changing the column type of a state is
worse than an error, and rejecting keeps the door open to supporting them);
``java.lang.Short``/``Byte`` on anything but ``int``; invalid Avro (names,
duplicate fields or symbols, unknown type names, bad defaults, ...).
Unknown logical types and unknown ``java-class`` values are ignored: the
underlying type is used.

Every Arrow field produced (top level, struct fields, list items, map values)
is nullable, so batches match Spark's nullable declared schema (a map key
field is the exception: Arrow requires it non-null). Non-null-ness is enforced
against the Avro schema by :meth:`ValueSchema.to_arrow` and
:meth:`ValueSchema.validate` instead: None where the Avro type is not a
nullable union raises :class:`TypeMismatchError` naming the field path.
Paths name record fields joined with ``.``, array items as ``[i]`` and map
values as ``["key"]`` in value errors; in schema errors array items are
``[]`` and map values ``{}`` (``field 'user.tags[]': ...``).

Conversion is strict: no silent coercion between Python types (``True`` is
not an int, ``1`` is not a bool, ``1.5`` is not an int, ``str`` is not bytes
and ``bytes`` not str, a ``datetime`` is not a date, naive and aware datetimes
are not mixed up, sub-millisecond parts are not truncated), although pyarrow
itself would do all of these silently.

Canonical form
--------------
:attr:`ValueSchema.avro` is Avro's Parsing Canonical Form extended with the
attributes this mapping interprets: names are full names (no ``namespace``
attribute, except ``"namespace": ""`` for a null-namespace type nested in a
namespaced one), ``{"type": "long"}`` becomes ``"long"``, later uses of a
named type are its full name, keys are ordered name, type, fields, symbols,
items, values, size, logicalType, precision, scale, java-class. ``doc``,
``aliases``, ``default``, ``order``, unknown logical types and other
properties are dropped: they do not change the values or their Arrow type.
Union branch order is kept (it is part of Avro's binary encoding). Two
schemas are equal iff their canonical forms are.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from statesource.errors import InvalidArgumentError, TypeMismatchError
from statesource.schema.avro_parsing import compile_schema, load_schema, short_json
from statesource.schema.converter import ColumnMismatch, Mismatch, Node, describe

__all__ = ["ValueSchema", "value_schema", "arrow_field_for"]


class ValueSchema:
    """The Avro schema of the values of a state, with its Arrow mapping.

    Immutable and hashable; equal iff the canonical forms are equal (``"long"``
    equals ``{"type": "long"}``). Create with :meth:`parse` or :func:`value_schema`.
    Pickles as its canonical JSON.
    """

    __slots__ = ("_json", "_root", "_nullable", "_arrow_type", "_hash")
    # Set once by :meth:`parse` through ``object.__setattr__`` (the class is immutable).
    _json: str
    _root: Node
    _nullable: bool
    _arrow_type: pa.DataType
    _hash: int

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise TypeError("use ValueSchema.parse(schema) or value_schema(schema)")

    @classmethod
    def parse(cls, schema: str | dict | list | ValueSchema) -> ValueSchema:
        """Parse JSON text, a bare type name (``"long"``) or an already-parsed schema.

        Raises :class:`InvalidArgumentError` for an argument that is not a schema
        at all (wrong Python type, malformed JSON) and :class:`TypeMismatchError`
        for an invalid Avro schema or one that cannot be mapped to Arrow.
        """
        if isinstance(schema, ValueSchema):
            return schema
        obj = load_schema(schema)
        canon, root, nullable = compile_schema(obj)
        self = object.__new__(cls)
        text = json.dumps(canon, separators=(",", ":"), ensure_ascii=False)
        object.__setattr__(self, "_json", text)
        object.__setattr__(self, "_root", root)
        object.__setattr__(self, "_nullable", nullable)
        object.__setattr__(self, "_arrow_type", root.arrow_type)
        object.__setattr__(self, "_hash", hash(text))
        return self

    # ---- properties ----------------------------------------------------------
    @property
    def avro(self) -> dict | str | list:
        """The canonical Avro schema (a fresh JSON-able copy on each access)."""
        return json.loads(self._json)

    @property
    def json(self) -> str:
        """The canonical Avro schema as compact JSON text (what checkpoint metadata stores)."""
        return self._json

    @property
    def arrow_type(self) -> pa.DataType:
        return self._arrow_type

    @property
    def nullable(self) -> bool:
        """Whether the schema is a nullable union, i.e. None is a valid value."""
        return self._nullable

    # ---- conversions ---------------------------------------------------------
    def to_arrow(self, values: Sequence[object]) -> pa.Array:
        """Convert Python values to an Arrow array of :attr:`arrow_type`.

        ``values`` is a list or tuple (or a 1-D numpy array, or any iterable,
        which is materialised). Raises :class:`TypeMismatchError` naming the
        first value that does not match, its index and field path. The result
        is a ``pa.ChunkedArray`` only when pyarrow needs one (over 2 GiB of
        string/binary data in one column).
        """
        items: list[Any] | tuple[Any, ...] | np.ndarray
        if isinstance(values, (pa.Array, pa.ChunkedArray)):
            items = values.to_pylist()
        elif isinstance(values, np.ndarray):
            if values.ndim != 1:
                raise InvalidArgumentError(
                    f"to_arrow needs a 1-D sequence of values, got a {values.ndim}-D numpy array"
                )
            items = values
        elif isinstance(values, (list, tuple)):
            items = values
        else:
            if isinstance(values, (str, bytes, bytearray, Mapping)):
                raise InvalidArgumentError(
                    "to_arrow needs a sequence of values, "
                    f"got a single {type(values).__name__}: {values!r:.80}"
                )
            try:
                items = list(values)
            except TypeError:
                raise InvalidArgumentError(
                    f"to_arrow needs a sequence of values, got {type(values).__name__}"
                ) from None
        try:
            return self._root.to_arrow(items, self._nullable)
        except ColumnMismatch as e:
            raise TypeMismatchError(self._column_message(e)) from None

    def to_python(self, array: pa.Array | pa.ChunkedArray) -> list:
        """Convert an Arrow array of :attr:`arrow_type` back to the Python values."""
        if not isinstance(array, (pa.Array, pa.ChunkedArray)):
            raise InvalidArgumentError(
                f"to_python needs a pyarrow Array or ChunkedArray, got {type(array).__name__}"
            )
        if array.type != self._arrow_type:
            raise TypeMismatchError(
                f"Arrow array of type {array.type} does not have the type {self._arrow_type} "
                f"of Avro schema {short_json(self.avro)}"
            )
        return self._root.to_python(array)

    def validate(self, value: object) -> None:
        """Check one value; raise :class:`TypeMismatchError` if it does not match the schema."""
        try:
            self._root.check_nullable(value, self._nullable)
        except Mismatch as m:
            path = m.render_path()
            where = f"field '{path}': " if path else ""
            raise TypeMismatchError(
                f"value {describe(value)} does not match Avro schema "
                f"{short_json(self.avro)}: {where}{m.message}"
            ) from None

    def _column_message(self, e: ColumnMismatch) -> str:
        head = f"values do not match Avro schema {short_json(self.avro)}"
        if e.index is not None:
            head = f"value at index {e.index} does not match Avro schema {short_json(self.avro)}"
        if e.mismatch is None:
            return f"{head}: {e.detail}"
        path = e.mismatch.render_path()
        where = f"field '{path}': " if path else ""
        return f"{head}: {where}{e.mismatch.message}"

    # ---- identity ------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if isinstance(other, ValueSchema):
            return self._json == other._json
        return NotImplemented

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"ValueSchema({self._json})"

    def __reduce__(self) -> tuple[Callable[[str], ValueSchema], tuple[str]]:
        return (value_schema, (self._json,))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("ValueSchema is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("ValueSchema is immutable")

    def __copy__(self) -> ValueSchema:
        return self

    def __deepcopy__(self, memo: dict) -> ValueSchema:
        return self


@functools.lru_cache(maxsize=512)
def _cached(key: str) -> ValueSchema:
    return ValueSchema.parse(key)


def value_schema(schema: str | dict | list | ValueSchema) -> ValueSchema:
    """:meth:`ValueSchema.parse` with a cache: equal inputs give the same object."""
    if isinstance(schema, ValueSchema):
        return schema
    if isinstance(schema, str):
        return _cached(schema)
    if isinstance(schema, (Mapping, list)):
        try:
            key = json.dumps(schema, sort_keys=True, separators=(",", ":"))
        except (TypeError, ValueError):
            return ValueSchema.parse(schema)
        return _cached(key)
    return ValueSchema.parse(schema)


def arrow_field_for(name: str, schema: ValueSchema | str | dict | list) -> pa.Field:
    """A nullable Arrow field called ``name`` of the Arrow type of ``schema``."""
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"an Arrow field name must be a non-empty str, got {name!r}")
    return pa.field(name, value_schema(schema).arrow_type, nullable=True)

"""Avro value schemas of keyed state and their Arrow mapping.

Every state declares the type of its values as an Avro schema. A
:class:`ValueSchema` validates the schema (with our own checks and with
fastavro), keeps a canonical form of it for the checkpoint metadata, maps it
to one Arrow type, and converts Python values to Arrow arrays and back.
A schema that cannot be mapped raises :class:`~statesource.errors.TypeMismatchError`
when it is parsed, naming the schema and the offending part.

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
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np
import pyarrow as pa
from fastavro.schema import parse_schema as _fastavro_parse

from statesource.errors import InvalidArgumentError, TypeMismatchError
from statesource.schema import convert as _c

__all__ = ["ValueSchema", "value_schema", "arrow_field_for"]

_PRIMITIVES = frozenset(("null", "boolean", "int", "long", "float", "double", "bytes", "string"))
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SHORT, _BYTE, _CHAR = "java.lang.Short", "java.lang.Byte", "java.lang.Character"
# logical type -> (required underlying type, node factory)
_TEMPORAL = {
    "date": ("int", lambda: _c.DateLeaf()),
    "time-millis": ("int", lambda: _c.TimeLeaf("int/time-millis", pa.time32("ms"), True)),
    "time-micros": ("long", lambda: _c.TimeLeaf("long/time-micros", pa.time64("us"), False)),
    "timestamp-millis": ("long", lambda: _c.TimestampLeaf("long/timestamp-millis", True, True)),
    "timestamp-micros": ("long", lambda: _c.TimestampLeaf("long/timestamp-micros", False, True)),
    "local-timestamp-millis": (
        "long",
        lambda: _c.TimestampLeaf("long/local-timestamp-millis", True, False),
    ),
    "local-timestamp-micros": (
        "long",
        lambda: _c.TimestampLeaf("long/local-timestamp-micros", False, False),
    ),
}
_NANOS = "nanosecond timestamps are not supported (Python datetime holds microseconds)"
_UNSUPPORTED_LOGICAL = {
    "timestamp-nanos": _NANOS,
    "local-timestamp-nanos": _NANOS,
    "duration": "the duration logical type is not supported",
    "big-decimal": "the big-decimal logical type is not supported (Arrow decimals have one scale)",
}
_PRIMITIVE_NODES = {
    "boolean": lambda: _c.BoolLeaf(),
    "int": lambda: _c.IntLeaf("int", pa.int32(), 32),
    "long": lambda: _c.IntLeaf("long", pa.int64(), 64),
    "float": lambda: _c.FloatLeaf("float", pa.float32(), 24),
    "double": lambda: _c.FloatLeaf("double", pa.float64(), 53),
    "bytes": lambda: _c.BytesLeaf(),
    "string": lambda: _c.StringLeaf(),
}
_IN_PROGRESS = object()


def _short_json(obj: object, limit: int = 160) -> str:
    try:
        text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(obj)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _SchemaProblem(Exception):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path, self.message = path, message


class _Compiler:
    """One walk over the schema: validation, canonical form and converter nodes."""

    def __init__(self) -> None:
        self.named: dict[str, object] = {}  # full name -> node, or _IN_PROGRESS

    def compile(self, s: object, ns: str | None, path: str) -> tuple[object, _c.Node, bool]:
        """Return (canonical form, node, nullable) of one schema; "null" only inside unions."""
        if isinstance(s, list):
            return self._union(s, ns, path)
        if isinstance(s, str):
            if s in _PRIMITIVES:
                return s, self._primitive(s, {}, path), False
            return self._reference(s, ns, path)
        if not isinstance(s, Mapping):
            raise _SchemaProblem(
                path,
                f"a schema must be a type name, an object or a union list, got {_short_json(s)}",
            )
        t = s.get("type")
        if t is None:
            raise _SchemaProblem(path, f"schema object {_short_json(s)} has no 'type'")
        if not isinstance(t, str):
            raise _SchemaProblem(
                path, f"'type' of schema object {_short_json(s)} must be a type name"
            )
        if t in _PRIMITIVES:
            return self._logical_or_primitive(s, t, path)
        if t == "record":
            return self._record(s, ns, path)
        if t == "enum":
            return self._enum(s, ns, path)
        if t == "array":
            if "items" not in s:
                raise _SchemaProblem(path, f"array schema {_short_json(s)} has no 'items'")
            canon, node, nullable = self.compile(s["items"], ns, path + "[]")
            return {"type": "array", "items": canon}, _c.ArrayNode(node, nullable), False
        if t == "map":
            if "values" not in s:
                raise _SchemaProblem(path, f"map schema {_short_json(s)} has no 'values'")
            canon, node, nullable = self.compile(s["values"], ns, path + "{}")
            return {"type": "map", "values": canon}, _c.MapNode(node, nullable), False
        if t == "fixed":
            return self._fixed(s, ns, path)
        return self._reference(t, ns, path)

    # ---- names ---------------------------------------------------------------
    def _define(self, s: Mapping, ns: str | None, path: str) -> tuple[str, str | None, dict]:
        name = s.get("name")
        if not isinstance(name, str):
            raise _SchemaProblem(path, f"named type {_short_json(s)} needs a string 'name'")
        if "." in name:
            space: str | None = name.rsplit(".", 1)[0]
            full = name
        else:
            space = s.get("namespace", ns)
            if space is not None and not isinstance(space, str):
                raise _SchemaProblem(path, f"'namespace' of {name!r} must be a string")
            full = f"{space}.{name}" if space else name
        space = space or None
        for part in full.split("."):
            if not _NAME_RE.match(part):
                raise _SchemaProblem(
                    path, f"invalid name {full!r}: each part must match [A-Za-z_][A-Za-z0-9_]*"
                )
        if full.rsplit(".", 1)[-1] in _PRIMITIVES:
            raise _SchemaProblem(
                path, f"a named type cannot be called {full!r} (a primitive type name)"
            )
        if full in self.named:
            raise _SchemaProblem(path, f"named type {full!r} is defined twice")
        canon: dict = {"name": full}
        if space is None and ns:
            canon["namespace"] = ""  # keeps the null namespace when re-parsed inside `ns`
        return full, space, canon

    def _reference(self, name: str, ns: str | None, path: str) -> tuple[object, _c.Node, bool]:
        candidates = [name] if "." in name else ([f"{ns}.{name}", name] if ns else [name])
        for full in candidates:
            node = self.named.get(full)
            if node is _IN_PROGRESS:
                raise _SchemaProblem(
                    path,
                    f"recursive type {full!r} is not supported: its Arrow type would be infinite",
                )
            if node is not None:
                return full, node, False  # type: ignore[return-value]
        raise _SchemaProblem(
            path, f"unknown type {name!r} (not a primitive and not defined before this use)"
        )

    # ---- primitives and logical types ----------------------------------------
    def _primitive(self, t: str, s: Mapping, path: str) -> _c.Node:
        if t == "null":
            raise _SchemaProblem(
                path, '"null" is only supported as a branch of a nullable union ["null", X]'
            )
        return _PRIMITIVE_NODES[t]()

    def _logical_or_primitive(self, s: Mapping, t: str, path: str) -> tuple[object, _c.Node, bool]:
        logical = s.get("logicalType")
        jclass = s.get("java-class")
        if logical is not None and not isinstance(logical, str):
            raise _SchemaProblem(path, f"'logicalType' of {_short_json(s)} must be a string")
        if jclass in (_SHORT, _BYTE, _CHAR):
            if (
                logical in _TEMPORAL
                or logical in ("decimal", "uuid")
                or logical in _UNSUPPORTED_LOGICAL
            ):
                raise _SchemaProblem(
                    path,
                    f"{_short_json(s)}: java-class {jclass} cannot be combined with a logicalType",
                )
            if jclass == _CHAR and t in ("string", "int"):
                return (
                    {"type": t, "java-class": jclass},
                    _c.CharLeaf(f"{t}/java.lang.Character"),
                    False,
                )
            if jclass != _CHAR and t == "int":
                bits = 16 if jclass == _SHORT else 8
                node = _c.IntLeaf(f"int/{jclass}", pa.int16() if bits == 16 else pa.int8(), bits)
                return {"type": t, "java-class": jclass}, node, False
            need = "string or int" if jclass == _CHAR else "int"
            raise _SchemaProblem(
                path, f"{_short_json(s)}: java-class {jclass} requires type {need}, not {t}"
            )
        if logical in _UNSUPPORTED_LOGICAL:
            raise _SchemaProblem(path, f"{_short_json(s)}: {_UNSUPPORTED_LOGICAL[logical]}")
        if logical in _TEMPORAL:
            need, factory = _TEMPORAL[logical]
            if t != need:
                raise _SchemaProblem(
                    path, f"{_short_json(s)}: logicalType {logical} requires type {need}, not {t}"
                )
            return {"type": t, "logicalType": logical}, factory(), False
        if logical == "uuid":
            if t != "string":
                raise _SchemaProblem(
                    path, f"{_short_json(s)}: logicalType uuid is supported on string only, not {t}"
                )
            return {"type": t, "logicalType": logical}, _c.UuidLeaf("string/uuid"), False
        if logical == "decimal":
            if t != "bytes":
                raise _SchemaProblem(
                    path, f"{_short_json(s)}: logicalType decimal requires bytes or fixed, not {t}"
                )
            precision, scale = self._decimal(s, None, path)
            canon = {"type": t, "logicalType": logical, "precision": precision, "scale": scale}
            return (
                canon,
                _c.DecimalLeaf(f"bytes/decimal({precision}, {scale})", precision, scale),
                False,
            )
        return t, self._primitive(t, s, path), False

    def _decimal(self, s: Mapping, size: int | None, path: str) -> tuple[int, int]:
        precision, scale = s.get("precision"), s.get("scale", 0)
        # ``type(...) is int`` (not isinstance): a bool is not a decimal precision or scale
        if type(precision) is not int:
            raise _SchemaProblem(path, f"{_short_json(s)}: decimal precision must be an integer")
        if type(scale) is not int:
            raise _SchemaProblem(path, f"{_short_json(s)}: decimal scale must be an integer")
        if precision < 1 or scale < 0 or scale > precision:
            raise _SchemaProblem(
                path, f"{_short_json(s)}: decimal needs precision >= 1 and 0 <= scale <= precision"
            )
        if precision > 38:
            raise _SchemaProblem(
                path,
                f"{_short_json(s)}: decimal precision {precision} exceeds 38, "
                "the maximum of Arrow decimal128",
            )
        if size is not None:
            most = math.floor(math.log10(2) * (8 * size - 1)) if size else 0
            if precision > most:
                raise _SchemaProblem(
                    path,
                    f"{_short_json(s)}: a fixed of {size} bytes holds at most {most} "
                    f"decimal digits, not {precision}",
                )
        return precision, scale

    # ---- unions and named types ----------------------------------------------
    def _union(self, s: list, ns: str | None, path: str) -> tuple[object, _c.Node, bool]:
        def is_null(branch: object) -> bool:
            return branch == "null" or (
                isinstance(branch, Mapping) and branch.get("type") == "null"
            )

        nulls = [is_null(b) for b in s]
        if len(s) != 2 or nulls.count(True) != 1:
            raise _SchemaProblem(
                path,
                f'union {_short_json(s)} is not supported: only a union of "null" and '
                'exactly one other type (["null", X] or [X, "null"]) maps to Arrow (a nullable X)',
            )
        other = s[nulls.index(False)]
        if isinstance(other, list):
            raise _SchemaProblem(
                path, f"union {_short_json(s)} directly contains another union (invalid Avro)"
            )
        canon, node, _ = self.compile(other, ns, path)
        canons = ["null", canon] if nulls[0] else [canon, "null"]
        return canons, node, True

    def _record(self, s: Mapping, ns: str | None, path: str) -> tuple[object, _c.Node, bool]:
        full, space, canon = self._define(s, ns, path)
        fields = s.get("fields", [])
        if not isinstance(fields, list):
            raise _SchemaProblem(path, f"'fields' of record {full!r} must be a list")
        self.named[full] = _IN_PROGRESS
        node = _c.RecordNode(f"record {full}")
        canon_fields, node_fields, seen = [], [], set()
        for f in fields:
            fname = f.get("name") if isinstance(f, Mapping) else None
            if not isinstance(fname, str) or not _NAME_RE.match(fname):
                raise _SchemaProblem(
                    path, f"record {full!r} has a field with an invalid name: {_short_json(f)}"
                )
            if fname in seen:
                raise _SchemaProblem(path, f"record {full!r} has two fields named {fname!r}")
            seen.add(fname)
            fpath = f"{path}.{fname}" if path else fname
            if "type" not in f:
                raise _SchemaProblem(fpath, "field has no 'type'")
            fcanon, fnode, fnullable = self.compile(f["type"], space, fpath)
            canon_fields.append({"name": fname, "type": fcanon})
            node_fields.append((fname, fnode, fnullable))
        node.finish(node_fields)
        self.named[full] = node
        canon.update(type="record", fields=canon_fields)
        return canon, node, False

    def _enum(self, s: Mapping, ns: str | None, path: str) -> tuple[object, _c.Node, bool]:
        full, _, canon = self._define(s, ns, path)
        symbols = s.get("symbols")
        if not isinstance(symbols, list) or not all(
            isinstance(x, str) and _NAME_RE.match(x) for x in symbols
        ):
            raise _SchemaProblem(
                path,
                f"enum {full!r} needs 'symbols', a list of names matching [A-Za-z_][A-Za-z0-9_]*",
            )
        if len(set(symbols)) != len(symbols):
            raise _SchemaProblem(path, f"enum {full!r} has duplicate symbols")
        node = _c.EnumLeaf(f"enum {full}", list(symbols))
        self.named[full] = node
        canon.update(type="enum", symbols=list(symbols))
        return canon, node, False

    def _fixed(self, s: Mapping, ns: str | None, path: str) -> tuple[object, _c.Node, bool]:
        full, _, canon = self._define(s, ns, path)
        size = s.get("size")
        if type(size) is not int or size < 0:
            raise _SchemaProblem(path, f"fixed {full!r} needs 'size', a non-negative integer")
        canon.update(type="fixed", size=size)
        logical = s.get("logicalType")
        if logical == "decimal":
            precision, scale = self._decimal(s, size, path)
            canon.update(logicalType=logical, precision=precision, scale=scale)
            node: _c.Node = _c.DecimalLeaf(
                f"fixed {full}/decimal({precision}, {scale})", precision, scale
            )
        elif logical in _UNSUPPORTED_LOGICAL or logical in _TEMPORAL or logical == "uuid":
            reason = (
                _UNSUPPORTED_LOGICAL.get(logical)
                or f"logicalType {logical} is not supported on fixed"
            )
            raise _SchemaProblem(path, f"{_short_json(s)}: {reason}")
        else:
            node = _c.FixedLeaf(f"fixed {full}({size})", size)
        self.named[full] = node
        return canon, node, False


# ----------------------------------------------------------------------------
# public API
# ----------------------------------------------------------------------------
def _load(schema: object) -> str | list[Any] | Mapping[Any, Any]:
    if isinstance(schema, str):
        text = schema.strip()
        if text[:1] in ("{", "[", '"'):
            try:
                return json.loads(text)
            except json.JSONDecodeError as exc:
                raise InvalidArgumentError(
                    f"Avro schema text {_short_json(schema)} is not valid JSON: {exc}"
                ) from None
        return text  # a bare type name such as long
    if isinstance(schema, (Mapping, list)):
        return schema
    raise InvalidArgumentError(
        "an Avro schema must be JSON text, a type name, a dict or a list, "
        f"got {type(schema).__name__} {schema!r:.80}"
    )


class ValueSchema:
    """The Avro schema of the values of a state, with its Arrow mapping.

    Immutable and hashable; equal iff the canonical forms are equal (``"long"``
    equals ``{"type": "long"}``). Create with :meth:`parse` or :func:`value_schema`.
    Pickles as its canonical JSON.
    """

    __slots__ = ("_json", "_root", "_nullable", "_arrow_type", "_hash")
    # Set once by :meth:`parse` through ``object.__setattr__`` (the class is immutable).
    _json: str
    _root: _c.Node
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
        obj = _load(schema)
        try:
            canon, root, nullable = _Compiler().compile(obj, None, "")
        except _SchemaProblem as p:
            where = f"field '{p.path}': " if p.path else ""
            raise TypeMismatchError(
                f"Avro schema {_short_json(obj)} cannot be mapped to Arrow: {where}{p.message}"
            ) from None
        except RecursionError:
            raise TypeMismatchError(
                f"Avro schema {_short_json(obj)} is nested too deeply"
            ) from None
        try:
            # fastavro is typed for a dict; a non-dict Mapping (outside parse's signature)
            # is handed on unchanged as before, and fastavro's rejection is reported below.
            _fastavro_parse(cast("str | list[Any] | dict[Any, Any]", obj), _write_hint=False)
        except Exception as exc:  # fastavro raises assorted exception types
            # fastavro mis-resolves references to null-namespace types inside a
            # namespace; our resolution already accepted every name, so ignore that one.
            if type(exc).__name__ != "UnknownType":
                raise TypeMismatchError(
                    f"Avro schema {_short_json(obj)} is invalid: {exc}"
                ) from None
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
        except _c.ColumnMismatch as e:
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
                f"of Avro schema {_short_json(self.avro)}"
            )
        return self._root.to_python(array)

    def validate(self, value: object) -> None:
        """Check one value; raise :class:`TypeMismatchError` if it does not match the schema."""
        try:
            self._root.check_nullable(value, self._nullable)
        except _c.Mismatch as m:
            path = m.render_path()
            where = f"field '{path}': " if path else ""
            raise TypeMismatchError(
                f"value {_c.describe(value)} does not match Avro schema "
                f"{_short_json(self.avro)}: {where}{m.message}"
            ) from None

    def _column_message(self, e: _c.ColumnMismatch) -> str:
        head = f"values do not match Avro schema {_short_json(self.avro)}"
        if e.index is not None:
            head = f"value at index {e.index} does not match Avro schema {_short_json(self.avro)}"
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

    def __reduce__(self):
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

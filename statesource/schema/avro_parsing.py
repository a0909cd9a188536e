"""Reading an Avro value schema: validation, canonical form and the converter tree.

One walk over the schema (:class:`_Compiler`) checks it against the mapping's
rules (what is accepted and rejected is listed in :mod:`statesource.schema.value_schema`),
writes its canonical form (described there too) and builds one converter node
per Avro type; fastavro then checks that the schema is valid Avro.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, cast

import pyarrow as pa
from fastavro.schema import parse_schema as _fastavro_parse

from statesource.errors import InvalidArgumentError, TypeMismatchError
from statesource.schema.container_converters import ArrayNode, MapNode, RecordNode
from statesource.schema.converter import Node
from statesource.schema.leaf_converters import (
    BoolLeaf,
    BytesLeaf,
    CharLeaf,
    DateLeaf,
    DecimalLeaf,
    EnumLeaf,
    FixedLeaf,
    FloatLeaf,
    IntLeaf,
    StringLeaf,
    TimeLeaf,
    TimestampLeaf,
    UuidLeaf,
)

_PRIMITIVES = frozenset(("null", "boolean", "int", "long", "float", "double", "bytes", "string"))
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SHORT, _BYTE, _CHAR = "java.lang.Short", "java.lang.Byte", "java.lang.Character"
# logical type -> (required underlying type, node factory)
_TEMPORAL = {
    "date": ("int", lambda: DateLeaf()),
    "time-millis": ("int", lambda: TimeLeaf("int/time-millis", pa.time32("ms"), True)),
    "time-micros": ("long", lambda: TimeLeaf("long/time-micros", pa.time64("us"), False)),
    "timestamp-millis": ("long", lambda: TimestampLeaf("long/timestamp-millis", True, True)),
    "timestamp-micros": ("long", lambda: TimestampLeaf("long/timestamp-micros", False, True)),
    "local-timestamp-millis": (
        "long",
        lambda: TimestampLeaf("long/local-timestamp-millis", True, False),
    ),
    "local-timestamp-micros": (
        "long",
        lambda: TimestampLeaf("long/local-timestamp-micros", False, False),
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
    "boolean": lambda: BoolLeaf(),
    "int": lambda: IntLeaf("int", pa.int32(), 32),
    "long": lambda: IntLeaf("long", pa.int64(), 64),
    "float": lambda: FloatLeaf("float", pa.float32(), 24),
    "double": lambda: FloatLeaf("double", pa.float64(), 53),
    "bytes": lambda: BytesLeaf(),
    "string": lambda: StringLeaf(),
}
_IN_PROGRESS = object()


def short_json(obj: object, limit: int = 160) -> str:
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

    def compile(self, s: object, ns: str | None, path: str) -> tuple[object, Node, bool]:
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
                f"a schema must be a type name, an object or a union list, got {short_json(s)}",
            )
        t = s.get("type")
        if t is None:
            raise _SchemaProblem(path, f"schema object {short_json(s)} has no 'type'")
        if not isinstance(t, str):
            raise _SchemaProblem(
                path, f"'type' of schema object {short_json(s)} must be a type name"
            )
        if t in _PRIMITIVES:
            return self._logical_or_primitive(s, t, path)
        if t == "record":
            return self._record(s, ns, path)
        if t == "enum":
            return self._enum(s, ns, path)
        if t == "array":
            if "items" not in s:
                raise _SchemaProblem(path, f"array schema {short_json(s)} has no 'items'")
            canon, node, nullable = self.compile(s["items"], ns, path + "[]")
            return {"type": "array", "items": canon}, ArrayNode(node, nullable), False
        if t == "map":
            if "values" not in s:
                raise _SchemaProblem(path, f"map schema {short_json(s)} has no 'values'")
            canon, node, nullable = self.compile(s["values"], ns, path + "{}")
            return {"type": "map", "values": canon}, MapNode(node, nullable), False
        if t == "fixed":
            return self._fixed(s, ns, path)
        return self._reference(t, ns, path)

    # ---- names ---------------------------------------------------------------
    def _define(self, s: Mapping, ns: str | None, path: str) -> tuple[str, str | None, dict]:
        name = s.get("name")
        if not isinstance(name, str):
            raise _SchemaProblem(path, f"named type {short_json(s)} needs a string 'name'")
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

    def _reference(self, name: str, ns: str | None, path: str) -> tuple[object, Node, bool]:
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
    def _primitive(self, t: str, s: Mapping, path: str) -> Node:
        if t == "null":
            raise _SchemaProblem(
                path, '"null" is only supported as a branch of a nullable union ["null", X]'
            )
        return _PRIMITIVE_NODES[t]()

    def _logical_or_primitive(self, s: Mapping, t: str, path: str) -> tuple[object, Node, bool]:
        logical = s.get("logicalType")
        jclass = s.get("java-class")
        if logical is not None and not isinstance(logical, str):
            raise _SchemaProblem(path, f"'logicalType' of {short_json(s)} must be a string")
        if jclass in (_SHORT, _BYTE, _CHAR):
            if (
                logical in _TEMPORAL
                or logical in ("decimal", "uuid")
                or logical in _UNSUPPORTED_LOGICAL
            ):
                raise _SchemaProblem(
                    path,
                    f"{short_json(s)}: java-class {jclass} cannot be combined with a logicalType",
                )
            if jclass == _CHAR and t in ("string", "int"):
                return (
                    {"type": t, "java-class": jclass},
                    CharLeaf(f"{t}/java.lang.Character"),
                    False,
                )
            if jclass != _CHAR and t == "int":
                bits = 16 if jclass == _SHORT else 8
                node = IntLeaf(f"int/{jclass}", pa.int16() if bits == 16 else pa.int8(), bits)
                return {"type": t, "java-class": jclass}, node, False
            need = "string or int" if jclass == _CHAR else "int"
            raise _SchemaProblem(
                path, f"{short_json(s)}: java-class {jclass} requires type {need}, not {t}"
            )
        if logical in _UNSUPPORTED_LOGICAL:
            raise _SchemaProblem(path, f"{short_json(s)}: {_UNSUPPORTED_LOGICAL[logical]}")
        if logical in _TEMPORAL:
            need, factory = _TEMPORAL[logical]
            if t != need:
                raise _SchemaProblem(
                    path, f"{short_json(s)}: logicalType {logical} requires type {need}, not {t}"
                )
            return {"type": t, "logicalType": logical}, factory(), False
        if logical == "uuid":
            if t != "string":
                raise _SchemaProblem(
                    path, f"{short_json(s)}: logicalType uuid is supported on string only, not {t}"
                )
            return {"type": t, "logicalType": logical}, UuidLeaf("string/uuid"), False
        if logical == "decimal":
            if t != "bytes":
                raise _SchemaProblem(
                    path, f"{short_json(s)}: logicalType decimal requires bytes or fixed, not {t}"
                )
            precision, scale = self._decimal(s, None, path)
            canon = {"type": t, "logicalType": logical, "precision": precision, "scale": scale}
            return (
                canon,
                DecimalLeaf(f"bytes/decimal({precision}, {scale})", precision, scale),
                False,
            )
        return t, self._primitive(t, s, path), False

    def _decimal(self, s: Mapping, size: int | None, path: str) -> tuple[int, int]:
        precision, scale = s.get("precision"), s.get("scale", 0)
        # ``type(...) is int`` (not isinstance): a bool is not a decimal precision or scale
        if type(precision) is not int:
            raise _SchemaProblem(path, f"{short_json(s)}: decimal precision must be an integer")
        if type(scale) is not int:
            raise _SchemaProblem(path, f"{short_json(s)}: decimal scale must be an integer")
        if precision < 1 or scale < 0 or scale > precision:
            raise _SchemaProblem(
                path, f"{short_json(s)}: decimal needs precision >= 1 and 0 <= scale <= precision"
            )
        if precision > 38:
            raise _SchemaProblem(
                path,
                f"{short_json(s)}: decimal precision {precision} exceeds 38, "
                "the maximum of Arrow decimal128",
            )
        if size is not None:
            most = math.floor(math.log10(2) * (8 * size - 1)) if size else 0
            if precision > most:
                raise _SchemaProblem(
                    path,
                    f"{short_json(s)}: a fixed of {size} bytes holds at most {most} "
                    f"decimal digits, not {precision}",
                )
        return precision, scale

    # ---- unions and named types ----------------------------------------------
    def _union(self, s: list, ns: str | None, path: str) -> tuple[object, Node, bool]:
        def is_null(branch: object) -> bool:
            return branch == "null" or (
                isinstance(branch, Mapping) and branch.get("type") == "null"
            )

        nulls = [is_null(b) for b in s]
        if len(s) != 2 or nulls.count(True) != 1:
            raise _SchemaProblem(
                path,
                f'union {short_json(s)} is not supported: only a union of "null" and '
                'exactly one other type (["null", X] or [X, "null"]) maps to Arrow (a nullable X)',
            )
        other = s[nulls.index(False)]
        if isinstance(other, list):
            raise _SchemaProblem(
                path, f"union {short_json(s)} directly contains another union (invalid Avro)"
            )
        canon, node, _ = self.compile(other, ns, path)
        canons = ["null", canon] if nulls[0] else [canon, "null"]
        return canons, node, True

    def _record(self, s: Mapping, ns: str | None, path: str) -> tuple[object, Node, bool]:
        full, space, canon = self._define(s, ns, path)
        fields = s.get("fields", [])
        if not isinstance(fields, list):
            raise _SchemaProblem(path, f"'fields' of record {full!r} must be a list")
        self.named[full] = _IN_PROGRESS
        node = RecordNode(f"record {full}")
        canon_fields, node_fields, seen = [], [], set()
        for f in fields:
            fname = f.get("name") if isinstance(f, Mapping) else None
            if not isinstance(fname, str) or not _NAME_RE.match(fname):
                raise _SchemaProblem(
                    path, f"record {full!r} has a field with an invalid name: {short_json(f)}"
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

    def _enum(self, s: Mapping, ns: str | None, path: str) -> tuple[object, Node, bool]:
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
        node = EnumLeaf(f"enum {full}", list(symbols))
        self.named[full] = node
        canon.update(type="enum", symbols=list(symbols))
        return canon, node, False

    def _fixed(self, s: Mapping, ns: str | None, path: str) -> tuple[object, Node, bool]:
        full, _, canon = self._define(s, ns, path)
        size = s.get("size")
        if type(size) is not int or size < 0:
            raise _SchemaProblem(path, f"fixed {full!r} needs 'size', a non-negative integer")
        canon.update(type="fixed", size=size)
        logical = s.get("logicalType")
        if logical == "decimal":
            precision, scale = self._decimal(s, size, path)
            canon.update(logicalType=logical, precision=precision, scale=scale)
            node: Node = DecimalLeaf(
                f"fixed {full}/decimal({precision}, {scale})", precision, scale
            )
        elif logical in _UNSUPPORTED_LOGICAL or logical in _TEMPORAL or logical == "uuid":
            reason = (
                _UNSUPPORTED_LOGICAL.get(logical)
                or f"logicalType {logical} is not supported on fixed"
            )
            raise _SchemaProblem(path, f"{short_json(s)}: {reason}")
        else:
            node = FixedLeaf(f"fixed {full}({size})", size)
        self.named[full] = node
        return canon, node, False


def load_schema(schema: object) -> str | list[Any] | Mapping[Any, Any]:
    """The schema object of JSON text, a bare type name or an already-loaded dict or list."""
    if isinstance(schema, str):
        text = schema.strip()
        if text[:1] in ("{", "[", '"'):
            try:
                return json.loads(text)
            except json.JSONDecodeError as exc:
                raise InvalidArgumentError(
                    f"Avro schema text {short_json(schema)} is not valid JSON: {exc}"
                ) from None
        return text  # a bare type name such as long
    if isinstance(schema, (Mapping, list)):
        return schema
    raise InvalidArgumentError(
        "an Avro schema must be JSON text, a type name, a dict or a list, "
        f"got {type(schema).__name__} {schema!r:.80}"
    )


def compile_schema(obj: str | list[Any] | Mapping[Any, Any]) -> tuple[object, Node, bool]:
    """(canonical form, converter tree, nullable) of a loaded schema.

    Raises :class:`TypeMismatchError` for an invalid Avro schema or one that cannot
    be mapped to Arrow, naming the schema and the offending field.
    """
    try:
        canon, root, nullable = _Compiler().compile(obj, None, "")
    except _SchemaProblem as p:
        where = f"field '{p.path}': " if p.path else ""
        raise TypeMismatchError(
            f"Avro schema {short_json(obj)} cannot be mapped to Arrow: {where}{p.message}"
        ) from None
    except RecursionError:
        raise TypeMismatchError(
            f"Avro schema {short_json(obj)} is nested too deeply"
        ) from None
    try:
        # fastavro is typed for a dict; a non-dict Mapping (outside ValueSchema.parse's signature)
        # is handed on unchanged as before, and fastavro's rejection is reported below.
        _fastavro_parse(cast("str | list[Any] | dict[Any, Any]", obj), _write_hint=False)
    except Exception as exc:  # fastavro raises assorted exception types
        # fastavro mis-resolves references to null-namespace types inside a
        # namespace; our resolution already accepted every name, so ignore that one.
        if type(exc).__name__ != "UnknownType":
            raise TypeMismatchError(
                f"Avro schema {short_json(obj)} is invalid: {exc}"
            ) from None
    return canon, root, nullable

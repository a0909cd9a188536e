"""Type strings: parsing ``tuple<string,long>`` and Java spellings into declared types.

The canonical string of a type (its ``name``) is what checkpoint metadata
stores; Java spellings (``Integer``, ``byte[]``, ``Tuple2<String,Long>``) are
accepted on input only.
"""

from __future__ import annotations

import re

from statesource.errors import InvalidArgumentError, TypeMismatchError
from statesource.types.composites import RowType, TupleType
from statesource.types.datatype import DataType
from statesource.types.primitives import (
    BOOLEAN,
    BYTE,
    BYTES,
    CHAR,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    SHORT,
    STRING,
    TIMEWINDOW,
    VOID,
)

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

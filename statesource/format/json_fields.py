"""Typed reads of untrusted JSON: each field is exactly the JSON type it must be.

``json.loads`` gives Python values whose types only resemble the format's: a
``bool`` is an ``int``, a string is iterable like an array, and a float can
equal an integer. Every metadata field goes through one of these, so that a
value of the wrong JSON type is refused by name instead of being misread.

Every refusal is a :class:`ValueError`, so a parser can turn exactly these into
its corruption error and let a KeyError or TypeError of its own, a bug, through.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class MissingFieldError(ValueError):
    """A field the format requires is absent from its JSON object."""

    def __init__(self, name: str) -> None:
        super().__init__(f"missing field {name!r}")
        self.name = name


def json_field(data: object, name: str) -> Any:
    """Field ``name`` of a JSON object; a document of another shape is refused, not indexed."""
    fields = json_object(data)
    if name not in fields:
        raise MissingFieldError(name)
    return fields[name]


def json_int(value: Any) -> int:
    """JSON integers only: a float, string or bool in an integer field is corruption."""
    if type(value) is not int:
        raise ValueError(f"expected an integer, got {value!r:.80}")
    return value


def json_int_list(value: Any) -> list[int]:
    """A JSON array of integers only (one pass for a whole column of a key-group index)."""
    values = json_list(value)
    if not set(map(type, values)) <= {int}:
        json_int(next(item for item in values if type(item) is not int))
    return values


def json_list(value: Any) -> list:
    """A JSON array (iterating a string or an object instead would misread it)."""
    if not isinstance(value, list):
        raise ValueError(f"expected an array, got {value!r:.80}")
    return value


def json_object(value: Any) -> dict:
    if not isinstance(value, dict):
        raise ValueError(f"expected an object, got {value!r:.80}")
    return value


def json_nullable(value: object, parse: Callable[[Any], T]) -> T | None:
    """An optional field: JSON null, or what ``parse`` makes of it."""
    return None if value is None else parse(value)


def json_name(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected a non-empty name, got {value!r:.80}")
    return value


def check_unique(items: tuple, what: str, attribute: str = "name") -> None:
    names = [getattr(item, attribute) for item in items]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"{what} names {duplicates} appear more than once")

"""Records that can be dict keys: the struct user keys of a map state.

A map state's stored value is a dict keyed by user key; a record-typed user
key (a Flink ``Tuple``, ``Row`` or POJO, or a record schema) takes the dict
shape of its Avro schema, which Python cannot hash (nor an array's list). :class:`RecordKey` is
that dict with a hash over its contents, so the model's shape stays "a dict
of user keys" whatever their type. It must not be changed once used as a key.
"""

from __future__ import annotations

from typing import Any


class RecordKey(dict):
    """A record value (field name -> value) usable as a dict key."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(_frozen(self))


def _frozen(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted(((k, _frozen(v)) for k, v in value.items()), key=lambda kv: kv[0]))
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def hashable_record(value: Any) -> Any:
    """``value`` hashable: a record (a dict) as a :class:`RecordKey`, a list as a tuple."""
    if type(value) is dict:
        return RecordKey(value)
    if type(value) is list:
        return tuple(value)
    return value

"""The (composite key, value) pairs of a canonical savepoint, built from values.

:mod:`canonical_writer` frames a key group from pairs already serialized; this
module makes those pairs from statesource values, as Flink's canonical
savepoints hold them (the counterpart of the canonical decoding in
:mod:`keyed`):

- the **composite key**: the key-group prefix (one byte up to max parallelism
  128, else two, big-endian), the key, then the namespace; when both the key's
  and the namespace's serializers write values of varying length, each is
  followed by its own length in Flink's ``writeVariableIntBytes`` form (the
  low byte first, then further bytes while any bit is left), so that no key
  and namespace can run into each other; a map state's pair adds the user key
  at the end, with nothing after it;
- the **value** of a value, reducing or aggregating state: the value (the
  stored accumulator for aggregating state); of a list state: its elements
  joined by one ``,`` byte (``ListDelimited``); of a map state, one pair per
  entry: a null flag, then the value, even a null one, as the value's serializer
  writes it (so a null map value needs a serializer that can write a null);
- with **TTL**, every value, list element and map value is the TTL wrapper: its
  last-access timestamp, then the value (given as ``(value, timestamp)``, the
  shape statesource keeps TTL values in);
- a **timer**'s pair is all key: the prefix, then the timer as its serializer
  writes it (the timestamp with its sign bit flipped, the key, the namespace;
  no lengths), and an empty value.

What Flink keeps no entry for has no pair: a null value (``update(null)`` clears a value
state), an empty list and an empty map. A null key, and a null list element (Flink's
``ListState`` refuses them), are refused. Values are encoded by
:mod:`~statesource.flink.serializers.encoding`, so everything it refuses is refused here
too, with the state's name and the role of the value in the error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from statesource.errors import TypeMismatchError
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.layouts.canonical_writer import key_group_prefix, prefix_bytes
from statesource.flink.layouts.keyed import LIST_DELIMITER, variable_int_bytes
from statesource.flink.serializers.base import FlinkType
from statesource.flink.serializers.collections import ListType, MapType
from statesource.flink.serializers.encoding import (
    Write,
    inside,
    misfit,
    type_name,
    value_writer,
    write_part,
)
from statesource.flink.statefiles.keyed_header import StateInfo
from statesource.keygroups import assign_to_key_group
from statesource.model import StateKind

Pairs = list[tuple[bytes, bytes]]
_NULL, _PRESENT = 1, 0


class CompositeKeys:
    """Composite keys of the states of one key serializer and one namespace serializer."""

    def __init__(self, key: FlinkType, namespace: FlinkType, max_parallelism: int) -> None:
        self.key = key
        self.namespace = namespace
        self.max_parallelism = max_parallelism
        self.prefix_bytes = prefix_bytes(max_parallelism)
        self.ambiguous = key.length < 0 and namespace.length < 0
        """Whether key and namespace are each followed by their length (both vary in size)."""
        self._write_key = value_writer(key)
        self._write_namespace = value_writer(namespace)

    def key_group_of(self, key: Any) -> int:
        """The key group Flink assigns ``key`` to (murmur hash of its Java ``hashCode``)."""
        return assign_to_key_group(key, self.key.data_type(), self.max_parallelism)

    def key_and_namespace(self, key: Any, namespace: Any, key_group: int | None = None
                          ) -> bytes:
        """The composite key of ``key`` and ``namespace``: all of it but a map's user key.

        ``key_group`` is the key's (computed from the key when not given; a caller
        that already knows it saves the hash, and answers for it).
        """
        if key is None:
            raise misfit(key, type_name(self.key), "a key is never null in Flink")
        w = BinaryWriter()
        w.raw(key_group_prefix(self.key_group_of(key) if key_group is None else key_group,
                               self.max_parallelism))
        write_part(w, self._write_key, key, "the key")
        if self.ambiguous:
            w.raw(variable_int_bytes(len(w) - self.prefix_bytes))
        start = len(w)
        write_part(w, self._write_namespace, namespace, "the namespace")
        if self.ambiguous:
            w.raw(variable_int_bytes(len(w) - start))
        return w.getvalue()


class StateEntries:
    """The canonical pairs of one keyed state or timer state of a keyed-state file."""

    def __init__(self, key: FlinkType, info: StateInfo, max_parallelism: int) -> None:
        self.info = info
        self.max_parallelism = max_parallelism
        self.kind = None if info.is_timer else info.kind
        if self.kind is None:
            timer = info.timer
            self.keys = CompositeKeys(key, timer.namespace, max_parallelism)
            self._write_timer = value_writer(timer)
            return
        self.keys = CompositeKeys(key, info.namespace, max_parallelism)
        value = info.value
        if self.kind is StateKind.LIST:
            assert isinstance(value, ListType)
            self._write_element = value_writer(value.element)
        elif self.kind is StateKind.MAP:
            assert isinstance(value, MapType)
            self._write_user_key = value_writer(value.key)
            self._write_user_value = value_writer(value.value)
        else:
            self._write_value = value_writer(value)

    def _in_state(self, role: str, error: TypeMismatchError) -> TypeMismatchError:
        return inside(f"state {self.info.name!r}, {role}", error)

    def _written(self, write: Write, value: Any, role: str, flag: int | None = None) -> bytes:
        """``value`` as ``write`` writes it (after a null flag if ``flag`` is given)."""
        w = BinaryWriter()
        if flag is not None:
            w.u8(flag)
        write_part(w, write, value, "state {!r}, {}", self.info.name, role)
        return w.getvalue()

    def pairs(self, key: Any, namespace: Any, stored: Any, key_group: int | None = None
              ) -> Pairs:
        """The pairs of one entry: ``stored`` is the value, list or dict (a timer's timestamp)."""
        if self.kind is None:
            return [(self.timer_key(stored, key, namespace, key_group), b"")]
        try:
            composite = self.keys.key_and_namespace(key, namespace, key_group)
        except TypeMismatchError as error:
            raise self._in_state("entry", error) from None
        if self.kind is StateKind.MAP:
            if stored is None:
                return []
            if not isinstance(stored, Mapping):
                raise self._in_state("entry", misfit(stored, "map state", "expected a dict"))
            return [(composite + self.user_key(user_key), self.map_value(user_value))
                    for user_key, user_value in stored.items()]
        if self.kind is StateKind.LIST:
            return [] if not stored else [(composite, self.list_value(stored))]
        return [] if stored is None else [(composite, self.value(stored))]

    def value(self, stored: Any) -> bytes:
        """The value of a value, reducing or aggregating state (``(value, timestamp)`` with TTL)."""
        return self._written(self._write_value, stored, "value")

    def list_value(self, elements: Any) -> bytes:
        """A list state's value: the elements joined by ``,`` (none of them null)."""
        if not isinstance(elements, (list, tuple)) or not elements:
            raise self._in_state("value", misfit(elements, "list state",
                                                 "expected a non-empty list"))
        w = BinaryWriter()
        for index, element in enumerate(elements):
            if index:
                w.u8(LIST_DELIMITER)
            if element is None:
                raise self._in_state(f"element {index}", misfit(
                    element, "list state", "Flink's list state holds no nulls"))
            write_part(w, self._write_element, element, "state {!r}, element {}",
                       self.info.name, index)
        return w.getvalue()

    def user_key(self, user_key: Any) -> bytes:
        """A map state's user key, as it ends the composite key of its entry."""
        return self._written(self._write_user_key, user_key, "user key")

    def map_value(self, user_value: Any) -> bytes:
        """A map state's value: a null flag, then the value as its serializer writes it.

        Flink writes a null too after its flag, so only a serializer that can write a null
        (``String``, a POJO) has null map values in a canonical savepoint: Flink fails to
        write one of ``Long``, say, and so is it refused here.
        """
        return self._written(self._write_user_value, user_value, "user value",
                             _NULL if user_value is None else _PRESENT)

    def timer_key(self, timestamp: Any, key: Any, namespace: Any,
                  key_group: int | None = None) -> bytes:
        """A timer's composite key: the key-group prefix, then the timer element."""
        if key is None:
            raise self._in_state("timer", misfit(key, type_name(self.keys.key),
                                                 "a key is never null in Flink"))
        prefix = key_group_prefix(self.keys.key_group_of(key) if key_group is None else key_group,
                                  self.max_parallelism)
        return prefix + self._written(self._write_timer, (timestamp, key, namespace), "timer")

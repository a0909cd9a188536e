"""State descriptors: a state's name, kind, declared types and TTL.

Types are resolved when the descriptor is created, so a type that the
checkpoint format cannot store fails here, at the line the user wrote, and not
minutes later inside a background snapshot. A declared type is a word of the
key vocabulary (``"long"``, ``"tuple<string,long>"``), a
:class:`~statesource.types.DataType`, or an Avro schema (JSON text or dict).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar

import pyarrow as pa

from statesource.errors import InvalidArgumentError, StateSourceError, TypeMismatchError
from statesource.model import StateDeclaration, StateKind, TtlConfig
from statesource.schema import ValueSchema
from statesource.types import VOID, DataType, parse_type

IN = TypeVar("IN", contravariant=True)
ACC = TypeVar("ACC")
OUT = TypeVar("OUT", covariant=True)


class AggregateFunction(Protocol, Generic[IN, ACC, OUT]):
    """What an AggregatingState folds values with; the accumulator is what is stored."""

    def create_accumulator(self) -> ACC: ...

    def add(self, value: IN, accumulator: ACC) -> ACC: ...

    def get_result(self, accumulator: ACC) -> OUT: ...


def resolve_value_type(declared: str | dict | list | DataType | ValueSchema) -> ValueSchema:
    """The Avro-backed schema of a declared value type (see the module docstring)."""
    if isinstance(declared, ValueSchema):
        return declared
    if isinstance(declared, DataType):
        return ValueSchema.parse(declared.to_avro())
    if isinstance(declared, str) and not declared.lstrip().startswith(("{", "[", '"')):
        try:
            return ValueSchema.parse(parse_type(declared).to_avro())
        except InvalidArgumentError:
            pass  # not a vocabulary word: an Avro type name such as "double" or a named type
    return ValueSchema.parse(declared)


def _is_mutable(schema: ValueSchema) -> bool:
    """Values of nested types are dicts and lists, which a caller could change in place."""
    return pa.types.is_nested(schema.arrow_type)


class StateDescriptor:
    """A state's declaration: name, kind, typed roles, namespace type and TTL.

    ``schemas`` maps a role (``value``, ``element``, ``user_key``, ``user_value``,
    ``accumulator``) to its schema; the checkpoint metadata stores them by role.
    Programs use the subclasses below; a bare ``StateDescriptor`` is what a
    restored checkpoint declares before the program supplies its functions.
    """

    def __init__(
        self,
        name: str,
        kind: StateKind,
        schemas: Mapping[str, Any],
        *,
        namespace_type: str | DataType = VOID,
        ttl: TtlConfig | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"a state name must be a non-empty string, got {name!r}")
        if ttl is not None and not isinstance(ttl, TtlConfig):
            raise InvalidArgumentError(f"ttl of state {name!r} must be a TtlConfig, got {ttl!r}")
        try:
            self.declaration = StateDeclaration(
                name, kind, parse_type(namespace_type),
                {role: resolve_value_type(t) for role, t in schemas.items()}, ttl)
        except StateSourceError as error:
            raise type(error)(f"state {name!r}: {error}") from None
        self.name = name
        self.kind = kind
        self.ttl = ttl
        self.namespace_type = self.declaration.namespace_type
        self.schemas = dict(self.declaration.schemas)

    @classmethod
    def of(cls, declaration: StateDeclaration) -> StateDescriptor:
        """The descriptor a restored state carries until the program registers its own."""
        return cls(declaration.name, declaration.kind, declaration.schemas,
                   namespace_type=declaration.namespace_type, ttl=declaration.ttl)

    def state_copier(self) -> Callable[[Any], Any] | None:
        """How the state map copies a stored object shared with a snapshot (None: never)."""
        if any(_is_mutable(schema) for schema in self.schemas.values()):
            return copy.deepcopy
        if self.kind is StateKind.LIST:
            return list.copy
        if self.kind is StateKind.MAP:
            return dict.copy
        return None

    def same_declaration(self, other: StateDescriptor) -> bool:
        """Whether two descriptors declare the same stored state (functions aside)."""
        return self.declaration.same_types(other.declaration)

    def describe(self) -> str:
        return self.declaration.describe()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.describe()})"


class ValueStateDescriptor(StateDescriptor):
    def __init__(self, name: str, value_type: Any, **options: Any) -> None:
        super().__init__(name, StateKind.VALUE, {"value": value_type}, **options)


class ListStateDescriptor(StateDescriptor):
    def __init__(self, name: str, element_type: Any, **options: Any) -> None:
        super().__init__(name, StateKind.LIST, {"element": element_type}, **options)


class MapStateDescriptor(StateDescriptor):
    def __init__(self, name: str, user_key_type: Any, user_value_type: Any,
                 **options: Any) -> None:
        super().__init__(name, StateKind.MAP,
                         {"user_key": user_key_type, "user_value": user_value_type}, **options)


class ReducingStateDescriptor(StateDescriptor):
    def __init__(self, name: str, reduce_function: Callable[[Any, Any], Any], value_type: Any,
                 **options: Any) -> None:
        if not callable(reduce_function):
            raise InvalidArgumentError(
                f"state {name!r}: reduce function {reduce_function!r} is not callable"
            )
        self.reduce_function = reduce_function
        super().__init__(name, StateKind.REDUCING, {"value": value_type}, **options)


class AggregatingStateDescriptor(StateDescriptor):
    def __init__(self, name: str, aggregate_function: AggregateFunction, accumulator_type: Any,
                 **options: Any) -> None:
        missing = [m for m in ("create_accumulator", "add", "get_result")
                   if not callable(getattr(aggregate_function, m, None))]
        if missing:
            raise TypeMismatchError(
                f"state {name!r}: aggregate function {aggregate_function!r} lacks"
                f" {', '.join(missing)}"
            )
        self.aggregate_function = aggregate_function
        super().__init__(name, StateKind.AGGREGATING, {"accumulator": accumulator_type},
                         **options)

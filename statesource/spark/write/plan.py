"""What one keyed-state write produces: the state declared, its layout, where its files go.

Planned once on the driver, before any task runs, so every bad request (a
state that is an operator state, a DataFrame whose columns do not fit the
state, a key type or max parallelism that contradicts the operator) fails
with nothing written. The resulting :class:`StateWrite` is small and
picklable: Spark ships it to every task.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pyarrow as pa
from pyspark.errors import PySparkException
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import StructField, StructType

from statesource.errors import IncompatibleCheckpointError, InvalidArgumentError, TypeMismatchError
from statesource.format.columns import COLUMN_OF_ROLE, KEY, KEY_GROUP, NAMESPACE, TTL_TIMESTAMP
from statesource.format.target import KeyedStateSink, SnapshotTarget
from statesource.keygroups import check_max_parallelism, check_parallelism, default_max_parallelism
from statesource.model import VALUE_ROLES, StateDeclaration, StateKind
from statesource.schema import ValueSchema
from statesource.spark.options import WriteOptions
from statesource.spark.schema import OPERATOR_INDEX
from statesource.spark.write.value_types import avro_for, key_type_for
from statesource.types import VOID, DataType, key_type


@dataclass(frozen=True)
class StateWrite:
    """One keyed state to write: its declaration and layout, and the sink its files go to."""

    sink: KeyedStateSink
    operator: str
    declaration: StateDeclaration
    key_type: DataType
    max_parallelism: int
    parallelism: int
    timestamp_ms: int
    order_column: str | None


def plan_state(target: SnapshotTarget, options: WriteOptions, schema: StructType,
               declaration: StateDeclaration | None = None) -> StateWrite:
    """Declare the state a write of ``schema``-shaped rows replaces (or creates) in ``target``.

    ``declaration`` declares a new state completely (TTL included), as a
    re-keying job copies it from the source checkpoint.
    """
    for required in ("operator", "state"):
        if getattr(options, required) is None:
            raise InvalidArgumentError(f"write option {required} is required")
    assert options.operator is not None and options.state is not None
    uid, name = target.operator_uid(options.operator), options.state
    op = target.edit.operator(uid)
    existing = None
    if op is not None:
        existing = next((s for s in op.keyed_states if s.name == name), None)
        if any(s.name == name for s in op.operator_states):
            raise IncompatibleCheckpointError(
                f"state {name!r} of operator {uid!r} is an operator state; the writer"
                " writes keyed state")
    if declaration is None:
        declaration = (existing.declaration if existing is not None
                       else _declare(options, name, schema))
    _check_declared(options, declaration)
    if op is not None and op.keyed_states:
        keys, max_parallelism, parallelism = op.keyed_key_type, op.max_parallelism, op.parallelism
        _check_same(options, "keyType", options.key_type, keys)
        _check_same(options, "maxParallelism", options.max_parallelism, max_parallelism)
    elif op is not None:  # an operator with operator state only keeps its (max) parallelism
        keys = _key_type(options, schema)
        max_parallelism, parallelism = op.max_parallelism, op.parallelism
        _check_same(options, "maxParallelism", options.max_parallelism, max_parallelism)
    else:
        keys = _key_type(options, schema)
        parallelism = 1 if options.parallelism is None else options.parallelism
        max_parallelism = (default_max_parallelism(parallelism) if options.max_parallelism is None
                           else options.max_parallelism)
    check_max_parallelism(max_parallelism)
    check_parallelism(parallelism, max_parallelism)
    _check_same(options, "parallelism", options.parallelism, parallelism)
    _check_columns(schema, declaration, options.order_column)
    _check_types(schema, keys, declaration)
    return StateWrite(target.sink(uid, declaration, keys, max_parallelism), uid, declaration, keys,
                      max_parallelism, parallelism, target.timestamp_ms, options.order_column)


def _key_type(options: WriteOptions, schema: StructType) -> DataType:
    if options.key_type is not None:
        return options.key_type
    return key_type(key_type_for(_field(schema, KEY).dataType))


def _declare(options: WriteOptions, name: str, schema: StructType) -> StateDeclaration:
    """A new state's declaration: kind from the options, types from options or the schema."""
    if options.kind is None:
        raise InvalidArgumentError(
            f"state {name!r} does not exist yet: give {options.named('kind')} (one of"
            f" {', '.join(k.value for k in StateKind)}) to create it")
    schemas = {}
    for role in VALUE_ROLES[options.kind]:
        column = COLUMN_OF_ROLE[role]
        declared = options.value_schemas.get(role)
        if declared is None:
            declared = avro_for(_field(schema, column).dataType, column)
        schemas[role] = ValueSchema.parse(declared)
    namespace = VOID if options.namespace_type is None else options.namespace_type
    return StateDeclaration(name, options.kind, namespace, schemas, None)


def _check_declared(options: WriteOptions, declaration: StateDeclaration) -> None:
    _check_same(options, "kind", options.kind, declaration.kind)
    _check_same(options, "namespaceType", options.namespace_type, declaration.namespace_type)
    for role, avro in options.value_schemas.items():
        schema = declaration.schemas.get(role)
        if schema is None or schema != ValueSchema.parse(avro):
            raise IncompatibleCheckpointError(
                f"{options.named('valueSchemas')} gives {role}={json.dumps(avro)}, but state"
                f" {declaration.name!r} is {declaration.describe()}")


def _check_same(options: WriteOptions, option: str, wanted: object, actual: object) -> None:
    """An option that restates a fixed property must agree with it."""
    if wanted is not None and wanted != actual:
        shown = actual.value if isinstance(actual, StateKind) else actual
        raise IncompatibleCheckpointError(
            f"{options.named(option)} is {options.given[option]!r}, but the state already has"
            f" {shown};"
            " a write replaces a state's rows, not its declaration (rescale changes"
            " parallelism and max parallelism)")


def _check_columns(schema: StructType, declaration: StateDeclaration,
                   order_column: str | None) -> None:
    required = [KEY, *(COLUMN_OF_ROLE[r] for r in VALUE_ROLES[declaration.kind])]
    if declaration.namespace_type != VOID:
        required.append(NAMESPACE)
    if declaration.ttl is not None:
        required.append(TTL_TIMESTAMP)
    if order_column:
        required.append(order_column)
    allowed = {*required, NAMESPACE, KEY_GROUP, OPERATOR_INDEX}
    names = schema.fieldNames()
    missing = [c for c in required if c not in names]
    extra = [c for c in names if c not in allowed]
    if missing or extra:
        raise InvalidArgumentError(
            f"the DataFrame's columns {names} do not fit {declaration.describe()}:"
            + (f" missing {missing}" if missing else "")
            + (f" unexpected {extra}" if extra else "")
            + f"; expected {required} (plus optional {sorted(allowed - set(required))})")


def _check_types(schema: StructType, keys: DataType, declaration: StateDeclaration) -> None:
    """The key and value columns' types fit the state: checked here, before any task runs
    (the tasks check again, value by value)."""
    declared = [(KEY, keys.arrow_type, True, f"keys of type {keys} are {keys.arrow_type}")]
    for role in VALUE_ROLES[declaration.kind]:
        value = declaration.schemas[role]
        declared.append((COLUMN_OF_ROLE[role], value.arrow_type, False,
                         f"the state stores {value.arrow_type} (Avro {value.json})"))
    for column, arrow_type, exact, wanted in declared:
        try:
            given = to_arrow_type(schema[column].dataType, timezone="UTC")
        except (TypeError, ValueError, AssertionError, PySparkException):
            continue  # a type Arrow has no form for: the tasks refuse it
        if not same_shape(given, arrow_type, exact=exact):
            raise TypeMismatchError(f"column {column} has type {given}; {wanted}")


def same_shape(given: pa.DataType, declared: pa.DataType, *, exact: bool) -> bool:
    """Whether a cast from ``given`` keeps meaning: same structure and field names, leaves of
    one family (ints to ints, floats to floats, ...; exact: the same leaf types).

    Arrow would also cast strings to numbers or numbers to strings; a write must
    not reinterpret a column that way.
    """
    if pa.types.is_struct(declared):
        return (pa.types.is_struct(given) and [f.name for f in given] == [f.name for f in declared]
                and all(same_shape(g.type, d.type, exact=exact)
                        for g, d in zip(given, declared)))
    if pa.types.is_map(declared):
        return (pa.types.is_map(given)
                and same_shape(given.key_type, declared.key_type, exact=exact)
                and same_shape(given.item_type, declared.item_type, exact=exact))
    if pa.types.is_list(declared):
        return (pa.types.is_list(given) or pa.types.is_large_list(given)) and same_shape(
            given.value_type, declared.value_type, exact=exact)
    if exact or given == declared:
        return given == declared
    families = (pa.types.is_integer, pa.types.is_floating, pa.types.is_timestamp,
                pa.types.is_decimal, pa.types.is_date, pa.types.is_time,
                lambda t: pa.types.is_binary(t) or pa.types.is_fixed_size_binary(t)
                or pa.types.is_large_binary(t),
                lambda t: pa.types.is_string(t) or pa.types.is_large_string(t))
    return any(family(given) and family(declared) for family in families)


def _field(schema: StructType, name: str) -> StructField:
    if name not in schema.fieldNames():
        raise InvalidArgumentError(
            f"the DataFrame has no column {name!r} (columns: {schema.fieldNames()})")
    return schema[name]

"""What a ``flinkstate`` write produces: options checked, the base opened, the state declared.

Planned once on the driver, before any task runs, so every bad request (a
base checkpoint that does not exist, an id already taken, a DataFrame whose
columns do not fit the state) fails with nothing written. The resulting
:class:`WriteTarget` is small and picklable: Spark ships it to every task.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import StructField, StructType

from statesource.checks import check_checkpoint_id
from statesource.errors import (
    CheckpointExistsError,
    CheckpointNotFoundError,
    IncompatibleCheckpointError,
    InvalidArgumentError,
)
from statesource.format.columns import COLUMN_OF_ROLE, KEY, KEY_GROUP, NAMESPACE, TTL_TIMESTAMP
from statesource.format.edit import CheckpointEdit
from statesource.format.metadata import CheckpointMeta
from statesource.format.reader import read_metadata
from statesource.format.storage import (
    METADATA_FILE,
    Location,
    complete_checkpoints,
    resolve,
)
from statesource.keygroups import check_max_parallelism, check_parallelism, default_max_parallelism
from statesource.model import VALUE_ROLES, StateDeclaration, StateKind
from statesource.schema import ValueSchema
from statesource.spark.schema import OPERATOR_INDEX
from statesource.spark.value_types import avro_for, key_type_for
from statesource.types import VOID, DataType, key_type, parse_type

_KNOWN = {name.lower(): name for name in (
    "path", "operator", "state", "baseCheckpointId", "checkpointId", "kind", "keyType",
    "namespaceType", "maxParallelism", "parallelism", "valueSchemas", "orderColumn")}
"""Write options, by their lower-cased form (Spark lower-cases option names)."""


@dataclass(frozen=True)
class WriteTarget:
    """One keyed state to write into checkpoint ``checkpoint_id`` under ``root``."""

    root: Location
    checkpoint_id: int
    operator: str
    declaration: StateDeclaration
    key_type: DataType
    max_parallelism: int
    parallelism: int
    timestamp_ms: int
    order_column: str | None


@dataclass(frozen=True)
class NewCheckpoint:
    """Where a write's checkpoint goes and what it starts from (driver side only)."""

    root: Location
    base: CheckpointMeta | None
    checkpoint_id: int
    timestamp_ms: int


def parse_write_options(options: Mapping[str, object]) -> dict[str, str]:
    """Options by their camelCase name, as text (Python callers may pass ints); unknown
    ones are an error naming them."""
    lowered = {key.lower(): str(value) for key, value in options.items()}
    unknown = sorted(set(lowered) - set(_KNOWN))
    if unknown:
        raise InvalidArgumentError(
            f"unknown write option(s) {', '.join(unknown)}; known options:"
            f" {', '.join(_KNOWN.values())}")
    return {_KNOWN[key]: value for key, value in lowered.items()}


def new_checkpoint(path: str | None, base_checkpoint_id: int | None = None,
                   checkpoint_id: int | None = None) -> NewCheckpoint:
    """Open the base (default: the newest complete checkpoint, or none in an empty root)
    and choose the new id (default: newest + 1; an existing id is refused)."""
    if not path:
        raise InvalidArgumentError("write option path is required: the directory of checkpoints")
    root = resolve(path)
    if root.child(METADATA_FILE).exists():
        raise InvalidArgumentError(
            f"path {root} is one checkpoint; give the directory of checkpoints it belongs to")
    complete = complete_checkpoints(root)
    base = _open_base(root, complete, base_checkpoint_id)
    if checkpoint_id is None:
        checkpoint_id = max(complete, default=0) + 1
    check_checkpoint_id(checkpoint_id)
    if checkpoint_id in complete:
        raise CheckpointExistsError(
            f"checkpoint {checkpoint_id} already exists under {root}; checkpoints are never"
            " overwritten: choose another checkpointId")
    return NewCheckpoint(root, base, checkpoint_id, time.time_ns() // 1_000_000)


def plan_write(options: Mapping[str, str], schema: StructType) -> tuple[NewCheckpoint,
                                                                       WriteTarget]:
    """The ``df.write`` path: one state replaced in a new checkpoint."""
    given = parse_write_options(options)
    checkpoint = new_checkpoint(given.get("path"), optional_int(given, "baseCheckpointId"),
                                optional_int(given, "checkpointId"))
    return checkpoint, plan_state(checkpoint, CheckpointEdit(checkpoint.base), given, schema)


def plan_state(checkpoint: NewCheckpoint, edit: CheckpointEdit, given: Mapping[str, str],
               schema: StructType, declaration: StateDeclaration | None = None) -> WriteTarget:
    """Declare the state a write of ``schema``-shaped rows replaces (or creates) in ``edit``.

    ``declaration`` declares a new state completely (TTL included), as a
    re-keying job copies it from the source checkpoint.
    """
    given = parse_write_options(given)
    for required in ("operator", "state"):
        if not given.get(required):
            raise InvalidArgumentError(f"write option {required} is required")
    uid, name = given["operator"], given["state"]
    op = edit.operator(uid)
    existing = None
    if op is not None:
        existing = next((s for s in op.keyed_states if s.name == name), None)
        if any(s.name == name for s in op.operator_states):
            raise IncompatibleCheckpointError(
                f"state {name!r} of operator {uid!r} is an operator state; the writer"
                " writes keyed state")
    if declaration is None:
        declaration = (existing.declaration if existing is not None
                       else _declare(given, name, schema))
    _check_declared(given, declaration)
    if op is not None and op.keyed_states:
        keys, max_parallelism, parallelism = op.keyed_key_type, op.max_parallelism, op.parallelism
        _check_same(given, "keyType", keys, key_type)
        _check_same(given, "maxParallelism", max_parallelism, int)
    elif op is not None:  # an operator with operator state only keeps its (max) parallelism
        keys = _key_type(given, schema)
        max_parallelism, parallelism = op.max_parallelism, op.parallelism
        _check_same(given, "maxParallelism", max_parallelism, int)
    else:
        keys = _key_type(given, schema)
        given_parallelism = optional_int(given, "parallelism")
        parallelism = 1 if given_parallelism is None else given_parallelism
        given_max = optional_int(given, "maxParallelism")
        max_parallelism = (default_max_parallelism(max(parallelism, 1)) if given_max is None
                           else given_max)
    check_max_parallelism(max_parallelism)
    check_parallelism(parallelism, max_parallelism)
    _check_same(given, "parallelism", parallelism, int)
    order_column = given.get("orderColumn") or None
    _check_columns(schema, declaration, order_column)
    return WriteTarget(checkpoint.root, checkpoint.checkpoint_id, uid, declaration, keys,
                       max_parallelism, parallelism, checkpoint.timestamp_ms, order_column)


def _key_type(given: dict[str, str], schema: StructType) -> DataType:
    if "keyType" in given:
        return key_type(given["keyType"])
    return key_type(key_type_for(_field(schema, KEY).dataType))


def _open_base(root: Location, complete: dict[int, Location],
               base_id: int | None) -> CheckpointMeta | None:
    if base_id is None:
        return read_metadata(complete[max(complete)]) if complete else None
    if base_id not in complete:
        raise CheckpointNotFoundError(
            f"base checkpoint {base_id} does not exist under {root}; complete checkpoints:"
            f" {sorted(complete) or 'none'}")
    return read_metadata(complete[base_id])


def _declare(given: dict[str, str], name: str, schema: StructType) -> StateDeclaration:
    """A new state's declaration: kind from the options, types from options or the schema."""
    if "kind" not in given:
        raise InvalidArgumentError(
            f"state {name!r} does not exist yet: give the kind option (one of"
            f" {', '.join(k.value for k in StateKind)}) to create it")
    try:
        kind = StateKind(given["kind"])
    except ValueError:
        raise InvalidArgumentError(
            f"option kind must be one of {', '.join(k.value for k in StateKind)},"
            f" got {given['kind']!r}") from None
    explicit = _value_schemas(given)
    schemas = {}
    for role in VALUE_ROLES[kind]:
        column = COLUMN_OF_ROLE[role]
        declared = explicit.get(role)
        if declared is None:
            declared = avro_for(_field(schema, column).dataType, column)
        schemas[role] = ValueSchema.parse(declared)
    namespace = parse_type(given.get("namespaceType", VOID.name))
    return StateDeclaration(name, kind, namespace, schemas, None)


def _value_schemas(given: dict[str, str]) -> dict[str, Any]:
    text = given.get("valueSchemas")
    if text is None:
        return {}
    try:
        schemas = json.loads(text)
    except json.JSONDecodeError as error:
        raise InvalidArgumentError(f"option valueSchemas is not JSON: {error}") from None
    if not isinstance(schemas, dict):
        raise InvalidArgumentError(
            f"option valueSchemas must be a JSON object of role -> Avro schema, got {text!r}")
    return schemas


def _check_declared(given: dict[str, str], declaration: StateDeclaration) -> None:
    _check_same(given, "kind", declaration.kind.value, str)
    _check_same(given, "namespaceType", declaration.namespace_type, parse_type)
    explicit = _value_schemas(given)
    for role, avro in explicit.items():
        schema = declaration.schemas.get(role)
        if schema is None or schema != ValueSchema.parse(avro):
            raise IncompatibleCheckpointError(
                f"option valueSchemas gives {role}={json.dumps(avro)}, but state"
                f" {declaration.name!r} is {declaration.describe()}")


def _check_same(given: dict[str, str], option: str, actual: object,
                parse: Callable[[str], object]) -> None:
    """An option that restates a fixed property must agree with it."""
    if option not in given:
        return
    try:
        wanted = parse(given[option])
    except (ValueError, InvalidArgumentError):
        raise InvalidArgumentError(f"option {option} is invalid: {given[option]!r}") from None
    if wanted != actual:
        raise IncompatibleCheckpointError(
            f"option {option} is {given[option]!r}, but the state already has {actual}; a"
            " write replaces a state's rows, not its declaration (rescale changes"
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


def _field(schema: StructType, name: str) -> StructField:
    if name not in schema.fieldNames():
        raise InvalidArgumentError(
            f"the DataFrame has no column {name!r} (columns: {schema.fieldNames()})")
    return schema[name]


def optional_int(given: dict[str, str], option: str) -> int | None:
    """An integer option as plain ASCII digits, or None when absent."""
    text = given.get(option)
    if text is None or text == "":
        return None
    if not text.isascii() or not text.isdigit():
        raise InvalidArgumentError(f"option {option} must be a non-negative integer, got {text!r}")
    return int(text)

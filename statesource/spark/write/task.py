"""One Spark task of a ``flinkstate`` write: rows in, Flink-exact key groups, data files out.

Rows arrive in whatever order the DataFrame has. The task types every
column to the state's declaration (refusing what does not fit, naming the
column and the value), recomputes each row's key group (a ``key_group`` or
``operator_index`` column the input carries is checked, never trusted),
sorts stably by key group and entry, refuses duplicate entries, and writes
one data file per Flink subtask it holds rows of through the format's
data-file writer. Whether files of different tasks overlap is the driver's
check, in the commit.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from statesource.errors import InvalidArgumentError, StateSourceError, TypeMismatchError
from statesource.format.columns import (
    COLUMN_OF_ROLE,
    KEY,
    KEY_GROUP,
    NAMESPACE,
    TTL_ARROW_TYPE,
    TTL_TIMESTAMP,
    data_schema,
)
from statesource.format.entries import entry_starts, java_equality_columns, row_changes
from statesource.format.ipc import split_batches
from statesource.format.locations import DataFile
from statesource.keygroups import KeyGroupRange, key_groups, operator_indexes
from statesource.model import VALUE_ROLES, StateKind
from statesource.schema import ValueSchema
from statesource.spark.schema import OPERATOR_INDEX
from statesource.spark.write.plan import StateWrite, same_shape
from statesource.types import VOID, DataType

_NEEDS_PYTHON_CHECK = ("tuple", "row", "char")


def write_partition(target: StateWrite, batches: Iterable[pa.RecordBatch]) -> list[DataFile]:
    """Write this task's rows; returns the data files (none for an empty partition).

    On any failure the files this task wrote are removed before re-raising.
    """
    received = [b for b in batches if b.num_rows]
    if not received:
        return []
    table = pa.Table.from_batches(received)
    stored, groups = _typed_rows(target, table)
    written: list[DataFile] = []
    try:
        for subtask, rows, subtask_groups in _by_subtask(target, stored, groups):
            written.append(_write_subtask(target, subtask, rows, subtask_groups))
    except BaseException:
        target.sink.remove(written)
        raise
    return written


def _typed_rows(target: StateWrite, table: pa.Table) -> tuple[pa.Table, np.ndarray]:
    """The rows in the data-file schema, sorted by key group and entry; and their key groups."""
    declaration = target.declaration
    schema = data_schema(target.key_type, declaration)
    keys = key_column(target.key_type, table.column(KEY))
    groups = key_groups(keys, target.key_type, target.max_parallelism)
    _check_given(table, KEY_GROUP, groups, keys)
    if OPERATOR_INDEX in table.column_names:
        indexes = operator_indexes(target.max_parallelism, target.parallelism, groups)
        _check_given(table, OPERATOR_INDEX, indexes, keys)
    columns: dict[str, pa.Array | pa.ChunkedArray] = {
        KEY_GROUP: pa.array(groups, pa.int32()),
        KEY: keys,
        NAMESPACE: _namespace_column(declaration.namespace_type, table),
    }
    for role in VALUE_ROLES[declaration.kind]:
        column = COLUMN_OF_ROLE[role]
        columns[column] = _value_column(column, declaration.schemas[role], table.column(column),
                                        keys)
    if declaration.ttl is not None:
        columns[TTL_TIMESTAMP] = _ttl_column(table, target.timestamp_ms)
    rows = pa.Table.from_arrays([columns[name] for name in schema.names], schema=schema)
    order = _sort_keys(rows, declaration.kind, target.order_column, table)
    try:
        indices = pc.sort_indices(order,
                                  sort_keys=[(name, "ascending") for name in order.column_names])
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError) as error:
        raise TypeMismatchError(
            f"state {declaration.name!r} cannot be written from Spark: its keys, namespaces or"
            f" user keys hold lists or maps, which cannot be ordered ({error})") from None
    rows = rows.take(indices)
    groups = groups[indices.to_numpy()]
    _check_unique_entries(rows, order.take(indices), declaration.kind, declaration.name)
    return rows, groups


def key_column(key_type: DataType, given: pa.ChunkedArray) -> pa.ChunkedArray:
    """The key column as the key type's Arrow type; null or unfit keys are an error."""
    if given.null_count:
        row = pc.index(pc.is_null(given), True).as_py()
        raise InvalidArgumentError(f"column key is null at row {row}: keys cannot be null")
    if not same_shape(given.type, key_type.arrow_type, exact=True):
        raise TypeMismatchError(
            f"column key has type {given.type}; keys of type {key_type} are"
            f" {key_type.arrow_type}")
    keys = given.cast(key_type.arrow_type)
    if key_type.name.startswith(_NEEDS_PYTHON_CHECK):
        for value in key_type.from_arrow(keys):
            try:
                key_type.validate(value)
            except StateSourceError as error:
                raise type(error)(f"column key: {error}") from None
    return keys


def _check_given(table: pa.Table, column: str, computed: np.ndarray,
                 keys: pa.ChunkedArray) -> None:
    """A ``key_group`` / ``operator_index`` the input carries must be Flink's."""
    if column not in table.column_names:
        return
    given = table.column(column).cast(pa.int64()).to_numpy(zero_copy_only=False)
    wrong = np.flatnonzero(given != computed)
    if wrong.size:
        row = int(wrong[0])
        raise InvalidArgumentError(
            f"column {column} says {given[row]} for key {keys[row].as_py()!r}, but Flink"
            f" computes {computed[row]}: {column} is recomputed on write, drop the column or"
            " fix it")


def _namespace_column(namespace_type: DataType, table: pa.Table) -> pa.Array | pa.ChunkedArray:
    if namespace_type == VOID:
        if NAMESPACE in table.column_names and table.column(NAMESPACE).null_count != len(table):
            raise InvalidArgumentError(
                "column namespace has values, but the state has no namespaces (void)")
        return pa.nulls(table.num_rows)
    given = table.column(NAMESPACE)
    if not same_shape(given.type, namespace_type.arrow_type, exact=True):
        raise TypeMismatchError(
            f"column namespace has type {given.type}; namespaces of type {namespace_type} are"
            f" {namespace_type.arrow_type}")
    if given.null_count:
        raise InvalidArgumentError(
            f"column namespace is null at row {pc.index(pc.is_null(given), True).as_py()}:"
            f" the state's namespaces are {namespace_type}")
    try:
        return given.cast(namespace_type.arrow_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise TypeMismatchError(
            f"column namespace cannot hold namespaces of type {namespace_type}: {error}") from None


def _value_column(column: str, schema: ValueSchema, given: pa.ChunkedArray,
                  keys: pa.ChunkedArray) -> pa.ChunkedArray:
    """``given`` as the declared Arrow type; a value that does not fit is named with its key."""
    if not same_shape(given.type, schema.arrow_type, exact=False):
        raise TypeMismatchError(
            f"column {column} has type {given.type}; the state stores {schema.arrow_type}"
            f" (Avro {schema.json})")
    try:
        typed = given.cast(schema.arrow_type)
        if pa.types.is_floating(given.type) and not typed.type.equals(given.type):
            back = typed.cast(given.type)
            same = pc.or_kleene(pc.equal(back, given), pc.and_(pc.is_nan(back), pc.is_nan(given)))
            if not pc.all(pc.fill_null(same, True)).as_py():
                raise TypeMismatchError("narrowing changed a value")
        if typed.null_count and not schema.nullable:
            raise TypeMismatchError("null")
        if pa.types.is_nested(schema.arrow_type):
            schema.to_arrow(schema.to_python(typed))  # nested fields' nullability
        return typed
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeMismatchError):
        values = given.to_pylist()
        for row, value in enumerate(values):
            try:
                schema.validate(value)
            except TypeMismatchError as error:
                raise TypeMismatchError(
                    f"column {column}, key {keys[row].as_py()!r}: {error}") from None
        raise TypeMismatchError(
            f"column {column} of Spark type {given.type} cannot be stored as"
            f" {schema.arrow_type} (Avro {schema.json})") from None


def _ttl_column(table: pa.Table, timestamp_ms: int) -> pa.ChunkedArray:
    """Last-access times; a row without one was accessed now, when it is written."""
    given = table.column(TTL_TIMESTAMP)
    if not pa.types.is_timestamp(given.type) or given.type.tz is None:
        raise TypeMismatchError(
            f"column {TTL_TIMESTAMP} has type {given.type}; last-access times are timestamps"
            " (Spark's TIMESTAMP, with a time zone)")
    try:
        typed = given.cast(TTL_ARROW_TYPE)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise TypeMismatchError(
            f"column {TTL_TIMESTAMP} must be a timestamp in whole milliseconds: {error}") from None
    return pc.fill_null(typed, pa.scalar(timestamp_ms, TTL_ARROW_TYPE))


def _sort_keys(rows: pa.Table, kind: StateKind, order_column: str | None,
               given: pa.Table) -> pa.Table:
    """Columns to sort by: key group, then the entry (key and namespace fields flattened).

    Map entries also sort by user key, so a repeated user key is adjacent; list
    elements keep their input order (the sort is stable) or follow ``order_column``.
    """
    columns = {KEY_GROUP: rows.column(KEY_GROUP)}
    for name in (KEY, NAMESPACE):
        columns.update(java_equality_columns(name, rows.column(name)))
    if kind is StateKind.MAP:
        columns.update(java_equality_columns("user_key", rows.column("user_key")))
    if order_column is not None:
        columns["__order"] = given.column(order_column)
    return pa.table(columns)


def _check_unique_entries(rows: pa.Table, order: pa.Table, kind: StateKind, state: str) -> None:
    """Value, reducing and aggregating states hold one value per (key, namespace); a map
    one value per user key of an entry."""
    if kind is StateKind.LIST or rows.num_rows < 2:
        return
    columns = [order.column(name) for name in order.column_names if name != "__order"]
    duplicates = np.flatnonzero(~row_changes(columns))
    if duplicates.size:
        row = int(duplicates[0]) + 1
        what = "user key" if kind is StateKind.MAP else "(key, namespace)"
        detail = rows.slice(row, 1).to_pylist()[0]
        raise InvalidArgumentError(
            f"state {state!r}: {what} appears more than once, e.g. key {detail[KEY]!r},"
            f" namespace {detail[NAMESPACE]!r}"
            + (f", user key {detail['user_key']!r}" if kind is StateKind.MAP else ""))


def _by_subtask(target: StateWrite, rows: pa.Table, groups: np.ndarray
                ) -> Iterator[tuple[int, pa.Table, np.ndarray]]:
    """The rows of each Flink subtask present, in subtask order."""
    subtasks = operator_indexes(target.max_parallelism, target.parallelism, groups)
    bounds = np.flatnonzero(np.diff(subtasks)) + 1
    for start, end in zip([0, *bounds.tolist()], [*bounds.tolist(), len(groups)]):
        yield int(subtasks[start]), rows.slice(start, end - start), groups[start:end]


def _write_subtask(target: StateWrite, subtask: int, rows: pa.Table,
                   groups: np.ndarray) -> DataFile:
    """One file of the key groups this task holds of ``subtask``.

    Its range is the key groups present, not the subtask's whole range, so a
    subtask split over several tasks at key-group boundaries (as a
    ``flinkstate`` read splits large ones) still writes disjoint files.
    """
    present = KeyGroupRange(int(groups[0]), int(groups[-1]))
    return target.sink.write_subtask(subtask, present, rows.schema,
                                     _key_group_batches(rows, groups, target.declaration.kind))


def _key_group_batches(rows: pa.Table, groups: np.ndarray, kind: StateKind
                       ) -> Iterator[tuple[int, list[pa.RecordBatch], int]]:
    bounds = np.flatnonzero(np.diff(groups)) + 1
    starts = [0, *bounds.tolist()]
    ends = [*bounds.tolist(), len(groups)]
    entries = _entry_counts(rows, kind, starts, ends)
    for start, end, count in zip(starts, ends, entries):
        yield int(groups[start]), split_batches(rows, start, end - start), count


def _entry_counts(rows: pa.Table, kind: StateKind, starts: list[int],
                  ends: list[int]) -> list[int]:
    """Distinct (key, namespace) pairs per key group: rows are grouped by entry already."""
    if kind not in (StateKind.LIST, StateKind.MAP):
        return [end - start for start, end in zip(starts, ends)]
    entry_rows = np.union1d(entry_starts(rows.column(KEY), rows.column(NAMESPACE)), starts)
    return (np.searchsorted(entry_rows, ends) - np.searchsorted(entry_rows, starts)).tolist()

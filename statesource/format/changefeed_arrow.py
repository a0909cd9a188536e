"""The change feed's vectorised diff of one key group, for types Arrow compares as Java does.

Diffing in Python costs microseconds per entry; a hash join in Arrow costs a
fraction of that. The two sides' rows are joined on (key, namespace,
position), where the position is the element index of a list state or the
user key of a map state, and the values (with TTL timestamps) are compared
column-wise. That is exact only where Arrow's equality is Java's ``equals``:
integers, strings, booleans, binary, decimals, dates and times, but not
floats (``0.0 == -0.0``, ``NaN != NaN``) and not nested types, which Arrow's
join and ``equal`` do not take. States with such types are diffed in Python.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from statesource.format.columns import COLUMN_OF_ROLE, KEY, KEY_GROUP, NAMESPACE, TTL_TIMESTAMP
from statesource.format.entries import entry_starts, equal_or_both_null
from statesource.model import VALUE_ROLES, StateDeclaration, StateKind
from statesource.types import DataType

_POSITION, _VALUE, _TTL, _PRESENT = "position", "value", "ttl", "present"
_CHANGE_TYPES = pa.array(["insert", "delete", "update"])
"""Change types by code: a string column is built by one ``take`` of these."""


def _exact(arrow_type: pa.DataType) -> bool:
    return (pa.types.is_integer(arrow_type) or pa.types.is_string(arrow_type)
            or pa.types.is_boolean(arrow_type) or pa.types.is_binary(arrow_type)
            or pa.types.is_fixed_size_binary(arrow_type) or pa.types.is_decimal(arrow_type)
            or pa.types.is_temporal(arrow_type))


def arrow_diffable(key_type: DataType, declaration: StateDeclaration) -> bool:
    """Whether :func:`diff_tables` diffs this state exactly."""
    namespace = declaration.namespace_type.arrow_type
    return (_exact(key_type.arrow_type) and (pa.types.is_null(namespace) or _exact(namespace))
            and all(_exact(s.arrow_type) for s in declaration.schemas.values()))


KeyGroupPair = tuple[int, "pa.Table | None", "pa.Table | None"]
"""A key group and its rows in the start and the end checkpoint (None: no rows)."""


def diff_tables(pairs: Sequence[KeyGroupPair], declaration: StateDeclaration,
                stored: pa.Schema, schema: pa.Schema) -> pa.Table:
    """The change rows (of ``schema``) of several key groups, ordered by key group.

    Each table holds one key group's rows of the data-file schema ``stored``.
    The key groups are diffed together, one join for all, because a join has
    a fixed cost that would dominate per key group.
    """
    kind = declaration.kind
    namespaced = not pa.types.is_null(declaration.namespace_type.arrow_type)
    keys = [KEY_GROUP, KEY, *([NAMESPACE] if namespaced else []),
            *([_POSITION] if kind in (StateKind.LIST, StateKind.MAP) else [])]
    tables = [[stored.empty_table() if side is None else side for side in (before, after)]
              for _, before, after in pairs]
    lengths = np.array([[pair[i].num_rows for pair in tables] for i in (0, 1)],
                       dtype=np.int64)
    # One chunk per side: every later step then costs one call, not one per key group.
    before, after = (_side(pa.concat_tables([pair[i] for pair in tables]).combine_chunks(),
                           declaration, namespaced) for i in (0, 1))
    before, after, aligned = _split_aligned(before, after, lengths, keys)
    joined = aligned  # each row faced its counterpart and differs from it: all changes
    if before.num_rows or after.num_rows:
        unaligned = before.join(after, keys=keys, join_type="full outer", left_suffix="_old",
                                right_suffix="_new", coalesce_keys=True, use_threads=False)
        old_present = pc.is_valid(unaligned.column(f"{_PRESENT}_old"))
        new_present = pc.is_valid(unaligned.column(f"{_PRESENT}_new"))
        value_names = [_VALUE, *([_TTL] if declaration.ttl is not None else [])]
        same = pa.array(_same_values(unaligned, unaligned,
                                     [(f"{name}_old", f"{name}_new") for name in value_names]))
        changed = pc.or_(pc.invert(pc.and_(old_present, new_present)), pc.invert(same))
        unaligned = unaligned.filter(changed)
        joined = pa.concat_tables([unaligned, aligned.select(unaligned.column_names).cast(
            unaligned.schema)]).sort_by(KEY_GROUP)  # a join's rows come in no order
    old_present, new_present = (
        pc.is_valid(joined.column(f"{_PRESENT}_{side}")).to_numpy(zero_copy_only=False)
        for side in ("old", "new"))
    change_type = _CHANGE_TYPES.take(pa.array(np.where(old_present, np.where(new_present, 2, 1),
                                                       0).astype(np.int8)))
    columns = [joined.column(KEY_GROUP), change_type, joined.column(KEY),
               joined.column(NAMESPACE) if namespaced else pa.nulls(joined.num_rows)]
    if _POSITION in keys:
        columns.append(joined.column(_POSITION))
    columns += [joined.column(f"{_VALUE}_old"), joined.column(f"{_VALUE}_new")]
    if declaration.ttl is not None:
        columns += [joined.column(f"{_TTL}_old"), joined.column(f"{_TTL}_new")]
    return pa.Table.from_arrays([c.cast(f.type) for c, f in zip(columns, schema)],
                                schema=schema)


def _side(table: pa.Table, declaration: StateDeclaration, namespaced: bool) -> pa.Table:
    """One side's rows as (key, namespace, position, value, ttl, present) columns."""
    kind = declaration.kind
    value_column = COLUMN_OF_ROLE[VALUE_ROLES[kind][-1]]
    columns = {KEY_GROUP: table.column(KEY_GROUP), KEY: table.column(KEY)}
    if namespaced:
        columns[NAMESPACE] = table.column(NAMESPACE)
    if kind is StateKind.LIST:
        columns[_POSITION] = pa.array(_element_indices(table), pa.int32())
    elif kind is StateKind.MAP:
        columns[_POSITION] = table.column("user_key")
    columns[_VALUE] = table.column(value_column)
    if declaration.ttl is not None:
        columns[_TTL] = table.column(TTL_TIMESTAMP)
    columns[_PRESENT] = pa.array(np.ones(table.num_rows, dtype=np.bool_))
    return pa.table(columns)


def _split_aligned(before: pa.Table, after: pa.Table, lengths: np.ndarray,
                   keys: list[str]) -> tuple[pa.Table, pa.Table, pa.Table]:
    """Pair the rows that hold the same entry at the same index of a key group.

    A key group's rows come in the map's slot order, which an entry mostly
    keeps while it is updated, so most rows of an unchanged or updated entry
    face each other in the two checkpoints. Those rows are paired here by a
    column-wise comparison, and only the rest needs the join. Returns both
    sides without the paired rows, and the pairs whose values differ, laid
    out as the join lays out its result. Exact because the join keys are
    unique per side. ``lengths`` holds each side's rows per key group.
    """
    if (lengths[0] == lengths[1]).all():  # the usual case: entries updated, none added
        indices = [np.arange(before.num_rows)] * 2
        aligned_before, aligned_after = before, after
    else:
        starts = np.concatenate([np.zeros((2, 1), dtype=np.int64),
                                 np.cumsum(lengths, axis=1)[:, :-1]], axis=1)
        aligned = lengths.min(axis=0)
        within = np.arange(aligned.sum()) - np.repeat(np.cumsum(aligned) - aligned, aligned)
        indices = [np.repeat(starts[side], aligned) + within for side in (0, 1)]
        aligned_before, aligned_after = before.take(indices[0]), after.take(indices[1])

    def equal(names: list[str]) -> np.ndarray:
        result = np.ones(len(indices[0]), dtype=np.bool_)
        for name in names:
            same = pc.equal(aligned_before.column(name), aligned_after.column(name))
            result &= pc.fill_null(same, False).to_numpy(zero_copy_only=False)
        return result

    paired = equal(keys)
    values = [name for name in before.column_names if name not in keys and name != _PRESENT]
    updated = paired & ~_same_values(aligned_before, aligned_after,
                                     [(name, name) for name in values])

    mask = None if updated.all() else pa.array(updated)  # updates alone: all rows differ

    def picked(column: pa.ChunkedArray) -> pa.ChunkedArray:
        return column if mask is None else column.filter(mask)

    pairs = {name: picked(aligned_before.column(name)) for name in keys}
    for name in [*values, _PRESENT]:
        pairs[f"{name}_old"] = picked(aligned_before.column(name))
        pairs[f"{name}_new"] = picked(aligned_after.column(name))
    rest = []
    for side, table in zip(indices, (before, after)):
        keep = np.ones(table.num_rows, dtype=np.bool_)
        keep[side[paired]] = False
        rest.append(table.filter(pa.array(keep)) if keep.any() else table.slice(0, 0))
    return rest[0], rest[1], pa.table(pairs)


def _same_values(before: pa.Table, after: pa.Table, names: list[tuple[str, str]]
                 ) -> np.ndarray:
    """Per row, whether each pair of columns (one of ``before``, one of ``after``) is equal,
    two nulls included."""
    result = np.ones(before.num_rows, dtype=np.bool_)
    for old_name, new_name in names:
        result &= equal_or_both_null(before.column(old_name), after.column(new_name))
    return result


def _element_indices(table: pa.Table) -> np.ndarray:
    """Each row's position in its list: rows of one (key, namespace) are contiguous, and
    lie in one key group."""
    groups = table.column(KEY_GROUP).to_numpy()
    starts = np.union1d(entry_starts(table.column(KEY), table.column(NAMESPACE)),
                        np.flatnonzero(groups[1:] != groups[:-1]) + 1)
    return np.arange(table.num_rows) - np.repeat(starts[:-1], np.diff(starts))

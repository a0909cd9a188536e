"""Which rows hold the same (key, namespace) entry, decided by Java's ``equals`` over Arrow.

The rows of one entry are contiguous, so an entry starts wherever the key or
the namespace differs from the row before. "Differs" must mean what it means to
the state map, Java's ``equals``, not Arrow's comparison: floating-point values
compare by their bits (every NaN one value, ``0.0`` and ``-0.0`` two), two nulls
are equal, and a null struct differs from a struct whose fields are all null.
Readers regrouping a data file's rows, the Spark writer sorting rows, counting
entries and refusing duplicates, and the change feed numbering list elements all
decide here, so none of them can split or merge an entry the others would not.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from statesource.keyequality import java_float_bits


def entry_starts(keys: pa.Array | pa.ChunkedArray,
                 namespaces: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Row index where each (key, namespace) entry starts, plus the row count at the end."""
    rows = len(keys)
    if not rows:
        return np.zeros(1, dtype=np.int64)
    columns = [*java_equality_columns("key", keys).values(),
               *java_equality_columns("namespace", namespaces).values()]
    return np.concatenate([[0], np.flatnonzero(row_changes(columns)) + 1, [rows]])


def row_changes(columns: Sequence[pa.Array | pa.ChunkedArray]) -> np.ndarray:
    """For rows 1..n-1: whether any of ``columns`` differs from the row before (nulls equal).

    The columns compare as Arrow compares them: give the Java-equality form
    (:func:`java_equality_columns`) of anything that holds floats or structs.
    """
    changed = np.zeros(max(len(columns[0]) - 1, 0) if columns else 0, dtype=bool)
    for given in columns:
        column = given.combine_chunks() if isinstance(given, pa.ChunkedArray) else given
        changed |= ~equal_or_both_null(column.slice(0, changed.size), column.slice(1))
    return changed


def equal_or_both_null(left: pa.Array | pa.ChunkedArray,
                       right: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Per row, whether ``left`` and ``right`` hold equal values or are both null."""
    same = pc.or_(pc.fill_null(pc.equal(left, right), False),
                  pc.and_(pc.is_null(left), pc.is_null(right)))
    return same.to_numpy(zero_copy_only=False)


def java_equality_columns(name: str, column: pa.Array | pa.ChunkedArray) -> dict[str, pa.Array]:
    """The leaf columns that decide whether two of ``column``'s values are Java-equal, by path.

    Two rows are equal exactly when every leaf column is (nulls equal), and
    sorting by the leaf columns keeps equal rows adjacent. A struct gives its
    fields' leaves, then its validity when it holds nulls (Arrow nulls every
    field of a null struct, which alone would make it equal a struct of nulls);
    floating-point values give their Java bits; the null type (the void
    namespace) gives nothing.
    """
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_null(column.type):
        return {}
    if pa.types.is_struct(column.type):
        leaves: dict[str, pa.Array] = {}
        for index, field in enumerate(column.type):
            leaves.update(java_equality_columns(f"{name}.{field.name}",
                                                pc.struct_field(column, [index])))
        if column.null_count:
            leaves[name] = column.is_valid()
        return leaves
    if pa.types.is_floating(column.type):
        bits = java_float_bits(column.to_numpy(zero_copy_only=False))
        return {name: pa.array(bits, mask=column.is_null().to_numpy(zero_copy_only=False))}
    return {name: column}

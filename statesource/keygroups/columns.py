"""Key groups of Arrow columns whose type implies the key type (Spark's view of a key).

SQL functions receive columns, not declared key types, so the type comes from
the column as docs/FORMAT.md section 6 maps it: utf8 is a String (or Char,
which hashes the same), int32 / int64 / int16 / int8 / bool / float32 /
float64 the Java primitives, a struct whose first field is ``row_kind`` a
Flink Row and any other struct a Tuple. The Java shim applies the same rules
(jvm-shim/.../FlinkKeyGroups.java); both paths give the same answers and
errors. NULL in any argument gives NULL.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from statesource.errors import InvalidArgumentError, TypeMismatchError
from statesource.keygroups.assignment import UPPER_BOUND_MAX_PARALLELISM
from statesource.keygroups.bulk import java_hashes, murmur_hashes, operator_indexes
from statesource.types import (
    BOOLEAN,
    BYTE,
    BYTES,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    SHORT,
    STRING,
    DataType,
    RowType,
    TupleType,
    key_type,
)

ROW_KIND = "row_kind"
_PRIMITIVES: dict[pa.DataType, DataType] = {
    pa.string(): STRING, pa.large_string(): STRING, pa.int32(): INT, pa.int64(): LONG,
    pa.int16(): SHORT, pa.int8(): BYTE, pa.bool_(): BOOLEAN, pa.float32(): FLOAT,
    pa.float64(): DOUBLE, pa.binary(): BYTES, pa.large_binary(): BYTES,
}


def key_type_of_arrow(arrow_type: pa.DataType) -> DataType:
    """The Flink key type a column of ``arrow_type`` holds (fields of structs may be bytes)."""
    if arrow_type in _PRIMITIVES:
        return _PRIMITIVES[arrow_type]
    if pa.types.is_struct(arrow_type) and arrow_type.num_fields:
        names = [arrow_type.field(i).name for i in range(arrow_type.num_fields)]
        if names[0] == ROW_KIND:
            return RowType(tuple(key_type_of_arrow(arrow_type.field(i).type)
                                 for i in range(1, len(names))))
        return TupleType(tuple(key_type_of_arrow(f.type) for f in arrow_type))
    raise TypeMismatchError(
        f"a {arrow_type} column cannot be a Flink key: key types are string, int, bigint,"
        " smallint, tinyint, boolean, float, double and structs of them (tuples; rows when the"
        " first field is row_kind)"
    )


def key_groups_of_column(keys: pa.Array, max_parallelism: pa.Array) -> pa.Array:
    """``flink_key_group``: Flink's key group of each key, as int32 (NULL where an input is)."""
    declared = key_type(key_type_of_arrow(keys.type))
    present = _all_valid(keys, max_parallelism)
    result = np.zeros(len(keys), dtype=np.int32)
    if present.any():
        maxp = _checked(max_parallelism, present, "max parallelism", 1,
                        np.full(len(keys), UPPER_BOUND_MAX_PARALLELISM), "")
        hashes = _hashes(keys.filter(pa.array(present)), declared)
        result[present] = murmur_hashes(hashes) % maxp[present]
    return pa.array(result, mask=~present)


def operator_indexes_of_columns(key_groups: pa.Array, max_parallelism: pa.Array,
                                parallelism: pa.Array) -> pa.Array:
    """``flink_operator_index``: the subtask owning each key group (NULL where an input is)."""
    present = _all_valid(key_groups, max_parallelism, parallelism)
    result = np.zeros(len(key_groups), dtype=np.int32)
    if present.any():
        size = len(key_groups)
        maxp = _checked(max_parallelism, present, "max parallelism", 1,
                        np.full(size, UPPER_BOUND_MAX_PARALLELISM), "")
        p = _checked(parallelism, present, "parallelism", 1, maxp, " (the max parallelism)")
        groups = _checked(key_groups, present, "key group", 0, maxp - 1,
                          " for max parallelism {maxp}", maxp)
        configurations = np.unique(np.stack([maxp, p], axis=1)[present], axis=0)
        for config_maxp, config_p in configurations.tolist():  # usually one: literals
            rows = present & (maxp == config_maxp) & (p == config_p)
            result[rows] = operator_indexes(config_maxp, config_p, groups[rows])
    return pa.array(result, mask=~present)


def _all_valid(*columns: pa.Array) -> np.ndarray:
    present = np.ones(len(columns[0]), dtype=bool)
    for column in columns:
        if column.null_count:
            present &= column.is_valid().to_numpy(zero_copy_only=False)
    return present


def _checked(column: pa.Array, present: np.ndarray, what: str, low: int, high: np.ndarray,
             context: str, maxp: np.ndarray | None = None) -> np.ndarray:
    """An integer argument column as int64, every present value inside ``low..high``."""
    if not pa.types.is_integer(column.type):
        first = column.filter(pa.array(present))[0].as_py()
        raise TypeMismatchError(f"{what} must be an int, got {first!r}")
    values = pc.fill_null(column, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    bad = present & ((values < low) | (values > high))
    if bad.any():
        index = int(np.argmax(bad))
        where = context.format(maxp=None if maxp is None else int(maxp[index]))
        raise InvalidArgumentError(
            f"{what} {int(values[index])} is outside [{low}, {int(high[index])}]{where}")
    return values


def _hashes(keys: pa.Array, declared: DataType) -> np.ndarray:
    if isinstance(declared, (TupleType, RowType)):
        return java_hashes(declared.from_arrow(_canonical(keys, declared)), declared)
    return java_hashes(keys, declared)


def _canonical(column: pa.Array, declared: DataType) -> pa.Array:
    """Struct fields renamed to the vocabulary's ``f0..`` (Spark structs may name them freely)."""
    if not isinstance(declared, (TupleType, RowType)):
        return column
    offset = 1 if isinstance(declared, RowType) else 0
    children = [_canonical(column.field(i + offset), t) for i, t in enumerate(declared.fields)]
    names = [f"f{i}" for i in range(len(children))]
    if offset:
        children.insert(0, column.field(0))
        names.insert(0, ROW_KIND)
    return pa.StructArray.from_arrays(children, names=names, mask=column.is_null())

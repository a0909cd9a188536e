"""Key groups (and their subtasks) for a whole column of keys at once.

Restore, rewrite and rescale jobs assign millions of keys; a Python loop over
them is the bottleneck. Here Java ``hashCode`` and Flink's murmur hash run as
numpy operations on uint32 arrays, whose multiplication wraps exactly like
Java's 32-bit ``int``. The scalar functions in ``assignment`` stay the
reference: tests check that both paths agree key for key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from statesource.errors import TypeMismatchError
from statesource.keyequality import java_float_bits
from statesource.keygroups.assignment import (
    check_key_group,
    check_max_parallelism,
    check_parallelism,
)
from statesource.types import (
    BOOLEAN,
    BYTE,
    CHAR,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    SHORT,
    STRING,
    DataType,
    Row,
    RowType,
    TupleType,
)

_U32 = np.uint32
_NUMERIC = (INT, SHORT, BYTE, LONG, FLOAT, DOUBLE, BOOLEAN)
_CHUNK = 1 << 20


def key_groups(keys: Sequence[Any] | pa.Array | pa.ChunkedArray, key_type: DataType,
               max_parallelism: int) -> np.ndarray:
    """The key group of every key, as an int32 array in input order."""
    check_max_parallelism(max_parallelism)
    hashes = java_hashes(keys, key_type)
    return (murmur_hashes(hashes) % max_parallelism).astype(np.int32)


def operator_indexes(max_parallelism: int, parallelism: int, groups: np.ndarray) -> np.ndarray:
    """The subtask owning each key group, as int32: :func:`operator_index_for_key_group` of
    a whole column.

    The product of key group and parallelism is taken in int64, so narrow input
    columns cannot wrap before the division.
    """
    check_parallelism(parallelism, max_parallelism)
    wide = np.asarray(groups).astype(np.int64)
    outside = (wide < 0) | (wide >= max_parallelism)
    if outside.any():
        check_key_group(int(wide[np.argmax(outside)]), max_parallelism)
    return (wide * parallelism // max_parallelism).astype(np.int32)


def murmur_hashes(codes: np.ndarray) -> np.ndarray:
    """Flink's ``murmurHash`` of every int32 in ``codes`` (non-negative int64 result)."""
    h = np.asarray(codes).astype(np.int32).view(_U32) * _U32(0xCC9E2D51)
    h = _rotl(h, 15) * _U32(0x1B873593)
    h = _rotl(h, 13) * _U32(5) + _U32(0xE6546B64)
    h ^= _U32(4)
    h ^= h >> _U32(16)
    h *= _U32(0x85EBCA6B)
    h ^= h >> _U32(13)
    h *= _U32(0xC2B2AE35)
    h ^= h >> _U32(16)
    signed = h.view(np.int32).astype(np.int64)
    return np.abs(signed) % (1 << 31)  # |MIN_VALUE| = 2^31 wraps to 0, as Flink returns


def _rotl(h: np.ndarray, bits: int) -> np.ndarray:
    return (h << _U32(bits)) | (h >> _U32(32 - bits))


def java_hashes(values: Sequence[Any] | pa.Array | pa.ChunkedArray, value_type: DataType,
                nullable: bool = False) -> np.ndarray:
    """Java ``hashCode`` of every value as int32; a null hashes to 0 where ``nullable``."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        if not nullable and values.null_count:
            raise TypeMismatchError(f"a {value_type.name} key column must not contain nulls")
        if value_type is STRING and values.type in (pa.string(), pa.large_string()):
            return _string_hashes_arrow(values)
        if value_type in _NUMERIC and not values.null_count:
            return _arrow_numeric_hashes(values, value_type)
        values = value_type.from_arrow(values)  # tuples and Rows, not dicts, for composites
    values = list(values)
    present = [v is not None for v in values]
    if not all(present):
        if not nullable:
            index = present.index(False)
            raise TypeMismatchError(f"key at index {index} is None; keys must not be null")
        mask = np.array(present)
        hashes = np.zeros(len(values), dtype=np.int32)
        hashes[mask] = java_hashes([v for v in values if v is not None], value_type)
        return hashes
    return _hash_present(values, value_type)


def _hash_present(values: list[Any], value_type: DataType) -> np.ndarray:
    if value_type is STRING:
        return _string_hashes(values)
    if value_type in (INT, SHORT, BYTE, LONG):
        return _numeric_hashes(_checked_ints(values, value_type), value_type)
    if value_type in (FLOAT, DOUBLE):
        return _numeric_hashes(_checked_floats(values, value_type), value_type)
    if value_type is BOOLEAN:
        if any(type(v) is not bool for v in values):
            raise _first_invalid(values, value_type)
        return _numeric_hashes(np.array(values, dtype=bool), value_type)
    if value_type is CHAR:
        return np.array([CHAR.java_hash(v) for v in values], dtype=np.int32)
    if isinstance(value_type, TupleType):
        return _fold_fields(values, value_type, row_kinds=None)
    if isinstance(value_type, RowType):
        kinds = [v.kind.byte_value if isinstance(v, Row) else 0 for v in values]
        fields = [v.fields if isinstance(v, Row) else v for v in values]
        return _fold_fields(fields, value_type, row_kinds=np.array(kinds, dtype=_U32))
    return np.array([value_type.java_hash(v) for v in values], dtype=np.int32)


def _numeric_hashes(column: np.ndarray, value_type: DataType) -> np.ndarray:
    """hashCode of a typed numpy column (already range-checked)."""
    if value_type in (INT, SHORT, BYTE):
        return column.astype(np.int32)
    if value_type is LONG:
        bits = column.astype(np.int64).view(np.uint64)
        return (bits ^ (bits >> np.uint64(32))).astype(_U32).view(np.int32)
    if value_type is DOUBLE:
        bits = java_float_bits(column.astype(np.float64)).view(np.uint64)
        return (bits ^ (bits >> np.uint64(32))).astype(_U32).view(np.int32)
    if value_type is FLOAT:
        with np.errstate(over="ignore"):
            narrowed = column.astype(np.float32)
        return java_float_bits(narrowed)
    return np.where(column, 1231, 1237).astype(np.int32)


def _arrow_numeric_hashes(array: pa.Array, value_type: DataType) -> np.ndarray:
    try:
        typed = array.cast(value_type.arrow_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise TypeMismatchError(
            f"a {array.type} column is not a valid {value_type.name} key column: {error}"
        ) from None
    return _numeric_hashes(typed.to_numpy(zero_copy_only=False), value_type)


def _fold_fields(values: list[Any], composite: TupleType | RowType,
                 row_kinds: np.ndarray | None) -> np.ndarray:
    """Tuple and Row hashCodes, folded column by column instead of key by key."""
    arity = len(composite.fields)
    for index, value in enumerate(values):
        if not isinstance(value, tuple) or len(value) != arity:
            raise TypeMismatchError(
                f"key at index {index} is {value!r}, not a {composite.name} of {arity} fields"
            )
    columns = list(zip(*values)) if values else [() for _ in composite.fields]
    h = np.full(len(values), 0 if row_kinds is None else 1, dtype=_U32)
    for field_type, column in zip(composite.fields, columns):
        field_hashes = java_hashes(column, field_type, nullable=True).view(_U32)
        if row_kinds is not None and not isinstance(field_type, RowType):
            present = np.fromiter((v is not None for v in column), bool, len(column))
            field_hashes = np.where(present, field_hashes + _U32(31), _U32(0))
        h = h * _U32(31) + field_hashes
    if row_kinds is not None:
        h = row_kinds * _U32(31) + h
    return h.view(np.int32)


def _checked_ints(values: list[Any], value_type: DataType) -> np.ndarray:
    if any(type(v) is not int for v in values):
        raise _first_invalid(values, value_type)
    try:
        column = np.array(values, dtype=np.int64)
    except OverflowError:
        raise _first_invalid(values, value_type) from None
    if value_type is not LONG:
        low, high = {INT: (-(2**31), 2**31 - 1), SHORT: (-(2**15), 2**15 - 1),
                     BYTE: (-128, 127)}[value_type]
        if column.size and (column.min() < low or column.max() > high):
            raise _first_invalid(values, value_type)
    return column


def _checked_floats(values: list[Any], value_type: DataType) -> np.ndarray:
    if any(type(v) is not float for v in values):
        raise _first_invalid(values, value_type)
    return np.array(values, dtype=np.float64)


def _first_invalid(values: list[Any], value_type: DataType) -> TypeMismatchError:
    for index, value in enumerate(values):
        try:
            value_type.validate(value)
        except TypeMismatchError as error:
            return TypeMismatchError(f"key at index {index}: {error}")
    return TypeMismatchError(f"keys are not all valid {value_type.name} values")


def _string_hashes(values: list[Any]) -> np.ndarray:
    if any(type(v) is not str for v in values):
        raise _first_invalid(values, STRING)
    hashes = np.empty(len(values), dtype=np.int32)
    for start in range(0, len(values), _CHUNK):
        chunk = values[start:start + _CHUNK]
        joined = "".join(chunk)
        if joined.isascii():
            units = np.frombuffer(joined.encode("ascii"), dtype=np.uint8)
            lengths = np.fromiter(map(len, chunk), dtype=np.int64, count=len(chunk))
        else:
            encoded = [s.encode("utf-16-le", "surrogatepass") for s in chunk]
            units = np.frombuffer(b"".join(encoded), dtype=np.uint16)
            lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(chunk)) // 2
        hashes[start:start + len(chunk)] = _polynomial_hashes(units, lengths)
    return hashes


def _string_hashes_arrow(array: pa.Array) -> np.ndarray:
    """ASCII Arrow strings hash straight from the Arrow buffers, no Python objects."""
    if not pc.all(pc.string_is_ascii(array)).as_py():
        return _string_hashes(array.to_pylist())
    offset_type = np.int32 if array.type == pa.string() else np.int64
    _, offsets_buffer, data_buffer = array.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=offset_type)[
        array.offset:array.offset + len(array) + 1].astype(np.int64)
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer else np.empty(0, np.uint8)
    units = data[offsets[0]:offsets[-1]]
    return _polynomial_hashes(units, np.diff(offsets))


def _polynomial_hashes(units: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``h = 31*h + unit`` over each string's code units, as one segmented sum.

    Each unit contributes ``unit * 31^(distance to its string's end - 1)``;
    summing those in uint32 wraps exactly as Java's int arithmetic does.
    """
    hashes = np.zeros(len(lengths), dtype=_U32)
    if not units.size:
        return hashes.view(np.int32)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    exponents = np.repeat(ends, lengths) - 1 - np.arange(units.size, dtype=np.int64)
    powers = np.cumprod(np.full(int(lengths.max()), 31, dtype=_U32), dtype=_U32)
    powers = np.concatenate(([_U32(1)], powers[:-1]))
    terms = units.astype(_U32) * powers[exponents]
    nonempty = lengths > 0
    hashes[nonempty] = np.add.reduceat(terms, starts[nonempty], dtype=_U32)
    return hashes.view(np.int32)

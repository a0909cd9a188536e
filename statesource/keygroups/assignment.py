"""Flink's key-group arithmetic, reproduced bit for bit.

A restoring Flink job finds a key's state by recomputing its key group, so any
disagreement with Flink's ``KeyGroupRangeAssignment`` silently loses state.
Every function here mirrors one of Flink's with Java's 32-bit semantics and is
checked against vectors produced by a real Flink (``tests/keygroups/test_golden.py``).
"""

from __future__ import annotations

import struct
from typing import Any

import mmh3

from statesource.checks import check_int
from statesource.errors import InvalidArgumentError
from statesource.keygroups.range import KeyGroupRange
from statesource.types import DataType

UPPER_BOUND_MAX_PARALLELISM = 1 << 15
DEFAULT_LOWER_BOUND_MAX_PARALLELISM = 1 << 7
_INT32_MIN = -(2**31)
_PACK_INT = struct.Struct("<i").pack


def murmur_hash(code: int) -> int:
    """Flink's ``MathUtils.murmurHash``: MurmurHash3_x86_32 of the int, made non-negative.

    Integer.MIN_VALUE has no positive counterpart, so Flink maps it to 0.
    """
    hashed = mmh3.hash(_PACK_INT(code), 0, True)
    if hashed >= 0:
        return hashed
    return 0 if hashed == _INT32_MIN else -hashed


def compute_key_group_for_key_hash(key_hash: int, max_parallelism: int) -> int:
    """The key group of a key whose Java ``hashCode`` is ``key_hash``."""
    return murmur_hash(key_hash) % max_parallelism


def assign_to_key_group(key: Any, key_type: DataType, max_parallelism: int) -> int:
    """The key group Flink assigns ``key`` of the declared ``key_type`` to."""
    check_max_parallelism(max_parallelism)
    return murmur_hash(key_type.java_hash(key)) % max_parallelism


def operator_index_for_key_group(max_parallelism: int, parallelism: int, key_group: int) -> int:
    """The subtask that owns ``key_group`` when the operator runs with ``parallelism``."""
    check_parallelism(parallelism, max_parallelism)
    return check_key_group(key_group, max_parallelism) * parallelism // max_parallelism


def key_group_range_for_operator(
    max_parallelism: int, parallelism: int, operator_index: int
) -> KeyGroupRange:
    """The contiguous key groups subtask ``operator_index`` owns under ``parallelism``."""
    check_parallelism(parallelism, max_parallelism)
    if not 0 <= operator_index < parallelism:
        raise InvalidArgumentError(
            f"operator index {operator_index} is outside [0, {parallelism - 1}] for parallelism"
            f" {parallelism}"
        )
    start = (operator_index * max_parallelism + parallelism - 1) // parallelism
    end = ((operator_index + 1) * max_parallelism - 1) // parallelism
    return KeyGroupRange(start, end)


def default_max_parallelism(parallelism: int) -> int:
    """Flink's default max parallelism: 1.5x parallelism rounded up to a power of two, >= 128."""
    check_parallelism(parallelism, UPPER_BOUND_MAX_PARALLELISM)
    wanted = parallelism + parallelism // 2
    power = 1 << (wanted - 1).bit_length()
    return min(max(power, DEFAULT_LOWER_BOUND_MAX_PARALLELISM), UPPER_BOUND_MAX_PARALLELISM)


def check_max_parallelism(max_parallelism: int) -> int:
    """Validate a max parallelism (1..32768) and return it."""
    return check_int(max_parallelism, "max parallelism", 1, UPPER_BOUND_MAX_PARALLELISM)


def check_key_group(key_group: int, max_parallelism: int) -> int:
    """Validate a key group against its (already checked) max parallelism and return it."""
    if not 0 <= key_group < max_parallelism:
        raise InvalidArgumentError(
            f"key group {key_group} is outside [0, {max_parallelism - 1}] for max parallelism"
            f" {max_parallelism}"
        )
    return key_group


def check_parallelism(parallelism: int, max_parallelism: int) -> int:
    """Validate a parallelism against its max parallelism and return it."""
    check_max_parallelism(max_parallelism)
    return check_int(parallelism, "parallelism", 1, max_parallelism,
                     context=" (the max parallelism)")

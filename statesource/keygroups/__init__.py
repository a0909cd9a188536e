"""Flink-exact key groups: Java hashCodes, murmur hash, range assignment."""

from statesource.keygroups.assignment import (
    UPPER_BOUND_MAX_PARALLELISM,
    assign_to_key_group,
    check_max_parallelism,
    check_parallelism,
    compute_key_group_for_key_hash,
    default_max_parallelism,
    key_group_range_for_operator,
    murmur_hash,
    operator_index_for_key_group,
)
from statesource.keygroups.bulk import java_hashes, key_groups, murmur_hashes, operator_indexes
from statesource.keygroups.range import EMPTY_RANGE, KeyGroupRange

__all__ = [
    "EMPTY_RANGE",
    "UPPER_BOUND_MAX_PARALLELISM",
    "KeyGroupRange",
    "assign_to_key_group",
    "check_max_parallelism",
    "check_parallelism",
    "compute_key_group_for_key_hash",
    "default_max_parallelism",
    "java_hashes",
    "key_group_range_for_operator",
    "key_groups",
    "murmur_hash",
    "murmur_hashes",
    "operator_index_for_key_group",
    "operator_indexes",
]

"""Every row of the vectors a real Flink 2.3 produced must match (see shared/flink-golden)."""

from __future__ import annotations

import numpy as np
import pytest

from golden_vectors import golden_key, rows
from statesource.keygroups import (
    assign_to_key_group,
    default_max_parallelism,
    key_group_range_for_operator,
    key_groups,
    murmur_hash,
    murmur_hashes,
    operator_index_for_key_group,
    operator_indexes,
)
from statesource.types import key_type, parse_type


def test_java_hashcode_and_key_group_of_every_key():
    mismatches = []
    for row in rows("keygroups.csv"):
        declared, key = golden_key(row)
        hashed = declared.java_hash(key)
        group = assign_to_key_group(key, declared, int(row["max_parallelism"]))
        if (hashed, group) != (int(row["java_hashcode"]), int(row["key_group"])):
            mismatches.append((row, hashed, group))
    assert not mismatches, mismatches[:5]


def test_bulk_key_groups_match_golden_per_type():
    by_type: dict[tuple[str, int], list[dict[str, str]]] = {}
    for row in rows("keygroups.csv"):
        by_type.setdefault((row["key_type"], int(row["max_parallelism"])), []).append(row)
    for (type_name, max_parallelism), group_rows in by_type.items():
        declared = parse_type(type_name)
        keys = [golden_key(row)[1] for row in group_rows]
        expected = [int(row["key_group"]) for row in group_rows]
        assert key_groups(keys, declared, max_parallelism).tolist() == expected, type_name


def test_byte_array_keys_are_rejected_alone_but_hash_inside_a_row():
    with pytest.raises(TypeError, match="cannot be a key type"):
        key_type("byte[]")
    assert key_type("Row<byte[]>").name == "row<bytes>"


def test_murmur_hash():
    golden = rows("murmur.csv")
    inputs = [int(row["input"]) for row in golden]
    expected = [int(row["murmur_hash"]) for row in golden]
    assert [murmur_hash(value) for value in inputs] == expected
    assert murmur_hashes(np.array(inputs, dtype=np.int64)).tolist() == expected


def test_key_group_ranges():
    for row in rows("ranges.csv"):
        assigned = key_group_range_for_operator(
            int(row["max_parallelism"]), int(row["parallelism"]), int(row["operator_index"])
        )
        assert (assigned.start, assigned.end) == (int(row["start"]), int(row["end"])), row


def test_operator_index_for_key_group():
    for row in rows("operator_index.csv"):
        index = operator_index_for_key_group(
            int(row["max_parallelism"]), int(row["parallelism"]), int(row["key_group"])
        )
        assert index == int(row["operator_index"]), row


def test_vectorised_operator_indexes():
    by_config: dict[tuple[int, int], list[dict[str, str]]] = {}
    for row in rows("operator_index.csv"):
        config = (int(row["max_parallelism"]), int(row["parallelism"]))
        by_config.setdefault(config, []).append(row)
    for (max_parallelism, parallelism), config_rows in by_config.items():
        groups = np.array([int(row["key_group"]) for row in config_rows], dtype=np.int32)
        expected = [int(row["operator_index"]) for row in config_rows]
        assert operator_indexes(max_parallelism, parallelism, groups).tolist() == expected


def test_default_max_parallelism():
    for row in rows("default_maxp.csv"):
        computed = default_max_parallelism(int(row["parallelism"]))
        assert computed == int(row["default_max_parallelism"]), row

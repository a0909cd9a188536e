"""Flink's golden key-group vectors as Arrow columns, one table per key type.

Spark strings are UTF-8, so a string or char key holding a lone UTF-16 surrogate cannot
reach a SQL function; those rows are left out and counted (``GoldenColumns.skipped``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from golden_vectors import golden_key, rows


@dataclass
class GoldenColumns:
    key_type: str
    table: pa.Table  # key, max_parallelism int32, expected int32
    skipped: int


def _encodable(key) -> bool:
    try:
        str(key).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def golden_tables() -> list[GoldenColumns]:
    by_type: dict[str, list[dict[str, str]]] = {}
    for row in rows("keygroups.csv"):
        by_type.setdefault(row["key_type"], []).append(row)
    tables = []
    for type_name, group in sorted(by_type.items()):
        keys, max_ps, expected, skipped = [], [], [], 0
        declared = None
        for row in group:
            declared, key = golden_key(row)
            if isinstance(key, str) and not _encodable(key):
                skipped += 1
                continue
            keys.append(key)
            max_ps.append(int(row["max_parallelism"]))
            expected.append(int(row["key_group"]))
        table = pa.table({"key": declared.to_arrow(keys),
                          "max_parallelism": pa.array(max_ps, pa.int32()),
                          "expected": pa.array(expected, pa.int32())})
        tables.append(GoldenColumns(type_name, table, skipped))
    return tables

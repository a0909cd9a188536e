"""The vectors a real Flink 2.3 produced (shared/flink-golden), read row by row.

A helper beside the tests rather than inside one, because the key-group tests, their Arrow
column variant and the Spark SQL functions' tests all check against the same rows.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from statesource.keyjson import from_json
from statesource.types import DataType, parse_type


def _golden_dir() -> Path:
    """``shared/flink-golden`` beside the repository or beside any directory above it.

    A checkout is usually ``<dir>/main`` next to ``<dir>/shared``; a git worktree may sit one
    level deeper (``<dir>/wt/<branch>``) and must find the same vectors.
    """
    repository = Path(__file__).resolve().parents[1]
    for directory in repository.parents:
        candidate = directory / "shared" / "flink-golden"
        if candidate.is_dir():
            return candidate
    return repository.parent / "shared" / "flink-golden"


GOLDEN = _golden_dir()


def rows(name: str) -> list[dict[str, str]]:
    path = GOLDEN / name
    if not path.is_file():
        pytest.fail(
            f"golden vectors not found at {path}: the repository must sit beside shared/"
            " (clone it as <dir>/main next to <dir>/shared)"
        )
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def golden_key(row: dict[str, str]) -> tuple[DataType, Any]:
    declared = parse_type(row["key_type"])
    return declared, from_json(declared, json.loads(row["key_repr"]))

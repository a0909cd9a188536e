"""Locating the real Flink snapshots in ../shared/flink-savepoints (or $STATESOURCE_SHARED)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

SHARED = Path(os.environ.get("STATESOURCE_SHARED",
                             Path(__file__).resolve().parents[1].parent / "shared"))
SAVEPOINTS = SHARED / "flink-savepoints"


def shared_path(*parts: str) -> Path:
    path = SAVEPOINTS.joinpath(*parts)
    if not path.exists():
        pytest.fail(f"Flink snapshots not found at {path}: the repository must sit beside"
                    " shared/ (or set STATESOURCE_SHARED)")
    return path


def only(pattern: str) -> Path:
    found = sorted(shared_path().glob(pattern))
    assert len(found) == 1, (pattern, found)
    return found[0]


def expected(flavour: str) -> dict:
    return json.loads(shared_path(flavour, "expected_state.json").read_text())


JAVA_SNAPSHOTS = {
    "canonical": "java/canonical/savepoint-*",
    "native": "java/native/savepoint-*",
    "checkpoint-7": "java/checkpoints/chk-7",
}

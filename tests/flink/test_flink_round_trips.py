"""The Flink writers reproduce real Flink 2.3 output byte for byte.

Every ``_metadata`` at hand (the shared snapshots and the fixtures of
tests/fixtures/flink: canonical and native savepoints, checkpoints) is parsed
with the reader and written back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from flink_snapshots import only
from statesource.flink.metadata import parse_metadata
from statesource.flink.metadata_writer import write_metadata

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "flink"
SHARED = ["java/canonical/savepoint-*", "java/native/savepoint-*", "java/checkpoints/chk-4",
          "java/checkpoints/chk-7", "pyflink/savepoint-*"]
FIXTURE_SNAPSHOTS = [f"{variant}/{kind}" for variant in ("mp256", "mp128-snappy", "types")
                     for kind in ("canonical", "native")] + [
                         f"changes/checkpoints/chk-{i}" for i in (1, 2, 3)]
SNAPSHOTS = [f"shared:{p}" for p in SHARED] + [f"fixture:{p}" for p in FIXTURE_SNAPSHOTS]


def _directory(name: str) -> Path:
    where, pattern = name.split(":", 1)
    return only(pattern) if where == "shared" else FIXTURES / pattern


@pytest.mark.parametrize("name", SNAPSHOTS)
def test_metadata_is_written_back_byte_for_byte(name):
    path = _directory(name) / "_metadata"
    original = path.read_bytes()
    assert write_metadata(parse_metadata(original, str(path))) == original

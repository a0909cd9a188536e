"""The Flink writers reproduce real Flink 2.3 output byte for byte.

Every real snapshot at hand (the shared ones and the fixtures of
tests/fixtures/flink: canonical and native savepoints, checkpoints) is parsed
with the reader and written back: every ``_metadata``, and the header of every
keyed-state file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from flink_snapshots import only
from statesource.flink.binary import BinaryReader
from statesource.flink.header import read_keyed_header
from statesource.flink.header_writer import write_keyed_header
from statesource.flink.metadata import KeyedHandle, OperatorSnapshot, parse_metadata
from statesource.flink.metadata_writer import write_metadata
from statesource.flink.snapshot import FlinkSnapshot

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


def _keyed_files(snapshot: FlinkSnapshot) -> list[tuple[OperatorSnapshot, KeyedHandle, bytes]]:
    return [(op, handle, snapshot.read_bytes(handle.stream, 0, handle.stream.size))
            for op in snapshot.operators for handle in snapshot.keyed_handles(op)]


@pytest.mark.parametrize("name", SNAPSHOTS)
def test_metadata_is_written_back_byte_for_byte(name):
    path = _directory(name) / "_metadata"
    original = path.read_bytes()
    assert write_metadata(parse_metadata(original, str(path))) == original


@pytest.mark.parametrize("name", SNAPSHOTS)
def test_keyed_state_headers_are_written_back_byte_for_byte(name):
    snapshot = FlinkSnapshot.open(str(_directory(name)))
    files = _keyed_files(snapshot)
    assert files
    for _, handle, data in files:
        header = read_keyed_header(BinaryReader(data, snapshot.describe(handle.stream)))
        assert write_keyed_header(header) == data[:header.data_start]

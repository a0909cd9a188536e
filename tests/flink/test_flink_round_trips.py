"""The Flink writers reproduce real Flink 2.3 output byte for byte.

Every real snapshot at hand (the shared ones and the fixtures of
tests/fixtures/flink) is parsed with the reader and written back:

- every ``_metadata`` (canonical and native savepoints, checkpoints);
- the header of every keyed-state file;
- every key group of every canonical savepoint, re-framed from the raw pairs
  the reader extracts, against the file's (decompressed) bytes; and each whole
  canonical keyed-state file, assembled from the written header and the key
  groups as stored (Snappy streams as they are), with the offsets ``_metadata``
  records.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from flink_fixture_checks import FLINK_1X, SNAPSHOTS_1X
from flink_snapshots import only
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.snappy import unframe
from statesource.flink.handles import KeyedHandle, OperatorSnapshot
from statesource.flink.layouts.canonical_writer import assemble_keyed_file, frame_key_group
from statesource.flink.layouts.keyed import canonical_sections, check_key_group_range
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.flink.snapshot.metadata import parse_metadata
from statesource.flink.snapshot.metadata_writer import write_metadata
from statesource.flink.statefiles.keyed_header import read_keyed_header
from statesource.flink.statefiles.keyed_header_writer import write_keyed_header

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "flink"
SHARED = ["java/canonical/savepoint-*", "java/native/savepoint-*", "java/checkpoints/chk-4",
          "java/checkpoints/chk-7", "pyflink/savepoint-*"]
FIXTURE_SNAPSHOTS = [f"{variant}/{kind}"
                     for variant in ("mp256", "mp128-snappy", "types", "encoding")
                     for kind in ("canonical", "native")] + [
                         f"changes/checkpoints/chk-{i}" for i in (1, 2, 3)] + SNAPSHOTS_1X
SNAPSHOTS = [f"shared:{p}" for p in SHARED] + [f"fixture:{p}" for p in FIXTURE_SNAPSHOTS]
CANONICAL = ["shared:java/canonical/savepoint-*", "shared:pyflink/savepoint-*",
             "fixture:mp256/canonical", "fixture:mp128-snappy/canonical",
             "fixture:types/canonical", "fixture:encoding/canonical",
             *(f"fixture:{version}/{kind}" for version in FLINK_1X
               for kind in ("canonical", "rocksdb"))]


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


@pytest.mark.parametrize("name", CANONICAL)
def test_canonical_key_groups_are_reframed_byte_for_byte(name):
    snapshot = FlinkSnapshot.open(str(_directory(name)))
    framed = 0
    for op, handle, data in _keyed_files(snapshot):
        assert handle.savepoint
        source = snapshot.describe(handle.stream)
        header = read_keyed_header(BinaryReader(data, source))
        prefix = 1 if op.max_parallelism <= 128 else 2
        ranges = {key_group: (begin, end) for key_group, begin, end in check_key_group_range(
            handle.offsets, handle.start, handle.stream.size, header.data_start, source)}
        stored = []
        for key_group in range(handle.start, handle.end + 1):
            begin, end = ranges.get(key_group, (0, 0))
            raw = data[begin:end]
            stored.append(raw)
            if not raw:
                continue
            sections = canonical_sections(raw, source, begin, key_group, prefix,
                                          header.compressed)
            plain = unframe(raw, source, begin) if header.compressed else raw
            assert frame_key_group(key_group, op.max_parallelism, sections) == plain
            framed += 1
        whole, offsets = assemble_keyed_file(write_keyed_header(header), stored)
        assert whole == data
        assert tuple(offsets) == handle.offsets
    assert framed

"""RocksDB handles (Flink's ``IncrementalRemoteKeyedStateHandle``): parsed and written back,
read as exactly the canonical savepoint Flink wrote of the same state, their files found
(relative ones in the snapshot, a checkpoint's absolute ones in its job's ``shared/``),
hostile ones refused with one error naming the file, and rewrites converting them to
canonical files.

The fixtures are real Flink's: ``lazy/rocksdb-native`` and ``lazy/rocksdb-incremental``
(Flink 2.3; the checkpoint's SST files named by absolute paths of the machine that wrote
them), ``flink-1.20/rocksdb-native`` (Flink 1.20). That every state reads as the jobs' models
say is tested with the other kinds (test_lazy_states.py, test_generated_fixtures.py).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from flink_fixture_checks import FIXTURES, expected_keyed, found_keyed
from statesource.errors import CorruptCheckpointError
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.handles import KeyedHandle, RocksDBFile, RocksDBHandle, StreamHandle
from statesource.flink.operations.edit import drop_state
from statesource.flink.operations.rescale import rescale_max_parallelism
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.flink.snapshot.metadata import ROCKSDB, ROCKSDB_V2, parse_metadata
from statesource.flink.snapshot.metadata_writer import write_metadata

LAZY = FIXTURES / "lazy"
Change = Callable[[RocksDBHandle], RocksDBHandle]


def _handles(path: Path) -> list[RocksDBHandle]:
    metadata = parse_metadata((path / "_metadata").read_bytes(), "x")
    return [h for op in metadata.operators for s in op.subtasks for h in s.keyed
            if isinstance(h, RocksDBHandle)]


def _edit(snapshot: Path, change: Change) -> None:
    """Rewrite the RocksDB handles of ``snapshot``'s ``_metadata`` by ``change``."""
    path = snapshot / "_metadata"
    metadata = parse_metadata(path.read_bytes(), str(path))
    operators = tuple(dataclasses.replace(op, subtasks=tuple(
        dataclasses.replace(s, keyed=tuple(change(h) if isinstance(h, RocksDBHandle) else h
                                           for h in s.keyed))
        for s in op.subtasks)) for op in metadata.operators)
    path.write_bytes(write_metadata(dataclasses.replace(metadata, operators=operators)))


def _first(change: Change) -> Change:
    """``change`` of the handle of key groups 0.. alone."""
    return lambda handle: change(handle) if handle.start == 0 else handle


def _file(handle: RocksDBHandle, prefix: str) -> RocksDBFile:
    (found,) = [f for f in handle.files if f.name.startswith(prefix)]
    return found


def _copy(tmp_path: Path, kind: str) -> Path:
    shutil.copytree(LAZY / kind, tmp_path / kind)
    return tmp_path / kind


def _read_all(path: Path) -> None:
    checkpoint = FlinkCheckpoint.open(str(path))
    for state in ("count", "last", "vip", "rare", "late"):
        list(checkpoint.read_keyed_state(state, operator="lazy"))


def _utf(text: str) -> bytes:
    writer = BinaryWriter()
    writer.utf(text)
    return writer.getvalue()


def test_version_1_of_the_handle_is_version_2_without_size_and_id():
    # Flink 2.3's bytes of version 2 (type 11), less its checkpointed size and state handle id,
    # are version 1's (type 5), the layout both Flink 1.20's and 2.3's MetadataV2V3SerializerBase
    # read
    raw = (LAZY / "rocksdb-native" / "_metadata").read_bytes()
    metadata = parse_metadata(raw, "x")
    handles = _handles(LAZY / "rocksdb-native")
    assert len(handles) == 4 and all(h.handle_id and h.checkpointed_size for h in handles)
    expected = raw
    for handle in handles:
        head = handle.checkpoint_id.to_bytes(8, "big") + _utf(handle.backend_id)
        at = expected.index(bytes([ROCKSDB_V2]) + head)
        size_at = at + 1 + len(head) + 8
        assert expected[size_at:size_at + 8] == handle.checkpointed_size.to_bytes(8, "big")
        expected = (expected[:at] + bytes([ROCKSDB]) + expected[at + 1:size_at]
                    + expected[size_at + 8:])
        expected = expected.replace(_utf(handle.handle_id), b"", 1)
    version_1 = dataclasses.replace(metadata, operators=tuple(
        dataclasses.replace(op, subtasks=tuple(dataclasses.replace(s, keyed=tuple(
            dataclasses.replace(h, checkpointed_size=None, handle_id=None) for h in s.keyed))
            for s in op.subtasks)) for op in metadata.operators))
    assert write_metadata(version_1) == expected
    assert parse_metadata(expected, "x") == version_1


@pytest.mark.parametrize("files, canonical", [
    ("lazy/rocksdb-native", "lazy/rocksdb"), ("lazy/rocksdb-incremental", "lazy/rocksdb"),
    ("flink-1.20/rocksdb-native", "flink-1.20/rocksdb"),
    ("flink-1.20/rocksdb-checkpoint", "flink-1.20/rocksdb")])
def test_a_database_reads_as_flinks_canonical_savepoint_of_it(files, canonical):
    # each fixture's snapshots were taken of one job holding its final state: Flink's
    # canonical savepoint (written by iterating RocksDB) is the transcoded file, byte for byte
    ours, flinks = (FlinkSnapshot.open(str(FIXTURES / path)) for path in (files, canonical))
    compared = 0
    for op in flinks.operators:
        pairs = zip(ours.keyed_handles(ours.operator(op.operator_id)), flinks.keyed_handles(op),
                    strict=True)
        for mine, theirs in pairs:
            assert (mine.start, mine.offsets, mine.savepoint) == (
                theirs.start, theirs.offsets, theirs.savepoint)
            assert ours.read_bytes(mine.stream, 0, mine.stream.size) == flinks.read_bytes(
                theirs.stream, 0, theirs.stream.size)
            compared += 1
    assert compared == (4 if files.startswith("lazy") else 6)


def test_a_checkpoints_files_are_found_in_its_jobs_shared_directory():
    # the meta data streams are relative paths of chk-5, the databases' files absolute ones of
    # the machine that wrote them, under its job's shared/: a checkpoint mixing both
    checkpoint = LAZY / "rocksdb-incremental" / "chk-5"
    snapshot = FlinkSnapshot.open(str(checkpoint))
    handles = _handles(checkpoint)
    assert all(h.meta.relative for h in handles)
    assert all(not f.stream.relative and "/shared/" in (f.stream.path or "")
               for h in handles for f in h.files)
    for handle in handles:
        for file in handle.files:
            location = snapshot.file_location(file.stream)
            assert Path(location.path) == (LAZY / "rocksdb-incremental" / "shared"
                                           / Path(file.stream.path or "").name)
    assert snapshot.check_files() == sum(len(h.streams) for h in handles)


def test_a_missing_sst_file_is_named(tmp_path):
    job = _copy(tmp_path, "rocksdb-incremental")
    sst = _file(_handles(job / "chk-5")[0], "000025.sst")
    missing = job / "shared" / Path(sst.stream.path or "").name
    missing.unlink()
    with pytest.raises(CorruptCheckpointError, match=f"{missing}.* is missing"):
        _read_all(job)


def test_a_truncated_manifest_is_refused_naming_it(tmp_path):
    savepoint = _copy(tmp_path, "rocksdb-native")
    manifest = _file(_handles(savepoint)[0], "MANIFEST")
    path = savepoint / (manifest.stream.path or "")
    path.write_bytes(path.read_bytes()[:-100])
    short = dataclasses.replace(manifest.stream, size=manifest.stream.size - 100)

    def truncated(handle: RocksDBHandle) -> RocksDBHandle:
        return dataclasses.replace(handle, private=tuple(
            dataclasses.replace(f, stream=short) if f == manifest else f
            for f in handle.private))

    _edit(savepoint, truncated)
    with pytest.raises(CorruptCheckpointError,
                       match=rf"{path} \(RocksDB's MANIFEST-\d+\).*byte offset \d+"):
        _read_all(savepoint)


def test_a_bit_flipped_sst_file_is_refused_naming_it(tmp_path):
    savepoint = _copy(tmp_path, "rocksdb-native")
    sst = _file(_handles(savepoint)[0], "000025.sst")
    path = savepoint / (sst.stream.path or "")
    raw = bytearray(path.read_bytes())
    raw[10] ^= 0x20  # inside the first data block
    path.write_bytes(bytes(raw))
    with pytest.raises(CorruptCheckpointError,
                       match=rf"{path} \(RocksDB's 000025\.sst\): .*checksum.*byte offset 0"):
        _read_all(savepoint)


def test_a_file_of_another_size_than_recorded_is_named(tmp_path):
    savepoint = _copy(tmp_path, "rocksdb-native")
    sst = _file(_handles(savepoint)[0], "000025.sst")
    path = savepoint / (sst.stream.path or "")
    path.write_bytes(path.read_bytes() + b"\0")
    with pytest.raises(CorruptCheckpointError, match=f"{path} has {sst.stream.size + 1} bytes"):
        _read_all(savepoint)


@pytest.mark.parametrize("where", ["../outside.sst", "sub/../../outside.sst"])
def test_a_file_recorded_outside_the_snapshot_is_refused(tmp_path, where):
    savepoint = _copy(tmp_path, "rocksdb-native")
    (tmp_path / "outside.sst").write_bytes(b"")
    outside = StreamHandle(where, True, 0)
    _edit(savepoint, _first(lambda h: dataclasses.replace(h, shared=(
        RocksDBFile("000025.sst", outside), *h.shared[1:]))))
    with pytest.raises(CorruptCheckpointError, match=f"{where}.*not a relative path inside"):
        _read_all(savepoint)


def test_a_shared_file_leading_out_of_the_job_directory_is_refused(tmp_path):
    job = _copy(tmp_path, "rocksdb-incremental")
    sst = _file(_handles(job / "chk-5")[0], "000025.sst")
    name = Path(sst.stream.path or "").name
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (job / "shared" / name).rename(outside / name)
    (job / "shared" / name).symlink_to(outside / name)
    with pytest.raises(CorruptCheckpointError, match=f"shared/{name}.* leads outside"):
        _read_all(job)


def test_an_absolute_path_is_never_looked_for_outside_the_snapshot(tmp_path):
    # a savepoint (not a chk-<id>) has no job directory around it: a file recorded under some
    # shared/ is looked for in the savepoint alone
    savepoint = _copy(tmp_path, "rocksdb-native")
    sst = _file(_handles(savepoint)[0], "000025.sst")
    name = sst.stream.path or ""
    (tmp_path / "shared").mkdir()
    (savepoint / name).rename(tmp_path / "shared" / name)
    absolute = StreamHandle(f"file:/elsewhere/shared/{name}", False, sst.stream.size)
    _edit(savepoint, _first(lambda h: dataclasses.replace(h, shared=tuple(
        RocksDBFile(f.name, absolute) if f == sst else f for f in h.shared))))
    with pytest.raises(CorruptCheckpointError, match=f"{savepoint / name} is missing"):
        _read_all(savepoint)


def test_a_rocksdb_name_that_is_a_path_is_refused(tmp_path):
    savepoint = _copy(tmp_path, "rocksdb-native")
    _edit(savepoint, _first(lambda h: dataclasses.replace(h, shared=(
        dataclasses.replace(h.shared[0], name="../000025.sst"), *h.shared[1:]))))
    with pytest.raises(CorruptCheckpointError,
                       match=r"_metadata.*'\.\./000025\.sst' is not a bare file name"):
        FlinkCheckpoint.open(str(savepoint))


def test_keys_outside_the_handles_key_groups_are_no_state_of_it(tmp_path):
    # as Flink reads a database rebuilt by a rescaled restore (its tables hold keys of the key
    # groups it gave away; tests/flink/test_rocksdb_rescaled_checkpoints.py): a handle now
    # claiming key groups 0..15 of its 0..31 reads as those key groups alone (it used to be
    # refused: the JVM reader, reading key group by key group, served them)
    savepoint = _copy(tmp_path, "rocksdb-native")
    whole = _rows(savepoint)
    _edit(savepoint, _first(lambda h: dataclasses.replace(h, count=16)))
    kept = {state: [r for r in rows if not 16 <= r["key_group"] < 32]
            for state, rows in whole.items()}
    assert _rows(savepoint) == kept
    assert all(kept.values()) and kept != whole


def _rows(path: Path) -> dict[str, list[dict]]:
    checkpoint = FlinkCheckpoint.open(str(path))
    return {state: [r for t in checkpoint.read_keyed_state(state, operator="lazy")
                    for r in t.to_pylist()]
            for state in ("count", "last", "vip", "rare", "late")}


def test_column_families_other_than_the_meta_datas_states_are_refused(tmp_path):
    # the meta data of the subtask that never obtained "rare" or "vip", for one that did
    savepoint = _copy(tmp_path, "rocksdb-native")
    handles = _handles(savepoint)
    (fewer,) = [h for h in handles if h.start == 64]
    _edit(savepoint, _first(lambda h: dataclasses.replace(h, meta=fewer.meta)))
    with pytest.raises(CorruptCheckpointError,
                       match=r"meta data lists the states.*column families.*rare"):
        _read_all(savepoint)


def test_a_rewrite_converts_every_operators_rocksdb_files_to_canonical_ones(tmp_path):
    # dropping one state of "stateful" carries the other operators over: their RocksDB
    # databases become canonical files, and every state reads as the job's model says
    source = FIXTURES / "flink-1.20" / "rocksdb-native"
    output = tmp_path / "dropped"
    drop_state(str(source), str(output), "stateful", "avg")
    snapshot = FlinkSnapshot.open(str(output))
    handles = [h for op in snapshot.operators for s in op.subtasks for h in s.keyed]
    assert len(handles) == 6
    assert all(isinstance(h, KeyedHandle) and h.savepoint and h.stream.relative
               for h in handles)
    truth = json.loads((FIXTURES / "flink-1.20" / "expected.json").read_text())
    checkpoint = FlinkCheckpoint.open(str(output))
    for (operator, state), want in expected_keyed(truth, flink1x=True).items():
        if state == "avg":
            continue
        rows = [row for table in checkpoint.read_keyed_state(state, operator=operator)
                for row in table.to_pylist()]
        assert found_keyed(rows, operator, state, truth) == want, (operator, state)


@pytest.mark.parametrize("kind, converted", [("rocksdb", False), ("rocksdb-native", True),
                                             ("rocksdb-incremental", True)])
def test_a_rescale_says_when_it_converted_rocksdbs_files(kind, converted, tmp_path):
    done = rescale_max_parallelism(str(LAZY / kind), str(tmp_path / "out"), 256)
    assert done.converted is converted


def test_an_operator_that_does_not_decode_keeps_its_rocksdb_files(tmp_path):
    # "opaque"'s meta data names a serializer snapshot class no one knows: it fails alone, and
    # an edit of another operator copies its files as they are (a RocksDB handle still)
    source = tmp_path / "source"
    shutil.copytree(FIXTURES / "flink-1.20" / "rocksdb-native", source)
    opaque = FlinkSnapshot.open(str(source)).operator("opaque")
    for subtask in opaque.subtasks:
        (handle,) = subtask.keyed
        assert isinstance(handle, RocksDBHandle)
        meta = source / (handle.meta.path or "")
        meta.write_bytes(meta.read_bytes().replace(b"kryo.KryoSerializerSnapshot",
                                                   b"kryo.KryoSerializerSnapshoX"))
    output = tmp_path / "dropped"
    drop_state(str(source), str(output), "stateful", "avg")
    written = FlinkSnapshot.open(str(output))
    kept = [h for s in written.operator("opaque").subtasks for h in s.keyed]
    copied = [h for s in opaque.subtasks for h in s.keyed]
    assert [dataclasses.replace(h, meta=None, shared=(), private=()) for h in kept] == [
        dataclasses.replace(h, meta=None, shared=(), private=()) for h in copied]
    for mine, theirs in zip(kept, copied, strict=True):
        assert isinstance(mine, RocksDBHandle) and isinstance(theirs, RocksDBHandle)
        assert [f.name for f in mine.files] == [f.name for f in theirs.files]
        for stream, original in zip(mine.streams, theirs.streams, strict=True):
            assert stream.relative and (output / (stream.path or "")).read_bytes() == (
                source / (original.path or "")).read_bytes()
    assert "KryoSerializerSnapshoX" in (written.undecodable(written.operator("opaque")) or "")
    assert written.check_files() > 0
    rows = [row for table in FlinkCheckpoint.open(str(output)).read_keyed_state(
        "max_id", operator="stateful") for row in table.to_pylist()]
    assert len(rows) == 50

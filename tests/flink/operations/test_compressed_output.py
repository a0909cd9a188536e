"""Snappy-compressed savepoint output: compressed where the input was, or as asked.

A written savepoint keeps its input's compression (``mp128-snappy`` was taken with
``execution.checkpointing.snapshot-compression``, ``mp256`` without), unless
``compression`` asks for ``"snappy"`` or ``"none"``. The truth for the bytes is the
uncompressed output, which real Flinks restore elsewhere: each key group of a compressed
output is one framed stream that decompresses to exactly the bytes of the same key group of
the uncompressed output, and the files differ only in the header's flag. statesource reads
compressed output as it reads the uncompressed; a corrupt compressed file is refused,
naming it, and never copied into another savepoint.

That a real Flink restores compressed output, every key compared:
``test_flink_savepoint_rescale.py`` (Flink 2.3) and ``test_flink_1x_writes.py`` (1.20).
"""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_flink_export import (
    USERS,
    _checkpoint,
    _operator_backends,
    backends_of,
    populate_users,
)
from test_flink_target import COUNT, stage, values

from flink_fixture_checks import FIXTURES
from statesource.checkpointing import SubtaskBackends
from statesource.cli import main
from statesource.errors import CorruptCheckpointError, InvalidArgumentError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.snappy import STREAM_IDENTIFIER, unframe
from statesource.flink.layouts.keyed import canonical_sections, check_key_group_range
from statesource.flink.operations.edit import drop_state, erase_keys
from statesource.flink.operations.export import export_flink
from statesource.flink.operations.migrate import migrate
from statesource.flink.operations.rescale import rescale_max_parallelism
from statesource.flink.operations.savepoint_target import FlinkSavepointTarget
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.flink.statefiles.keyed_header import read_keyed_header
from statesource.flink.statefiles.operator_state import read_operator_header
from statesource.sources import open_target
from statesource.spark.options import parse_write_options
from statesource.spark.write.rewrite import publish_staged
from statesource.state.clock import ManualClock
from statesource.types import STRING

STATES = ("total", "avg", "last", "max_id", "events", "per_user",
          "_timer_state/event_user-timers")


def keyed_files(path) -> dict[tuple[str, int], tuple[bytes, list[tuple[int, int, int]], int]]:
    """Per (operator, first key group): a keyed-state file's bytes, its key groups' byte
    ranges and where its header ends."""
    snapshot = FlinkSnapshot.open(str(path))
    found = {}
    for op in snapshot.operators:
        for handle in snapshot.keyed_handles(op):
            data = snapshot.read_bytes(handle.stream, 0, handle.stream.size)
            header = read_keyed_header(BinaryReader(data, handle.stream.path or ""))
            found[(op.label, handle.start)] = (data, check_key_group_range(
                handle.offsets, handle.start, len(data), header.data_start, "f"),
                header.data_start)
    return found


def compression_flags(path) -> set[bool]:
    return {data[4] == 1 for data, _, _ in keyed_files(path).values()}


def operator_state_flags(path) -> set[bool]:
    """The compression flag of every managed operator-state file of a savepoint."""
    snapshot = FlinkSnapshot.open(str(path))
    return {read_operator_header(BinaryReader(snapshot.read_bytes(
        handle.stream, 0, handle.stream.size), "f")).compressed
        for op in snapshot.operators for subtask in op.subtasks for handle in subtask.operator}


@pytest.mark.parametrize("variant, compressed", [("mp256", False), ("mp128-snappy", True)])
def test_what_is_written_keeps_the_inputs_compression(variant, compressed, tmp_path):
    source = FIXTURES / variant / "canonical"
    assert compression_flags(source) == {compressed}
    rescaled = rescale_max_parallelism(source, tmp_path / "rescaled", 512)
    erased = erase_keys(source, tmp_path / "erased", "stateful", [3])
    dropped = drop_state(source, tmp_path / "dropped", "stateful", "total")
    for done in (rescaled, erased, dropped):
        assert done.compressed is compressed
        assert compression_flags(done.output) == {compressed}
        assert operator_state_flags(done.output) == {compressed}  # copied as they were


@pytest.mark.parametrize("variant", ["mp256", "mp128-snappy"])
def test_compressed_key_groups_are_the_uncompressed_ones_framed(variant, tmp_path):
    source = FIXTURES / variant / "canonical"
    packed = rescale_max_parallelism(source, tmp_path / "packed", 1024, compression="snappy")
    plain = rescale_max_parallelism(source, tmp_path / "plain", 1024, compression="none")
    assert (packed.compressed, plain.compressed) == (True, False)
    assert compression_flags(packed.output) == {True}
    assert compression_flags(plain.output) == {False}
    packed_files, plain_files = keyed_files(packed.output), keyed_files(plain.output)
    assert packed_files.keys() == plain_files.keys()
    groups = 0
    for where, (data, ranges, start) in packed_files.items():
        plain_data, plain_ranges, plain_start = plain_files[where]
        assert start == plain_start
        assert data[:4] + data[5:start] == plain_data[:4] + plain_data[5:start]  # the flag
        assert [k for k, _, _ in ranges] == [k for k, _, _ in plain_ranges]
        for (key_group, begin, end), (_, plain_begin, plain_end) in zip(ranges, plain_ranges):
            stream = data[begin:end]
            assert stream.startswith(STREAM_IDENTIFIER), (where, key_group)
            assert unframe(stream, "f", begin) == plain_data[plain_begin:plain_end]
            groups += 1
    assert groups == sum(op.key_groups for op in packed.operators) > 0
    assert sum(op.bytes for op in packed.operators) < sum(op.bytes for op in plain.operators)


def test_statesource_reads_its_compressed_output_as_the_uncompressed(tmp_path):
    source = FIXTURES / "mp256" / "canonical"
    packed = FlinkCheckpoint.open(rescale_max_parallelism(
        source, tmp_path / "packed", 300, compression="snappy").output)
    plain = FlinkCheckpoint.open(rescale_max_parallelism(
        source, tmp_path / "plain", 300, compression="none").output)
    for state in STATES:
        tables = [list(c.read_keyed_state(state, operator="stateful")) for c in (packed, plain)]
        assert tables[0] and [t.to_pylist() for t in tables[0]] == [
            t.to_pylist() for t in tables[1]], state
    assert (packed.read_operator_state("seen", operator="stateful")
            == plain.read_operator_state("seen", operator="stateful"))


@pytest.mark.parametrize("source, compression", [
    ("mp128-snappy/canonical", "none"),         # carried compressed files decompressed
    ("mp256/canonical", "snappy"),              # carried plain files compressed
    ("flink-1.20/rocksdb-checkpoint", "snappy"),  # RocksDB's files, converted, compressed
])
def test_an_edit_writes_every_operator_with_the_compression_asked(source, compression,
                                                                   tmp_path):
    """The operators an edit leaves alone are carried over with the compression asked too
    (their key groups written again, not re-keyed), operator state too, and read as
    before."""
    edited = erase_keys(FIXTURES / source, tmp_path / "edited", "stateful", [3],
                        compression=compression)
    assert compression_flags(edited.output) == {compression == "snappy"}
    assert operator_state_flags(edited.output) == {compression == "snappy"}
    kept = erase_keys(FIXTURES / source, tmp_path / "kept", "stateful", [3])
    readers = [FlinkCheckpoint.open(done.output) for done in (edited, kept)]
    rows = 0
    for op in readers[1].snapshot.operators:
        for state in readers[1].operator(op.label).keyed_states:
            tables = [list(r.read_keyed_state(state.name, operator=op.label)) for r in readers]
            assert [t.to_pylist() for t in tables[0]] == [
                t.to_pylist() for t in tables[1]], (op.label, state.name)
            rows += sum(t.num_rows for t in tables[0])
        for name in {s.name for sub in op.subtasks for h in sub.operator for s in h.states}:
            shares = [r.read_operator_state(name, operator=op.label) for r in readers]
            assert shares[0] == shares[1], (op.label, name)
    assert rows


def test_a_compressed_output_rescales_back_to_the_same_bytes(tmp_path):
    """Up compressed, then back asking for none: the bytes of the same round trip made
    uncompressed all the way."""
    source = FIXTURES / "mp256" / "canonical"
    up = rescale_max_parallelism(source, tmp_path / "up", 512, compression="snappy")
    back = rescale_max_parallelism(up.output, tmp_path / "back", 256, compression="none")
    plain_up = rescale_max_parallelism(source, tmp_path / "plain-up", 512)
    plain_back = rescale_max_parallelism(plain_up.output, tmp_path / "plain-back", 256)
    assert [d for d, _, _ in keyed_files(back.output).values()] == [
        d for d, _, _ in keyed_files(plain_back.output).values()]


def test_a_corrupt_compressed_file_is_refused_and_not_copied(tmp_path):
    written = rescale_max_parallelism(FIXTURES / "mp256" / "canonical", tmp_path / "packed",
                                      512, compression="snappy")
    files = keyed_files(written.output)
    (label, start), (data, ranges, _) = next(iter(files.items()))
    snapshot = FlinkSnapshot.open(written.output)
    name = next(h.stream.path for op in snapshot.operators for h in snapshot.keyed_handles(op)
                if (op.label, h.start) == (label, start))
    _, begin, end = ranges[len(ranges) // 2]
    damaged = bytearray(data)
    damaged[begin + len(STREAM_IDENTIFIER) + 4 + 4 + 2] ^= 0x5A  # inside the first chunk
    path = tmp_path / "packed" / name
    path.chmod(0o644)
    path.write_bytes(bytes(damaged))
    with pytest.raises(CorruptCheckpointError, match=name):
        rescale_max_parallelism(written.output, tmp_path / "again", 256)
    with pytest.raises(CorruptCheckpointError, match=name):
        erase_keys(written.output, tmp_path / "again", label, [3])
    assert sorted(os.listdir(tmp_path)) == ["packed"]


def test_an_unknown_compression_is_refused_before_anything(tmp_path):
    for run in (lambda: rescale_max_parallelism(FIXTURES / "mp256" / "canonical",
                                                tmp_path / "out", 512, compression="zstd"),
                lambda: drop_state(FIXTURES / "mp256" / "canonical", tmp_path / "out",
                                   "stateful", "total", compression="LZ4"),
                lambda: export_flink(tmp_path / "nothing", tmp_path / "out",
                                     compression="gzip")):
        with pytest.raises(InvalidArgumentError, match="'snappy' or 'none'"):
            run()
    assert os.listdir(tmp_path) == []


def test_the_cli_takes_compression_and_reports_it(tmp_path, capsys):
    source = str(FIXTURES / "mp128-snappy" / "canonical")
    assert main(["rescale", source, "--max-parallelism", "256", "--output",
                 str(tmp_path / "kept"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["compressed"] is True
    assert main(["drop", source, "--operator", "stateful", "--state", "total", "--output",
                 str(tmp_path / "plain"), "--compression", "none", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["compressed"] is False
    assert compression_flags(tmp_path / "plain") == {False}
    assert main(["erase", source, "--operator", "stateful", "--key", "3", "--output",
                 str(tmp_path / "bad"), "--compression", "zip"]) == 1
    assert "compression 'zip'" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


def test_exported_state_is_compressed_on_request(tmp_path):
    """``export_flink(compression="snappy")``: keyed and operator-state files flagged, each
    key group one framed stream, and the state read back as from the uncompressed export."""
    keyed = backends_of("string", 128, 2, USERS, populate_users, ManualClock(1_700_000_000_000))
    operator = _operator_backends(2)
    source = _checkpoint(tmp_path / "checkpoints", {
        "users": [SubtaskBackends(k, o) for k, o in zip(keyed, operator)]})
    packed = export_flink(source, tmp_path / "packed", compression="snappy")
    plain = export_flink(source, tmp_path / "plain")
    assert (packed.compressed, plain.compressed) == (True, False)
    assert compression_flags(packed.output) == {True}
    assert compression_flags(plain.output) == {False}
    snapshot = FlinkSnapshot.open(packed.output)
    (op,) = snapshot.operators
    for subtask in op.subtasks:
        (handle,) = subtask.operator
        data = snapshot.read_bytes(handle.stream, 0, handle.stream.size)
        header = read_operator_header(BinaryReader(data, "f"))
        assert header.compressed
        assert data[header.data_start:].startswith(STREAM_IDENTIFIER)
    readers = [FlinkCheckpoint.open(done.output) for done in (packed, plain)]
    for state in ("value", "list", "map", "ttl_map"):
        tables = [list(r.read_keyed_state(state, operator="users")) for r in readers]
        assert tables[0] and [t.to_pylist() for t in tables[0]] == [
            t.to_pylist() for t in tables[1]], state
    for state in ("offsets", "seen", "rules"):
        shares = [r.read_operator_state(state, operator="users") for r in readers]
        assert shares[0] == shares[1] and any(shares[0]), state


@pytest.mark.parametrize("base, compression, compressed", [
    (None, None, False),                      # from nothing: nothing to keep
    (None, "snappy", True),
    ("mp128-snappy/canonical", None, True),   # the base's, kept
    ("mp128-snappy/canonical", "none", False),
])
def test_a_spark_writes_savepoint_is_compressed_as_its_base_or_as_asked(base, compression,
                                                                       compressed, tmp_path):
    """The target of ``write_state``, ``rewrite`` and ``df.write`` with an output (here
    without Spark: the task's staging and the driver's publish): a new operator and the
    base's operators alike; the rows read back."""
    output = tmp_path / "out"
    target = FlinkSavepointTarget.open(None if base is None else str(FIXTURES / base),
                                       str(output), compression=compression)
    keys = [f"user-{i}" for i in range(300)]
    files = stage(target, "counter", COUNT, STRING,
                  pa.record_batch({"key": keys, "value": list(range(300))}), 128, 3)
    publish_staged(target, files, [])
    assert compression_flags(output) == {compressed}
    assert values(output, "counter", "count") == dict(zip(keys, range(300)))


def test_write_options_take_compression_for_a_savepoint_only(tmp_path):
    options = parse_write_options({"path": "p", "output": "o", "compression": "snappy"})
    assert options.compression == "snappy"
    assert options.without_checkpoint_options().compression is None
    with pytest.raises(InvalidArgumentError, match="compression snappy is of a new Flink"):
        open_target(str(tmp_path / "checkpoints"), compression="snappy")
    with pytest.raises(InvalidArgumentError, match="compression 'lz4'"):
        FlinkSavepointTarget.open(None, str(tmp_path / "out"), compression="lz4")
    assert os.listdir(tmp_path) == []


def test_a_migration_is_compressed_on_request(tmp_path):
    """The 1.20 fixture (uncompressed) migrated for Flink 2.3: its operators' files carried
    over are written again compressed; and as they were by default."""
    source = str(FIXTURES / "flink-1.20" / "canonical")
    migrate(source, str(tmp_path / "packed"), skip_unmigratable=True, compression="snappy")
    migrate(source, str(tmp_path / "kept"), skip_unmigratable=True)
    assert compression_flags(tmp_path / "packed") == {True}
    assert compression_flags(tmp_path / "kept") == {False}
    packed = keyed_files(tmp_path / "packed")
    for where, (data, ranges, _) in keyed_files(tmp_path / "kept").items():
        packed_data, packed_ranges, _ = packed[where]
        assert [unframe(packed_data[b:e], "f") for _, b, e in packed_ranges] == [
            data[b:e] for _, b, e in ranges]


@pytest.fixture(scope="module")
def compressed_key_groups(tmp_path_factory) -> list[tuple[int, bytes, int]]:
    """(key group, stored bytes, max parallelism) of every key group of a compressed output."""
    output = tmp_path_factory.mktemp("hostile") / "packed"
    rescale_max_parallelism(FIXTURES / "mp256" / "canonical", output, 512, compression="snappy")
    return [(key_group, data[begin:end], 512)
            for data, ranges, _ in keyed_files(output).values()
            for key_group, begin, end in ranges]


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_a_damaged_compressed_key_group_is_refused_or_reads_the_same(compressed_key_groups,
                                                                      data):
    """Any byte of a written key group changed: the reader refuses it as corrupt, naming
    the file, or (a change Snappy's framing ignores) reads exactly the original pairs."""
    key_group, stored, max_parallelism = data.draw(st.sampled_from(compressed_key_groups))
    prefix = 1 if max_parallelism <= 128 else 2
    original = canonical_sections(stored, "f", 0, key_group, prefix, True)
    damaged = bytearray(stored)
    damaged[data.draw(st.integers(0, len(stored) - 1))] ^= data.draw(st.integers(1, 255))
    try:
        read = canonical_sections(bytes(damaged), "f", 0, key_group, prefix, True)
    except CorruptCheckpointError as error:
        assert str(error).startswith("f")
    else:
        assert read == original

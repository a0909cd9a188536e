"""The JVM reader's SST tables (jvm-shim's RocksColumnFamily.java) read what the Python reader
reads: every column family of the real Flink fixtures, whole and by random key ranges; databases
a real RocksDB (rocksdict's) wrote under random table options, with deletions, range deletions,
compactions and ingested files; damaged tables, refused as the Python reader refuses them
(CorruptCheckpointError naming the file, never another exception, never other data); and its
XXH3 against the ``xxhash`` package. The merge operands Flink's own RocksDB writes are held to
RocksDB's own read in test_rocksdb_flink.py. One JVM (tests/jvm/SstEcho.java) serves the module.
"""

from __future__ import annotations

import random
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st
from rocksdict import Checkpoint, Rdict, SstFileWriter
from sst_echo import (
    Echo,
    Table,
    directory_tables,
    java_tables,
    python_scans,
    random_ranges,
    start_echo,
)
from test_rocksdb_hostile_tables import ROWS, _first_data_block, _with_index_entry

from rocksdict_files import TableOptions, table_options, write_table
from statesource.errors import CorruptCheckpointError, UnsupportedFormatVersionError
from statesource.flink.handles import RocksDBHandle
from statesource.flink.rocksdb import SstFile, read_directory, read_live_files
from statesource.flink.rocksdb.lookup import BlockReads, range_entries
from statesource.flink.snapshot.directory import FlinkSnapshot

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "flink"
SNAPSHOTS = ["flink-1.20/rocksdb-checkpoint", "flink-1.20/rocksdb-native",
             "incremental/heap-timers/chk-2", "incremental/rocksdb-timers/chk-1",
             "incremental/rocksdb-timers/chk-2", "kryo/flink-1.20/rocksdb-checkpoint",
             "lazy/rocksdb-incremental", "lazy/rocksdb-native"]
"""Every fixture whose keyed state is RocksDB's files (Flink 2.3 and 1.20 native savepoints,
incremental and full checkpoints)."""


HEAP = "-Xmx128m"
"""The echo's heap: a block claiming more than this is refused before it is allocated, or the
JVM dies of it and the test with it."""


@pytest.fixture(scope="module")
def echo(tmp_path_factory) -> Iterator[Echo]:
    yield from start_echo(tmp_path_factory.mktemp("sst-echo"), [HEAP])


def _databases(snapshot: Path) -> Iterator[tuple[dict[str, list[Table]], dict]]:
    """Each RocksDB database of the snapshot: its column families' live tables as the JVM
    reader takes them, and as the Python reader opens them."""
    flink = FlinkSnapshot.open(str(snapshot))
    for operator in flink.operators:
        for subtask in operator.subtasks:
            for handle in subtask.keyed:
                if not isinstance(handle, RocksDBHandle):
                    continue
                inline = {f.name: f.stream.inline for f in handle.files
                          if f.stream.inline is not None}
                local = {f.name: Path(flink.file_location(f.stream).path) for f in handle.files
                         if f.name not in inline}
                files = {name: (lambda path=path: path.read_bytes())
                         for name, path in local.items()} | inline
                yield java_tables(files, local), read_live_files(files)


@pytest.mark.parametrize("snapshot", SNAPSHOTS)
def test_every_column_family_of_real_flink_snapshots_reads_as_in_python(echo, snapshot):
    rng = random.Random(snapshot)
    families = 0
    for java, python in _databases(FIXTURES / snapshot):
        assert set(java) == set(python)
        for name, tables in java.items():
            whole = python_scans(python[name], [(b"", None)])[0]
            ranges = random_ranges([key for key, _ in whole], rng, 12)
            assert echo.scan(tables, ranges) == python_scans(python[name], ranges), name
            families += bool(whole)
    assert families > 0


def test_a_range_scan_reads_the_blocks_the_python_lookup_reads(echo, tmp_path):
    """Only the data blocks whose separators can hold the range: as many as the Python
    reader's range read counts, a block or two of the hundreds a table has."""
    rows = {b"%05d" % i: b"v%d" % i * (i % 7) for i in range(0, 6000, 3)} | {b"gone": None}
    tables = []
    for number, options in enumerate([TableOptions(block_size=256), TableOptions(
            compression="none", format_version=6, checksum="xxh3", block_size=256,
            partitioned_index=True)]):
        path = write_table(tmp_path / f"{number}.sst", rows, options)
        tables.append((Table(str(path), path.name, path.stat().st_size), SstFile(
            path.read_bytes(), path.name)))
    ranges = random_ranges(sorted(rows), random.Random(7), 30)
    for java, python in tables:
        assert len(python.data_blocks) > 40
        expected = []
        for start, stop in ranges:
            reads = BlockReads()
            list(range_entries([python], start, stop, reads))
            expected.append(len(reads.data_blocks))
        assert echo.blocks_read([java], ranges)[1:] == expected[1:]
        assert echo.blocks_read([java], ranges)[0] == len(python.data_blocks)


KEYS = [bytes([group]) + name for group in (0, 1, 0x7F) for name in (b"", b"a", b"ab", b"b\x00")]
operation = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(KEYS), st.binary(max_size=40)),
    st.tuples(st.just("delete"), st.sampled_from(KEYS)),
    st.tuples(st.just("delete_range"), st.sampled_from(KEYS), st.sampled_from(KEYS)),
    st.tuples(st.just("ingest"), st.dictionaries(st.sampled_from(KEYS),
                                                 st.none() | st.binary(max_size=20),
                                                 min_size=1, max_size=4)),
    st.tuples(st.just("flush")),
    st.tuples(st.just("compact")),
)


def _replayed(operations: list, options: TableOptions, scratch: Path) -> Path:
    """The writes made by a real RocksDB under ``options``, checkpointed."""
    rocksdb = options.rocksdb()
    rocksdb.create_if_missing(True)
    rocksdb.set_disable_auto_compactions(True)
    db = Rdict(str(scratch / "db"), rocksdb)
    for number, (op, *args) in enumerate(operations):
        if op == "put":
            db[args[0]] = args[1]
        elif op == "delete":
            del db[args[0]]
        elif op == "delete_range":
            db.delete_range(*sorted(args))
        elif op == "ingest":
            path = scratch / f"ingest-{number}.sst"
            writer = SstFileWriter(options=options.rocksdb())
            writer.open(str(path))
            for key, value in sorted(args[0].items()):
                if value is None:
                    del writer[key]
                else:
                    writer[key] = value
            writer.finish()
            db.ingest_external_file([str(path)])
        elif op == "flush":
            db.flush()
        else:
            db.compact_range(None, None)
    Checkpoint(db).create_checkpoint(str(scratch / "checkpoint"))
    db.close()
    return scratch / "checkpoint"


@settings(max_examples=60, deadline=None)
@given(st.lists(operation, max_size=30), table_options, st.randoms(use_true_random=False))
def test_databases_rocksdb_wrote_read_as_in_python_by_any_range(echo, operations, options, rng):
    with tempfile.TemporaryDirectory() as scratch:
        checkpoint = _replayed(operations, options, Path(scratch))
        python = read_directory(checkpoint)["default"]
        tables = directory_tables(checkpoint)["default"]
        ranges = random_ranges(KEYS, rng, 8)
        assert echo.scan(tables, ranges) == python_scans(python, ranges)


def _outcome(data: bytes) -> list[tuple[bytes, bytes]] | str:
    """What the Python reader makes of a table alone: its merged entries, or its error's kind."""
    try:
        return python_scans([SstFile(data, "bad.sst")], [(b"", None)])[0]
    except CorruptCheckpointError:
        return "CorruptCheckpointError"
    except UnsupportedFormatVersionError:
        return "IncompatibleCheckpointError"


def _java_outcome(echo: Echo, data: bytes, scratch: Path) -> list[tuple[bytes, bytes]] | str:
    path = scratch / "bad.sst"
    path.write_bytes(data)
    found = echo.scan([Table(str(path), "bad.sst", len(data))], [(b"", None)])
    if isinstance(found, str):
        kind, _, rest = found.partition(": ")
        assert rest.startswith("bad.sst: "), found  # named, and never another exception
        return kind
    return found[0]


def _agrees(echo: Echo, data: bytes, scratch: Path) -> str:
    """Java's outcome of a table is Python's; which one it was."""
    expected = _outcome(data)
    assert _java_outcome(echo, data, scratch) == expected
    return expected if isinstance(expected, str) else "read"


HOSTILE = [TableOptions(compression="snappy", format_version=5, checksum="crc32c", block_size=128),
           TableOptions(compression="none", format_version=6, checksum="xxh3", block_size=128,
                        partitioned_index=True),
           TableOptions(compression="zstd", format_version=4, checksum="xxhash64", block_size=200,
                        hash_index=True)]


@pytest.fixture(scope="module", params=HOSTILE, ids=["v5-crc32c-snappy", "v6-xxh3-partitioned",
                                                     "v4-xxhash64-zstd"])
def small_table(request, tmp_path_factory) -> bytes:
    return write_table(tmp_path_factory.mktemp("t") / "t.sst", ROWS, request.param).read_bytes()


def test_every_truncation_and_flipped_byte_is_refused_as_in_python(echo, small_table, tmp_path):
    outcomes = [_agrees(echo, small_table[:length], tmp_path)
                for length in range(0, len(small_table), 7)]
    assert set(outcomes) == {"CorruptCheckpointError"}
    for position in range(len(small_table)):
        damaged = bytearray(small_table)
        damaged[position] ^= 0x01 << (position % 8)
        outcomes.append(_agrees(echo, bytes(damaged), tmp_path))
    assert outcomes.count("CorruptCheckpointError") > 0.9 * len(outcomes)


@pytest.fixture(scope="module", params=["none", "snappy", "lz4", "zstd", "zlib", "bz2"])
def unchecked_table(request, tmp_path_factory) -> bytes:
    """No checksums: only the structural checks and the codecs stand between damage and a
    misreading, so every damage reaches them."""
    options = TableOptions(compression=request.param, format_version=5, checksum="no_checksum",
                           block_size=128, restart_interval=2)
    rows = ROWS | {b"long-%d" % i: b"abcd" * 60 * i for i in range(4)}
    return write_table(tmp_path_factory.mktemp("u") / "u.sst", rows, options).read_bytes()


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_random_damage_without_checksums_is_refused_as_in_python(echo, unchecked_table, data):
    damaged = bytearray(unchecked_table)
    for _ in range(data.draw(st.integers(1, 4))):
        damaged[data.draw(st.integers(0, len(damaged) - 1))] = data.draw(st.integers(0, 255))
    with tempfile.TemporaryDirectory() as scratch:
        _agrees(echo, bytes(damaged), Path(scratch))


def test_a_bzip2_block_claiming_a_gigabyte_is_refused_without_allocating_it(echo, tmp_path):
    """bzip2 has no useful bound on its expansion, so nothing of the size a block claims may be
    allocated up front: a few bytes claiming 1 GiB would exhaust the heap."""
    table = write_table(tmp_path / "b.sst", ROWS, TableOptions(
        compression="bz2", format_version=5, checksum="no_checksum")).read_bytes()
    offset, size = _first_data_block(table)
    assert table[offset + size] == 3  # bzip2
    block = table[offset:offset + size]
    stream = block[next(i for i, b in enumerate(block) if b < 0x80) + 1:]  # past its size
    claim = bytes([0x80, 0x80, 0x80, 0x80, 0x04])  # varint32 of 1 << 30
    damaged = table[:offset] + (claim + stream)[:size] + table[offset + size:]
    assert _agrees(echo, damaged, tmp_path) == "CorruptCheckpointError"


def test_many_small_tables_read_in_a_small_heap(echo, tmp_path):
    """A table's buffers are what it holds, not a fixed read-ahead window and decompression
    buffer each (about 320 KiB): 600 tables of one entry each are read in 128 MiB."""
    tables, python = [], []
    for number in range(600):
        path = write_table(tmp_path / f"{number}.sst", {b"%04d" % number: b"v" * 40},
                           TableOptions(compression="snappy"))
        tables.append(Table(str(path), path.name, path.stat().st_size))
        python.append(SstFile(path.read_bytes(), path.name))
    ranges = [(b"", None), (b"0100", b"0105")]
    assert echo.scan(tables, ranges) == python_scans(python, ranges)


def test_damaged_restart_arrays_and_indexes_are_refused(echo, tmp_path):
    table = write_table(tmp_path / "u.sst", ROWS, TableOptions(
        compression="none", format_version=5, checksum="no_checksum", block_size=128,
        restart_interval=2)).read_bytes()
    offset, size = _first_data_block(table)
    beyond = bytearray(table)
    struct.pack_into("<I", beyond, offset + size - 4, 1000)
    last = SstFile(table, "t").data_blocks[-1].handle
    for damaged in (bytes(beyond), _with_index_entry(table, -1, (0x3FFF, last.size)),
                    _with_index_entry(table, 0, (offset, size - 9)),
                    _with_index_entry(table, 0, (offset, size + 20))):
        assert _agrees(echo, damaged, tmp_path) == "CorruptCheckpointError"


def test_a_table_of_another_size_or_missing_is_refused(echo, tmp_path):
    path = write_table(tmp_path / "t.sst", ROWS, TableOptions())
    size = path.stat().st_size
    found = echo.scan([Table(str(path), "chk-1/t.sst", size + 1)], [(b"", None)])
    assert found == (f"CorruptCheckpointError: chk-1/t.sst has {size} bytes; the snapshot"
                     f" records {size + 1}: it was truncated or replaced")
    found = echo.scan([Table(str(tmp_path / "gone.sst"), "chk-1/gone.sst", 9)], [(b"", None)])
    assert isinstance(found, str) and found.startswith("CheckpointNotFoundError: chk-1/gone.sst")


lengths = st.sampled_from([0, 1, 2, 3, 4, 5, 8, 9, 15, 16, 17, 64, 128, 129, 240, 241, 1024,
                           1025, 2048]) | st.integers(0, 3000)


@settings(max_examples=60, deadline=None)
@given(st.lists(lengths.flatmap(lambda n: st.binary(min_size=n, max_size=n)), min_size=1,
                max_size=12))
def test_xxh3_is_the_xxhash_packages(echo, inputs):
    assert echo.xxh3(inputs) == [xxhash.xxh3_64_intdigest(data) for data in inputs]

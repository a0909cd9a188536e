"""Point lookups in RocksDB state: the same answer as a full read, from only the blocks that can
hold the key.

Truth: databases and tables written by a real RocksDB (rocksdict's 9.x) with and without
Bloom filters (the FastLocalBloom of ``format_version`` 5 and the legacy one before it), against
a model of the writes; and the real Flink snapshots of tests/fixtures/flink, whose every
key's lookup must give the rows the full read gives it. What a lookup reads is counted
(:class:`BlockReads`): at most one data block per live table for a key whose versions fit in
one block, none in a table whose filter rules the key out.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.datasource import EqualTo
from rocksdict import BlockBasedOptions, Checkpoint, Options, Rdict, SstFileWriter

from statesource.errors import CorruptCheckpointError
from statesource.flink.jvm_layout import jvm_layout
from statesource.flink.layouts.rocksdb_canonical import Selection
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.rocksdb import SstFile, merged_entries, read_directory
from statesource.flink.rocksdb.coding import Place
from statesource.flink.rocksdb.filter import (
    FastLocalBloom,
    LegacyBloom,
    MayMatch,
    murmur1,
    parse_filter,
)
from statesource.flink.rocksdb.lookup import BlockReads, get, prefix_entries
from statesource.flink.serializers.encoding import encode
from statesource.keygroups import assign_to_key_group
from statesource.spark.source import FlinkStateDataSource

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "flink"
KEYS = [bytes([group]) + name for group in (0, 1, 0x7F) for name in (b"", b"a", b"ab", b"b\x00")]


def _options(format_version: int, bloom: bool) -> Options:
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_disable_auto_compactions(True)
    table = BlockBasedOptions()
    table.set_format_version(format_version)
    table.set_block_size(64)  # many blocks even in small tables
    if bloom:
        table.set_bloom_filter(10, False)
    options.set_block_based_table_factory(table)
    return options


def _table(tmp: Path, keys: list[bytes], format_version: int) -> SstFile:
    writer = SstFileWriter(options=_options(format_version, bloom=True))
    writer.open(str(tmp / "t.sst"))
    for key in sorted(set(keys)):
        writer[key] = b"v" + key
    writer.finish()
    return SstFile((tmp / "t.sst").read_bytes(), "t.sst")


@pytest.mark.parametrize(("format_version", "kind"), [(5, FastLocalBloom), (6, FastLocalBloom),
                                                      (4, LegacyBloom), (2, LegacyBloom)])
def test_a_filter_never_rules_out_a_key_the_table_holds(tmp_path, format_version, kind):
    """Keys of every length 0..200 (longer than 128 bytes: never ruled out); absent keys are
    mostly ruled out (10 bits per key: about 1% false positives)."""
    rng = random.Random(format_version)
    keys = [rng.randbytes(length) for length in range(0, 201) for _ in range(8)]
    table = _table(tmp_path, keys, format_version)
    assert isinstance(table.key_filter, kind)
    assert all(table.key_filter.may_contain(key) for key in keys)
    absent = {rng.randbytes(rng.randrange(1, 100)) for _ in range(2000)} - set(keys)
    assert sum(map(table.key_filter.may_contain, absent)) < len(absent) * 0.05


def test_rocksdbs_hash_functions_on_known_values():
    """MurmurHash1 as RocksDB's ``Hash`` (its tail bytes sign-extended)."""
    assert murmur1(b"", 0xBC9F1D34) == 0xBC9F1D34
    assert murmur1(b"\x80", 0) != murmur1(b"\x80", 1)
    assert murmur1(b"\xff", 0) != murmur1(b"\x7f", 0)


def test_hostile_filter_blocks_are_refused_or_rule_nothing_out():
    place = Place("t.sst", 100)
    lines = bytes(128)
    with pytest.raises(CorruptCheckpointError, match=r"^t.sst: .*not whole cache lines"):
        parse_filter(bytes(100) + b"\xff\x00\x06\x00\x00", place)
    with pytest.raises(CorruptCheckpointError, match=r"^t.sst: .*cache lines does not fill"):
        parse_filter(lines + b"\x06" + (3).to_bytes(4, "little"), place)
    with pytest.raises(CorruptCheckpointError, match=r"^t.sst: .*cache lines does not fill"):
        parse_filter(lines + b"\x06" + (0).to_bytes(4, "little"), place)
    for reserved in (b"\xff\x01\x06\x00\x00", b"\xff\x00\x26\x00\x00", b"\xff\x00\x00\x00\x00",
                     b"\xff\x00\x06\x01\x00", b"\xfe\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00"):
        assert isinstance(parse_filter(lines + reserved, place), MayMatch)


def test_a_flipped_bit_in_a_filter_block_is_refused_by_its_checksum(tmp_path):
    table = _table(tmp_path, [b"k%d" % i for i in range(500)], 5)
    handle = next(h for name, h in table.meta_blocks.items() if name.startswith("fullfilter."))
    damaged = bytearray(table.data)
    damaged[handle.offset + 10] ^= 0x04
    with pytest.raises(CorruptCheckpointError, match=r"^t.sst: .*filter block checksum"):
        SstFile(bytes(damaged), "t.sst").key_filter  # noqa: B018


operation = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(KEYS), st.binary(max_size=30)),
    st.tuples(st.just("delete"), st.sampled_from(KEYS)),
    st.tuples(st.just("delete_range"), st.sampled_from(KEYS), st.sampled_from(KEYS)),
    st.tuples(st.just("flush")),
    st.tuples(st.just("compact")),
)


@settings(max_examples=40, deadline=None)
@given(st.lists(operation, max_size=40), st.sampled_from([(5, True), (4, True), (5, False)]))
def test_a_lookup_answers_what_the_writes_left_from_one_block_per_table(operations, table):
    format_version, bloom = table
    with tempfile.TemporaryDirectory() as scratch:
        db = Rdict(str(Path(scratch) / "db"), _options(format_version, bloom))
        model: dict[bytes, bytes] = {}
        for op, *args in operations:
            if op == "put":
                db[args[0]] = args[1]
                model[args[0]] = args[1]
            elif op == "delete":
                del db[args[0]]
                model.pop(args[0], None)
            elif op == "delete_range":
                begin, end = sorted(args)
                db.delete_range(begin, end)
                model = {k: v for k, v in model.items() if not begin <= k < end}
            elif op == "flush":
                db.flush()
            else:
                db.compact_range(None, None)
        db.flush()
        Checkpoint(db).create_checkpoint(str(Path(scratch) / "checkpoint"))
        db.close()
        tables = read_directory(Path(scratch) / "checkpoint")["default"]
        assert dict(merged_entries(tables)) == model
        for key in KEYS:
            reads = BlockReads()
            assert get(tables, key, reads) == model.get(key)
            per_table = Counter(source for source, _ in reads.data_blocks)
            for table in tables:  # one block, or two where the first one's separator is the
                # key itself (RocksDB's shortened separator: the key may begin the next block)
                count = per_table.get(table.source, 0)
                first = next(iter(table.blocks_from(key)), (None, None))[0]
                assert count <= 1 or (count == 2 and first == key), (key, count, first)
            assert len(per_table) + reads.filtered_out <= len(tables)
        for group in (b"\x00", b"\x01", b"\x7f", b"\x01a"):
            assert dict(prefix_entries(tables, group)) == {
                k: v for k, v in model.items() if k.startswith(group)}


SNAPSHOTS = [("lazy/rocksdb-native", "lazy"), ("lazy/rocksdb-incremental", "lazy"),
             ("flink-1.20/rocksdb-native", "stateful"),
             ("flink-1.20/rocksdb-checkpoint", "stateful"),
             ("flink-1.20/rocksdb-native", "windows")]


@pytest.mark.parametrize(("snapshot", "operator"), SNAPSHOTS)
def test_every_keys_lookup_in_a_real_flink_snapshot_equals_the_full_read(snapshot, operator):
    """Every state of the operator (timers: their key groups), every key of the full read (a
    sample of 25 in the larger 1.20 fixture), looked up with nothing converted whole."""
    full = FlinkCheckpoint.open(str(FIXTURES / snapshot))
    op = full.operator(operator)
    rows_by_key: dict[str, dict[object, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for state in op.keyed_states:
        for table in full.read_keyed_state(state.name, operator=operator):
            for row in table.to_pylist():
                rows_by_key[state.name][_hashable(row["key"])].append(row)
    keys = sorted({key for rows in rows_by_key.values() for key in rows}, key=repr)
    keys = random.Random(7).sample(keys, min(25, len(keys)))
    lookup = FlinkCheckpoint.open(str(FIXTURES / snapshot))
    for key in keys:
        for state in op.keyed_states:
            found = [row for table in lookup.read_keyed_state(state.name, operator=operator,
                                                              keys=[_value(key)])
                     for row in table.to_pylist() if _hashable(row["key"]) == key]
            assert found == rows_by_key[state.name].get(key, [])
    assert not lookup.snapshot._canonical  # nothing was converted whole


def test_a_lookup_in_a_real_flink_snapshot_reads_one_block_per_table():
    flink = FlinkCheckpoint.open(str(FIXTURES / "lazy" / "rocksdb-incremental"))
    snapshot = flink.snapshot
    op = snapshot.operator("lazy")
    header = snapshot.header(op)
    assert header is not None
    for number in range(40):
        key = f"k{number}"
        key_group = assign_to_key_group(key, flink.operator("lazy").key_type, op.max_parallelism)
        reads = BlockReads()
        selection = Selection(frozenset([key_group]), ((key_group, encode(header.key, key)),),
                              reads)
        pieces = snapshot.key_group_bytes(op, selection)
        assert {piece.key_group for piece in pieces} <= {key_group}
        per_table = Counter(source for source, _ in reads.data_blocks)
        tables = sum(len(h.shared) for s in op.subtasks for h in s.keyed
                     if h.start <= key_group <= h.end)
        assert sum(per_table.values()) <= tables


def _hashable(value: object) -> object:
    return tuple(value.items()) if isinstance(value, dict) else value


def _value(key: object) -> object:
    return tuple(value for _, value in key) if isinstance(key, tuple) else key


def test_a_spark_key_pushdown_converts_nothing_whole_and_finds_the_keys_rows():
    """Planning weighs the RocksDB key groups by their tables' bytes; the one task seeks the key."""
    path = str(FIXTURES / "lazy" / "rocksdb-incremental")
    truth = FlinkCheckpoint.open(path)
    expected = [row for table in truth.read_keyed_state("count", operator="lazy")
                for row in table.to_pylist() if row["key"] == "k7"]
    source = FlinkStateDataSource({"path": path, "operator": "lazy", "state": "count",
                                   "filterPushdown": "true"})
    reader = source.reader(source.schema())
    assert list(reader.pushFilters([EqualTo(("key",), "k7")])) == []
    (partition,) = reader.partitions()
    rows = [row for batch in reader.read(partition) for row in batch.to_pylist()]
    assert [(r["key"], r["value"]) for r in rows] == [(r["key"], r["value"]) for r in expected]
    assert len(rows) == 1
    assert not reader._snapshot().snapshot._canonical


def test_a_lookup_through_a_damaged_block_is_refused(tmp_path):
    """The block a lookup reads is checked as a full read checks it: a flipped byte in it is
    refused, naming the file."""
    copy = tmp_path / "snapshot"
    shutil.copytree(FIXTURES / "lazy" / "rocksdb-native", copy)
    flink = FlinkCheckpoint.open(str(copy))
    snapshot = flink.snapshot
    op = snapshot.operator("lazy")
    header = snapshot.header(op)
    assert header is not None
    key_group = assign_to_key_group("k7", flink.operator("lazy").key_type, op.max_parallelism)
    reads = BlockReads()
    selection = Selection(frozenset([key_group]), ((key_group, encode(header.key, "k7")),), reads)
    snapshot.key_group_bytes(op, selection)
    source, offset = reads.data_blocks[0]
    (path,) = [p for p in copy.iterdir() if p.name in source]
    damaged = bytearray(path.read_bytes())
    damaged[offset + 3] ^= 0x10
    path.write_bytes(bytes(damaged))
    fresh = FlinkCheckpoint.open(str(copy))
    with pytest.raises(CorruptCheckpointError, match=rf"{path.name}.*checksum mismatch"):
        list(fresh.read_keyed_state("count", operator="lazy", keys=["k7"]))


def test_planning_and_listing_a_rocksdb_snapshot_convert_nothing_whole():
    """The metadata view, the JVM reader's refusal and Spark's weights are answered from the
    headers and the files' sizes."""
    source = FlinkCheckpoint.open(str(FIXTURES / "lazy" / "rocksdb-incremental"))
    assert {s.state_name for s in source.summaries() if s.operator_uid == "lazy"} >= {"count"}
    assert "RocksDB" in str(jvm_layout(source, "lazy", "count"))
    assert set(source.key_group_weights("lazy", "count")) == set(range(128))
    assert not source.snapshot._canonical


def test_a_key_equal_to_a_blocks_separator_is_looked_for_in_the_next_block_too(tmp_path):
    """RocksDB shortens the index key of a block to a separator between its last key and
    the next block's first: here b"\\x01", which the next block could begin with. A lookup
    of b"\\x01" reads both blocks (found by Hypothesis: the test assumed one)."""
    db = Rdict(str(tmp_path / "db"), _options(5, False))
    db[b"\x00"] = db[b"\x00a"] = bytes(7)
    del db[b"\x00b\x00"]
    db[b"\x01a"] = b""
    db.flush()
    Checkpoint(db).create_checkpoint(str(tmp_path / "checkpoint"))
    db.close()
    (table,) = read_directory(tmp_path / "checkpoint")["default"]
    assert next(iter(table.blocks_from(b"\x01")))[0] == b"\x01"
    reads = BlockReads()
    assert get([table], b"\x01", reads) is None and len(reads.data_blocks) == 2
    assert get([table], b"\x01a") == b""

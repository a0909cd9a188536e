"""Database directories of a real RocksDB (rocksdict's): the MANIFEST says which tables are live
and whose, and the merged tables hold exactly what the writes left, as a model says."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rocksdict import Checkpoint, Options, Rdict

from statesource.errors import CorruptCheckpointError
from statesource.flink.rocksdb import merged_entries, read_database_manifest, read_directory
from statesource.flink.rocksdb.database import read_live_files

FAMILIES = ("default", "state-a", "state-b")
KEYS = [bytes([group]) + name for group in (0, 1, 0x7F) for name in (b"", b"a", b"ab", b"b\x00")]

family = st.sampled_from(FAMILIES)
key = st.sampled_from(KEYS)
operation = st.one_of(
    st.tuples(st.just("put"), family, key, st.binary(max_size=40)),
    st.tuples(st.just("delete"), family, key),
    st.tuples(st.just("delete_range"), family, key, key),
    st.tuples(st.just("flush"), family),
    st.tuples(st.just("compact"), family),
    st.tuples(st.just("recreate"), st.sampled_from(FAMILIES[1:])),
)


def _options() -> Options:
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_disable_auto_compactions(True)  # tables pile up in level 0 until "compact"
    return options


def replay(operations, directory: Path) -> dict[str, dict[bytes, bytes]]:
    """Run ``operations`` on a new database, checkpoint it (as Flink snapshots one) into
    ``directory`` / "checkpoint", and return what a model of the writes says it holds."""
    db = Rdict(str(directory / "db"), _options())
    families = {"default": db}
    model: dict[str, dict[bytes, bytes]] = {name: {} for name in FAMILIES}
    for name in FAMILIES[1:]:
        families[name] = db.create_column_family(name, _options())
    for op, name, *args in operations:
        target, contents = families[name], model[name]
        if op == "put":
            target[args[0]] = args[1]
            contents[args[0]] = args[1]
        elif op == "delete":
            del target[args[0]]
            contents.pop(args[0], None)
        elif op == "delete_range":
            begin, end = sorted(args)
            target.delete_range(begin, end)
            for gone in [k for k in contents if begin <= k < end]:
                del contents[gone]
        elif op == "flush":
            target.flush()
        elif op == "compact":
            target.compact_range(None, None)
        else:  # drop the column family and create it anew (a new id, no tables)
            target.close()
            db.drop_column_family(name)
            families[name] = db.create_column_family(name, _options())
            model[name] = {}
    Checkpoint(db).create_checkpoint(str(directory / "checkpoint"))
    for name in FAMILIES[1:]:
        families[name].close()
    db.close()
    return model


@settings(max_examples=60, deadline=None)
@given(st.lists(operation, max_size=50))
def test_a_checkpoint_holds_what_the_writes_left(operations):
    with tempfile.TemporaryDirectory() as scratch:
        model = replay(operations, Path(scratch))
        live = read_directory(Path(scratch) / "checkpoint")
        assert set(live) == set(FAMILIES)
        assert {name: dict(merged_entries(tables)) for name, tables in live.items()} == model
        for name, tables in live.items():
            assert all(table.properties.column_family_name == name for table in tables)


def test_a_manifest_of_many_edits_spans_its_32_kib_blocks(tmp_path):
    """Three hundred flushes, each an edit: records cross block boundaries as fragments."""
    operations = []
    for round_ in range(300):
        operations += [("put", FAMILIES[round_ % 3], KEYS[round_ % len(KEYS)], b"%d" % round_),
                       ("flush", FAMILIES[round_ % 3])]
    operations += [("compact", "state-a"), ("delete_range", "state-b", KEYS[0], KEYS[5])]
    model = replay(operations, tmp_path)
    manifest_file = next((tmp_path / "checkpoint").glob("MANIFEST-*"))
    assert manifest_file.stat().st_size > 32 * 1024
    live = read_directory(tmp_path / "checkpoint")
    assert {name: dict(merged_entries(tables)) for name, tables in live.items()} == model
    manifest = read_database_manifest(_files(tmp_path / "checkpoint"))
    assert sorted(manifest.column_families.values()) == sorted(FAMILIES)
    assert {f.level for f in manifest.files if manifest.column_families[f.column_family]
            == "state-a"} == {6}  # compacted to the bottom level
    assert len([f for f in manifest.files if f.level == 0]) > 100


def _files(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in directory.iterdir()}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> tuple[dict[str, bytes], dict[str, dict[bytes, bytes]]]:
    directory = tmp_path_factory.mktemp("db")
    operations = [("put", "state-a", KEYS[1], b"one"), ("flush", "state-a"),
                  ("put", "state-a", KEYS[2], b"two"), ("delete", "state-a", KEYS[1]),
                  ("recreate", "state-b"), ("put", "state-b", KEYS[3], b"three"),
                  ("flush", "state-b")]
    model = replay(operations, directory)
    return _files(directory / "checkpoint"), model


def test_only_live_tables_are_opened_and_errors_name_the_snapshot_path(checkpoint):
    files, model = checkpoint
    opened = []

    def opener(name):
        def read():
            opened.append(name)
            return files[name]
        return read

    live = read_live_files({name: opener(name) for name in files}, lambda n: f"chk-7/{n}")
    assert {name: dict(merged_entries(tables)) for name, tables in live.items()} == model
    assert sorted(opened) == sorted(
        ["CURRENT", next(n for n in files if n.startswith("MANIFEST-"))]
        + [t.source.removeprefix("chk-7/") for tables in live.values() for t in tables])
    table = next(n for n in files if n.endswith(".sst"))
    with pytest.raises(CorruptCheckpointError, match=rf"^chk-7/MANIFEST-\d+: live file {table}"
                                                     r" is missing from the snapshot at byte"):
        read_live_files({n: data for n, data in files.items() if n != table},
                        lambda n: f"chk-7/{n}")
    with pytest.raises(CorruptCheckpointError, match=rf"^chk-7/{table}: a file of \d+ bytes,"
                                                     r" where the MANIFEST says"):
        read_live_files(files | {table: files[table] + b"\0"}, lambda n: f"chk-7/{n}")


def test_every_flipped_byte_of_the_manifest_is_refused(checkpoint):
    files, _ = checkpoint
    name = next(n for n in files if n.startswith("MANIFEST-"))
    manifest = files[name]
    assert len(manifest) < 32 * 1024  # no zero-filled block tails here: every byte is covered
    for position in range(len(manifest)):
        damaged = bytearray(manifest)
        damaged[position] ^= 0x20
        with pytest.raises(CorruptCheckpointError, match=rf"^{name}: "):
            read_database_manifest(files | {name: bytes(damaged)})


def test_a_truncated_manifest_is_refused_or_is_an_older_state(checkpoint):
    """A cut between two records leaves a shorter, valid log (as RocksDB would read it);
    any other cut is refused."""
    files, _ = checkpoint
    name = next(n for n in files if n.startswith("MANIFEST-"))
    states = set()
    for length in range(len(files[name])):
        try:
            manifest = read_database_manifest(files | {name: files[name][:length]})
        except CorruptCheckpointError as error:
            assert str(error).startswith(f"{name}: ")
            continue
        states.add(manifest.files)
    assert 1 < len(states) < 20


def test_current_must_name_a_manifest(checkpoint):
    files, _ = checkpoint
    for current in (b"", b"MANIFEST-000001", b"../MANIFEST-000001\n", b"OPTIONS-000001\n"):
        with pytest.raises(CorruptCheckpointError, match="^CURRENT: CURRENT does not name"):
            read_database_manifest(files | {"CURRENT": current})
    with pytest.raises(CorruptCheckpointError, match="^MANIFEST-999999: missing from the"):
        read_database_manifest(files | {"CURRENT": b"MANIFEST-999999\n"})

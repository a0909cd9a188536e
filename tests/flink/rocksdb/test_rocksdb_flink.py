"""The RocksDB Flink runs on (FRocksDB 8.10 in Flink 2.3, 6.20.3 in Flink 1.20), with Flink's
merge operator: list-state appends spread over many tables, deletions, range deletions, and
every table option, read back as RocksDB itself reads them and as a model of the writes says.

Each database is scripted by a seeded generator (one JVM runs them all), checkpointed with
RocksDB's ``Checkpoint``, as Flink's native snapshots are, and then read three ways: by
RocksDB (``dump``, with Flink's ``stringappendtest`` operator), by a model replaying the
writes in order, and by statesource.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sst_echo import Echo, directory_tables, python_scans, random_ranges, start_echo

from flink_restore import FLINK_1X_VERSION
from flink_rocksdb import VERSIONS, dumped, hexed, run
from statesource.flink.rocksdb import keys, merged_entries, read_directory

FAMILIES = ("default", "list-state", "_timer_state/event_user-timers")
KEYS = [bytes([group]) + name for group in (0, 3, 0x7F) for name in (b"", b"u1", b"u1\x00", b"u2")]
SINGLE_DELETE_KEYS = [b"\x05sd-%d" % i for i in range(4)]  # only ever put, then single-deleted


@dataclass
class Scenario:
    """One database: its options, the script's lines, and the model of what it holds."""

    name: str
    options: dict[str, str]
    lines: list[str] = field(default_factory=list)
    model: dict[str, dict[bytes, bytes]] = field(
        default_factory=lambda: {name: {} for name in FAMILIES})

    def write(self, op: str, family: str, *args: bytes) -> None:
        self.lines.append(" ".join([op, hexed(family.encode()), *map(hexed, args)]))
        contents = self.model[family]
        if op == "put":
            contents[args[0]] = args[1]
        elif op == "merge":  # StringAppendTESTOperator: old value, ",", operand
            old = contents.get(args[0])
            contents[args[0]] = args[1] if old is None else old + b"," + args[1]
        elif op in ("delete", "single_delete"):
            contents.pop(args[0], None)
        else:
            for gone in [k for k in contents if args[0] <= k < args[1]]:
                del contents[gone]


def scenario(rng: random.Random, name: str, options: dict[str, str], writes: int) -> Scenario:
    """A random history: appends, puts, deletions and range deletions among flushes and
    compactions, so that a key's versions lie in several tables at several levels."""
    made = Scenario(name, options)
    for family in FAMILIES[1:]:
        made.lines.append(f"cf {hexed(family.encode())}")
    for _ in range(writes):
        family = rng.choice(FAMILIES)
        roll = rng.random()
        value = rng.randbytes(rng.choice([0, 1, 8, 30, 300]))
        if roll < 0.4:
            made.write("merge", family, rng.choice(KEYS), value)
        elif roll < 0.6:
            made.write("put", family, rng.choice(KEYS), value)
        elif roll < 0.7:
            made.write("delete", family, rng.choice(KEYS))
        elif roll < 0.75:
            begin, end = sorted(rng.sample(KEYS + [b""], 2))
            made.write("delete_range", family, begin, end)
        elif roll < 0.85:
            key = rng.choice(SINGLE_DELETE_KEYS)
            if key in made.model[family]:
                made.write("single_delete", family, key)
            else:
                made.write("put", family, key, value)
        elif roll < 0.97:
            made.lines.append(f"flush {hexed(family.encode())}")
        else:
            made.lines.append(f"compact {hexed(family.encode())}")
    return made


def scenarios(version: str) -> list[Scenario]:
    """Flink's own defaults first, then table options drawn at random."""
    rng = random.Random(f"rocksdb-{version}")
    old = version == FLINK_1X_VERSION  # RocksDB 6.20: no XXH3, no format_version 6
    made = [scenario(rng, "flink-defaults", {}, 400)]
    for number in range(14):
        options = {
            "compression": rng.choice(["none", "snappy", "zlib", "bzip2", "lz4", "lz4hc",
                                       "zstd"]),
            "format_version": str(rng.randint(2, 5 if old else 6)),
            "checksum": rng.choice(["kNoChecksum", "kCRC32c", "kxxHash", "kxxHash64"]
                                   + ([] if old else ["kXXH3"])),
            "block_size": str(rng.choice([64, 256, 4096])),
            "restart_interval": str(rng.choice([1, 2, 16])),
            "index_restart_interval": str(rng.choice([1, 3])),
            "index_type": rng.choice(["kBinarySearch", "kTwoLevelIndexSearch",
                                      "kBinarySearchWithFirstKey"]),
        }
        made.append(scenario(rng, f"options-{number}", options, rng.randint(50, 300)))
    return made


@pytest.fixture(scope="module", params=VERSIONS, ids=lambda v: f"flink-{v}")
def databases(request, tmp_path_factory) -> tuple[str, list[tuple[Scenario, Path, dict]]]:
    """Every scenario of one Flink's RocksDB, written, checkpointed and dumped in one JVM."""
    work = tmp_path_factory.mktemp("rocks")
    lines = []
    made = scenarios(request.param)
    for number, one in enumerate(made):
        options = " ".join(f"{k}={v}" for k, v in one.options.items())
        lines += [f"open {work}/db{number} {options}", *one.lines,
                  f"checkpoint {work}/checkpoint{number}", "close",
                  f"dump {work}/checkpoint{number} {work}/dump{number}.txt"]
    run(lines, request.param)
    return request.param, [(one, work / f"checkpoint{number}",
                            dumped(work / f"dump{number}.txt")) for number, one in enumerate(made)]


def test_merged_tables_are_what_rocksdb_and_the_model_read(databases):
    for one, checkpoint, rocksdb_read in databases[1]:
        ours = {name: dict(merged_entries(tables))
                for name, tables in read_directory(checkpoint).items()}
        expected = {name: contents for name, contents in one.model.items() if contents}
        assert {name: found for name, found in ours.items() if found} == expected, one.name
        assert rocksdb_read == expected, f"the model itself is wrong in {one.name}"


def test_list_appends_lie_unmerged_across_tables(databases):
    """What makes the merge necessary: operands of one key in several tables."""
    spread = 0
    for _, checkpoint, _ in databases[1]:
        for tables in read_directory(checkpoint).values():
            operand_keys = [{key for key, _, kind, _ in t.entries() if kind == keys.MERGE}
                            for t in tables]
            spread += sum(len(a & b) for i, a in enumerate(operand_keys)
                          for b in operand_keys[i + 1:])
    assert spread > 20


def test_flink_defaults_are_the_tables_flink_writes(databases):
    """Flink 2.3's RocksDB checksums blocks with XXH3, Flink 1.20's with CRC-32C; both write
    format_version 5, compress with Snappy and name Flink's merge operator."""
    version, made = databases
    one, checkpoint, _ = made[0]
    assert one.name == "flink-defaults"
    tables = [t for found in read_directory(checkpoint).values() for t in found]
    assert tables
    assert {t.footer.checksum_type for t in tables} == ({1} if version == FLINK_1X_VERSION
                                                        else {4})
    assert {t.footer.format_version for t in tables} == {5}
    assert {t.properties.merge_operator for t in tables} == {"StringAppendTESTOperator"}
    assert {t.properties.compression for t in tables} <= {"Snappy", "NoCompression"}
    assert sum(len(t.range_deletions()) for t in tables) > 0


@pytest.fixture(scope="module")
def echo(tmp_path_factory) -> Iterator[Echo]:
    """The JVM reader's SST tables (tests/flink/rocksdb/sst_echo.py)."""
    yield from start_echo(tmp_path_factory.mktemp("sst-echo"))


def test_the_jvm_reader_reads_what_rocksdb_reads(databases, echo):
    """RocksColumnFamily.java, whole: what RocksDB read; by random key ranges: what the Python
    reader reads of them."""
    rng = random.Random(databases[0])
    for one, checkpoint, rocksdb_read in databases[1]:
        python = read_directory(checkpoint)
        for name, tables in directory_tables(checkpoint).items():
            ranges = random_ranges(KEYS + SINGLE_DELETE_KEYS, rng, 10)
            found = echo.scan(tables, ranges)
            assert not isinstance(found, str), found
            assert dict(found[0]) == rocksdb_read.get(name, {}), (one.name, name)
            assert found == python_scans(python[name], ranges), (one.name, name)

"""The SST files and MANIFESTs of real Flink 2.3 RocksDB snapshots (tests/fixtures/flink/lazy:
a native savepoint and an incremental checkpoint of LazyJob.java), against the state its
generator computed independently (expected.json).

Files are told apart by their contents here, apart from the snapshot readers (which take
them by the names ``_metadata`` gives them: tests/flink/snapshot/test_rocksdb_handles.py):
tables by their footer's magic number, MANIFESTs by their first log record's type.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from statesource.flink.rocksdb import SstFile, merged_entries, read_live_files
from statesource.flink.rocksdb.footer import BLOCK_BASED_MAGIC
from statesource.flink.rocksdb.manifest import read_manifest

LAZY = Path(__file__).resolve().parents[2] / "fixtures" / "flink" / "lazy"
MAGIC = BLOCK_BASED_MAGIC.to_bytes(8, "little")


def snapshot_files(snapshot: str) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in (LAZY / snapshot).rglob("*")
            if path.is_file() and path.name != "_metadata"}


def one_table(candidates: list[bytes], size: int, smallest: bytes) -> bytes:
    """The one table of ``candidates`` (of one file number, from four databases) with the size
    and smallest internal key the MANIFEST gives."""
    (found,) = [t for t in candidates if len(t) == size
                and next(SstFile(t, "t").entries())[0] == smallest[:-8]]
    return found


@pytest.fixture(scope="module")
def expected() -> dict[str, int]:
    """Per state, how many RocksDB entries the job's state makes (a map entry each)."""
    counts: dict[str, int] = defaultdict(int)
    for states in json.loads((LAZY / "expected.json").read_text())["keys"].values():
        for state, value in states.items():
            counts[state] += len(value) if isinstance(value, dict) else 1
    return counts


@pytest.mark.parametrize("snapshot", ["rocksdb-native", "rocksdb-incremental"])
def test_every_state_holds_the_jobs_entries(snapshot, expected):
    """Subtasks hold different key groups, so one state's tables of all four merge apart."""
    by_family: dict[str, list[SstFile]] = defaultdict(list)
    for path, data in snapshot_files(snapshot).items():
        if data.endswith(MAGIC):
            table = SstFile(data, str(path))
            assert (table.footer.format_version, table.footer.checksum_type) == (5, 4)  # XXH3
            by_family[table.properties.column_family_name].append(table)
    found = {family: len(list(merged_entries(tables))) for family, tables in by_family.items()}
    assert found == dict(expected)
    vip = [key for key, _ in merged_entries(by_family["vip"])]
    assert all(sum(key.endswith(b"e%d" % i) for key in vip) == 1
               for i in range(7, 568, 40))  # the map's user keys, "e7" ... "e567"


@pytest.mark.parametrize("snapshot", ["rocksdb-native", "rocksdb-incremental"])
def test_each_subtasks_manifest_names_its_live_tables(snapshot):
    """Each of the four databases' MANIFEST lists tables the snapshot holds: named by the file
    number their properties record, they read as a database."""
    files = snapshot_files(snapshot)
    tables = {}
    for data in files.values():
        if data.endswith(MAGIC):
            number = SstFile(data, "t").properties.original_file_number
            tables.setdefault(number, []).append(data)
    currents = {data.decode().strip() for data in files.values() if data.startswith(b"MANIFEST-")}
    manifests = 0
    for path, data in files.items():
        if data.endswith(MAGIC) or len(data) < 7 or data[6] not in (1, 2):
            continue  # a table, CURRENT, OPTIONS or Flink's state meta data: not a log
        manifest = read_manifest(data, str(path))
        manifests += 1
        names = {live.name: one_table(tables[live.number], live.size, live.smallest)
                 for live in manifest.files}
        (current,) = currents
        live = read_live_files(names | {"CURRENT": f"{current}\n".encode(), current: data})
        assert {"count", "last"} <= {family for family, found in live.items() if found}
    assert manifests == 4

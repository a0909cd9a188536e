"""A RocksDB directory as a whole: its live tables, grouped by column family.

A Flink snapshot of a RocksDB backend lists the files of one database: ``CURRENT``, a
``MANIFEST-*``, ``OPTIONS-*`` and the SST files, named as RocksDB named them (``000123.sst``)
whatever the path each is stored under. :func:`read_live_files` takes that listing, each
name mapped to the file's bytes or to a function that reads them (so that only the files
the MANIFEST keeps alive are ever read), and gives each column family's live tables.
Each table is checked against what the MANIFEST says of it: its size, and the column
family its properties name.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Container, Mapping
from pathlib import Path

from statesource.errors import CorruptCheckpointError
from statesource.flink.rocksdb.coding import Buffer, RangedFile, TableData, corrupt
from statesource.flink.rocksdb.manifest import (
    LiveFile,
    Manifest,
    manifest_name,
    manifest_number,
    read_manifest,
)
from statesource.flink.rocksdb.properties import NO_COLUMN_FAMILY
from statesource.flink.rocksdb.table import SstFile

Opener = TableData | Callable[[], TableData]
"""A file's bytes, or a function returning them (called at most once, when they are needed):
a table's may be a :class:`~.coding.RangedFile`, read block by block."""


def read_live_files(files: Mapping[str, Opener],
                    describe: Callable[[str], str] = str) -> dict[str, list[SstFile]]:
    """The live tables of every column family (by name) of the database ``files`` hold.

    ``files`` maps the database's own file names to their contents; ``describe`` turns such
    a name into what errors call the file (a snapshot's path of it, say).
    """
    manifest = read_database_manifest(files, describe)
    tables: dict[int, list[SstFile]] = {family: [] for family in manifest.column_families}
    for live in manifest.files:
        tables[live.column_family].append(_open_table(files, live, manifest, describe))
    return {manifest.column_families[family]: found for family, found in sorted(tables.items())}


def read_database_manifest(files: Mapping[str, Opener],
                           describe: Callable[[str], str] = str) -> Manifest:
    """The replayed MANIFEST that the database's ``CURRENT`` names."""
    name = manifest_name(_whole(files, "CURRENT", describe), describe("CURRENT"))
    return read_manifest(_whole(files, name, describe), describe(name), manifest_number(name))


def read_directory(directory: str | Path) -> dict[str, list[SstFile]]:
    """:func:`read_live_files` of a database directory on the local file system (its tables
    are memory-mapped, not read)."""
    root = Path(directory)
    files = {path.name: _mapper(path) for path in root.iterdir() if path.is_file()}
    return read_live_files(files, lambda name: str(root / name))


def live_name(files: Container[str], live: LiveFile, manifest: Manifest) -> str:
    """The name ``files`` hold the live table ``live`` under: its own, or its LevelDB-style
    ``.ldb`` one (which RocksDB opens too); refused where the snapshot lacks it."""
    name = live.name if live.name in files else live.name[:-4] + ".ldb"
    if name not in files:
        raise corrupt(manifest.source, live.added_at,
                      f"live file {live.name} is missing from the snapshot")
    return name


def check_size(source: str, size: int, live: LiveFile) -> None:
    """Refuse a live table of another size than the MANIFEST records."""
    if size != live.size:
        raise corrupt(source, 0, f"a file of {size} bytes, where the MANIFEST says {live.size}")


def _open_table(files: Mapping[str, Opener], live: LiveFile, manifest: Manifest,
                describe: Callable[[str], str]) -> SstFile:
    name = live_name(files, live, manifest)
    source = describe(name)
    data = _bytes(files, name, describe)
    check_size(source, len(data), live)
    table = SstFile(data, source, live.largest_seqno)
    family = manifest.column_families[live.column_family]
    recorded = table.properties
    if (recorded.column_family_id != NO_COLUMN_FAMILY
            and recorded.column_family_id != live.column_family) or (
            recorded.column_family_name and recorded.column_family_name != family):
        raise corrupt(source, table.footer.offset,
                      f"the table belongs to column family {recorded.column_family_id}"
                      f" ({recorded.column_family_name!r}), the MANIFEST says"
                      f" {live.column_family} ({family!r})")
    return table


def _whole(files: Mapping[str, Opener], name: str, describe: Callable[[str], str]) -> Buffer:
    data = _bytes(files, name, describe)
    return data[0:len(data)] if isinstance(data, RangedFile) else data


def _bytes(files: Mapping[str, Opener], name: str, describe: Callable[[str], str]
           ) -> TableData:
    opener = files.get(name)
    if opener is None:
        raise CorruptCheckpointError(f"{describe(name)}: missing from the RocksDB snapshot")
    return opener() if callable(opener) else opener


def _mapper(path: Path) -> Callable[[], Buffer]:
    def mapped() -> Buffer:
        with open(path, "rb") as handle:
            if path.stat().st_size == 0:
                return b""
            return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    return mapped

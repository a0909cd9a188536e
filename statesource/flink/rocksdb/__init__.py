"""RocksDB's own files, read in pure Python: the state of Flink's RocksDB backend.

Native savepoints and RocksDB checkpoints of Flink hold a RocksDB database's files: ``CURRENT``,
a ``MANIFEST-*``, ``OPTIONS-*`` and SST files (block-based tables), one column family per
state. No Python binding reads them as Flink wrote them (none can set Flink's merge operator,
with which list states are written), so the formats are read here, from RocksDB's sources:
compression by cramjam (and the standard library), checksums by the ``crc32c`` and
``xxhash`` packages. Every file is untrusted: bounds, counts and checksums are checked before
anything is allocated, and a bad file is refused with
:class:`~statesource.errors.CorruptCheckpointError` naming it and the offset; what RocksDB can
write but no Flink state uses (BlobDB, user-defined timestamps, wide columns, ...) with
:class:`~statesource.errors.UnsupportedFormatVersionError`.

The API, for a snapshot reader:

- :func:`read_live_files` ``(files, describe=str) -> {column family name: [SstFile]}``: the live
  tables of each column family of the database whose files ``files`` maps by their RocksDB
  names (``"CURRENT"``, ``"MANIFEST-000004"``, ``"000123.sst"``) to their bytes or to a
  function reading them (only the live ones are read); ``describe`` turns a RocksDB name
  into what errors call the file (a snapshot's path of it). :func:`read_directory` does the
  same for a local directory, memory-mapping the tables.
- :func:`merged_entries` ``(tables) -> Iterator[(user key, value)]``: one column family's
  contents, sorted by user key (bytewise), as RocksDB reads them with Flink's merge operator:
  newest version first, deletions and range deletions hiding older versions, merge operands
  appended oldest first with ``,`` to the newest full value.
- :class:`SstFile` ``(data, source)``: one table; ``entries()`` yields every version in file
  order as an :data:`Entry`, a tuple (user key, sequence number, kind, value) (``kind``:
  :mod:`.keys`' ``VALUE``, ``MERGE``, ``DELETION``, ``SINGLE_DELETION``), ``range_deletions()``
  its range deletions, ``properties`` what RocksDB recorded (column family, counts,
  comparator, compression), and ``data_blocks`` the index (each block's separator key and
  handle, for point lookups).
- :func:`read_database_manifest` ``(files) -> Manifest``: the column families (id -> name) and
  the live files (number, column family, level, smallest and largest keys) alone.
- :mod:`.lookup`: ``range_entries`` / ``prefix_entries`` / ``get``: what :func:`merged_entries`
  gives for some keys, reading only the data blocks the tables' indexes place them in (and,
  for ``get``, skipping tables whose Bloom filter, :mod:`.filter`, rules the key out).

Modules, bottom up: ``coding`` (varints, fixed integers), ``checksums``, ``compression``,
``keys`` (internal keys and value types), ``footer``, ``fetch`` (one block: bounds, checksum,
decompression), ``block`` (entries over restart points), ``index``, ``properties``, ``filter``,
``table``; ``log`` (the MANIFEST's record framing), ``version_edit``, ``manifest``;
``database``, ``merge`` and ``lookup`` on top.
"""

from statesource.flink.rocksdb.database import (
    read_database_manifest,
    read_directory,
    read_live_files,
)
from statesource.flink.rocksdb.manifest import LiveFile, Manifest
from statesource.flink.rocksdb.merge import LIST_DELIMITER, merged_entries
from statesource.flink.rocksdb.table import Entry, RangeTombstone, SstFile

__all__ = [
    "LIST_DELIMITER",
    "Entry",
    "LiveFile",
    "Manifest",
    "RangeTombstone",
    "SstFile",
    "merged_entries",
    "read_database_manifest",
    "read_directory",
    "read_live_files",
]

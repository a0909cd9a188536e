"""The properties block of a table: what RocksDB recorded about it when it wrote it.

A block of (name, value) entries in name order (``table/meta_blocks.cc``,
``table/table_properties.cc``): RocksDB's own counters as varint64s (``rocksdb.num.entries``,
``rocksdb.column.family.id``, ...), its names as strings (``rocksdb.column.family.name``,
``rocksdb.comparator``, ``rocksdb.compression``, ...), and properties of collectors as
raw bytes, among them the index type (``rocksdb.block.based.table.index.type``, a
``uint32``) and, in files made by ``SstFileWriter``, the external file version and the
global sequence number that all of the file's entries take (``uint32``, ``uint64``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from statesource.flink.rocksdb.coding import Place, varint

_COUNTERS = {
    "rocksdb.num.entries": "num_entries",
    "rocksdb.deleted.keys": "num_deletions",
    "rocksdb.merge.operands": "num_merge_operands",
    "rocksdb.num.range-deletions": "num_range_deletions",
    "rocksdb.num.data.blocks": "num_data_blocks",
    "rocksdb.format.version": "format_version",
    "rocksdb.original.file.number": "original_file_number",
    "rocksdb.column.family.id": "column_family_id",
    "rocksdb.index.key.is.user.key": "index_key_is_user_key",
    "rocksdb.index.value.is.delta.encoded": "index_value_is_delta_encoded",
    "rocksdb.udi.is.primary.index": "user_defined_index",
    "rocksdb.user.defined.timestamps.persisted": "user_defined_timestamps_persisted",
}
_NAMES = {
    "rocksdb.column.family.name": "column_family_name",
    "rocksdb.comparator": "comparator",
    "rocksdb.merge.operator": "merge_operator",
    "rocksdb.compression": "compression",
    "rocksdb.compression_options": "compression_options",
}
INDEX_TYPE = "rocksdb.block.based.table.index.type"
EXTERNAL_VERSION = "rocksdb.external_sst_file.version"
EXTERNAL_GLOBAL_SEQNO = "rocksdb.external_sst_file.global_seqno"
NO_COLUMN_FAMILY = 0x7FFFFFFF  # TablePropertiesCollectorFactory::Context::kUnknownColumnFamily


@dataclass(frozen=True)
class TableProperties:
    """The properties a reader of Flink's state needs, and every other one raw."""

    num_entries: int = 0  # point entries and range deletions
    num_deletions: int = 0  # point and range deletions
    num_merge_operands: int = 0
    num_range_deletions: int = 0
    num_data_blocks: int = 0
    format_version: int = 0
    original_file_number: int = 0  # the number the table was written under (000123.sst: 123)
    column_family_id: int = NO_COLUMN_FAMILY
    column_family_name: str = ""
    comparator: str = ""
    merge_operator: str = ""
    compression: str = ""
    compression_options: str = ""
    index_key_is_user_key: int = 0
    index_value_is_delta_encoded: int = 0
    user_defined_index: int = 0
    user_defined_timestamps_persisted: int = 1
    raw: dict[str, bytes] = field(default_factory=dict, repr=False)

    @property
    def index_type(self) -> int:
        """``BlockBasedTableOptions::IndexType``: 0 binary search, 1 hash search, 2 two-level
        (partitioned), 3 binary search with each block's first key."""
        value = self.raw.get(INDEX_TYPE, bytes(4))
        return int.from_bytes(value[:4], "little") if len(value) == 4 else -1

    @property
    def external_version(self) -> int:
        """1 or 2 for a file ``SstFileWriter`` made, else 0."""
        value = self.raw.get(EXTERNAL_VERSION, b"")
        return int.from_bytes(value, "little") if len(value) == 4 else 0

    @property
    def global_seqno(self) -> int:
        """The sequence number an ingested external file's entries take (0: not recorded)."""
        value = self.raw.get(EXTERNAL_GLOBAL_SEQNO, b"")
        return int.from_bytes(value, "little") if len(value) == 8 else 0

    @property
    def window_bits(self) -> int:
        """zlib's ``window_bits`` the table was compressed with (RocksDB's default -14)."""
        for option in self.compression_options.split(";"):
            name, _, value = option.strip().partition("=")
            if name == "window_bits" and value.lstrip("-").isdigit():
                return int(value)
        return -14


def parse_properties(entries: list[tuple[bytes, bytes]], place: Place) -> TableProperties:
    """The properties in a properties block's (name, value) entries, which must be sorted."""
    values: dict[str, object] = {}
    raw: dict[str, bytes] = {}
    previous = None
    for key, value in entries:
        if previous is not None and key <= previous:
            raise place.error(0, f"properties out of order at {key!r}")
        previous = key
        name = key.decode("utf-8", "replace")
        raw[name] = value
        if name in _COUNTERS:
            number, end = varint(value, 0, len(value), place, name)
            if end != len(value):
                raise place.error(0, f"property {name} holds bytes after its number")
            values[_COUNTERS[name]] = number
        elif name in _NAMES:
            values[_NAMES[name]] = value.decode("utf-8", "replace")
    return TableProperties(raw=raw, **values)  # type: ignore[arg-type]

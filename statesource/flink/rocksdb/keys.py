"""RocksDB's internal keys (``db/dbformat.h``): a user key, then 8 bytes of version.

The 8 bytes are a little-endian ``uint64``: the sequence number (56 bits, the order in
which writes happened, across every file of a database) shifted left by 8, or'ed with the
value type. Within a table, entries are sorted by user key (bytewise, for the comparator
Flink uses), then by sequence number *descending*: the newest version of a key comes first.
"""

from __future__ import annotations

from statesource.errors import UnsupportedFormatVersionError
from statesource.flink.rocksdb.coding import Place

DELETION = 0x0
VALUE = 0x1
MERGE = 0x2
SINGLE_DELETION = 0x7
RANGE_DELETION = 0xF
BLOB_INDEX = 0x11
DELETION_WITH_TIMESTAMP = 0x14
WIDE_COLUMN_ENTITY = 0x16
VALUE_PREFERRED_SEQNO = 0x18

POINT_TYPES = frozenset({DELETION, VALUE, MERGE, SINGLE_DELETION})
"""The value types a table of Flink's state holds, and the ones statesource reads."""
UNSUPPORTED_TYPES = {
    BLOB_INDEX: "a reference into a blob file (BlobDB)",
    DELETION_WITH_TIMESTAMP: "a deletion with a user-defined timestamp",
    WIDE_COLUMN_ENTITY: "a wide-column entity",
    VALUE_PREFERRED_SEQNO: "a value with a preferred sequence number (TimedPut)",
}
"""Value types RocksDB can write that no Flink state uses: refused by name."""

TYPE_NAMES = {DELETION: "deletion", VALUE: "value", MERGE: "merge operand",
              SINGLE_DELETION: "single deletion", RANGE_DELETION: "range deletion"}

INTERNAL_BYTES = 8
MAX_SEQUENCE_NUMBER = (1 << 56) - 1
BYTEWISE_COMPARATOR = "leveldb.BytewiseComparator"


def split_internal_key(key: bytes) -> tuple[bytes, int, int] | None:
    """(user key, sequence number, value type) of ``key``, or None when it is too short."""
    if len(key) < INTERNAL_BYTES:
        return None
    packed = int.from_bytes(key[-INTERNAL_BYTES:], "little")
    return key[:-INTERNAL_BYTES], packed >> 8, packed & 0xFF


def refused_type(kind: int, place: Place, position: int) -> Exception:
    """Why an entry of value type ``kind`` is not read: a type no Flink state uses, by name,
    or one RocksDB does not have."""
    if kind in UNSUPPORTED_TYPES:
        return UnsupportedFormatVersionError(
            f"{place.source}: a data block at byte offset {place.offset} holds"
            f" {UNSUPPORTED_TYPES[kind]}, which Flink never writes")
    return place.error(position, f"entry of unknown value type {kind:#x}")

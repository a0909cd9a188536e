"""RocksDB's log format, in which a MANIFEST (and a write-ahead log) is written.

From ``db/log_format.h`` and ``db/log_reader.cc``: the file is cut into 32 KiB blocks, and a
record into fragments that never cross a block. Each fragment has a 7-byte header (a masked
CRC-32C, a ``uint16`` length, a type) or, for the *recyclable* types, an 11-byte one that
adds the ``uint32`` number of the log it belongs to; the CRC covers the type, that log
number and the payload. Types: FULL (1), FIRST (2), MIDDLE (3), LAST (4) and their
recyclable forms (5 to 8); 9 marks a compressed log, which a MANIFEST never is; 10 and 11
carry user-defined timestamp sizes and 130 and 131 a predecessor WAL's identity, neither of
which a MANIFEST reader needs; any other type with bit 7 set may be ignored. Where fewer
bytes than a header are left in a block, the writer zero-fills them.

A MANIFEST is read whole, so every damaged or truncated fragment is refused, naming the
file and its offset, never skipped as a recovering database might.
"""

from __future__ import annotations

from collections.abc import Iterator

from statesource.errors import UnsupportedFormatVersionError
from statesource.flink.binary.crc32c import masked_crc32c
from statesource.flink.rocksdb.coding import Buffer, corrupt

BLOCK_BYTES = 32 * 1024
HEADER_BYTES, RECYCLABLE_HEADER_BYTES = 7, 11
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
_RECYCLABLE = {5: FULL, 6: FIRST, 7: MIDDLE, 8: LAST}
_SET_COMPRESSION = 9
_SKIPPED = {10: False, 11: True, 130: False, 131: True}  # type -> recyclable header
_IGNORABLE = 0x80


def records(data: Buffer, source: str, log_number: int | None = None
            ) -> Iterator[tuple[int, bytes]]:
    """Every record of the log ``data`` as (file offset of its first fragment, payload).

    ``log_number`` is the file's own number: a recyclable fragment of another number is
    left over from the file's previous life, and ends the log.
    """
    size = len(data)
    pending: bytearray | None = None
    pending_at = 0
    pos = 0
    while pos < size:
        block_end = min(pos - pos % BLOCK_BYTES + BLOCK_BYTES, size)
        if block_end - pos < HEADER_BYTES:
            if any(data[pos:block_end]) or block_end == size:
                raise corrupt(source, pos, "truncated log record header")
            pos = block_end
            continue
        kind = data[pos + 6]
        length = data[pos + 4] | (data[pos + 5] << 8)
        if kind == 0 and length == 0:  # zero-filled: the rest of the block must be padding
            if any(data[pos:block_end]):
                raise corrupt(source, pos, "a log record of type 0 that is not padding")
            pos = block_end
            continue
        recyclable = kind in _RECYCLABLE or _SKIPPED.get(kind, False)
        header = RECYCLABLE_HEADER_BYTES if recyclable else HEADER_BYTES
        end = pos + header + length
        if end > block_end:
            raise corrupt(source, pos, f"log record of {length} bytes runs past its block")
        stored = int.from_bytes(data[pos:pos + 4], "little")
        if masked_crc32c(memoryview(data)[pos + 6:end]) != stored:
            raise corrupt(source, pos, "log record checksum mismatch")
        if recyclable and log_number is not None and (
                int.from_bytes(data[pos + 7:pos + 11], "little") != log_number):
            break  # a record of the recycled file's previous log: the end of this one
        fragment = bytes(data[pos + header:end])
        at, pos = pos, end
        kind = _RECYCLABLE.get(kind, kind)
        if kind in (FULL, FIRST):
            if pending is not None:
                raise corrupt(source, at, "a record starts inside another one")
            if kind == FULL:
                yield at, fragment
            else:
                pending, pending_at = bytearray(fragment), at
        elif kind in (MIDDLE, LAST):
            if pending is None:
                raise corrupt(source, at, "a record continues that never started")
            pending += fragment
            if kind == LAST:
                yield pending_at, bytes(pending)
                pending = None
        elif kind == _SET_COMPRESSION:
            raise UnsupportedFormatVersionError(
                f"{source}: a compressed log (at byte offset {at}), which a MANIFEST never is")
        elif kind not in _SKIPPED and not kind & _IGNORABLE:
            raise corrupt(source, at, f"unknown log record type {kind}")
    if pending is not None:
        raise corrupt(source, pending_at, "the log ends inside a record")

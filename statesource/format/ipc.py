"""Arrow IPC files whose record batches are addressable by key group.

Each key group's rows are written as one or more whole record batches, so its
bytes form one contiguous range of the file: the metadata records that range
and its CRC-32, and a reader fetches exactly those bytes, checks them, and
decodes the IPC messages inside with the schema derived from the metadata.
The file stays a regular Arrow IPC file that any Arrow reader can open whole.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa

from statesource.errors import CorruptCheckpointError
from statesource.format.storage import Location, open_regular_file

MAX_ROWS_PER_BATCH = 1 << 16

MAX_REQUEST_BYTES = 64 << 20
"""Adjacent ranges are read with one request up to this many bytes (a larger range is a
request of its own): a request's buffer lives as long as any table decoded from it, so
a read of a large file must not take the whole file at once."""

ReadListener = Callable[[str, int, int], None]
"""Called with (path, offset, length) for every byte range read; for instrumentation."""


class LocatedBatches(Protocol):
    """Anything that says where consecutive batches lie (a key group, a subtask's share)."""

    @property
    def batch_count(self) -> int: ...

    @property
    def offset(self) -> int: ...

    @property
    def length(self) -> int: ...

    @property
    def crc32(self) -> int: ...

    @property
    def rows(self) -> int: ...


@dataclass(frozen=True)
class ByteRange:
    """Where a group of consecutive batches lies in a file."""

    batch_start: int
    batch_count: int
    offset: int
    length: int
    crc32: int


def split_batches(table: pa.Table, start: int, length: int) -> list[pa.RecordBatch]:
    """Rows ``start .. start+length`` of ``table`` as batches of bounded size."""
    return [
        batch
        for chunk_start in range(start, start + length, MAX_ROWS_PER_BATCH)
        for batch in table.slice(
            chunk_start, min(MAX_ROWS_PER_BATCH, start + length - chunk_start)
        ).to_batches()
    ]


def read_ranges(file: Location, schema: pa.Schema, ranges: Sequence[LocatedBatches],
                expected_size: int, verify: bool = True,
                listener: ReadListener | None = None, *,
                exact_rows: bool = True) -> Iterator[list[pa.RecordBatch]]:
    """Each range's batches, reading adjacent ranges with one request (up to
    :data:`MAX_REQUEST_BYTES`) and checking CRCs.

    Each range must hold exactly its ``rows``, unless not ``exact_rows``: ranges that
    runs share (format version 5), whose callers check the rows each run takes.
    """
    if not ranges:
        return
    with open_regular_file(file, "data file") as handle:
        if handle.size() != expected_size:
            raise CorruptCheckpointError(
                f"data file {file} is {handle.size()} bytes, the metadata says {expected_size}:"
                " it was truncated or replaced"
            )
        _check_file_schema(file, handle, schema, ranges[0].offset)
        for span in _adjacent_spans(ranges):
            start = span[0].offset
            length = span[-1].offset + span[-1].length - start
            data = _read_into_own_buffer(handle, start, length, file)
            if listener is not None:
                listener(file.path, start, length)
            for byte_range in span:
                piece = data.slice(byte_range.offset - start, byte_range.length)
                yield _decode(file, schema, byte_range, piece, verify, exact_rows)


def _read_into_own_buffer(handle: pa.NativeFile, start: int, length: int,
                          file: Location) -> pa.Buffer:
    """Bytes ``start .. start+length`` of ``handle`` in a new mutable buffer that nothing
    else holds: the batches decoded from it are the caller's alone, so a merge may write
    delta runs' values over a base's where they lie (:mod:`statesource.format.inplace`)."""
    data = pa.allocate_buffer(length)
    handle.seek(start)
    read = handle.readinto(data)
    if read != length:
        raise CorruptCheckpointError(
            f"data file {file}: short read at offset {start} ({read} of {length}"
            " bytes): the file is truncated"
        )
    return data


def check_file_schema(file: Location, schema: pa.Schema, first_range: int) -> None:
    """The check :func:`read_ranges` makes of a data file's own schema (see
    :func:`_check_file_schema`), for a reader that reads its byte ranges itself (the JVM
    reader, when its read is planned); ``first_range``: where the file's first range lies."""
    with open_regular_file(file, "data file") as handle:
        _check_file_schema(file, handle, schema, first_range)


_MAGIC = b"ARROW1\0\0"
_HEADER = len(_MAGIC) + 8  # the magic, then the schema message's marker and length


def _check_file_schema(file: Location, handle: pa.NativeFile, schema: pa.Schema,
                       first_range: int) -> None:
    """The file's own schema message must be the one the metadata's types derive.

    Record batches carry no types: bytes decoded with another schema of the
    same layout (``string`` as ``bytes``, ``long`` as a timestamp) would come
    back as different values without any error, so a metadata whose declared
    types no longer match the file is refused here. The schema message lies
    between the magic and the first batch, so it costs one small read.
    """
    head = handle.read_at(_HEADER, 0)
    length = int.from_bytes(head[len(_MAGIC) + 4:], "little", signed=True) \
        if len(head) == _HEADER else -1
    if head[:len(_MAGIC)] != _MAGIC or not 0 < length <= first_range - _HEADER:
        raise CorruptCheckpointError(f"data file {file} does not begin with an Arrow IPC schema")
    try:
        message = pa.ipc.read_message(pa.py_buffer(handle.read_at(length + 8, len(_MAGIC))))
        written = pa.ipc.read_schema(message)
    except (pa.ArrowException, OSError, EOFError) as error:
        raise CorruptCheckpointError(f"data file {file}: unreadable schema: {error}") from None
    if not written.equals(schema, check_metadata=False):
        raise CorruptCheckpointError(
            f"data file {file} holds other columns than the metadata's types make"
            f" ({_columns(schema)})"
        )


def _columns(schema: pa.Schema) -> str:
    return ", ".join(f"{field.name}: {field.type}" for field in schema)


def _adjacent_spans(ranges: Sequence[LocatedBatches]) -> Iterator[list[LocatedBatches]]:
    span = [ranges[0]]
    for byte_range in ranges[1:]:
        if byte_range.offset == span[-1].offset + span[-1].length \
                and byte_range.offset + byte_range.length - span[0].offset <= MAX_REQUEST_BYTES:
            span.append(byte_range)
        else:
            yield span
            span = [byte_range]
    yield span


def _decode(file: Location, schema: pa.Schema, byte_range: LocatedBatches, piece: pa.Buffer,
            verify: bool, exact_rows: bool = True) -> list[pa.RecordBatch]:
    if verify and zlib.crc32(memoryview(piece)) != byte_range.crc32:
        raise CorruptCheckpointError(
            f"data file {file}: checksum mismatch in bytes {byte_range.offset}.."
            f"{byte_range.offset + byte_range.length}: the file is corrupt"
        )
    stream = pa.BufferReader(piece)
    batches = []
    try:
        for _ in range(byte_range.batch_count):
            batch = pa.ipc.read_record_batch(pa.ipc.read_message(stream), schema)
            batch.validate()
            batches.append(batch)
        consumed = stream.tell()
    except (pa.ArrowException, OSError, EOFError) as error:
        raise CorruptCheckpointError(
            f"data file {file}: cannot decode record batches at offset {byte_range.offset}:"
            f" {error}"
        ) from None
    rows = sum(batch.num_rows for batch in batches)
    if consumed != byte_range.length or (exact_rows and rows != byte_range.rows):
        # The checksum held, so the metadata describes these bytes wrongly: reading
        # fewer batches or rows than are there would be a silently different answer.
        raise CorruptCheckpointError(
            f"data file {file}: bytes {byte_range.offset}..{byte_range.offset + byte_range.length}"
            f" hold {rows} rows in {consumed} bytes of {byte_range.batch_count} batches, the"
            f" metadata says {byte_range.rows} rows in {byte_range.length} bytes"
        )
    return batches

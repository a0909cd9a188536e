"""A RocksDB handle's database as a canonical keyed-state file.

Flink's RocksDB backend keeps each state in a column family named after it, and stores
exactly the pairs a canonical savepoint holds: the composite key (key-group prefix, key,
namespace, a map's user key; a timer's prefix, sign-flipped timestamp, key and namespace)
and the value as serialized (a list's elements joined by ``,``, a map value's null flag,
TTL's timestamp): a canonical savepoint of a RocksDB job is written by iterating them. So
a :class:`~statesource.flink.handles.RocksDBHandle` reads as a canonical file: its meta data
stream (the keyed-state header: the states and their ids), then per key group, in order,
each state's pairs by key, merged as RocksDB reads them (:mod:`statesource.flink.rocksdb`)
and framed as :mod:`.canonical_writer` frames them. Every reader (value by value,
column-wise, the census, the change feed, rescale and the edits) then takes it as it takes
a canonical savepoint's file, and what rewrites it writes a canonical savepoint.

The file is built whole, in memory (about the size of a canonical savepoint of the same
state): what a point lookup or a larger-than-memory state needs, reading key groups from
the tables' index blocks, is left for later.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from statesource.errors import (
    CorruptCheckpointError,
    IncompatibleCheckpointError,
    UnsupportedFormatVersionError,
)
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.handles import KeyedHandle, RocksDBHandle, StreamHandle
from statesource.flink.layouts.canonical_writer import (
    KeyGroupFramer,
    assemble_keyed_file,
    prefix_bytes,
)
from statesource.flink.rocksdb import SstFile, merged_entries, read_live_files
from statesource.flink.statefiles.keyed_header import KeyedHeader, read_keyed_header

DEFAULT_FAMILY = "default"
"""The column family every RocksDB database has, which Flink leaves empty."""
_COMPRESSED_FLAG = 4
"""Where the header's compression flag is: after its int version."""


def canonical_handle(handle: RocksDBHandle, max_parallelism: int,
                     read: Callable[[StreamHandle], bytes],
                     describe: Callable[[StreamHandle], str]) -> tuple[KeyedHandle, str]:
    """``handle``'s state as a canonical savepoint's keyed handle over a file held inline, and
    what errors call that file; ``read`` gives a stream's bytes, ``describe`` its name.

    A RocksDB file missing or corrupt is refused with
    :class:`~statesource.errors.CorruptCheckpointError` naming it; what RocksDB can write but
    no Flink state uses with :class:`~statesource.errors.IncompatibleCheckpointError`.
    """
    meta_source = describe(handle.meta)
    header, header_bytes = _header(read(handle.meta), meta_source)
    streams = {file.name: file.stream for file in handle.files}

    def named(name: str) -> str:
        stream = streams.get(name)
        return (f"{describe(stream)} (RocksDB's {name})" if stream is not None
                else f"{name} of the RocksDB state of {meta_source}")

    def opener(stream: StreamHandle) -> Callable[[], bytes]:
        return lambda: read(stream)

    source = (f"{meta_source} (the RocksDB state of key groups {handle.start}..{handle.end},"
              " read from its files)")
    try:
        families = read_live_files({name: opener(stream) for name, stream in streams.items()},
                                   named)
        key_groups = _key_groups(handle, header, families, max_parallelism, meta_source)
    except UnsupportedFormatVersionError as error:
        raise IncompatibleCheckpointError(f"{error}; statesource reads the RocksDB files Flink"
                                          " writes") from None
    data, offsets = assemble_keyed_file(header_bytes, key_groups)
    stream = StreamHandle(None, False, len(data), data, source)
    return KeyedHandle(handle.start, tuple(offsets), stream, savepoint=True), source


def _header(meta: bytes, source: str) -> tuple[KeyedHeader, bytes]:
    """The states of the meta data stream (nothing else is in it), and its bytes as a
    canonical file's header: the data that follows is not compressed, whatever Flink's
    snapshot compression (which RocksDB's own files never had)."""
    header = read_keyed_header(BinaryReader(meta, source))
    if header.data_start != len(meta):
        raise CorruptCheckpointError(
            f"{source}: {len(meta) - header.data_start} bytes after the RocksDB state's"
            f" header, at byte offset {header.data_start}")
    return header, meta[:_COMPRESSED_FLAG] + b"\x00" + meta[_COMPRESSED_FLAG + 1:]


def _key_groups(handle: RocksDBHandle, header: KeyedHeader,
                families: dict[str, list[SstFile]], max_parallelism: int, meta_source: str
                ) -> list[bytes]:
    """The framed bytes of each key group of the handle's range (empty where none)."""
    states = {info.name: info.state_id for info in header.states}
    if set(families) - {DEFAULT_FAMILY} != set(states):
        raise CorruptCheckpointError(
            f"{meta_source}: the RocksDB state's meta data lists the states"
            f" {', '.join(sorted(states))}; its database's column families are"
            f" {', '.join(sorted(families))}")
    framers: dict[int, KeyGroupFramer] = {}
    for info in header.states:  # state by state, in id order: as Flink writes a key group
        tables = families[info.name]
        for key_group, key_tail, value in _pairs(tables, info.name, handle, max_parallelism):
            framer = framers.get(key_group)
            if framer is None:
                framer = framers[key_group] = KeyGroupFramer(key_group, max_parallelism)
            framer.add(info.state_id, key_tail, value)
    return [framers[key_group].getvalue() if key_group in framers else b""
            for key_group in range(handle.start, handle.end + 1)]


def _pairs(tables: Sequence[SstFile], state: str, handle: RocksDBHandle, max_parallelism: int
           ) -> Iterator[tuple[int, bytes, bytes]]:
    """(key group, key after its prefix, value) of every entry of one state's tables, each
    key's group checked to lie in the handle's range."""
    size = prefix_bytes(max_parallelism)
    prefix: bytes | None = None
    key_group = -1
    for key, value in merged_entries(tables):
        if key[:size] != prefix:  # keys come sorted: a key group's are together
            prefix = key[:size]
            key_group = int.from_bytes(prefix, "big")
            where = ", ".join(table.source for table in tables)
            if len(key) <= size:
                raise CorruptCheckpointError(
                    f"{where}: state {state!r} holds the key {key.hex()!r}, no longer than"
                    f" a key-group prefix (max parallelism {max_parallelism})")
            if not handle.start <= key_group <= handle.end:
                raise CorruptCheckpointError(
                    f"{where}: state {state!r} holds the key {key[:16].hex()} of key group"
                    f" {key_group}, outside the key groups {handle.start}..{handle.end} of its"
                    f" subtask (max parallelism {max_parallelism})")
        yield key_group, key[size:], value


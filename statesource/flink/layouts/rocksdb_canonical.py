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
state), or, for a lookup, of only some key groups or some keys (:class:`Selection`): then
each state's tables are read by key range (:func:`~statesource.flink.rocksdb.lookup.range_entries`),
only the blocks their indexes place those ranges in, and the other key groups are empty.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain

from statesource.errors import (
    CorruptCheckpointError,
    IncompatibleCheckpointError,
    UnsupportedFormatVersionError,
)
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.handles import KeyedHandle, RocksDBFile, RocksDBHandle, StreamHandle
from statesource.flink.layouts.canonical_writer import (
    KeyGroupFramer,
    assemble_keyed_file,
    key_group_prefix,
    prefix_bytes,
)
from statesource.flink.layouts.legacy_timers import (
    LegacyTimers,
    holds_timers,
    read_legacy_timers,
)
from statesource.flink.rocksdb import (
    SstFile,
    merged_entries,
    read_database_manifest,
    read_live_files,
)
from statesource.flink.rocksdb.coding import RangedFile, TableData
from statesource.flink.rocksdb.database import check_size, live_name
from statesource.flink.rocksdb.lookup import BlockReads, prefix_end, range_entries
from statesource.flink.statefiles.keyed_header import KeyedHeader, read_keyed_header
from statesource.flink.statefiles.keyed_header_writer import write_keyed_header

DEFAULT_FAMILY = "default"
"""The column family every RocksDB database has, which Flink leaves empty."""
_COMPRESSED_FLAG = 4
"""Where the header's compression flag is: after its int version."""
KeyRange = tuple[bytes, bytes | None]
_INT = struct.Struct(">i")


@dataclass(frozen=True)
class Selection:
    """What a lookup reads of a RocksDB handle: some key groups, and in them, if ``keys`` is
    given, only the entries of those keys (serialized, each with its key group), except in
    timer states (whose keys start with the timestamp: their whole key groups)."""

    key_groups: frozenset[int]
    keys: tuple[tuple[int, bytes], ...] | None = None
    reads: BlockReads | None = None

    def ranges(self, max_parallelism: int, timers: bool) -> list[KeyRange]:
        """The RocksDB key ranges of a state, sorted and disjoint."""
        if self.keys is None or timers:
            found: list[KeyRange] = []
            for key_group in sorted(self.key_groups):
                start = key_group_prefix(key_group, max_parallelism)
                stop = prefix_end(start)
                if found and found[-1][1] == start:
                    found[-1] = (found[-1][0], stop)
                else:
                    found.append((start, stop))
            return found
        prefixes = sorted({key_group_prefix(key_group, max_parallelism) + key
                           for key_group, key in self.keys if key_group in self.key_groups})
        unique = [p for i, p in enumerate(prefixes) if i == 0 or not p.startswith(prefixes[i - 1])]
        return [(prefix, prefix_end(prefix)) for prefix in unique]


def canonical_handle(handle: RocksDBHandle, max_parallelism: int,
                     read: Callable[[StreamHandle], bytes],
                     describe: Callable[[StreamHandle], str],
                     selection: Selection | None = None,
                     read_range: Callable[[StreamHandle, int, int], bytes] | None = None,
                     raw_keyed: Sequence[KeyedHandle] = ()) -> tuple[KeyedHandle, str]:
    """``handle``'s state as a canonical savepoint's keyed handle over a file held inline, and
    what errors call that file; ``read`` gives a stream's bytes, ``describe`` its name;
    ``selection``: only what a lookup reads (the rest of the file's key groups empty), its
    tables read block by block with ``read_range`` (stream, offset, length) where it names
    keys (a few blocks of each), and not at all where it names no key group (the header).
    ``raw_keyed``: the subtask's raw keyed state, whose heap timers (:mod:`.legacy_timers`)
    the file holds as the timer states Flink's canonical savepoint of the job has.

    A RocksDB file missing or corrupt is refused with
    :class:`~statesource.errors.CorruptCheckpointError` naming it; what RocksDB can write but
    no Flink state uses with :class:`~statesource.errors.IncompatibleCheckpointError`.
    """
    meta_source = describe(handle.meta)
    header, header_bytes = _header(read(handle.meta), meta_source)
    timers = _heap_timers(handle, raw_keyed, read, describe, selection)
    if timers.states:
        clash = {info.name for info in header.states} & {info.name for info in timers.states}
        if clash:
            raise CorruptCheckpointError(
                f"{meta_source}: the RocksDB state and the heap timers of its raw keyed state"
                f" both hold {', '.join(sorted(clash))}")
        header_bytes = write_keyed_header(dataclasses.replace(
            header, compressed=False,
            states=header.states + timers.numbered(len(header.states))))
    streams = {file.name: file.stream for file in handle.files}
    named = table_names(handle, describe)
    ranged = read_range is not None and selection is not None and selection.keys is not None

    def opener(name: str, stream: StreamHandle) -> Callable[[], TableData]:
        if ranged and name.endswith(".sst"):
            assert read_range is not None
            return lambda: RangedFile(stream.size,
                                      lambda offset, length: read_range(stream, offset, length))
        return lambda: read(stream)

    source = database_source(handle, describe)
    try:
        if selection is not None and not selection.key_groups:
            key_groups = [b""] * handle.count
        else:
            families = read_live_files({name: opener(name, stream)
                                        for name, stream in streams.items()}, named)
            key_groups = _key_groups(handle, header, families, max_parallelism, meta_source,
                                     selection, timers)
    except UnsupportedFormatVersionError as error:
        raise IncompatibleCheckpointError(f"{error}; statesource reads the RocksDB files Flink"
                                          " writes") from None
    data, offsets = assemble_keyed_file(header_bytes, key_groups)
    stream = StreamHandle(None, False, len(data), data, source)
    return KeyedHandle(handle.start, tuple(offsets), stream, savepoint=True), source


def table_names(handle: RocksDBHandle, describe: Callable[[StreamHandle], str]
                ) -> Callable[[str], str]:
    """What errors call each file of ``handle``'s database, by its RocksDB name: its stream,
    and that name."""
    streams = {file.name: file.stream for file in handle.files}
    meta_source = describe(handle.meta)

    def named(name: str) -> str:
        stream = streams.get(name)
        return (f"{describe(stream)} (RocksDB's {name})" if stream is not None
                else f"{name} of the RocksDB state of {meta_source}")
    return named


def database_source(handle: RocksDBHandle, describe: Callable[[StreamHandle], str]) -> str:
    """What errors call the canonical file made of ``handle``'s database."""
    return (f"{describe(handle.meta)} (the RocksDB state of key groups {handle.start}.."
            f"{handle.end}, read from its files)")


@dataclass(frozen=True)
class LiveTable:
    """A live table of a database: the handle's file, and the largest sequence number the
    MANIFEST records of it (what an ingested table's entries have where it records none)."""

    file: RocksDBFile
    largest_seqno: int


def live_tables(handle: RocksDBHandle, read: Callable[[StreamHandle], bytes],
                describe: Callable[[StreamHandle], str]) -> dict[str, list[LiveTable]]:
    """The live tables of each state of ``handle``'s database (by its column family's name),
    from its ``CURRENT`` and MANIFEST alone (no table is opened), as :func:`canonical_handle`
    would read them: the column families checked against the meta data's states, every live
    file one of the handle's, of the size the MANIFEST records (by the size ``_metadata``
    records of it: the file itself is checked by whoever opens it)."""
    meta_source = describe(handle.meta)
    header, _ = _header(read(handle.meta), meta_source)
    named = table_names(handle, describe)
    files = {file.name: file for file in handle.files}

    def opener(file: RocksDBFile) -> Callable[[], TableData]:
        return lambda: read(file.stream)

    try:
        manifest = read_database_manifest({name: opener(file) for name, file in files.items()},
                                          named)
    except UnsupportedFormatVersionError as error:
        raise IncompatibleCheckpointError(f"{error}; statesource reads the RocksDB files Flink"
                                          " writes") from None
    check_families(header, manifest.column_families.values(), meta_source)
    tables: dict[str, list[LiveTable]] = {info.name: [] for info in header.states}
    for live in manifest.files:
        name = live_name(files, live, manifest)
        check_size(named(name), files[name].stream.size, live)
        family = manifest.column_families[live.column_family]
        if family != DEFAULT_FAMILY:
            tables[family].append(LiveTable(files[name], live.largest_seqno))
    return tables


def check_families(header: KeyedHeader, families: Iterable[str], meta_source: str) -> None:
    """Refuse a database whose column families (but ``default``) are not the states its meta
    data lists."""
    states = {info.name for info in header.states}
    found = set(families)
    if found - {DEFAULT_FAMILY} != states:
        raise CorruptCheckpointError(
            f"{meta_source}: the RocksDB state's meta data lists the states"
            f" {', '.join(sorted(states))}; its database's column families are"
            f" {', '.join(sorted(found))}")


def table_bytes(handles: Sequence[RocksDBHandle]) -> dict[int, int]:
    """Each key group's share of its handle's table files' bytes (spread evenly): what a
    planner weighs key groups by without converting anything."""
    spread: dict[int, int] = {}
    for handle in handles:
        size = sum(file.stream.size for file in handle.files if file.name.endswith(".sst"))
        for key_group in range(handle.start, handle.end + 1):
            spread[key_group] = spread.get(key_group, 0) + size // handle.count
    return spread


def holds_any(handle: KeyedHandle | RocksDBHandle, key_groups: frozenset[int]) -> bool:
    """Whether ``handle`` holds any of ``key_groups``."""
    return any(handle.start <= key_group <= handle.end for key_group in key_groups)


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
                families: dict[str, list[SstFile]], max_parallelism: int, meta_source: str,
                selection: Selection | None, timers: LegacyTimers) -> list[bytes]:
    """The framed bytes of each key group of the handle's range (empty where none): the
    RocksDB states', then the heap timers' (each a key and an empty value)."""
    check_families(header, families, meta_source)
    framers: dict[int, KeyGroupFramer] = {}
    for info in header.states:  # state by state, in id order: as Flink writes a key group
        tables = families[info.name]
        if selection is None:
            found = merged_entries(tables)
        else:
            found = chain.from_iterable(
                range_entries(tables, start, stop, selection.reads)
                for start, stop in selection.ranges(max_parallelism, info.is_timer))
        for key_group, pairs, last_key in _runs(found, tables, info.name, handle,
                                                max_parallelism):
            framer = framers.get(key_group)
            if framer is None:
                framer = framers[key_group] = KeyGroupFramer(key_group, max_parallelism)
            framer.add_framed(info.state_id, pairs, last_key)
    timer_states = timers.numbered(len(header.states))
    for key_group, held in timers.timers.items():
        for info in timer_states:
            for timer in held[info.name]:
                framer = framers.get(key_group)
                if framer is None:
                    framer = framers[key_group] = KeyGroupFramer(key_group, max_parallelism)
                framer.add(info.state_id, timer, b"")
    return [framers[key_group].getvalue() if key_group in framers else b""
            for key_group in range(handle.start, handle.end + 1)]


def _heap_timers(handle: RocksDBHandle, raw_keyed: Sequence[KeyedHandle],
                 read: Callable[[StreamHandle], bytes], describe: Callable[[StreamHandle], str],
                 selection: Selection | None) -> LegacyTimers:
    """The heap timers of the subtask's raw keyed state (none where it has none, or holds
    the operator's own bytes), of the key groups ``selection`` reads."""
    for raw in raw_keyed:
        data = read(raw.stream)
        if not raw.offsets or not holds_timers(data[raw.offsets[0]:raw.offsets[0] + 4]):
            break
        source = describe(raw.stream)
        if (raw.start, len(raw.offsets)) != (handle.start, handle.count):
            raise CorruptCheckpointError(
                f"{source}: raw keyed state of key groups {raw.start}.."
                f"{raw.start + len(raw.offsets) - 1}, not those of its subtask's RocksDB state"
                f" ({handle.start}..{handle.end})")
        wanted = (range(handle.start, handle.end + 1) if selection is None
                  else selection.key_groups)
        return read_legacy_timers(raw, data, source, wanted)
    return LegacyTimers()


def _runs(found: Iterator[tuple[bytes, bytes]], tables: Sequence[SstFile], state: str,
          handle: RocksDBHandle, max_parallelism: int) -> Iterator[tuple[int, bytes, int]]:
    """(key group, its pairs framed, where the last pair's key starts) of every run of one
    key group's entries ``found`` in one state's ``tables`` (the RocksDB key is the composite
    key, prefix included: framed as it is, in one join per run), in the handle's range.

    Keys of other key groups are no state of the handle: a database rebuilt by a rescaled
    restore keeps its old tables whole, the keys of the key groups it gave away in them
    (Flink clips it by range deletions, which the merge applies, and a later compaction drops
    them). Flink never reads such keys again (its savepoints iterate the backend's key groups,
    its restores clip or copy a database to them), so they are passed over here too, as the
    JVM reader, which reads key group by key group, never reaches them."""
    size = prefix_bytes(max_parallelism)
    pack = _INT.pack
    prefix: bytes | None = None
    key_group = -1
    inside = False
    parts: list[bytes] = []
    append = parts.append
    length = last = 0
    for key, value in found:
        if key[:size] != prefix:  # keys come sorted: a key group's are together
            if parts:
                yield key_group, b"".join(parts), last
                parts.clear()
                length = 0
            prefix = key[:size]
            key_group = int.from_bytes(prefix, "big")
            inside = handle.start <= key_group <= handle.end
            if len(key) <= size:  # sorted first of its key group's
                where = ", ".join(table.source for table in tables)
                raise CorruptCheckpointError(
                    f"{where}: state {state!r} holds the key {key.hex()!r}, no longer than"
                    f" a key-group prefix (max parallelism {max_parallelism})")
        if not inside:
            continue
        last = length + 4
        append(pack(len(key)))
        append(key)
        append(pack(len(value)))
        append(value)
        length += 8 + len(key) + len(value)
    if parts:
        yield key_group, b"".join(parts), last

"""Decoding one key group of a Flink keyed-state file value by value, canonical or native.

The reference decoders of both layouts (:mod:`canonical` and :mod:`native` offer them
through :class:`~statesource.flink.layouts.base.KeyGroupLayout`): what they refuse, they
name with its file and offset.

Native (heap checkpoints and native savepoints): the key-group id, then per
state its id, an entry count and ``(namespace, key, value)`` triples written
with the state's own serializers (timers: the timer elements).

Canonical (savepoints by default): per state its id and then length-prefixed
``(key, value)`` pairs whose key is a composite: key-group prefix, key,
namespace and, for map state, the user key; list values are elements joined
by ``,`` and map values a null flag and the value (Flink writes a null value
too, as its serializer writes one, and the reader skips it). The first byte
of the last key of a state carries the flag ``0x80``; then comes the next
state's id or ``0xFFFF``, the end of the key group.

With compression, the bytes after the native key-group id, or the whole
canonical key group, are Snappy framed streams.

Entries come out in the shapes of :mod:`statesource.model`: a value, a list
or a dict, each element or value paired with its last-access timestamp when
the state has TTL.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from statesource.errors import CorruptCheckpointError, IncompatibleCheckpointError
from statesource.flink.binary.reader import INT_AT, BinaryReader
from statesource.flink.binary.snappy import unframe
from statesource.flink.serializers.collections import ListType, MapType, duplicate_user_key
from statesource.flink.statefiles.keyed_header import KeyedHeader, StateInfo
from statesource.model import StateKind
from statesource.schema import hashable_record

END_OF_KEY_GROUP = 0xFFFF
META_DATA_FOLLOWS = 0x80
LIST_DELIMITER = ord(",")


@dataclass
class KeyGroupState:
    """One state's entries in one key group (timers: ``stored`` holds timestamps).

    ``size_bytes`` is the length of the state's section of the key group as
    serialized (its state id, counts, keys and values; for compressed snapshots,
    before compression).
    """

    keys: list[Any] = field(default_factory=list)
    namespaces: list[Any] = field(default_factory=list)
    stored: list[Any] = field(default_factory=list)
    size_bytes: int = 0


class CanonicalSection(NamedTuple):
    """One state's pairs in a canonical key group, as written: composite key and value bytes.

    Keys are given without the "meta data follows" flag, which is framing, not key.
    """

    state_id: int
    pairs: list[tuple[bytes, bytes]]


def canonical_sections(data: bytes, source: str, base: int, key_group: int, prefix_bytes: int,
                       compressed: bool) -> list[CanonicalSection]:
    """The state sections of one canonical key group in file order, their pairs undecoded.

    Heap backends write a key group's entries in hash-map order, which no
    decoded view keeps: these raw pairs are what re-framing
    (:func:`canonical_writer.frame_key_group`) needs to reproduce a file, and
    what carries a state over without decoding its values.
    """
    if compressed:
        data = unframe(data, source, base)
        source = f"{source} (key group {key_group}, decompressed)"
    r = BinaryReader(data, source, base)
    sections = []
    state_id = r.u16()
    while state_id != END_OF_KEY_GROUP:
        pairs = []
        last = False
        while not last:
            at = r.pos
            key = bytearray(r.take(r.count("key length")))
            value = r.take(r.count("value length"))
            if len(key) < prefix_bytes:
                raise r.error(f"invalid key length {len(key)}", at)
            last = bool(key[0] & META_DATA_FOLLOWS)
            key[0] &= ~META_DATA_FOLLOWS & 0xFF
            found = int.from_bytes(key[:prefix_bytes], "big")
            if found != key_group:
                raise r.error(f"entry of key group {found} in key group {key_group}", at + 4)
            pairs.append((bytes(key), value))
        sections.append(CanonicalSection(state_id, pairs))
        state_id = r.u16()
    if not r.at_end():
        raise r.error("bytes after the end of the key group")
    return sections


def variable_int_bytes(value: int) -> bytes:
    """Flink's ``writeVariableIntBytes``: the low byte, then the next ones while any is left
    (the length after the key and after the namespace, where both vary in size)."""
    out = bytearray()
    while True:
        out.append(value & 0xFF)
        value >>= 8
        if not value:
            return bytes(out)


def decode_canonical(data: bytes, source: str, base: int, header: KeyedHeader, key_group: int,
                     prefix_bytes: int, wanted: Collection[int] | None = None
                     ) -> dict[int, KeyGroupState]:
    """Entries per state id of the canonical key group whose bytes are ``data`` (file offset
    ``base``)."""
    if header.compressed:
        data = unframe(data, source, base)
        source = f"{source} (key group {key_group}, decompressed)"
    return _canonical(BinaryReader(data, source, base), header, key_group, prefix_bytes, wanted)


def decode_native(data: bytes, source: str, base: int, header: KeyedHeader, key_group: int,
                  wanted: Collection[int] | None = None, stop_at: Collection[int] = ()
                  ) -> dict[int, KeyGroupState]:
    """Entries per state id of the native key group whose bytes are ``data`` (file offset
    ``base``).

    ``stop_at`` names states whose values cannot be framed: the walk ends where the first
    of them begins, so the result holds the states before it.
    """
    return _native(native_key_group_reader(data, source, base, key_group, header), header,
                   wanted, stop_at)


def native_key_group_reader(data: bytes, source: str, base: int, key_group: int,
                            header: KeyedHeader) -> BinaryReader:
    """A reader of a native key group's state sections: past its leading id, which must be
    ``key_group`` (swapped offsets would decode under the wrong group), and decompressed
    where the snapshot is."""
    reader = BinaryReader(data, source, base)
    found = reader.i32()
    if found != key_group:
        raise reader.error(f"expected key group {key_group}, found {found}", 0)
    if header.compressed:
        reader = BinaryReader(unframe(data[4:], source, base + 4),
                              f"{source} (key group {key_group}, decompressed)", base + 4)
    return reader


def _state(header: KeyedHeader, reader: BinaryReader, state_id: int) -> StateInfo:
    if not 0 <= state_id < len(header.states):
        raise reader.error(f"unknown state id {state_id}", reader.pos - 2)
    return header.states[state_id]


def unwalkable(info: StateInfo, error: IncompatibleCheckpointError
               ) -> IncompatibleCheckpointError:
    """The error of a native key group whose state ``info`` holds a value statesource cannot
    read (``error``): nothing frames it, so neither it nor the states after it are found."""
    return IncompatibleCheckpointError(
        f"state {info.name!r} of a native snapshot: {error}; the states after it in each key"
        " group cannot be found either")


def _native(r: BinaryReader, header: KeyedHeader, wanted: Collection[int] | None,
            stop_at: Collection[int] = ()) -> dict[int, KeyGroupState]:
    """Every state section of the key group, up to the last wanted one.

    Values are not framed here, so a state whose values statesource cannot
    delimit (Kryo) ends the walk: states after it in the key group cannot be
    found, and reading one of them fails naming the state that blocks it.
    """
    result: dict[int, KeyGroupState] = {}
    remaining = None if wanted is None else set(wanted)
    while not r.at_end() and (remaining is None or remaining):
        start = r.pos
        info = _state(header, r, r.i16())
        if info.state_id in stop_at:
            break
        out = result.setdefault(info.state_id, KeyGroupState())
        try:
            _native_section(r, header, info, out)
        except IncompatibleCheckpointError as error:
            raise unwalkable(info, error) from None
        out.size_bytes += r.pos - start
        if remaining is not None:
            remaining.discard(info.state_id)
    if wanted is not None:
        result = {sid: entries for sid, entries in result.items() if sid in wanted}
    return result


def _native_section(r: BinaryReader, header: KeyedHeader, info: StateInfo,
                    out: KeyGroupState) -> None:
    """One state's entries in a native key group: a count, then (namespace, key, value)s."""
    read_key = header.key.read
    count = r.count("entry count")
    if info.is_timer:
        read_timer = info.timer.read
        for _ in range(count):
            timestamp, key, namespace = read_timer(r)
            out.keys.append(key)
            out.namespaces.append(namespace)
            out.stored.append(timestamp)
        return
    read_namespace, read_value = info.namespace.read, info.value.read
    keys, namespaces, stored = out.keys, out.namespaces, out.stored
    for _ in range(count):
        namespaces.append(read_namespace(r))
        keys.append(read_key(r))
        stored.append(read_value(r))


def _canonical(r: BinaryReader, header: KeyedHeader, key_group: int, prefix_bytes: int,
               wanted: Collection[int] | None) -> dict[int, KeyGroupState]:
    """Walk the length-prefixed pairs, decoding those of the wanted states.

    States come one after another, so the walk stops once every wanted state's
    section has ended; the bytes after it are not read.
    """
    result: dict[int, KeyGroupState] = {}
    data, end = r.data, r.end
    remaining = None if wanted is None else set(wanted)
    state_id = r.u16()
    pos = r.pos
    while state_id != END_OF_KEY_GROUP:
        section_start = pos - 2
        r.pos = pos
        info = _state(header, r, state_id)
        decoding = remaining is None or state_id in remaining
        decoder = _PairDecoder(header, info, r) if decoding else None
        entries = result.setdefault(state_id, KeyGroupState()) if decoding else None
        while True:
            key_start = pos + 4
            if key_start > end:
                raise r.error("truncated: no room for a key length", pos)
            key_length = INT_AT(data, pos)[0]
            value_at = key_start + key_length
            if key_length < prefix_bytes or value_at + 4 > end:
                raise r.error(f"invalid key length {key_length}", pos)
            value_start = value_at + 4
            value_length = INT_AT(data, value_at)[0]
            pos = value_start + value_length
            if value_length < 0 or pos > end:
                raise r.error(f"invalid value length {value_length}", value_at)
            first = data[key_start]
            found = first & 0x7F
            if prefix_bytes == 2:
                found = (found << 8) | data[key_start + 1]
            if found != key_group:
                raise r.error(f"entry of key group {found} in key group {key_group}", key_start)
            if decoder is not None and entries is not None:
                decoder.decode(key_start + prefix_bytes, value_at, value_start, pos, entries)
            if first & META_DATA_FOLLOWS:
                break
        if entries is not None:
            entries.size_bytes += pos - section_start
        if remaining is not None:
            remaining.discard(state_id)
            if not remaining:
                break
        r.pos = pos
        state_id = r.u16()
        pos = r.pos
    else:
        if pos != end:
            raise r.error("bytes after the end of the key group", pos)
    return {sid: _grouped(header.states[sid], entries, r) for sid, entries in result.items()}


class _PairDecoder:
    """Decodes the composite key and the value of one canonical pair of one state."""

    def __init__(self, header: KeyedHeader, info: StateInfo, reader: BinaryReader) -> None:
        self.info = info
        # Two readers over the key group's bytes, moved to each pair's key and value.
        self.kr = BinaryReader(reader.data, reader.source, reader.base)
        self.vr = BinaryReader(reader.data, reader.source, reader.base)
        self.key = header.key
        if info.is_timer:
            self.kind = None
            return
        self.kind = info.kind
        self.namespace = info.namespace
        self.ambiguous = self.key.length < 0 and self.namespace.length < 0
        self.value = info.value

    def decode(self, key_start: int, key_end: int, value_start: int, value_end: int,
               out: KeyGroupState) -> None:
        kr, vr = self.kr, self.vr
        kr.pos, kr.end, vr.pos, vr.end = key_start, key_end, value_start, value_end
        if self.kind is None:
            timestamp, key, namespace = self.info.timer.read(kr)
            stored: Any = timestamp
        else:
            key = self.key.read(kr)
            if self.ambiguous:
                self._length_after("key", kr, key_start)
            namespace_start = kr.pos
            namespace = self.namespace.read(kr)
            if self.ambiguous:
                self._length_after("namespace", kr, namespace_start)
            stored = self._value(kr, vr)
        if not kr.at_end() or not vr.at_end():
            raise kr.error(f"state {self.info.name!r}: trailing bytes in an entry", key_start)
        out.keys.append(key)
        out.namespaces.append(namespace)
        out.stored.append(stored)

    def _length_after(self, part: str, kr: BinaryReader, start: int) -> None:
        """Check the length Flink writes after a part (other bytes would make equal entries
        differ in bytes, and the JVM and the column decoders tell entries apart by them)."""
        at = kr.pos
        length = at - start
        written = variable_int_bytes(length)
        if kr.take(len(written)) != written:
            raise kr.error(f"state {self.info.name!r}: the length after the {part} is not"
                           f" its {length} bytes", at)

    def _value(self, kr: BinaryReader, vr: BinaryReader) -> Any:
        value = self.value
        if self.kind is StateKind.MAP:
            assert isinstance(value, MapType)
            user_key = hashable_record(value.key.read(kr))
            if value.null_flag(vr):
                # After the null flag Flink still writes the null, as the value's serializer
                # writes one (a String's is one zero byte): what follows the flag is skipped.
                vr.pos = vr.end
                return (user_key, None)
            return (user_key, value.value.read_whole(vr))
        if self.kind is StateKind.LIST:
            assert isinstance(value, ListType)
            elements = [value.element.read(vr)]
            while not vr.at_end():
                if vr.u8() != LIST_DELIMITER:
                    raise vr.error(f"state {self.info.name!r}: missing list delimiter",
                                   vr.pos - 1)
                elements.append(value.element.read(vr))
            return elements
        return value.read_whole(vr)


def _grouped(info: StateInfo, entries: KeyGroupState, reader: BinaryReader) -> KeyGroupState:
    """Canonical map state has one pair per user key: gather them into one dict per entry."""
    if info.is_timer or info.kind is not StateKind.MAP:
        return entries
    maps: dict[tuple[Any, Any], dict[Any, Any]] = {}
    for key, namespace, (user_key, value) in zip(entries.keys, entries.namespaces,
                                                 entries.stored):
        mapping = maps.setdefault((key, namespace), {})
        if user_key in mapping:
            raise duplicate_user_key(
                f"{reader.source}, state {info.name!r} of the key group at byte offset"
                f" {reader.base}", user_key)
        mapping[user_key] = value
    grouped = KeyGroupState(size_bytes=entries.size_bytes)
    for (key, namespace), mapping in maps.items():
        grouped.keys.append(key)
        grouped.namespaces.append(namespace)
        grouped.stored.append(mapping)
    return grouped


def check_key_group_range(offsets: tuple[int, ...], start: int, size: int, data_start: int,
                          source: str) -> list[tuple[int, int, int]]:
    """``(key group, begin, end)`` byte ranges of the non-empty key groups of a handle."""
    present = sorted({o for o in offsets if o})
    ends = dict(zip(present, present[1:] + [size]))
    ranges = []
    for index, offset in enumerate(offsets):
        if not offset:
            continue
        if offset < data_start:
            raise CorruptCheckpointError(
                f"{source}: key group {start + index} starts at byte offset {offset}, inside"
                f" the header (which ends at {data_start})")
        ranges.append((start + index, offset, ends[offset]))
    return ranges

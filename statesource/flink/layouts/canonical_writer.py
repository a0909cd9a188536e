"""Writing the key groups of a canonical savepoint's keyed-state file: the counterpart of the
canonical part of :mod:`keyed`.

A key group is its states' sections one after another: the state's id (a
short), then its pairs, each an int length and the composite key, an int
length and the value. The first byte of the last key of a section carries the
flag ``0x80`` ("meta data follows"); what follows is the next section's state
id, or ``0xFFFF`` after the last. Every composite key starts with the key
group (one byte when max parallelism <= 128, else two), so that first byte
never has the flag's bit of its own. An empty key group has no bytes at all:
its offset in ``_metadata`` is 0.

Only the framing is written here: composite keys and values come already
serialized, and compression (a Snappy stream per key group) is the caller's;
:func:`recompressed_keyed_file` changes a whole file's compression, key group by key group.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from statesource.errors import InvalidArgumentError
from statesource.flink.binary.snappy import frame, unframe
from statesource.flink.layouts.keyed import (
    END_OF_KEY_GROUP,
    META_DATA_FOLLOWS,
    CanonicalSection,
    check_key_group_range,
)

_MAX_PARALLELISM = 1 << 15
_MAX_STATE_ID = (1 << 15) - 2  # ids are positions among at most 32767 states
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")
_END = struct.pack(">H", END_OF_KEY_GROUP)
_COMPRESSED_FLAG = 4
"""Where a keyed-state file's header has its compression flag: after its int version."""


def prefix_bytes(max_parallelism: int) -> int:
    """Bytes of the key-group prefix of every composite key (1 up to 128 key groups, else 2)."""
    if not 1 <= max_parallelism <= _MAX_PARALLELISM:
        raise InvalidArgumentError(
            f"max parallelism {max_parallelism} is outside 1 .. {_MAX_PARALLELISM}")
    return 1 if max_parallelism <= 128 else 2


def key_group_prefix(key_group: int, max_parallelism: int) -> bytes:
    """The bytes every composite key of ``key_group`` starts with (big-endian)."""
    size = prefix_bytes(max_parallelism)
    if not 0 <= key_group < max_parallelism:
        raise InvalidArgumentError(
            f"key group {key_group} is outside 0 .. {max_parallelism - 1} (max parallelism"
            f" {max_parallelism})")
    return key_group.to_bytes(size, "big")


def frame_key_group(key_group: int, max_parallelism: int,
                    sections: Iterable[CanonicalSection]) -> bytes:
    """The uncompressed bytes of one non-empty key group: its sections, in the order given.

    Flink's restore reads whatever order a file has (a heap backend writes
    hash-map order), so the order is the caller's; each key must start with
    the key group's prefix, and each state may have one section, of at least
    one pair.
    """
    prefix = key_group_prefix(key_group, max_parallelism)
    parts: list[bytes] = []
    pack_int = _INT.pack
    seen: set[int] = set()
    for state_id, pairs in sections:
        if not 0 <= state_id <= _MAX_STATE_ID or state_id in seen:
            raise InvalidArgumentError(
                f"state id {state_id} in key group {key_group}: ids are 0 .. {_MAX_STATE_ID},"
                " one section each")
        if not pairs:
            raise InvalidArgumentError(
                f"state {state_id} has no entries in key group {key_group}: leave it out")
        seen.add(state_id)
        parts.append(_SHORT.pack(state_id))
        for key, _ in pairs:
            if not key.startswith(prefix):
                raise InvalidArgumentError(
                    f"key {key[:8].hex()}... of state {state_id} does not start with the prefix"
                    f" {prefix.hex()} of key group {key_group}")
        for key, value in pairs[:-1]:
            parts += (pack_int(len(key)), key, pack_int(len(value)), value)
        key, value = pairs[-1]
        parts += (pack_int(len(key)), bytes((key[0] | META_DATA_FOLLOWS,)), key[1:],
                  pack_int(len(value)), value)
    if not seen:
        raise InvalidArgumentError(
            f"key group {key_group} has no entries: an empty key group is not written (offset 0)")
    parts.append(_END)
    return b"".join(parts)


class KeyGroupFramer:
    """One canonical key group framed as its pairs arrive, in any order of states.

    What :func:`frame_key_group` writes from sections held whole, built up pair
    by pair instead: each state's section grows as bytes (no pair is kept as an
    object), in the order states first arrive; :meth:`getvalue` flags each
    section's last key and ends the key group. Keys are given without the key
    group's prefix (``key_tail``), which the framer writes itself.
    """

    __slots__ = ("key_group", "prefix", "_sections", "_last", "_done")

    def __init__(self, key_group: int, max_parallelism: int) -> None:
        self.key_group = key_group
        self.prefix = key_group_prefix(key_group, max_parallelism)
        self._sections: dict[int, bytearray] = {}
        self._last: dict[int, int] = {}
        self._done = False

    def add(self, state_id: int, key_tail: bytes, value: bytes) -> None:
        """One pair of state ``state_id``: the composite key after its prefix, and the value."""
        section = self._section(state_id)
        prefix = self.prefix
        self._last[state_id] = len(section) + 4
        section += _INT.pack(len(prefix) + len(key_tail))
        section += prefix
        section += key_tail
        section += _INT.pack(len(value))
        section += value

    def add_framed(self, state_id: int, pairs: bytes, last_key: int) -> None:
        """Pairs of state ``state_id`` already framed as :meth:`add` frames them (each key
        with this key group's prefix, none flagged); ``last_key`` is where the last pair's key
        starts in ``pairs``. What moves many pairs at once adds them so, one call for all."""
        if not 0 <= last_key < len(pairs):
            raise InvalidArgumentError(
                f"last key at {last_key} of {len(pairs)} bytes of pairs of state {state_id}")
        section = self._section(state_id)
        self._last[state_id] = len(section) + last_key
        section += pairs

    def _section(self, state_id: int) -> bytearray:
        """The section of ``state_id``, started (with its id) at its first pair."""
        section = self._sections.get(state_id)
        if section is None:
            if self._done or not 0 <= state_id <= _MAX_STATE_ID:
                raise InvalidArgumentError(
                    f"state id {state_id} in key group {self.key_group}: ids are 0 .."
                    f" {_MAX_STATE_ID}, and nothing is added once the key group is framed")
            section = self._sections[state_id] = bytearray(_SHORT.pack(state_id))
        elif self._done:
            raise InvalidArgumentError(f"key group {self.key_group} is already framed")
        return section

    def add_section(self, state_id: int, body: bytes) -> None:
        """A whole section of state ``state_id`` framed elsewhere (:func:`section_body`): its
        pairs, the last key already flagged. The state has no other pairs in the key group."""
        if self._done or state_id in self._sections or not 0 <= state_id <= _MAX_STATE_ID:
            raise InvalidArgumentError(
                f"state id {state_id} in key group {self.key_group}: ids are 0 .."
                f" {_MAX_STATE_ID}, one section each, and nothing is added once framed")
        if not body:
            raise InvalidArgumentError(
                f"state {state_id} has an empty section in key group {self.key_group}")
        self._sections[state_id] = bytearray(_SHORT.pack(state_id)) + body

    def getvalue(self) -> bytes:
        """The key group's bytes; nothing can be added after."""
        if not self._sections:
            raise InvalidArgumentError(
                f"key group {self.key_group} has no entries: an empty key group is not written"
                " (offset 0)")
        self._done = True
        for state_id, last in self._last.items():
            self._sections[state_id][last] |= META_DATA_FOLLOWS
        return b"".join([*self._sections.values(), _END])


class _Heads(dict[int, bytes]):
    """What goes before a key or value of each length: the int length (counting the
    key-group prefix) and the prefix, packed once per length, since lengths repeat."""

    def __init__(self, prefix: bytes) -> None:
        super().__init__()
        self.prefix = prefix

    def __missing__(self, length: int) -> bytes:
        head = self[length] = _INT.pack(len(self.prefix) + length) + self.prefix
        return head


_FEW_PAIRS = 64
"""Up to how many pairs a section is framed pair by pair: beyond, :func:`section_columns`
is cheaper (measured: even near 60 pairs, 1.5 times as fast at 2,000; numpy's scatter was
no faster than the loop, its conversions from Python objects costing as much)."""


def section_body(key_group: int, max_parallelism: int, key_tails: Iterable[tuple[bytes, bytes]]
                 ) -> bytes:
    """One state's pairs of one key group framed as a section without its state id, the last
    key flagged: what :meth:`KeyGroupFramer.add_section` takes. Keys are given without the
    key group's prefix; no pairs give no bytes.

    A state's pairs can thus be framed where they are made (a Spark task) and placed under
    whatever id the state gets in the file's header later. Many pairs (``migrate`` frames
    thousands a key group) are framed column by column (:func:`section_columns`).
    """
    pairs = key_tails if isinstance(key_tails, list) else list(key_tails)
    if len(pairs) > _FEW_PAIRS:
        return section_columns(key_group, max_parallelism, [key_tail for key_tail, _ in pairs],
                               [value for _, value in pairs])
    prefix = key_group_prefix(key_group, max_parallelism)
    pack, size = _INT.pack, len(prefix)
    parts: list[bytes] = []
    for key_tail, value in pairs:  # framed as KeyGroupFramer.add frames a pair
        parts += (pack(size + len(key_tail)), prefix, key_tail, pack(len(value)), value)
    return _flagged(prefix, parts)


def section_columns(key_group: int, max_parallelism: int, key_tails: Sequence[bytes],
                    values: Sequence[bytes]) -> bytes:
    """:func:`section_body` of the pairs ``zip(key_tails, values)``, given as two sequences
    of one length (where pairs come as columns, no pair need be made). Many are framed column
    by column, each step a loop in C: the heads of the keys and of the values by length,
    slotted with them into one list, joined."""
    if len(key_tails) != len(values):
        raise InvalidArgumentError(
            f"{len(key_tails)} keys and {len(values)} values in key group {key_group}: a"
            " section frames pairs")
    if len(values) <= _FEW_PAIRS:
        return section_body(key_group, max_parallelism, list(zip(key_tails, values)))
    prefix = key_group_prefix(key_group, max_parallelism)
    parts = [b""] * (4 * len(values))
    parts[0::4] = map(_Heads(prefix).__getitem__, map(len, key_tails))
    parts[1::4] = key_tails
    parts[2::4] = map(_Heads(b"").__getitem__, map(len, values))
    parts[3::4] = values
    return _flagged(prefix, parts)


def section_revalued(data: bytes, pair_starts: Sequence[int], key_ends: Sequence[int],
                     values: Sequence[bytes]) -> bytes:
    """A state's section of the canonical key group ``data`` (its state id not included)
    with new ``values``: each pair's key length and key (its prefix, the last one flagged
    already) as ``data`` holds them from ``pair_starts`` to ``key_ends``, then its value's
    length and value. No pair is framed again: a migration's key groups keep their keys."""
    parts = [b""] * (3 * len(values))
    parts[0::3] = map(data.__getitem__, map(slice, pair_starts, key_ends))
    parts[1::3] = map(_Heads(b"").__getitem__, map(len, values))
    parts[2::3] = values
    return b"".join(parts)


def _flagged(prefix: bytes, parts: list[bytes]) -> bytes:
    """A section's parts joined, the last key's first byte flagged: the key group's prefix
    ends the part fourth from last (alone, or after the key's length)."""
    if not parts:
        return b""
    parts[-4] = parts[-4][:-len(prefix)] + bytes([prefix[0] | META_DATA_FOLLOWS]) + prefix[1:]
    return b"".join(parts)


def assemble_keyed_file(header: bytes, key_groups: Sequence[bytes]) -> tuple[bytes, list[int]]:
    """A keyed-state file and the offset of each of its key groups, as ``_metadata`` records them.

    ``key_groups`` holds the bytes of each key group of the file's range in
    order (framed, and compressed if the header says so), empty for an empty
    key group, whose offset is then 0.
    """
    offsets, at = [], len(header)
    for data in key_groups:
        offsets.append(at if data else 0)
        at += len(data)
    return b"".join([header, *key_groups]), offsets  # one copy of every byte


def recompressed_keyed_file(data: bytes, offsets: Sequence[int], start: int, data_start: int,
                            compressed: bool, compress: bool, source: str
                            ) -> tuple[bytes, list[int]]:
    """A canonical keyed-state file (``data``: its header ends at ``data_start``, its key
    groups from ``start`` lie at ``offsets``; ``compressed`` says whether they are Snappy
    streams) with every key group written again compressed or not (``compress``), its
    header's flag set to say so; and the new offsets. A compressed key group is
    decompressed, its checksums verified, before it is written: a corrupt one is refused,
    naming ``source``, never copied."""
    header = bytearray(data[:data_start])
    header[_COMPRESSED_FLAG] = compress
    stored = {key_group: (begin, end) for key_group, begin, end in check_key_group_range(
        tuple(offsets), start, len(data), data_start, source)}
    key_groups = []
    for key_group in range(start, start + len(offsets)):
        begin, end = stored.get(key_group, (0, 0))
        plain = unframe(data[begin:end], source, begin) if compressed else data[begin:end]
        key_groups.append(frame(plain) if compress and plain else plain)
    return assemble_keyed_file(bytes(header), key_groups)

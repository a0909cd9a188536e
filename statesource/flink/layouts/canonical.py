"""The canonical layout of canonical savepoints: per state, length-prefixed (composite key,
value) pairs (see :mod:`keyed` for the bytes).

Decoded value by value by :mod:`keyed`, column-wise one key group at a time (the framing
found by :mod:`framing`, the columns by :mod:`columnar`), and re-keyed as its pairs are:
their bytes as they are (:func:`canonical_pairs`), or whole key groups by :mod:`regroup`.
A canonical savepoint frames every value, so it delivers every state.
"""

from __future__ import annotations

import struct
from collections.abc import Collection, Sequence
from collections.abc import Set as AbstractSet

import numpy as np
import pyarrow as pa

from statesource.errors import CorruptCheckpointError
from statesource.flink.binary.snappy import unframe
from statesource.flink.layouts.base import (
    ColumnsOf,
    DecodedSection,
    KeyGroupData,
    KeyGroupLayout,
    Pairs,
)
from statesource.flink.layouts.framing import canonical_sections
from statesource.flink.layouts.keyed import (
    END_OF_KEY_GROUP,
    META_DATA_FOLLOWS,
    KeyGroupState,
    decode_canonical,
)
from statesource.flink.layouts.regroup import Moved, Regrouper
from statesource.flink.statefiles.keyed_header import KeyedHeader, StateInfo

_INT_AT = struct.Struct(">i").unpack_from
_USHORT_AT = struct.Struct(">H").unpack_from


class CanonicalLayout(KeyGroupLayout):
    """Canonical savepoints' key groups."""

    name = "canonical"
    batch_bytes = 0

    def decode(self, piece: KeyGroupData, header: KeyedHeader, prefix_bytes: int,
               wanted: Collection[int] | None = None, stop_at: Collection[int] = ()
               ) -> dict[int, KeyGroupState]:
        return decode_canonical(piece.data, piece.source, piece.base, header, piece.key_group,
                                prefix_bytes, wanted)

    def tables(self, pieces: Sequence[KeyGroupData], header: KeyedHeader, info: StateInfo,
               columns: ColumnsOf) -> list[pa.Table] | None:
        state = columns(info)
        if state is None:
            return None
        tables = []
        for piece in pieces:
            data = _plain(piece, header)
            sections = canonical_sections(data, piece.key_group, state.prefix_bytes,
                                          len(header.states), (info.state_id,))
            if sections is None:
                return None
            if not sections:
                tables.append(state.schema.empty_table())
                continue
            table = state.table(np.frombuffer(data, np.uint8), piece.key_group, sections[0])
            if table is None:
                return None
            tables.append(table)
        return tables

    def sections(self, piece: KeyGroupData, header: KeyedHeader, prefix_bytes: int,
                 columns: ColumnsOf) -> list[DecodedSection] | None:
        states = [columns(info) for info in header.states]
        if any(c is None for c in states):
            return None
        data = _plain(piece, header)
        sections = canonical_sections(data, piece.key_group, prefix_bytes, len(header.states))
        if sections is None:
            return None
        buf = np.frombuffer(data, np.uint8)
        decoded = []
        for section in sections:
            state = states[section.state_id]
            assert state is not None
            table = state.table(buf, piece.key_group, section)
            if table is None:
                return None
            decoded.append(DecodedSection(section.state_id, len(section), section.size_bytes,
                                          table))
        return decoded

    def pairs(self, piece: KeyGroupData, header: KeyedHeader, prefix_bytes: int
              ) -> list[tuple[int, Pairs]]:
        return canonical_pairs(piece.data, piece.source, piece.base, piece.key_group, header,
                               prefix_bytes)

    def regroup(self, piece: KeyGroupData, header: KeyedHeader, regrouper: Regrouper,
                skipped: AbstractSet[int] = frozenset()) -> list[Moved] | None:
        return regrouper.regroup(_plain(piece, header), piece.key_group, header.states,
                                 skipped)

    def blockers(self, header: KeyedHeader) -> dict[str, str]:
        return {}


CANONICAL = CanonicalLayout()


def _plain(piece: KeyGroupData, header: KeyedHeader) -> bytes:
    """The key group's bytes, decompressed where the file is compressed."""
    return unframe(piece.data, piece.source, piece.base) if header.compressed else piece.data


def canonical_pairs(raw: bytes, source: str, base: int, key_group: int, header: KeyedHeader,
                    old_prefix: int) -> list[tuple[int, Pairs]]:
    """A canonical key group's pairs per state id, composite keys without their prefix.

    The walk of :func:`keyed.canonical_sections`, with the same checks (every length
    within the key group, every key's prefix its key group, nothing after the end), in
    one pass that slices each key after its prefix: this loop runs once per pair.
    """
    if header.compressed:
        data = unframe(raw, source, base)
        source = f"{source} (key group {key_group}, decompressed)"
    else:
        data = raw
    end, states = len(data), len(header.states)

    def corrupt(what: str, at: int) -> CorruptCheckpointError:
        return CorruptCheckpointError(f"{source}: {what} at byte offset {base + at}")

    sections: list[tuple[int, Pairs]] = []
    if end < 2:
        raise corrupt("truncated key group", 0)
    state_id, pos = _USHORT_AT(data, 0)[0], 2
    while state_id != END_OF_KEY_GROUP:
        if state_id >= states:
            raise corrupt(f"state id {state_id} of a header with {states} states", pos - 2)
        pairs: Pairs = []
        append = pairs.append
        while True:
            key_start = pos + 4
            if key_start > end:
                raise corrupt("truncated: no room for a key length", pos)
            value_at = key_start + _INT_AT(data, pos)[0]
            if value_at < key_start + old_prefix or value_at + 4 > end:
                raise corrupt(f"invalid key length {value_at - key_start}", pos)
            value_start = value_at + 4
            pos = value_start + _INT_AT(data, value_at)[0]
            if pos < value_start or pos > end:
                raise corrupt(f"invalid value length {pos - value_start}", value_at)
            first = data[key_start]
            found = first & 0x7F
            if old_prefix == 2:
                found = (found << 8) | data[key_start + 1]
            if found != key_group:
                raise corrupt(f"entry of key group {found} in key group {key_group}",
                              key_start)
            append((data[key_start + old_prefix:value_at], data[value_start:pos]))
            if first & META_DATA_FOLLOWS:
                break
        sections.append((state_id, pairs))
        if pos + 2 > end:
            raise corrupt("truncated: no room for a state id", pos)
        state_id, pos = _USHORT_AT(data, pos)[0], pos + 2
    if pos != end:
        raise corrupt("bytes after the end of the key group", pos)
    return sections

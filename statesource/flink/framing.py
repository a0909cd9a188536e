"""Where the pairs of a canonical key group are: one walk over the framing, no field decoded.

A canonical key group (see :mod:`keyed`) is a chain of length-prefixed pairs:
where a pair ends, the next begins, so the walk itself cannot be vectorised.
It does the least a chain needs per pair (two lengths and a flag) and records
where each pair starts; everything else about the pairs (their lengths,
key-group prefixes, keys and values) is then read by numpy over all of them at
once, by :mod:`columnar` and by the rescale.

The walk does not explain what it finds wrong: it answers None, and the
caller decodes the key group with :mod:`keyed`, which names the file, the
offset and the fault. So a hostile file is refused with the same error
whichever path reads it, and the fast path never returns what the
reference decoder would not.
"""

from __future__ import annotations

import struct
from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

from statesource.flink.keyed import END_OF_KEY_GROUP, META_DATA_FOLLOWS

_INT_AT = struct.Struct(">i").unpack_from
_BIG_ENDIAN_INT = np.dtype(">i4")


@dataclass(frozen=True)
class Section:
    """One state's pairs in a canonical key group: where each pair's key and value lie.

    Positions index the key group's (uncompressed) bytes. ``size_bytes`` is the
    section's length as serialized, its state id included.
    """

    state_id: int
    key_start: np.ndarray
    key_end: np.ndarray
    value_start: np.ndarray
    value_end: np.ndarray
    size_bytes: int

    def __len__(self) -> int:
        return len(self.key_start)


def be_ints(buf: np.ndarray, positions: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The big-endian numbers of ``dtype`` at ``positions`` of ``buf``, as native ones."""
    width = dtype.itemsize
    gathered = buf[positions[:, None] + np.arange(width)] if len(positions) else \
        np.empty((0, width), np.uint8)
    return np.ascontiguousarray(gathered).view(dtype.newbyteorder(">")).ravel().astype(dtype)


def canonical_sections(data: bytes, key_group: int, prefix_bytes: int, states: int,
                       wanted: Collection[int] | None = None) -> list[Section] | None:
    """The sections of a canonical key group (up to the last wanted one), or None if its
    framing is not sound.

    Sound means: every length fits the bytes, every key has the key group's
    prefix, every state id is below ``states``, the key group ends with ``0xFFFF``
    exactly at its end (unless the walk stopped after the wanted states). States
    not wanted are walked over but left out.
    """
    starts_by_state = _walk(data, prefix_bytes, states, None if wanted is None else set(wanted))
    if starts_by_state is None:
        return None
    buf = np.frombuffer(data, np.uint8)
    sections = []
    for state_id, starts, size in starts_by_state:
        if wanted is not None and state_id not in wanted:
            continue
        key_start = np.array(starts, dtype=np.int64) + 4
        key_end = key_start + be_ints(buf, key_start - 4, np.dtype(np.int32))
        value_start = key_end + 4
        value_end = value_start + be_ints(buf, key_end, np.dtype(np.int32))
        found = buf[key_start] & 0x7F
        if prefix_bytes == 2:
            found = (found.astype(np.int32) << 8) | buf[key_start + 1]
        if (found != key_group).any():
            return None
        sections.append(Section(state_id, key_start, key_end, value_start, value_end, size))
    return sections


def _walk(data: bytes, prefix_bytes: int, states: int, wanted: set[int] | None
          ) -> list[tuple[int, list[int], int]] | None:
    """``(state id, pair starts, section bytes)`` per section; None where the framing breaks."""
    at = _INT_AT
    end = len(data)
    found = []
    try:
        state_id = (data[0] << 8) | data[1]
        pos = 2
        while state_id != END_OF_KEY_GROUP:
            if state_id >= states:
                return None
            section_start = pos - 2
            starts: list[int] = []
            append = starts.append
            while True:
                key_length = at(data, pos)[0]
                if key_length < prefix_bytes:
                    return None
                value_at = pos + 4 + key_length
                value_length = at(data, value_at)[0]
                if value_length < 0:
                    return None
                append(pos)
                flag = data[pos + 4]
                pos = value_at + 4 + value_length
                if flag & META_DATA_FOLLOWS:
                    break
            if pos > end:
                return None
            found.append((state_id, starts, pos - section_start))
            if wanted is not None:
                wanted.discard(state_id)
                if not wanted:
                    return found
            state_id = (data[pos] << 8) | data[pos + 1]
            pos += 2
    except (struct.error, IndexError):
        return None
    return found if pos == end else None

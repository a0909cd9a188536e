"""Where the pairs of a canonical key group are: found by numpy, no field decoded.

A canonical key group (see :mod:`keyed`) is a chain of length-prefixed pairs:
where a pair ends, the next begins. Walking that chain in Python costs a few
struct calls per pair; instead every position that could start a pair is
considered at once, and the chain is picked out of those candidates
(:func:`_pairs`). The pairs' lengths, prefixes, keys and values are then read
by numpy over all of them together, by :mod:`columnar` and by the rescale.

The scan does not explain what it finds wrong: it answers None, and the
caller decodes the key group with :mod:`keyed`, which names the file, the
offset and the fault. So a hostile file is refused with the same error
whichever path reads it, and the fast path never returns what the
reference decoder would not.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

from statesource.flink.layouts.keyed import END_OF_KEY_GROUP, META_DATA_FOLLOWS
from statesource.flink.serializers.columns import be_ints


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


def canonical_sections(data: bytes, key_group: int, prefix_bytes: int, states: int,
                       wanted: Collection[int] | None = None) -> list[Section] | None:
    """The sections of a canonical key group (those of ``wanted`` states), or None if its
    framing is not sound or not found by the scan.

    Sound means: every length fits the bytes, every key has the key group's
    prefix, every state id is below ``states`` and met once, and the key group
    ends with ``0xFFFF`` exactly at its end. As the per-value decoder does, the
    scan stops once every wanted state's section has ended: the bytes after it
    are neither read nor checked.
    """
    buf = np.frombuffer(data, np.uint8)
    found = _pairs(buf, key_group, prefix_bytes, states,
                   None if wanted is None else set(wanted))
    if found is None:
        return None
    starts, key_lengths, value_lengths, section_ends, state_ids = found
    sections = []
    begin = 0
    for state_id, end in zip(state_ids, section_ends):
        if wanted is None or state_id in wanted:
            key_start = starts[begin:end] + 4
            key_end = key_start + key_lengths[begin:end]
            value_start = key_end + 4
            value_end = value_start + value_lengths[begin:end]
            size = int(value_end[-1]) - int(starts[begin]) + 2  # from its state id
            sections.append(Section(state_id, key_start, key_end, value_start, value_end, size))
        begin = end
    return sections


_FIRST_WINDOW = 1 << 16


def _pairs(buf: np.ndarray, key_group: int, prefix_bytes: int, states: int,
           wanted: set[int] | None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int], list[int]] | None:
    """Start, key length and value length of every pair in order, where each section ends
    (an index past its last pair) and its state id; None where the framing breaks or the
    scan cannot follow it.

    The key group is scanned window by window (each twice the last), so that
    the scan can stop after the wanted states' sections; each window's pairs
    are found by :func:`_window`.
    """
    size = len(buf)
    if size < 2 + 8 + prefix_bytes:
        return None
    state_id = (int(buf[0]) << 8) | int(buf[1])
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    section_ends: list[int] = []
    state_ids = [state_id]
    pairs = 0
    pos, step = 2, max(_FIRST_WINDOW, size // 16)
    while True:
        if state_ids[-1] >= states or state_ids.count(state_ids[-1]) > 1:
            return None
        found = _window(buf, pos, min(size, pos + step), key_group, prefix_bytes)
        if found is None:
            return None
        starts, key_lengths, value_lengths, flagged, after = found
        parts.append((starts, key_lengths, value_lengths))
        for index in np.flatnonzero(flagged).tolist():
            section_ends.append(pairs + index + 1)
            if wanted is not None:
                wanted.discard(state_ids[-1])
                if not wanted:  # what follows is not read, as the per-value decoder does
                    parts[-1] = (starts[:index + 1], key_lengths[:index + 1],
                                 value_lengths[:index + 1])
                    return _joined(parts, section_ends, state_ids)
            at = int(after[index])
            if at + 2 > size:
                return None
            following = (int(buf[at]) << 8) | int(buf[at + 1])
            if following == END_OF_KEY_GROUP:
                if at + 2 != size or index != len(starts) - 1:
                    return None
                return _joined(parts, section_ends, state_ids)
            state_ids.append(following)
            if following >= states or state_ids.count(following) > 1:
                return None
        pairs += len(starts)
        pos = int(after[-1]) + (2 if flagged[-1] else 0)
        step *= 2


def _joined(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]], section_ends: list[int],
            state_ids: list[int]
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int], list[int]]:
    starts, key_lengths, value_lengths = (np.concatenate(column) for column in zip(*parts))
    return starts, key_lengths, value_lengths, section_ends, state_ids[:len(section_ends)]


def _window(buf: np.ndarray, pos: int, stop: int, key_group: int, prefix_bytes: int
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The pairs from the one starting at ``pos`` up to the first that starts at or after
    ``stop`` (at least one pair): their starts, key and value lengths, last-of-section
    flags, and where each one's value ends; None where the chain breaks.

    The chain is found without walking it: every position that could start a pair
    (a key length below 64 KiB, then the key group's prefix) is a candidate; each
    candidate's lengths say where the next pair would start (two bytes further
    after a section's last pair, past the next state id); the pairs are the
    candidates reached from the first one. Usually those are the candidates some
    other one leads to, which one comparison confirms; else the chain is followed
    candidate by candidate.
    """
    size = len(buf)
    limit = min(stop, size - 8)
    if limit <= pos:
        return None
    region = buf[pos + 4:limit + 4]
    first = key_group >> 8 if prefix_bytes == 2 else key_group
    # The prefix's first byte, flagged only on a section's last key (so: rarely).
    candidates = np.flatnonzero(region == first)
    flagged_ones = np.flatnonzero(region == first | META_DATA_FOLLOWS)
    if len(flagged_ones):
        candidates = np.insert(candidates, np.searchsorted(candidates, flagged_ones),
                               flagged_ones)
    candidates += pos
    candidates = candidates[(buf[candidates] == 0) & (buf[candidates + 1] == 0)]
    if prefix_bytes == 2:
        candidates = candidates[buf[candidates + 5] == (key_group & 0xFF)]
    if not len(candidates) or candidates[0] != pos:
        return None
    key_lengths = be_ints(buf, candidates, np.dtype(np.int32)).astype(np.int64)
    value_at = candidates + 4 + key_lengths
    usable = (key_lengths >= prefix_bytes) & (value_at + 4 <= size)
    value_lengths = np.full(len(candidates), -1, dtype=np.int64)
    value_lengths[usable] = be_ints(buf, value_at[usable], np.dtype(np.int32))
    flagged = (buf[candidates + 4] & META_DATA_FOLLOWS) != 0
    after = value_at + 4 + value_lengths
    following = after + np.where(flagged, 2, 0)
    usable &= (value_lengths >= 0) & (following <= size)
    sink = len(candidates)
    # Mostly the next candidate is the next pair: only the others are searched for.
    found = np.minimum(np.arange(1, sink + 1), sink - 1)
    missed = np.flatnonzero(candidates[found] != following)
    found[missed] = np.minimum(np.searchsorted(candidates, following[missed]), sink - 1)
    linked = usable & (candidates[found] == following)
    successor = np.where(linked, found, sink)
    chain = _prune(successor, sink)
    if chain is None:
        chain = _follow(successor.tolist(), sink)
    last = int(chain[-1])
    # The window's last pair ends the key group, or the next pair starts past the window.
    if not usable[last] or (following[last] < limit and not flagged[last]):
        return None
    return (candidates[chain], key_lengths[chain], value_lengths[chain], flagged[chain],
            after[chain])


def _prune(successor: np.ndarray, sink: int, rounds: int = 8) -> np.ndarray | None:
    """The chain from the first candidate, found by dropping the candidates no live one
    leads to (a candidate inside a pair, and then the ones only it led to), or None if a
    few rounds do not find it."""
    alive = np.arange(sink)
    for _ in range(rounds):
        if (successor[alive[:-1]] == alive[1:]).all() and successor[alive[-1]] == sink:
            return alive
        reached = np.zeros(sink + 1, dtype=bool)
        reached[successor[alive]] = True
        reached[0] = True
        alive = np.flatnonzero(reached[:sink])
    return None


def _follow(successor: list[int], sink: int) -> np.ndarray:
    """The candidates reached from the first, by following each one's successor."""
    chain = [0]
    append = chain.append
    at = successor[0]
    while at != sink:
        append(at)
        at = successor[at]
    return np.array(chain, dtype=np.int64)

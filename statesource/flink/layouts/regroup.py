"""A canonical key group's pairs sent to the key groups of another max parallelism, column-wise.

The rescale of a savepoint (:mod:`~statesource.flink.operations.rescale`) moves every pair
to the key group its key hashes to under the new max parallelism, keeping the value's bytes
as they are. Here a whole source key group is done at once: the framing is found by
:mod:`framing`, every key decoded by :mod:`~statesource.flink.serializers.columns` and
hashed by :mod:`statesource.keygroups`, and the pairs of each new key group are framed by
one numpy gather (each pair: the new key length and prefix, then the source's bytes from the
key's body through the value).

:func:`regroup` answers None where this cannot be done (a key it cannot decode, framing it
cannot follow, a key that does not hash to its key group): the per-pair path of
:mod:`~statesource.flink.operations.savepoint_writing` then moves that key group, or names
what is wrong with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import numpy as np

from statesource.flink.layouts.canonical_writer import prefix_bytes
from statesource.flink.layouts.framing import Section, canonical_sections
from statesource.flink.serializers.columns import Decoder, NotColumnar, gather
from statesource.flink.statefiles.keyed_header import StateInfo
from statesource.keygroups import java_hashes, murmur_hashes
from statesource.types import DataType


@dataclass(frozen=True)
class Moved:
    """A state's pairs bound for one new key group, framed for it."""

    state_id: int
    key_group: int
    pairs: bytes
    count: int
    last_key: int
    """Where the last pair's key starts in ``pairs``."""


class Regrouper:
    """Moves canonical key groups of ``old_max`` key groups to those of ``new_max``."""

    def __init__(self, key: Decoder, key_type: DataType, old_max: int, new_max: int,
                 timer_key_offset: int) -> None:
        self.key = key
        self.key_type = key_type
        self.old_max = old_max
        self.new_max = new_max
        self.old_prefix = prefix_bytes(old_max)
        self.new_prefix = prefix_bytes(new_max)
        self.timer_key_offset = timer_key_offset

    def regroup(self, data: bytes, key_group: int, states: Sequence[StateInfo],
                skipped: AbstractSet[int] = frozenset()) -> list[Moved] | None:
        """The pairs of the (uncompressed) key group ``data`` of a file of ``states``, by
        state in file order, then by new key group ascending, but for the states
        ``skipped`` (their framing checked, their keys not read); None for the per-pair
        path."""
        sections = canonical_sections(data, key_group, self.old_prefix, len(states))
        if sections is None:
            return None
        buf = np.frombuffer(data, np.uint8)
        moved: list[Moved] = []
        try:
            for section in sections:
                if section.state_id in skipped:
                    continue
                timer = states[section.state_id].is_timer
                moved += self._section(buf, key_group, section, timer)
        except NotColumnar:
            return None
        return moved

    def _section(self, buf: np.ndarray, key_group: int, s: Section, timer: bool
                 ) -> list[Moved]:
        body = s.key_start + self.old_prefix
        offset = self.timer_key_offset if timer else 0
        keys, _ = self.key.decode(buf, body + offset, s.key_end)
        if keys.null_count:
            raise NotColumnar
        hashes = murmur_hashes(java_hashes(keys, self.key_type))
        if (hashes % self.old_max != key_group).any():
            raise NotColumnar  # the per-pair path names the key
        groups = (hashes % self.new_max).astype(np.int64)
        order = np.argsort(groups, kind="stable")
        groups = groups[order]
        # Each pair: the new key length and prefix (from `heads`), then the source from the
        # key's body through the value.
        width = 4 + self.new_prefix
        key_lengths = (s.key_end - body + self.new_prefix)[order]
        heads = np.empty((len(s), width), dtype=np.uint8)
        heads[:, :4] = key_lengths.astype(">i4").view(np.uint8).reshape(-1, 4)
        for index in range(self.new_prefix):
            heads[:, 4 + index] = (groups >> (8 * (self.new_prefix - 1 - index))) & 0xFF
        joined = np.concatenate([buf, heads.ravel()])
        rest = (s.value_end - body)[order]
        starts = np.stack([len(buf) + np.arange(len(s)) * width, body[order]], axis=1).ravel()
        lengths = np.stack([np.full(len(s), width), rest], axis=1).ravel()
        out, _ = gather(joined, starts, lengths)
        ends = np.cumsum(width + rest)
        cuts = np.flatnonzero(np.diff(groups)) + 1
        firsts = np.concatenate([[0], cuts])
        lasts = np.concatenate([cuts, [len(s)]]) - 1
        moved = []
        for first, last in zip(firsts.tolist(), lasts.tolist()):
            begin = int(ends[first] - width - rest[first])
            end = int(ends[last])
            last_key = int(ends[last] - width - rest[last]) - begin + 4
            moved.append(Moved(s.state_id, int(groups[first]), out[begin:end].tobytes(),
                               last - first + 1, last_key))
        return moved

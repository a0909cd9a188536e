"""A chunk of a state's Kryo 2 values to Flink 2.x bytes: column-wise first, then by value.

A migration's scan hands each state's values of a key group over as ranges of the bytes
they lie in (:class:`Values`: no bytes object per value). Where the state's shape has a
column part (:mod:`~statesource.flink.serializers.kryo_chunk`: ``UUID`` s, POJOs), it
reads the whole chunk at once; the values it does not take, and every value of a shape
without one, go to the per-value fast path
(:mod:`~statesource.flink.serializers.kryo_transcode`), and what that leaves is the exact
path's, which re-encodes it or names its fault. What comes back is again ranges of bytes,
in the values' order, and the values left to the exact path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from statesource.flink.serializers.base import FlinkType
from statesource.flink.serializers.kryo_chunk import chunk_reader

COLUMNS = 64
"""Fewer values are taken one by one (numpy's cost per call is not worth it)."""


@dataclass(frozen=True)
class Values:
    """Values lying at ``[starts, ends)`` of ``data``."""

    data: bytes
    starts: np.ndarray
    ends: np.ndarray
    pair_starts: np.ndarray | None = None
    """Where ``data`` is a canonical key group and these are keys: where each key's pair
    starts (its key length)."""
    items: list[bytes] | None = field(default=None, compare=False)
    """The values one by one, where they were made so."""

    def __len__(self) -> int:
        return len(self.starts)

    def listed(self) -> list[bytes]:
        if self.items is not None:
            return self.items
        data = self.data
        return [data[start:end] for start, end in zip(self.starts.tolist(), self.ends.tolist())]

    def heads(self, values: Values) -> tuple[np.ndarray, np.ndarray] | None:
        """Of these keys, the ranges from each pair's start to its key's end, where they and
        ``values`` lie in one canonical key group, each between its value and the value
        before: what precedes each value in a section."""
        if self.pair_starts is None or self.data is not values.data:
            return None
        if not ((self.ends <= values.starts).all()
                and (self.pair_starts[1:] >= values.ends[:-1]).all()):
            return None
        return self.pair_starts, self.ends

    def value(self, index: int) -> bytes:
        return self.data[int(self.starts[index]):int(self.ends[index])]

    def taken(self, rows: np.ndarray) -> Values:
        return Values(self.data, self.starts[rows], self.ends[rows])

    @classmethod
    def of(cls, values: list[bytes]) -> Values:
        """Values given one by one (a layout that frames pairs one by one)."""
        return cls.joined(b"".join(values), np.fromiter(map(len, values), np.int64, len(values)))

    @classmethod
    def joined(cls, data: bytes, sizes: np.ndarray, items: list[bytes] | None = None
               ) -> Values:
        """Values of ``sizes`` one after another in ``data``."""
        ends = np.cumsum(sizes, dtype=np.int64)
        return cls(data, ends - sizes, ends, items=items)


Batch = Callable[[Values, "Values | None"], tuple["Values | bytes", np.ndarray]]
"""A chunk of values and their keys (None: not needed) to the values' 2.x bytes, and the
indexes of those left to the exact path (empty there, where they are bytes). Where every
value is taken column-wise and the keys lie in the values' canonical key group, the bytes
are the pairs' section already (:meth:`Values.heads`)."""


def batched(part_type: FlinkType, map_value: bool, list_elements: bool,
            each: Callable[[bytes], bytes | None]) -> Batch:
    """The transcoder of a chunk of values: its column part where ``part_type`` has one,
    then ``each`` value by itself (None: left to the exact path)."""
    columns = chunk_reader(part_type, map_value, list_elements)

    def by_value(values: Values, keys: Values | None = None
                 ) -> tuple[Values | bytes, np.ndarray]:
        found = list(map(each, values.listed()))
        if None in found:
            left = np.fromiter((index for index, out in enumerate(found) if out is None),
                               np.int64)
        else:
            left = np.zeros(0, np.int64)
        written = [b"" if out is None else out for out in found] if len(left) else found
        sizes = np.fromiter(map(len, written), np.int64, len(written))  # type: ignore[arg-type]
        return Values.joined(b"".join(written), sizes, written), left  # type: ignore[arg-type]

    if columns is None:
        return by_value

    def batch(values: Values, keys: Values | None = None) -> tuple[Values | bytes, np.ndarray]:
        if len(values) < COLUMNS:
            return by_value(values)
        heads = None if keys is None else keys.heads(values)
        out, sizes, taken = columns(values.data, values.starts, values.ends, heads)
        if taken.all():
            if heads is not None:
                return out.tobytes(), np.zeros(0, np.int64)
            return Values.joined(out.tobytes(), sizes), np.zeros(0, np.int64)
        rest = np.flatnonzero(~taken)
        each_out, left = by_value(values.taken(rest))
        assert isinstance(each_out, Values)
        source = np.concatenate([out, np.frombuffer(each_out.data, np.uint8)])
        starts = np.cumsum(sizes) - sizes
        starts[rest] = len(out) + each_out.starts
        sizes[rest] = each_out.ends - each_out.starts
        return Values(source.tobytes(), starts, starts + sizes), rest[left]
    return batch

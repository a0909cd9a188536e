"""Many Kryo 2 ``UUID`` values to Kryo 5 at once, by numpy: the fast path's column part.

A state whose values are Kryo ``UUID`` s (a ``ValueState<UUID>``: Flink 1.x gives it to
Kryo) holds, per value, the same five parts: the class tag ``0x54`` (id 82 on both sides), a
new object's marker, and Chill's two zigzag varlongs; Kryo 5 writes the tag, the marker
and two fixed little-endian longs. Decoding varlongs one value at a time is most of the
cost of such a state, so :func:`batched` reads a chunk of values as columns: a window of
each value's bytes, each varlong's length from its continuation bits, its seven-bit groups
shifted into place. A value taken here is one whose parts end exactly at its end, with
minimal varlongs (what :class:`~statesource.flink.serializers.kryo_graph.KryoGraph` checks
one by one); every other value goes to the per-value fast path, and from there to the
exact path, which names any fault.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from statesource.flink.serializers import kryo_classes as jdk
from statesource.flink.serializers.base import FlinkType
from statesource.flink.serializers.kryo_migration import Kryo2Value

Batch = Callable[[list[bytes]], list["bytes | None"]]
"""A chunk of values to their 2.x bytes (None: left to the exact path)."""
COLUMNS = 64
"""Fewer values are taken one by one (numpy's cost per call is not worth it)."""
_WIDTH = 20
"""The longest ``UUID`` value: the tag, the marker, two nine-byte varlongs."""
_GROUPS = (7 * np.arange(8)).astype(np.uint64)


def batched(part_type: FlinkType, map_value: bool, list_elements: bool,
            each: Callable[[bytes], bytes | None]) -> Batch:
    """The transcoder of a chunk of values: ``each`` value by itself, but a value state's
    ``UUID`` s all at once where ``part_type`` reads them."""
    if map_value or list_elements or not isinstance(part_type, Kryo2Value):
        return lambda values: list(map(each, values))
    tag = jdk.BASE_IDS[jdk.UUID] + 2  # Flink registers UUID itself: in every registry

    def batch(values: list[bytes]) -> list[bytes | None]:
        if len(values) < COLUMNS:
            return list(map(each, values))
        written = _uuids(values, tag)
        return [each(value) if out is None else out for value, out in zip(values, written)]
    return batch


def _uuids(values: list[bytes], tag: int) -> list[bytes | None]:
    """Each value's Kryo 5 bytes where it is a ``UUID`` as Kryo 2 writes one, else None."""
    count = len(values)
    lengths = np.fromiter(map(len, values), np.int64, count)
    starts = np.cumsum(lengths) - lengths
    padded = np.concatenate([np.frombuffer(b"".join(values), np.uint8),
                             np.zeros(_WIDTH, np.uint8)])
    window = padded[starts[:, None] + np.arange(_WIDTH)]
    most, most_size, most_ok = _varlongs(window, np.full(count, 2))
    least, least_size, least_ok = _varlongs(window, 2 + most_size)
    taken = ((window[:, 0] == tag) & (window[:, 1] == 1) & most_ok & least_ok
             & (2 + most_size + least_size == lengths))
    out = np.empty((count, 18), np.uint8)
    out[:, 0], out[:, 1] = tag, 1
    out[:, 2:10] = _zigzag(most).astype("<u8").view(np.uint8).reshape(count, 8)
    out[:, 10:] = _zigzag(least).astype("<u8").view(np.uint8).reshape(count, 8)
    blob = out.tobytes()
    return [blob[18 * row:18 * row + 18] if ok else None
            for row, ok in enumerate(taken.tolist())]


def _varlongs(window: np.ndarray, at: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The unsigned varlong at column ``at`` of each row: its value, its length, and
    whether it is minimal (a last byte of 0 after others is not)."""
    columns = np.minimum(at[:, None] + np.arange(9), _WIDTH - 1)
    raw = np.take_along_axis(window, columns, 1).astype(np.uint64)
    more = raw[:, :8] >= 0x80
    size = np.where(more.all(axis=1), 9, np.argmin(more, axis=1) + 1)
    kept = np.arange(8)[None, :] < np.minimum(size, 8)[:, None]
    value = (((raw[:, :8] & np.uint64(0x7F)) << _GROUPS) * kept).sum(axis=1, dtype=np.uint64)
    value |= np.where(size == 9, raw[:, 8] << np.uint64(56), np.uint64(0))
    last = np.take_along_axis(raw, (size - 1)[:, None], 1)[:, 0]
    return value, size, (size == 1) | (last != 0)


def _zigzag(raw: np.ndarray) -> np.ndarray:
    return (raw >> np.uint64(1)) ^ (np.uint64(0) - (raw & np.uint64(1)))

"""Delta runs' upserts written over their base rows' values, in the read buffer.

At the end of a chain of incremental checkpoints nearly all of a key group's
rows are its base's, unchanged. A merge that copies each value column to
replace a few of its rows costs about as much as reading the base did. But a
reader reads every byte range into a buffer of its own
(:func:`~statesource.format.ipc.read_ranges`), which nothing else holds until
the tables are handed out, so the values a run upserts can be written where
the base's lie: the merge then costs what the runs hold. (A reader's
``base_listener`` sees the base first, and copies what it keeps.)

A key group is merged this way only where the result is the one the merge by
search (:mod:`statesource.format.keyorder`) gives: every row of its runs is
an upsert of an entry its base holds at the hinted row (clipped into the
base: its keys ascending strictly, that is the entry's one row), and each
value column is a number held bit for bit, without nulls, in the one buffer
its base was read into. Every other key group is left to that merge, its base
untouched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from statesource.format.columns import KEY, KEY_GROUP, NAMESPACE, UPSERT

ENTRY_COLUMNS = (KEY_GROUP, KEY, NAMESPACE)
"""The columns that name an entry; the others hold its state."""


@dataclass(frozen=True)
class RunRows:
    """The state rows of the delta runs being merged (prior rows left out), ascending by
    key group, then by run (oldest first): each row's ``groups`` (key group), ``keys``,
    ``base_row`` ``hints``, ``ranks`` (the n-th run of its key group), ``kinds``, and
    ``rows``, its row in the runs' table."""

    groups: np.ndarray
    keys: np.ndarray
    hints: np.ndarray
    ranks: np.ndarray
    kinds: np.ndarray
    rows: np.ndarray

    def bounds(self, key_groups: list[int]) -> list[tuple[int, int]]:
        """Each of ``key_groups``' rows, as a slice of these rows."""
        searched = np.array(key_groups, dtype=self.groups.dtype)
        return list(zip(np.searchsorted(self.groups, searched).tolist(),
                        np.searchsorted(self.groups, searched + 1).tolist()))

    def without(self, key_groups: list[int]) -> RunRows:
        kept = np.ones(len(self.groups), dtype=bool)
        for start, end in self.bounds(key_groups):
            kept[start:end] = False
        return RunRows(*(column[kept] for column in (self.groups, self.keys, self.hints,
                                                     self.ranks, self.kinds, self.rows)))


@dataclass(frozen=True)
class UpsertRows:
    """The runs' state rows as their blocks hold them (:class:`~statesource.format.runblocks.
    RunBlocks`), oldest block first: each row's ``groups`` (key group), ``keys``,
    ``base_row`` ``hints`` and ``kinds``; ``ends``, where each block's rows end; ``rows``:
    each one's row in the runs' table, None where they are that table's rows in order."""

    groups: np.ndarray
    keys: np.ndarray
    hints: np.ndarray
    kinds: np.ndarray
    ends: np.ndarray
    rows: np.ndarray | None


@dataclass(frozen=True)
class _Target:
    """Where one base's key and value columns lie, in elements of their own type, in the
    mutable buffer ``root`` it was read into."""

    root: pa.Buffer
    length: int
    starts: dict[str, int]


def write_upserts(bases: Mapping[int, pa.Table], key_groups: list[int], rows: UpsertRows,
                  runs: pa.Table, schema: pa.Schema) -> list[int]:
    """Write the upserts of those of ``key_groups`` (the key groups with runs) that allow
    it (see the module) into their bases' buffers, oldest block first; return them.
    ``bases`` must be fresh reads that nothing else holds, their keys ascending strictly;
    ``runs`` is the runs' table, one chunk per column."""
    names = [name for name in schema.names if name not in ENTRY_COLUMNS]
    sources, nulls = {}, {}
    for name in names:
        bits = _bits(runs.column(name))
        if bits is None:
            return []
        sources[name] = bits if rows.rows is None else bits[rows.rows]
        if runs.column(name).null_count:
            null = runs.column(name).is_null().to_numpy(zero_copy_only=False)
            nulls[name] = null if rows.rows is None else null[rows.rows]
    targets = {}
    for key_group in key_groups:
        base = bases.get(key_group)
        target = None if base is None else _target(base, names)
        if target is not None:
            targets[key_group] = target
    written: list[int] = []
    for root_targets in _by_root(targets).values():
        written += _write(root_targets, rows, sources, nulls)
    return sorted(written)


def _target(base: pa.Table, names: list[str]) -> _Target | None:
    """Where ``base``'s key and ``names`` columns lie in its root buffer; None unless it has
    rows and each is one chunk of fixed-width numbers, the value columns without nulls
    and overlapping no other buffer of the base, all in one mutable buffer."""
    if not base.num_rows:
        return None
    root, starts = None, {}
    written: list[tuple[str, int, int]] = []
    for name in (KEY, *names):
        column = base.column(name)
        if column.num_chunks != 1 or _width(column.type) is None \
                or (name != KEY and column.null_count):
            return None
        chunk = column.chunk(0)
        data = chunk.buffers()[1]
        data_root = _root(data)
        width = chunk.type.bit_width // 8
        offset = data.address - data_root.address
        if not data_root.is_mutable or offset % width \
                or (root is not None and data_root.address != root.address):
            return None
        root = data_root
        starts[name] = offset // width + chunk.offset
        if name != KEY:
            written.append((name, data.address + chunk.offset * width,
                            len(chunk) * width))
    if not _apart(written, base):
        return None
    return None if root is None else _Target(root, base.num_rows, starts)


def _apart(written: list[tuple[str, int, int]], base: pa.Table) -> bool:
    """Whether each ``written`` byte range (column, address, size) overlaps no buffer of
    ``base`` but its column's values: a well-formed batch's never do, and a hostile one's
    must not let a write change what another column reads."""
    held = [(name, index, buffer.address, buffer.size)
            for name, column in zip(base.column_names, base.columns) for chunk in column.chunks
            for index, buffer in enumerate(chunk.buffers()) if buffer is not None]
    return all(start + size <= address or address + length <= start
               for column, start, size in written for name, index, address, length in held
               if (name, index) != (column, 1))


def _root(buffer: pa.Buffer) -> pa.Buffer:
    while buffer.parent is not None:
        buffer = buffer.parent
    return buffer


def _by_root(targets: dict[int, _Target]) -> dict[int, dict[int, _Target]]:
    by_root: dict[int, dict[int, _Target]] = {}
    for key_group, target in targets.items():
        by_root.setdefault(target.root.address, {})[key_group] = target
    return by_root


def _write(targets: dict[int, _Target], rows: UpsertRows, sources: dict[str, np.ndarray],
           nulls: dict[str, np.ndarray]) -> list[int]:
    """Write the upserts of ``targets``' key groups (all read into one buffer) whose every
    run row upserts, without a null, a row its base holds; return those key groups."""
    key_groups = sorted(targets)
    slot_of = np.full(max(key_groups[-1], int(rows.groups.max(initial=0))) + 1, -1, dtype=np.int64)
    slot_of[key_groups] = np.arange(len(key_groups))
    slot = slot_of[rows.groups]
    picked = None if slot.min(initial=0) >= 0 else np.flatnonzero(slot >= 0)
    if picked is not None:
        slot = slot[picked]
    hints, keys, kinds = (column if picked is None else column[picked] for column in
                          (rows.hints, rows.keys, rows.kinds))
    root = targets[key_groups[0]].root
    lengths = np.array([targets[kg].length for kg in key_groups], dtype=np.int64)
    positions = np.minimum(np.maximum(hints, 0), lengths[slot] - 1)
    held = _view(root, keys.dtype)[_starts(targets, key_groups, KEY)[slot] + positions] == keys
    held &= kinds == UPSERT
    for null in nulls.values():
        held &= ~(null if picked is None else null[picked])
    fit = np.bincount(slot[~held], minlength=len(key_groups)) == 0
    if not fit.all():
        kept = np.flatnonzero(fit[slot])
        picked = kept if picked is None else picked[kept]
        slot, positions = slot[kept], positions[kept]
    ends = (rows.ends if picked is None else np.searchsorted(picked, rows.ends)).tolist()
    spans = list(zip([0, *ends[:-1]], ends))
    for name, values in sources.items():
        at = _starts(targets, key_groups, name)[slot] + positions
        source = values if picked is None else values[picked]
        view = _view(root, source.dtype)
        for start, end in spans:  # one block at a time, so that the newest run's value is left
            view[at[start:end]] = source[start:end]
    return [kg for kg, fits in zip(key_groups, fit.tolist()) if fits]


def _starts(targets: dict[int, _Target], key_groups: list[int], name: str) -> np.ndarray:
    return np.array([targets[kg].starts[name] for kg in key_groups], dtype=np.int64)


def _view(root: pa.Buffer, dtype: np.dtype) -> np.ndarray:
    return np.frombuffer(root, dtype=dtype, count=root.size // dtype.itemsize)


def _bits(column: pa.ChunkedArray) -> np.ndarray | None:
    """The values of ``column`` (one chunk) as unsigned integers of their width, bit for bit
    (nulls as whatever their slots hold); None for other than fixed-width numbers."""
    width = _width(column.type)
    if width is None or column.num_chunks != 1:
        return None
    chunk = column.chunk(0)  # its data buffer may be longer than its values (Arrow allows it)
    return np.frombuffer(chunk.buffers()[1], dtype=f"u{width}", count=len(chunk),
                         offset=chunk.offset * width)


def _width(data_type: pa.DataType) -> int | None:
    """The bytes of each value of a fixed-width number (integers, floats, dates, times,
    timestamps, durations), which numpy can copy bit for bit; None for other types."""
    numeric = (pa.types.is_integer(data_type) or pa.types.is_floating(data_type)
               or pa.types.is_temporal(data_type) and not pa.types.is_interval(data_type))
    return data_type.bit_width // 8 if numeric and data_type.bit_width in (8, 16, 32, 64) \
        else None

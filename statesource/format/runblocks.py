"""The delta runs of one read, kept as their delta files hold them.

A row-addressed delta file (format version 5) holds the runs of many key groups
one after the other, ascending by key group. A read at the end of a chain
touches every key group's runs in every delta file, so cutting the files into
one table per key group and run (thousands of slices) and concatenating them
again per key group costs more than the merge itself. A :class:`RunBlocks`
keeps each file's runs as one *block* of rows, oldest file first, and says
which rows each run takes; the merge by search
(:func:`~statesource.format.keyorder.merge_blocks`) works on the blocks whole,
and only the general merge asks for tables per key group.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from statesource.errors import CorruptCheckpointError


@dataclass(frozen=True)
class RunBlock:
    """Runs of distinct key groups, one after the other: ``rows`` (the delta schema), each
    run's ``key_groups`` (ascending) and how many rows it takes (``counts``, in order)."""

    rows: pa.Table
    key_groups: np.ndarray
    counts: np.ndarray

    def keeping(self, first: int, last: int) -> RunBlock:
        """The runs of key groups ``first .. last``."""
        start, end = np.searchsorted(self.key_groups, [first, last + 1]).tolist()
        bounds = np.concatenate([[0], np.cumsum(self.counts)])
        return RunBlock(self.rows.slice(int(bounds[start]), int(bounds[end] - bounds[start])),
                        self.key_groups[start:end], self.counts[start:end])


class RunBlocks:
    """The runs of a read as blocks, oldest first: where two blocks hold runs of one key
    group, the later block's run is the newer."""

    def __init__(self, blocks: Sequence[RunBlock]) -> None:
        self.blocks = [block for block in blocks if len(block.key_groups)]
        self.row_count = sum(block.rows.num_rows for block in self.blocks)

    @classmethod
    def from_key_groups(cls, runs: Mapping[int, Sequence[pa.Table]]) -> RunBlocks:
        """``runs`` (each key group's, oldest first) as blocks: block n holds the n-th runs."""
        blocks = []
        for rank in range(max((len(tables) for tables in runs.values()), default=0)):
            key_groups = [kg for kg in sorted(runs) if len(runs[kg]) > rank]
            tables = [runs[kg][rank] for kg in key_groups]
            blocks.append(RunBlock(pa.concat_tables(tables), np.array(key_groups, np.int64),
                                   np.array([len(table) for table in tables], np.int64)))
        return cls(blocks)

    def keeping(self, first: int, last: int) -> RunBlocks:
        """The runs of key groups ``first .. last``."""
        return RunBlocks([block.keeping(first, last) for block in self.blocks])

    def key_groups(self) -> set[int]:
        return {kg for block in self.blocks for kg in block.key_groups.tolist()}

    def by_key_group(self) -> dict[int, list[pa.Table]]:
        """Each key group's runs, oldest first, as tables."""
        runs: dict[int, list[pa.Table]] = {}
        for block in self.blocks:
            start = 0
            for key_group, count in zip(block.key_groups.tolist(), block.counts.tolist()):
                runs.setdefault(key_group, []).append(block.rows.slice(start, count))
                start += count
        return runs

    def table(self) -> pa.Table:
        """Every block's rows, in order, one chunk per column (there must be a block)."""
        return pa.concat_tables([block.rows for block in self.blocks]).combine_chunks()

    def check_key_groups(self, groups: np.ndarray) -> None:
        """``groups``, the rows' key groups as :meth:`table` holds them, must be their
        runs'."""
        check_rows_of_runs(groups, self._column("key_groups"), self._column("counts"))

    def run_starts(self) -> np.ndarray:
        """Each run's first row in :meth:`table` (numbered over the blocks in order)."""
        counts = self._column("counts")
        return np.cumsum(counts) - counts

    def block_ends(self) -> np.ndarray:
        """Where each block's rows end in :meth:`table`."""
        return np.cumsum([block.rows.num_rows for block in self.blocks], dtype=np.int64)

    def key_group_order(self) -> tuple[np.ndarray, np.ndarray]:
        """The rows of :meth:`table` ascending by key group, then oldest run first (the
        order the runs of one key group apply in), and each such row's rank: the n-th run
        of its key group."""
        key_groups, counts, starts = (self._column("key_groups"), self._column("counts"),
                                      self.run_starts())
        blocks = np.repeat(np.arange(len(self.blocks)),
                           [len(block.key_groups) for block in self.blocks])
        order = np.lexsort((blocks, key_groups))
        key_groups, starts, counts = key_groups[order], starts[order], counts[order]
        ranks = np.arange(len(order)) - np.searchsorted(key_groups, key_groups)
        ends = np.cumsum(counts)
        rows = np.repeat(starts - (ends - counts), counts) + np.arange(self.row_count)
        return rows, np.repeat(ranks, counts)

    def _column(self, name: str) -> np.ndarray:
        """The runs' ``key_groups`` or ``counts``, over the blocks in order."""
        return np.concatenate([np.empty(0, np.int64),
                               *(getattr(block, name) for block in self.blocks)])


def check_rows_of_runs(groups: np.ndarray, key_groups: Sequence[int] | np.ndarray,
                       counts: Sequence[int] | np.ndarray) -> None:
    """``groups``, the key groups of the rows of runs of ``key_groups`` taking ``counts`` rows
    each, one after the other, must be their runs'."""
    if not np.array_equal(groups, np.repeat(key_groups, counts)):
        raise CorruptCheckpointError(
            f"a delta run of key groups {sorted(set(np.asarray(key_groups).tolist()))} holds"
            " rows of another key group")

"""What every key-group layout of a keyed-state file offers the code that reads its key groups.

A keyed-state file lays out each key group's entries (all states of an operator) in
one layout: canonical savepoints frame (composite key, value) pairs
(:mod:`~statesource.flink.layouts.canonical`), heap checkpoints and native savepoints
write unframed (namespace, key, value) triples (:mod:`~statesource.flink.layouts.native`).
The readers, the census, the change feed, rescale and the edits ask the layout of each
keyed handle (:func:`~statesource.flink.layouts.dispatch.layout_of`) for what they need
and never which layout it is, so that another layout is added by implementing
:class:`KeyGroupLayout` and choosing it in :mod:`~statesource.flink.layouts.dispatch`.

There is one instance of each layout: two key groups are in the same layout when their
layouts are the same object.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import pyarrow as pa

from statesource.flink.layouts.columnar import StateColumns
from statesource.flink.layouts.keyed import KeyGroupState
from statesource.flink.layouts.regroup import Moved, Regrouper
from statesource.flink.statefiles.keyed_header import KeyedHeader, StateInfo

Pairs = list[tuple[bytes, bytes]]
"""``(composite key without its key-group prefix, value)`` pairs of one state, as a
canonical savepoint holds them."""

ColumnsOf = Callable[[StateInfo], StateColumns | None]
"""A state's column decoder (None: it has none), as the reader caches them."""


@dataclass(frozen=True)
class KeyGroupData:
    """One key group's bytes as stored (compressed where the file is), and where they lie."""

    key_group: int
    data: bytes
    source: str
    """The file, as errors name it."""
    base: int
    """The byte offset of ``data`` in the file."""


class DecodedSection(NamedTuple):
    """One state's rows in one key group, decoded column-wise, and its framing's counts."""

    state_id: int
    pairs: int
    size_bytes: int
    """The section's bytes as serialized (before compression), its state id included."""
    table: pa.Table


class KeyGroupLayout(ABC):
    """How the key groups of some keyed-state files lay out their entries."""

    name: ClassVar[str]
    """As messages name the layout."""
    batch_bytes: ClassVar[int]
    """The most bytes of key groups that :meth:`tables` takes together (0: one at a time)."""

    @abstractmethod
    def decode(self, piece: KeyGroupData, header: KeyedHeader, prefix_bytes: int,
               wanted: Collection[int] | None = None, stop_at: Collection[int] = ()
               ) -> dict[int, KeyGroupState]:
        """Entries per state id of the key group (those of the ``wanted`` states), value by
        value: the reference decoder, which names the file, offset and fault of what it
        refuses. ``stop_at`` names states (:meth:`blockers`) whose section ends the walk."""

    @abstractmethod
    def tables(self, pieces: Sequence[KeyGroupData], header: KeyedHeader, info: StateInfo,
               columns: ColumnsOf) -> list[pa.Table] | None:
        """State ``info``'s rows in each key group, one table each (in the schema of its
        column decoder), decoded column-wise; None where the layout declines them, and
        :meth:`decode` reads them key group by key group."""

    @abstractmethod
    def sections(self, piece: KeyGroupData, header: KeyedHeader, prefix_bytes: int,
                 columns: ColumnsOf) -> list[DecodedSection] | None:
        """Every state's section of one key group, each decoded column-wise; None where the
        layout declines (then :meth:`decode` reads it, or names its fault)."""

    @abstractmethod
    def pairs(self, piece: KeyGroupData, header: KeyedHeader, prefix_bytes: int
              ) -> list[tuple[int, Pairs]]:
        """Every state's entries in the key group as the pairs a canonical savepoint holds,
        per state id in file order: what a rescale re-keys and an edit filters."""

    @abstractmethod
    def regroup(self, piece: KeyGroupData, header: KeyedHeader, regrouper: Regrouper,
                skipped: AbstractSet[int] = frozenset()) -> list[Moved] | None:
        """The key group's pairs moved to the key groups of another max parallelism all at
        once, but for the states ``skipped`` (by id: states a rewrite replaces); None where
        the layout declines (then :meth:`pairs` are moved one by one)."""

    @abstractmethod
    def blockers(self, header: KeyedHeader) -> dict[str, str]:
        """The states this layout cannot deliver, with the reason, by name."""

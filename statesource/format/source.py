"""What every readable snapshot offers: the one interface readers, Spark and tools plan with.

statesource reads two kinds of snapshot: its own checkpoints
(:class:`~statesource.format.reader.Checkpoint`) and Apache Flink's savepoints
and checkpoints (:class:`statesource.flink.reader.FlinkCheckpoint`). Both
describe operators as the format's :class:`OperatorMeta` and deliver key
groups as Arrow tables in the format's data schema, so a consumer written
against :class:`StateSource` serves either without asking which it holds.
Which kind a path is gets decided once, by :func:`statesource.sources.open_source`;
a :class:`SourceRef` carries that decision to wherever the snapshot is opened again
(a Spark task), so nothing re-probes.

The differences that remain are data, not types: a Flink snapshot has timer
states, a statesource checkpoint has Arrow byte ranges a columnar reader can
read directly (:meth:`StateSource.arrow_layout`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import pyarrow as pa

from statesource.format.ipc import ReadListener
from statesource.format.locations import KeyGroupLocation
from statesource.format.metadata import OperatorMeta
from statesource.format.storage import Location
from statesource.keygroups import KeyGroupRange
from statesource.model import DistributionMode
from statesource.schema import ValueSchema
from statesource.types import DataType

STATESOURCE = "statesource checkpoint"
FLINK = "Flink snapshot"
"""The kinds of :class:`StateSource`, as messages name them."""


@dataclass(frozen=True)
class SourceRef:
    """A snapshot whose kind is known: what a Spark task needs to open it again without probing.

    Small and picklable; :func:`statesource.sources.reopen` opens it.
    """

    kind: str
    location: Location
    checkpoint_id: int


@dataclass(frozen=True)
class TimerState:
    """A timer state (Flink's ``_timer_state/...``): one row per registered timer."""

    name: str
    key_type: DataType
    namespace_type: DataType


@dataclass
class OperatorStateShares:
    """One operator state across the subtasks that held it: each one's list (or dict)."""

    name: str
    mode: DistributionMode
    schemas: dict[str, ValueSchema]
    values: list[Any]
    size_bytes: int = 0
    rows: int = field(default=0)


@dataclass(frozen=True)
class StateSummary:
    """One state of one operator, as listings and the metadata view show it."""

    checkpoint_id: int
    operator_uid: str
    parallelism: int
    max_parallelism: int
    state_name: str | None
    kind: str
    key_type: str | None
    value_types: dict[str, Any]
    entries: int | None
    rows: int | None
    size_bytes: int | None
    unreadable: str | None = None
    """Why statesource cannot read this state, or None. An operator whose keyed state does
    not decode at all has one such row, without a state name: it fails alone."""
    operator_name: str | None = None
    """The name the operator's producer gave it, where it records one (Flink 2.x: ``Map``,
    ``GroupAggregate[5]``; the name a SQL user knows a planner's operator by)."""
    operator_id: str | None = None
    """A Flink operator's hex id (the hash of its uid, or of its place in the job graph):
    None in a statesource checkpoint, whose operators have a uid alone."""


@dataclass(frozen=True)
class ArrowLayout:
    """Where a keyed state's key groups lie as checksummed Arrow IPC byte ranges.

    ``files`` are confined to the snapshot's root, with their recorded sizes;
    ``key_groups`` lists ``(index into files, location)`` in ascending key-group
    order (an incremental checkpoint's files interleave). ``delta_key_groups``
    are the key groups that also have delta runs (format version 4): their rows
    are the base range merged with the runs, which the byte ranges alone do not give.
    """

    schema: pa.Schema
    files: tuple[tuple[Location, int], ...]
    key_groups: tuple[tuple[int, KeyGroupLocation], ...]
    delta_key_groups: tuple[int, ...] = ()


@runtime_checkable
class StateSource(Protocol):
    """A snapshot of operator state, read through one surface whatever wrote it."""

    kind: str
    """:data:`STATESOURCE` or :data:`FLINK`."""

    @property
    def location(self) -> Location:
        """The snapshot's own directory."""

    @property
    def checkpoint_id(self) -> int: ...

    def ref(self) -> SourceRef:
        """This snapshot, to be opened again elsewhere without probing its kind."""

    def operator(self, uid: str | None = None) -> OperatorMeta:
        """An operator (the only one when ``uid`` is None), timers left out."""

    def summaries(self) -> list[StateSummary]:
        """One row per state of every operator, as ``flinkstate-metadata`` shows."""

    def key_group_weights(self, operator: str, state: str) -> dict[int, int]:
        """What partitions are balanced by, per non-empty key group (rows, or bytes where
        rows are not known before decoding)."""

    def read_keyed_state(self, state: str | None = None, *, operator: str | None = None,
                         key_groups: KeyGroupRange | Collection[int] | None = None,
                         listener: ReadListener | None = None) -> Iterator[pa.Table]:
        """One table per non-empty key group, in ascending order, in the format's data
        schema (a timer state: :func:`~statesource.format.columns.timer_schema`)."""

    def timer_states(self, operator: str | None = None) -> list[TimerState]:
        """The operator's timer states (none in a statesource checkpoint)."""

    def operator_state(self, name: str, *, operator: str | None = None) -> OperatorStateShares:
        """Operator state ``name``: its mode, value schemas and every subtask's share."""

    def arrow_layout(self, operator: str, state: str) -> ArrowLayout | None:
        """The keyed state's Arrow byte ranges, or None where its rows must be decoded."""

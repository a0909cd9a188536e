"""Edits of a Flink savepoint: erase keys (a GDPR request), drop a state.

Each writes a new canonical savepoint directory, with the one pass of
:mod:`statesource.flink.operations.rescale` at the snapshot's own max parallelism and parallelism:

* :func:`erase_keys` leaves out every entry of every keyed state, and every timer, of one
  operator whose key is Java-equal to one of the given keys (each key decoded, never a
  value); every other pair is carried over byte for byte.
* :func:`drop_state` removes one keyed state or timer state of an operator from its
  header (the states after it renumbered: a state's id is its position in the header)
  and its sections from every key group; an operator state is removed from the
  operator-state handles, which Flink reads state by state (its elements stay in the
  copied file, unreferenced).

The other operators' files are copied byte for byte; the edited operator's keyed state
of a native savepoint or a checkpoint is converted to the canonical layout, as a rescale
converts it (Flink picks how to restore each operator by its keyed-state handles). Every refusal (an
unknown operator or state, a key of the wrong type, an output that exists) happens before
anything is written, and the output is published whole.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from statesource.errors import InvalidArgumentError
from statesource.flink.operations.rescale import RescaledSavepoint, rewrite_savepoint
from statesource.flink.operations.savepoint_plan import Edit, erasable_key_type, find_operator
from statesource.flink.operations.savepoint_writing import RescaledOperator
from statesource.flink.snapshot.compression import Compression
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.flink.statefiles.operator_state import decoded_states
from statesource.model import Progress
from statesource.types import DataType


@dataclass(frozen=True)
class EditedSavepoint:
    """The new savepoint, and what the edit left out of its operator."""

    source: str
    output: str
    operator: str
    removed: tuple[tuple[str, int], ...]
    """Per state (header name, timers as ``_timer_state/...``), the entries or timers left
    out; for a dropped operator state, its elements."""
    missing: tuple[Any, ...] = ()
    """Keys to erase that the operator's state does not hold (not an error)."""
    seconds: float = 0.0
    compressed: bool = False
    """Whether the operator's rewritten keyed-state files are Snappy-compressed."""

    @property
    def total(self) -> int:
        return sum(count for _, count in self.removed)

    def __repr__(self) -> str:
        """Short, however many keys were asked for: the keys not present are counted."""
        return (f"EditedSavepoint(output={self.output!r}, operator={self.operator!r},"
                f" removed={self.removed!r}, missing={len(self.missing)} keys,"
                f" seconds={self.seconds:.2f})")


def erase_keys(source: str | os.PathLike[str], output: str | os.PathLike[str], operator: str,
               keys: Iterable[Any], *, checkpoint_id: int | None = None,
               progress: Progress | None = None,
               compression: Compression | None = None) -> EditedSavepoint:
    """Write ``source`` as the new savepoint ``output`` without any entry or timer of
    ``operator`` (uid, hex id or unique name) whose key equals (Java's ``equals``) one of
    ``keys``, Python values of the operator's key type (a key of another type is refused).
    A Flink SQL operator's key is a row of its key fields' values (a tuple, a
    :class:`~statesource.types.Row` or a dict by field name ``f0``, ``f1``, ...), equal to a
    stored key when Flink would write the same ``BinaryRowData`` bytes for it.
    ``compression`` (``"snappy"``, ``"none"``; default: as the source's) is that of the
    operator's rewritten keyed-state files."""
    keys = tuple(keys)
    done = rewrite_savepoint(source, output, None, checkpoint_id=checkpoint_id,
                             progress=progress, edit=Edit(operator, erase=keys),
                             compression=compression)
    edited = _edited(done, operator)
    found = set(edited.erased) if edited is not None else set()
    missing = tuple(key for i, key in enumerate(keys) if i not in found)
    return EditedSavepoint(done.source, done.output, operator,
                           edited.removed if edited is not None else (), missing, done.seconds,
                           done.compressed)


def drop_state(source: str | os.PathLike[str], output: str | os.PathLike[str], operator: str,
               state: str, *, checkpoint_id: int | None = None,
               progress: Progress | None = None,
               compression: Compression | None = None) -> EditedSavepoint:
    """Write ``source`` as the new savepoint ``output`` without the keyed state, timer state
    (``_timer_state/event_<name>`` or ``_timer_state/processing_<name>``) or operator state
    ``state`` of ``operator``. ``compression``: as :func:`erase_keys`'s."""
    done = rewrite_savepoint(source, output, None, checkpoint_id=checkpoint_id,
                             progress=progress, edit=Edit(operator, drops=(state,)),
                             compression=compression)
    edited = _edited(done, operator)
    removed = edited.removed if edited is not None else ()
    if not removed:  # an operator state (or an empty keyed one): its elements
        removed = ((state, _elements(FlinkSnapshot.open(done.source,
                                                        checkpoint_id=checkpoint_id),
                                     operator, state)),)
    return EditedSavepoint(done.source, done.output, operator, removed, (), done.seconds,
                           done.compressed)


def operator_key_type(source: str | os.PathLike[str], operator: str, *,
                      checkpoint_id: int | None = None) -> DataType:
    """The key type of ``operator`` (uid, hex id or unique name): what its keys to erase are
    values of."""
    snapshot = FlinkSnapshot.open(os.fspath(source), checkpoint_id=checkpoint_id)
    op = find_operator(snapshot, operator)
    handles = snapshot.keyed_handles(op)
    if not handles:
        raise InvalidArgumentError(f"operator {op.label!r} has no keyed state: no keys to erase")
    return erasable_key_type(f"operator {op.label!r}", snapshot.read_header(handles[0]).key)


def _elements(snapshot: FlinkSnapshot, operator: str, state: str) -> int:
    """The elements operator state ``state`` held, summed over the subtasks: a list's
    elements, a broadcast map's entries (one offset each of a list's elements, but one per
    map of a broadcast state's), decoded as the rewrite checked them."""
    count = 0
    for sub in find_operator(snapshot, operator).subtasks:
        for handle in sub.operator:
            if any(s.name == state for s in handle.states):
                data = snapshot.read_bytes(handle.stream, 0, handle.stream.size)
                count += sum(len(value) for found, _, value in decoded_states(
                    data, snapshot.describe(handle.stream), handle) if found.name == state)
    return count


def _edited(done: RescaledSavepoint, operator: str) -> RescaledOperator | None:
    """The edited operator's report, ``operator`` found as the edit found it (by uid, hex id
    or unique name: a name is in no report)."""
    op = find_operator(FlinkSnapshot.open(done.source, checkpoint_id=done.checkpoint_id),
                       operator)
    for edited in done.operators:
        if edited.operator_id == op.operator_id:
            return edited
    return None

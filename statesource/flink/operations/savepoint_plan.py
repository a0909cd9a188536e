"""Planning a savepoint rewrite operator by operator: every check before anything is written.

A rescale or an edit (:mod:`statesource.flink.operations.rescale`) first plans each
operator of the source: its new max parallelism and parallelism, which keyed-state files
are read and where their states go in one merged header, which keys are hashed or erased,
which states are dropped or replaced by staged sections. Every refusal (raw keyed state, a
key type statesource cannot hash as Flink does, values a key-group layout cannot deliver,
an unknown operator, state or key) is raised here, so a rewrite that cannot be done
writes nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from statesource.errors import IncompatibleCheckpointError, InvalidArgumentError, TypeMismatchError
from statesource.flink.handles import KeyedHandle, OperatorSnapshot, pick_operator
from statesource.flink.layouts.dispatch import blockers
from statesource.flink.operations.staged import StagedState
from statesource.flink.serializers.base import FlinkType
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.flink.statefiles.keyed_header import SUPPORTED_VERSIONS as HEADER_VERSIONS
from statesource.flink.statefiles.keyed_header import KeyedHeader
from statesource.keyequality import Canonicalizer, decoded_key_canonicalizer, key_canonicalizer
from statesource.types import DataType, SqlRowType


@dataclass(frozen=True)
class Edit:
    """What an edit changes in one operator, every other operator carried over as it is."""

    operator: str
    """The operator's uid, hex id or unique name."""
    erase: tuple[Any, ...] = ()
    """Keys, as Python values of the operator's key type, whose every entry and timer go."""
    drops: tuple[str, ...] = ()
    """Keyed states, timer states or operator states that go."""
    staged: tuple[StagedState, ...] = ()
    """Keyed states whose pairs are replaced by (or, new, made of) staged sections."""
    key: FlinkType | None = None
    """The key serializer of an operator that gets its first keyed state (``staged``)."""


REPLACED = -2
"""Where a state's pairs go when the edit stages new ones for it: nowhere, uncounted."""


def find_operator(snapshot: FlinkSnapshot, label: str) -> OperatorSnapshot:
    """The operator of uid or hex id ``label`` (a uid also by Flink's hash of it: a Flink 1.x
    ``_metadata`` records ids only; or the name Flink gave it, where unique); an error naming
    the others."""
    found = pick_operator(snapshot.operators, label)
    if found is not None:
        return found
    names = ", ".join(sorted(op.label for op in snapshot.operators))
    raise InvalidArgumentError(
        f"{snapshot.location} has no operator {label!r}; its operators are: {names}")


@dataclass(frozen=True)
class _KeyedInput:
    """One keyed-state file of the source, and where its state ids go in the written header
    (-1: a dropped state, left out)."""

    handle: KeyedHandle
    header: KeyedHeader
    state_ids: tuple[int, ...]


@dataclass(frozen=True)
class OperatorPlan:
    op: OperatorSnapshot
    max_parallelism: int
    parallelism: int
    header: KeyedHeader | None
    """The header every written keyed-state file gets; None for an operator whose files are
    carried over (no keyed state, or not the edited operator of a canonical savepoint)."""
    inputs: tuple[_KeyedInput, ...] = ()
    key_type: DataType | None = None
    """The type keys are hashed as (for a new max parallelism, the keys to erase, and the
    check that each key walked hashes back to its key group); None: keys whose hash
    statesource does not know, carried in their key group unchecked."""
    erase: tuple[Any, ...] = ()
    """The erased keys' Java-equality forms."""
    dropped_operator_states: tuple[str, ...] = ()
    staged: tuple[tuple[int, StagedState], ...] = ()
    """Staged states by their id in ``header``."""

    @property
    def handles(self) -> tuple[KeyedHandle, ...]:
        return tuple(i.handle for i in self.inputs)


def plan_operator(snapshot: FlinkSnapshot, op: OperatorSnapshot, max_parallelism: int | None,
          parallelism: int | None, edit: Edit | None = None) -> OperatorPlan:
    where = f"operator {op.label!r}"
    if max_parallelism is None:  # an edit: the max parallelism and parallelism stay
        if edit is None:  # its files copied: Flink picks how to restore per keyed handle
            return OperatorPlan(op, op.max_parallelism, op.parallelism, None)
        return _edit_plan(snapshot, op, edit, where, snapshot.keyed_handles(op))
    handles = snapshot.keyed_handles(op)
    if any(s.raw_keyed and not snapshot.heap_timers(s) for s in op.subtasks):
        raise IncompatibleCheckpointError(
            f"{where} has raw keyed state (written by the operator's own code, in its own"
            " format), which cannot be re-keyed: its max parallelism cannot change")
    new_parallelism = parallelism if parallelism is not None and handles else op.parallelism
    if new_parallelism > max_parallelism:
        raise InvalidArgumentError(
            f"{where} has parallelism {new_parallelism}, above the new max parallelism"
            f" {max_parallelism}: a max parallelism is at least the parallelism")
    if not handles:
        return OperatorPlan(op, max_parallelism, new_parallelism, None)
    held = sorted(s.index for s in op.subtasks
                  if (s.operator or s.raw_operator) and s.index >= new_parallelism)
    if held:
        raise InvalidArgumentError(
            f"{where} holds operator state in subtasks {held}, which a parallelism of"
            f" {new_parallelism} does not have: keep its parallelism ({op.parallelism}); Flink"
            " redistributes keyed and operator state for the parallelism of the job that"
            " restores the savepoint")
    header, inputs = _merged_header(snapshot, op, handles)
    key_type = _key_type(where, header.key)
    _check_native(where, header, handles)
    return OperatorPlan(op, max_parallelism, new_parallelism, header, inputs, key_type)


def _check_native(where: str, header: KeyedHeader, handles: Sequence[KeyedHandle]) -> None:
    for name, reason in blockers(header, handles).items():
        raise IncompatibleCheckpointError(
            f"{where}, state {name!r} of a native snapshot: {reason}; take a canonical"
            " savepoint (flink savepoint --type canonical) to rewrite it")


def _edit_plan(snapshot: FlinkSnapshot, op: OperatorSnapshot, edit: Edit, where: str,
               handles: Sequence[KeyedHandle]) -> OperatorPlan:
    """The edited operator: its keys checked against its key type, its dropped states found,
    its staged states placed in the header (a replaced one keeps its meta info)."""
    operator_states = sorted({s.name for sub in op.subtasks for h in sub.operator
                              for s in h.states})
    header: KeyedHeader | None = None
    inputs: tuple[_KeyedInput, ...] = ()
    if handles:
        header, inputs = _merged_header(snapshot, op, handles)
        _check_native(where, header, handles)
    elif edit.staged and edit.key is not None:
        header = KeyedHeader(HEADER_VERSIONS[-1], False, edit.key, (), 0)
    dropped_operator_states = []
    for name in edit.drops:
        names = [info.name for info in header.states] if header is not None else []
        if name in names:
            assert header is not None
            header, inputs = _without_state(header, inputs, names.index(name))
        elif name in operator_states:
            dropped_operator_states.append(name)
        elif header is None:
            raise InvalidArgumentError(
                f"{where} has no keyed state"
                + (f"; its operator states are: {', '.join(operator_states)}"
                   if operator_states else " and no operator state"))
        else:
            raise InvalidArgumentError(
                f"{where} has no state {name!r}; its keyed and timer states are:"
                f" {', '.join(names)}; its operator states:"
                f" {', '.join(operator_states) or 'none'}")
    if header is None or not (edit.erase or edit.staged or len(dropped_operator_states)
                              < len(edit.drops)):  # keyed state untouched: files copied
        if header is None and (edit.erase or edit.staged):
            raise InvalidArgumentError(f"{where} has no keyed state: no keys to edit")
        return OperatorPlan(op, op.max_parallelism, op.parallelism, None,
                     dropped_operator_states=tuple(dropped_operator_states))
    staged = []
    for state in edit.staged:
        names = [info.name for info in header.states]
        if state.info.name in names:
            state_id = names.index(state.info.name)
            if state.replaces_info:
                header = dataclasses.replace(header, states=tuple(
                    dataclasses.replace(state.info, state_id=state_id)
                    if s.state_id == state_id else s for s in header.states))
            inputs = tuple(dataclasses.replace(i, state_ids=tuple(
                REPLACED if s == state_id else s for s in i.state_ids)) for i in inputs)
        else:
            state_id = len(names)
            header = dataclasses.replace(header, states=(
                *header.states, dataclasses.replace(state.info, state_id=state_id)))
        staged.append((state_id, state))
    key_type, erase = _checked_key_type(header.key), ()
    if edit.erase:
        if any(s.raw_keyed and not snapshot.heap_timers(s) for s in op.subtasks):
            raise IncompatibleCheckpointError(
                f"{where} has raw keyed state (written by the operator's own code, in its own"
                " format), which statesource does"
                " not read: the keys to erase could stay there")
        key_type = erasable_key_type(where, header.key)
        erase = tuple(_erased_key(where, key_type, key) for key in edit.erase)
    return OperatorPlan(op, op.max_parallelism, op.parallelism, header, inputs, key_type, erase,
                 tuple(dropped_operator_states), tuple(staged))


def _key_type(where: str, key: FlinkType) -> DataType:
    try:
        key_type = key.data_type()
    except IncompatibleCheckpointError:
        key_type = None
    if key_type is None or not key_type.usable_as_key:
        name = getattr(key, "java_class", None) or key.describe()
        raise IncompatibleCheckpointError(
            f"{where} is keyed by {name} ({key.serializer}): statesource cannot compute the"
            " key group of such keys as Flink does (their Java hashCode is not reproduced),"
            " and a new max parallelism moves every key by its key group")
    return key_type


def _checked_key_type(key: FlinkType) -> DataType | None:
    """The type an edit that keeps every key checks the walked keys' key groups with: each
    key must hash back to the key group it is stored in, or the edit would copy a key the job
    never finds. None where statesource cannot hash such keys as Flink does (a POJO, Kryo or
    Avro key): their pairs are carried unchecked, as their operator's files are."""
    try:
        return _key_type("", key)
    except IncompatibleCheckpointError:
        return None


def erasable_key_type(where: str, key: FlinkType) -> DataType:
    """The type of the keys of a header's key serializer, when statesource compares (and
    hashes) them as Java does."""
    try:
        key_type = _key_type(where, key)
    except IncompatibleCheckpointError:
        name = getattr(key, "java_class", None) or key.describe()
        raise IncompatibleCheckpointError(
            f"{where} is keyed by {name} ({key.serializer}): statesource cannot compare such"
            " keys as Java's equals does, so it cannot erase keys from it") from None
    return key_type


def erase_form(key_type: DataType, *, decoded: bool = False) -> Canonicalizer | None:
    """How keys to erase and the keys walked are compared: in their Java-equality forms
    (:mod:`statesource.keyequality`; for ``decoded`` keys, None where they are in it
    already). A SQL key is a ``BinaryRowData``, equal to exactly the rows of the same bytes:
    its form is its bytes, as Flink's key projection writes its fields."""
    if isinstance(key_type, SqlRowType):
        return key_type.encode
    return decoded_key_canonicalizer(key_type) if decoded else key_canonicalizer(key_type)


def _erased_key(where: str, key_type: DataType, key: Any) -> Any:
    try:
        canonical = erase_form(key_type)
        assert canonical is not None
        return canonical(key)
    except (TypeMismatchError, InvalidArgumentError) as error:
        raise InvalidArgumentError(
            f"key {key!r} is not a key of {where}, which is keyed by {key_type.name}: {error}"
        ) from None


def _without_state(header: KeyedHeader, inputs: Sequence[_KeyedInput], dropped: int
                   ) -> tuple[KeyedHeader, tuple[_KeyedInput, ...]]:
    """The header without state ``dropped``, the others renumbered (a state's id is its
    position in the header), and each input's ids mapped to them (-1 for the dropped one)."""
    states = tuple(dataclasses.replace(info, state_id=i) for i, info in enumerate(
        s for s in header.states if s.state_id != dropped))
    renumber = [i - (i > dropped) if i != dropped else -1 for i in range(len(header.states))]
    return (dataclasses.replace(header, states=states),
            tuple(dataclasses.replace(i, state_ids=tuple(renumber[s] for s in i.state_ids))
                  for i in inputs))


def _merged_header(snapshot: FlinkSnapshot, op: OperatorSnapshot,
                   handles: Sequence[KeyedHandle]) -> tuple[KeyedHeader, tuple[_KeyedInput, ...]]:
    """One header for every written file of the operator: the states of all the source's
    files by name (:meth:`FlinkSnapshot.header`; its compression flag is set for the whole
    rewrite, by ``SavepointRewrite.plan``); and each file's own."""
    merged = snapshot.header(op)
    assert merged is not None
    inputs = []
    for handle in handles:
        own = snapshot.handle_header(op, handle)
        ids = snapshot.state_ids(op, handle)
        inputs.append(_KeyedInput(handle, own, tuple(range(len(own.states)))
                                  if ids is None else ids))
    return dataclasses.replace(merged, data_start=0), tuple(inputs)

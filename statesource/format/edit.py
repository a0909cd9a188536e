"""Deriving a new checkpoint from a base one: replace, add or drop states and operators.

What is not replaced is carried over by reference: the new metadata records
the base's data files (format v2 shares files), so no byte is copied and
the time is proportional to the metadata, not the state. The result is a
:class:`CheckpointMeta` for :func:`~statesource.format.commit.commit_checkpoint`.
"""

from __future__ import annotations

import dataclasses

from statesource.errors import IncompatibleCheckpointError, StateNotFoundError
from statesource.format.keyed_state_meta import KeyedStateMeta
from statesource.format.metadata import CheckpointMeta, OperatorMeta
from statesource.types import DataType


class CheckpointEdit:
    """Staged changes to a base checkpoint's operators, applied by :meth:`build`.

    ``base`` may be None to build a checkpoint from nothing (bootstrap).
    """

    def __init__(self, base: CheckpointMeta | None) -> None:
        self._operators: dict[str, OperatorMeta] = (
            {} if base is None else {op.uid: op for op in base.operators})

    def operator(self, uid: str) -> OperatorMeta | None:
        return self._operators.get(uid)

    @property
    def operators(self) -> tuple[OperatorMeta, ...]:
        return tuple(self._operators.values())

    def put_keyed_state(self, uid: str, state: KeyedStateMeta, *, key_type: DataType,
                        max_parallelism: int, parallelism: int) -> None:
        """Replace (or add) keyed state ``state.name`` of operator ``uid`` (created if absent).

        An existing operator keeps its parallelism; its key type and max
        parallelism must match, since every keyed state of an operator shares them.
        """
        op = self._operators.get(uid)
        if op is None:
            op = OperatorMeta(uid, parallelism, max_parallelism, key_type, (), ())
        elif not op.keyed_states:
            op = dataclasses.replace(op, max_parallelism=max_parallelism)
        elif (op.key_type, op.max_parallelism) != (key_type, max_parallelism):
            raise IncompatibleCheckpointError(
                f"operator {uid!r} keys its states by {op.key_type} with max parallelism"
                f" {op.max_parallelism}; state {state.name!r} is keyed by {key_type} with max"
                f" parallelism {max_parallelism}"
            )
        others = tuple(s for s in op.keyed_states if s.name != state.name)
        self._operators[uid] = dataclasses.replace(
            op, key_type=key_type, max_parallelism=max_parallelism,
            keyed_states=tuple(sorted((*others, state), key=lambda s: s.name)))

    def rekey_operator(self, uid: str, *, max_parallelism: int, parallelism: int) -> None:
        """Start operator ``uid``'s keyed state over under a new max parallelism.

        Its keyed states are removed (to be written again, every key re-keyed)
        and its operator states kept; the caller redistributes them when the
        parallelism changes.
        """
        op = self._require(uid)
        self._operators[uid] = dataclasses.replace(
            op, keyed_states=(), max_parallelism=max_parallelism, parallelism=parallelism)

    def drop_state(self, uid: str, name: str) -> None:
        """Remove keyed or operator state ``name`` of operator ``uid``."""
        op = self._require(uid)
        keyed = tuple(s for s in op.keyed_states if s.name != name)
        operator_states = tuple(s for s in op.operator_states if s.name != name)
        if len(keyed) + len(operator_states) == len(op.keyed_states) + len(op.operator_states):
            raise StateNotFoundError(
                f"operator {uid!r} has no state {name!r}; available:"
                f" {op.state_names() or 'none'}")
        self._operators[uid] = dataclasses.replace(
            op, keyed_states=keyed, operator_states=operator_states,
            key_type=op.key_type if keyed else None)

    def drop_operator(self, uid: str) -> None:
        self._require(uid)
        del self._operators[uid]

    def build(self, checkpoint_id: int, timestamp_ms: int) -> CheckpointMeta:
        return CheckpointMeta(checkpoint_id, timestamp_ms, self.operators)

    def _require(self, uid: str) -> OperatorMeta:
        op = self._operators.get(uid)
        if op is None:
            raise StateNotFoundError(
                f"no operator named {uid!r}; available: {sorted(self._operators) or 'none'}")
        return op

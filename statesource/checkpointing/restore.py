"""Restoring backends from a checkpoint, at the checkpoint's parallelism or another.

Keyed state: a subtask of the new parallelism reads exactly the key groups
Flink assigns it, by byte range. The restored backend takes the checkpoint as
its base, so an incremental checkpoint into the same root references what the
program has not changed since. Operator state: every old share is read and
redistributed by Flink's rules, all states of the operator together (split states
continue one another's round robin; broadcast state comes from the subtasks that held it).
"""

from __future__ import annotations

import functools

import numpy as np

from statesource.checkpointing.incremental import BaseCheckpoint, note_base_keys
from statesource.checks import check_int
from statesource.format.columns import KEY_GROUP, data_schema, decode_entries, searchable
from statesource.format.reader import Checkpoint
from statesource.keygroups import check_parallelism, key_group_range_for_operator
from statesource.redistribution import redistribute_operator
from statesource.state.clock import Clock
from statesource.state.descriptors import StateDescriptor
from statesource.state.keyed_backend import KeyedStateBackend
from statesource.state.operator_backend import OperatorStateBackend


def restore_keyed_backend(checkpoint: Checkpoint, subtask_index: int, parallelism: int, *,
                          operator: str | None = None,
                          clock: Clock | None = None) -> KeyedStateBackend:
    """The keyed backend subtask ``subtask_index`` of ``parallelism`` starts from."""
    op = checkpoint.operator(operator)
    check_parallelism(parallelism, op.max_parallelism)
    check_int(subtask_index, "subtask index", 0, parallelism - 1)
    owned = key_group_range_for_operator(op.max_parallelism, parallelism, subtask_index)
    key_type = op.keyed_key_type
    backend = KeyedStateBackend(key_type, op.max_parallelism, owned, clock=clock)
    base_keys: dict[tuple[str, int], np.ndarray] = {}
    for meta in op.keyed_states:
        declaration = meta.declaration
        noted = functools.partial(note_base_keys, base_keys) \
            if searchable(data_schema(key_type, declaration)) else None
        backend.restore_state(StateDescriptor.of(declaration), (
            (table.column(KEY_GROUP)[0].as_py(), decode_entries(key_type, declaration, table))
            for table in checkpoint.read_keyed_state(meta.name, operator=op.uid,
                                                     key_groups=owned, base_listener=noted)
        ))
    backend.restored_from(BaseCheckpoint(checkpoint.root, checkpoint.checkpoint_id, op.uid,
                                         base_keys))
    return backend


def restore_operator_backend(checkpoint: Checkpoint, subtask_index: int, parallelism: int, *,
                             operator: str | None = None) -> OperatorStateBackend:
    """The operator-state backend of subtask ``subtask_index`` under a new parallelism."""
    op = checkpoint.operator(operator)
    check_int(parallelism, "parallelism", 1)
    check_int(subtask_index, "subtask index", 0, parallelism - 1)
    backend = OperatorStateBackend()
    shares = redistribute_operator(checkpoint.operator_states_as_left(op.uid), parallelism)
    for meta in op.operator_states:
        backend.restore_state(meta.name, meta.mode, meta.schemas, shares[meta.name][subtask_index])
    return backend

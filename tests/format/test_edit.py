"""Deriving a checkpoint from a base: a state put into an operator must share its keys.

Every keyed state of an operator is split into the same key groups (its key type and
max parallelism): a state keyed otherwise is refused, naming both, and a base whose
operator has no keyed state left takes the new max parallelism.
"""

from __future__ import annotations

import pytest

from statesource.checkpointing import CheckpointWriter
from statesource.errors import IncompatibleCheckpointError
from statesource.format import Checkpoint
from statesource.format.edit import CheckpointEdit
from statesource.format.keyed_state_meta import KeyedStateMeta
from statesource.state.descriptors import ValueStateDescriptor
from statesource.state.keyed_backend import KeyedStateBackend
from statesource.types import LONG, STRING

KEPT, REPLACED = ValueStateDescriptor("kept", "long"), ValueStateDescriptor("replaced", "long")


@pytest.fixture
def base(tmp_path):
    backend = KeyedStateBackend("string", 16)
    for descriptor in (KEPT, REPLACED):
        state = backend.get_state(descriptor)
        backend.set_current_key("k")
        state.update(1)
    with CheckpointWriter(str(tmp_path)) as writer:
        writer.write(1, {"op": [backend]})
    return Checkpoint.open(str(tmp_path)).metadata


def _new(name: str = "replaced") -> KeyedStateMeta:
    return KeyedStateMeta.of(ValueStateDescriptor(name, "long").declaration, ())


@pytest.mark.parametrize("key_type, max_parallelism, shown", [
    (STRING, 32, "max parallelism 32"), (LONG, 16, "is keyed by long")])
def test_a_state_keyed_otherwise_than_its_operator_is_refused(base, key_type, max_parallelism,
                                                             shown):
    edit = CheckpointEdit(base)
    with pytest.raises(IncompatibleCheckpointError, match=f"operator 'op' keys its states by"
                                                          f" .* with max parallelism 16; state"
                                                          f" 'replaced' .*{shown}"):
        edit.put_keyed_state("op", _new(), key_type=key_type, max_parallelism=max_parallelism,
                             parallelism=1)
    assert edit.operator("op") == base.operator("op")


def test_a_state_keyed_as_its_operator_replaces_the_base_one(base):
    edit = CheckpointEdit(base)
    edit.put_keyed_state("op", _new(), key_type=STRING, max_parallelism=16, parallelism=1)
    op = edit.operator("op")
    assert op is not None and op.max_parallelism == 16
    assert op.keyed_state("replaced").files == ()
    assert op.keyed_state("kept") == base.operator("op").keyed_state("kept")


@pytest.mark.parametrize("key_type", [STRING, LONG])
def test_an_operator_without_keyed_state_takes_the_new_keys(base, key_type):
    """Its keyed states dropped, the operator keeps its parallelism and takes the key type
    and max parallelism of the state put in."""
    edit = CheckpointEdit(base)
    edit.drop_state("op", "kept")
    edit.drop_state("op", "replaced")
    edit.put_keyed_state("op", _new(), key_type=key_type, max_parallelism=32, parallelism=3)
    op = edit.operator("op")
    assert op is not None
    assert (op.key_type, op.max_parallelism, op.parallelism) == (key_type, 32, 1)
    assert [s.name for s in op.keyed_states] == ["replaced"]

"""An incremental checkpoint builds on its backend's base only when the base can hold it.

The base recorded the operator's key groups under its max parallelism: a backend under
another max parallelism (its key groups are other ones) writes everything itself.
"""

from __future__ import annotations

from statesource.checkpointing import CheckpointWriter, restore_keyed_backend
from statesource.checkpointing.incremental import BaseCheckpoint
from statesource.format import Checkpoint
from statesource.state.descriptors import ValueStateDescriptor
from statesource.state.keyed_backend import KeyedStateBackend

VALUE = ValueStateDescriptor("value", "long")
KEYS = [f"k{i}" for i in range(40)]


def _backend(max_parallelism: int, offset: int) -> KeyedStateBackend:
    backend = KeyedStateBackend("string", max_parallelism)
    state = backend.get_state(VALUE)
    for number, key in enumerate(KEYS):
        backend.set_current_key(key)
        state.update(number + offset)
    return backend


def test_a_base_of_another_max_parallelism_is_not_built_on(tmp_path):
    root = str(tmp_path / "root")
    with CheckpointWriter(root) as writer:
        writer.write(1, {"op": [_backend(16, 0)]})
    base = Checkpoint.open(root, checkpoint_id=1)
    wider = _backend(32, 1000)
    wider.restored_from(BaseCheckpoint(base.root, 1, "op"))  # as a restore declares it
    with CheckpointWriter(root, incremental=True) as writer:
        info = writer.write(2, {"op": [wider]})
    (state,) = info.metadata.operator().keyed_states
    assert all(f.path.startswith("chk-2/") for f in state.files)
    restored = restore_keyed_backend(Checkpoint.open(root, checkpoint_id=2), 0, 1)
    assert restored.max_parallelism == 32
    values = restored.get_state(VALUE)
    found = {}
    for key in KEYS:
        restored.set_current_key(key)
        found[key] = values.value()
    assert found == {key: number + 1000 for number, key in enumerate(KEYS)}

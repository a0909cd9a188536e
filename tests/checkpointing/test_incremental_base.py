"""An incremental checkpoint builds on its backend's base only when the base can hold it.

The base is one operator's state as one checkpoint recorded it: a backend written as
another operator, under another max parallelism (its key groups are other ones) or with a
state of other types writes everything itself, and every checkpoint restores to exactly
the backend's state.
"""

from __future__ import annotations

from statesource.checkpointing import CheckpointWriter, restore_keyed_backend
from statesource.checkpointing.incremental import BaseCheckpoint
from statesource.format import Checkpoint
from statesource.format.commit import CheckpointInfo
from statesource.state.descriptors import ValueStateDescriptor
from statesource.state.keyed_backend import KeyedStateBackend

VALUE = ValueStateDescriptor("value", "long")
KEYS = [f"k{i}" for i in range(40)]


def _backend(max_parallelism: int, offset: int,
             descriptor: ValueStateDescriptor = VALUE) -> KeyedStateBackend:
    backend = KeyedStateBackend("string", max_parallelism)
    state = backend.get_state(descriptor)
    for number, key in enumerate(KEYS):
        backend.set_current_key(key)
        state.update(number + offset if descriptor is VALUE else f"text {number + offset}")
    return backend


def _values(root: str, checkpoint_id: int, operator: str, descriptor: ValueStateDescriptor
            ) -> dict[str, object]:
    restored = restore_keyed_backend(Checkpoint.open(root, checkpoint_id=checkpoint_id), 0, 1,
                                     operator=operator)
    state = restored.get_state(descriptor)
    found = {}
    for key in KEYS:
        restored.set_current_key(key)
        found[key] = state.value()
    return found


def _own_files(info: CheckpointInfo, operator: str, checkpoint_id: int) -> bool:
    (state,) = info.metadata.operator(operator).keyed_states
    return all(f.path.startswith(f"chk-{checkpoint_id}/") for f in state.files)


def test_a_base_of_another_max_parallelism_is_not_built_on(tmp_path):
    root = str(tmp_path / "root")
    with CheckpointWriter(root) as writer:
        writer.write(1, {"op": [_backend(16, 0)]})
    base = Checkpoint.open(root, checkpoint_id=1)
    wider = _backend(32, 1000)
    wider.restored_from(BaseCheckpoint(base.root, 1, "op"))  # as a restore declares it
    with CheckpointWriter(root, incremental=True) as writer:
        info = writer.write(2, {"op": [wider]})
    assert _own_files(info, "op", 2)
    assert Checkpoint.open(root, checkpoint_id=2).operator().max_parallelism == 32
    assert _values(root, 2, "op", VALUE) == {key: n + 1000 for n, key in enumerate(KEYS)}


def test_a_backend_restored_from_one_operator_and_written_as_another_writes_everything(
        tmp_path):
    """Operator ``a``'s state restored and written as operator ``b``: ``b``'s files in the
    checkpoint before hold ``b``'s own rows, not the backend's."""
    root = str(tmp_path / "root")
    with CheckpointWriter(root) as writer:
        writer.write(1, {"a": [_backend(16, 0)], "b": [_backend(16, 500)]})
    moved = restore_keyed_backend(Checkpoint.open(root, checkpoint_id=1), 0, 1, operator="a")
    with CheckpointWriter(root, incremental=True) as writer:
        info = writer.write(2, {"b": [moved]})
    assert _own_files(info, "b", 2)
    assert _values(root, 2, "b", VALUE) == {key: n for n, key in enumerate(KEYS)}


def test_a_state_of_other_types_than_the_bases_writes_everything(tmp_path):
    root = str(tmp_path / "root")
    with CheckpointWriter(root) as writer:
        writer.write(1, {"op": [_backend(16, 0)]})
    text = ValueStateDescriptor("value", "string")
    retyped = _backend(16, 0, text)
    retyped.restored_from(BaseCheckpoint(Checkpoint.open(root).root, 1, "op"))
    with CheckpointWriter(root, incremental=True) as writer:
        info = writer.write(2, {"op": [retyped]})
    assert _own_files(info, "op", 2)
    assert _values(root, 2, "op", text) == {key: f"text {n}" for n, key in enumerate(KEYS)}

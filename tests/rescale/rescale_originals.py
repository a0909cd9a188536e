"""Checkpoints to rescale: keyed state of every kind and operator state of every mode.

Each subtask owns the key groups Flink assigns it and holds the keys that fall
there; operator states differ per subtask, so that a test can tell which old
subtask's share a new subtask received.
"""

from __future__ import annotations

from pathlib import Path

from sample_state import dump, merged, populate
from statesource.checkpointing import CheckpointWriter, SubtaskBackends
from statesource.keygroups import assign_to_key_group, key_group_range_for_operator
from statesource.state.clock import ManualClock
from statesource.state.descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)
from statesource.state.keyed_backend import KeyedStateBackend
from statesource.state.operator_backend import OperatorStateBackend
from statesource.types import STRING

SPLIT_SHARES = {
    1: [[0, 1, 2, 3, 4]],
    2: [[0, 1, 2], [10, 11, 12, 13]],
    3: [[0], [10, 11], [20]],
    4: [[0], [10, 11, 12], [], [30]],
}
"""The split state ``offsets`` of each old parallelism (uneven on purpose)."""


def populate_light(backend: KeyedStateBackend, keys: list[str]) -> None:
    """Three states only: at max parallelism 32768 a backend keeps a map per key group
    and state, and the full sample would take most of a minute to build."""
    value = backend.get_state(ValueStateDescriptor("value", "long"))
    elements = backend.get_state(ListStateDescriptor("list", "string"))
    entries = backend.get_state(MapStateDescriptor("map", "string", "long"))
    for i, key in enumerate(keys):
        backend.set_current_key(key)
        value.update(i)
        elements.add_all([f"{key}-{j}" for j in range(i % 3 + 1)])
        entries.put_all({f"m{j}": j for j in range(i % 4)})


def operator_backend(subtask: int, parallelism: int) -> OperatorStateBackend:
    backend = OperatorStateBackend()
    backend.get_list_state("offsets", "long").update(SPLIT_SHARES[parallelism][subtask]
                                                     if parallelism in SPLIT_SHARES
                                                     else [subtask])
    backend.get_union_list_state("config", "string").update([f"c{subtask}", f"d{subtask}"])
    backend.get_broadcast_state("rules", "string", "double").put("from", float(subtask))
    return backend


def subtasks_of(parallelism: int, max_parallelism: int, keys: list[str], clock: ManualClock,
                *, light: bool = False) -> list[SubtaskBackends]:
    """An operator's subtasks, each holding the keys Flink assigns it."""
    subtasks = []
    for index in range(parallelism):
        owned = key_group_range_for_operator(max_parallelism, parallelism, index)
        keyed = KeyedStateBackend("string", max_parallelism, owned, clock=clock)
        mine = [k for k in keys if assign_to_key_group(k, STRING, max_parallelism) in owned]
        (populate_light if light else populate)(keyed, mine)
        subtasks.append(SubtaskBackends(keyed=keyed,
                                        operator=operator_backend(index, parallelism)))
    return subtasks


def keyed_content(subtasks: list[SubtaskBackends]) -> dict:
    """What the subtasks' keyed state holds, as ``sample_state.dump`` shows it."""
    return merged([dump(s.keyed) for s in subtasks if s.keyed is not None])


def write_original(root: Path, parallelism: int, max_parallelism: int, keys: list[str],
                   clock: ManualClock, *, light: bool = False, checkpoint_id: int = 1) -> dict:
    """Checkpoint ``checkpoint_id`` of operator ``op``; returns what its keyed state holds."""
    subtasks = subtasks_of(parallelism, max_parallelism, keys, clock, light=light)
    with CheckpointWriter(str(root)) as writer:
        writer.write(checkpoint_id, {"op": subtasks})
    return keyed_content(subtasks)


def file_bytes(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` with its content."""
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}

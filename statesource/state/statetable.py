"""``StateTable``: one state's entries, held in one copy-on-write map per key group.

Splitting by key group is what lets a checkpoint be written, and a rescaled
job restored, key group by key group, and it keeps every map small enough
that growing it never stalls the program.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from statesource.keygroups import KeyGroupRange
from statesource.state.descriptors import StateDescriptor
from statesource.state.statemap import CopyOnWriteStateMap, StateMapSnapshot


class StateTable:
    """All entries of one registered state within a backend's key-group range."""

    def __init__(self, descriptor: StateDescriptor, key_group_range: KeyGroupRange) -> None:
        self.descriptor = descriptor
        self.key_group_range = key_group_range
        copier = descriptor.state_copier()
        self.maps: list[CopyOnWriteStateMap] = [
            CopyOnWriteStateMap(copier=copier) for _ in key_group_range
        ]

    def map_for(self, key_group: int) -> CopyOnWriteStateMap:
        return self.maps[key_group - self.key_group_range.start]

    def __len__(self) -> int:
        return sum(len(m) for m in self.maps)

    def snapshot(self) -> StateTableSnapshot:
        """Snapshot every key group's map now (the synchronous part of a checkpoint)."""
        return StateTableSnapshot(
            self.descriptor,
            tuple(zip(self.key_group_range, (m.snapshot() for m in self.maps))),
        )


@dataclass(frozen=True)
class StateTableSnapshot:
    """One state's entries at snapshot time, per key group in ascending order."""

    descriptor: StateDescriptor
    key_group_snapshots: tuple[tuple[int, StateMapSnapshot], ...]

    def __iter__(self) -> Iterator[tuple[int, StateMapSnapshot]]:
        return iter(self.key_group_snapshots)

    def __len__(self) -> int:
        return sum(len(snapshot) for _, snapshot in self.key_group_snapshots)

    def release(self) -> None:
        for _, snapshot in self.key_group_snapshots:
            snapshot.release()

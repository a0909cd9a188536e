"""``StateTable``: one state's entries, held in one copy-on-write map per key group.

Splitting by key group is what lets a checkpoint be written, and a rescaled
job restored, key group by key group, and it keeps every map small enough
that growing it never stalls the program. It is also the unit of change
tracking: the table records which key groups were written since the last
completed checkpoint (:mod:`statesource.state.changes`), so that an
incremental checkpoint rewrites only those.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from statesource.keygroups import KeyGroupRange
from statesource.state.changes import KeyGroupChanges
from statesource.state.descriptors import StateDescriptor
from statesource.state.statemap import ChangedEntries, CopyOnWriteStateMap, StateMapSnapshot


class StateTable:
    """All entries of one registered state within a backend's key-group range."""

    def __init__(self, descriptor: StateDescriptor, key_group_range: KeyGroupRange) -> None:
        self.descriptor = descriptor
        self.key_group_range = key_group_range
        copier = descriptor.state_copier()
        self.maps: list[CopyOnWriteStateMap] = [
            CopyOnWriteStateMap(copier=copier) for _ in key_group_range
        ]
        self.changes = KeyGroupChanges(len(key_group_range), copier)

    def map_for(self, key_group: int) -> CopyOnWriteStateMap:
        return self.maps[key_group - self.key_group_range.start]

    def __len__(self) -> int:
        return sum(len(m) for m in self.maps)

    def snapshot(self, sequence: int) -> StateTableSnapshot:
        """Snapshot every key group's map now (the synchronous part of a checkpoint).

        ``sequence`` numbers the backend's snapshot; the changes it captures
        are kept under that number until a checkpoint completes. The changed
        entries' states are taken now, as their last writes left them (or looked
        up, if written before an earlier snapshot): the map snapshots keep those
        very objects unchanged until released (copy-on-write).
        """
        snapshots = tuple(zip(self.key_group_range, (m.snapshot() for m in self.maps)))
        flags, entries, written = self.changes.capture(sequence)
        start = self.key_group_range.start
        changed_entries = {start + index: self.maps[index].changed_entries(
                               tracked, written.get(index, {}))
                           for index, tracked in entries.items()}
        return StateTableSnapshot(self.descriptor, snapshots, flags, changed_entries)


@dataclass(frozen=True)
class StateTableSnapshot:
    """One state's entries at snapshot time, per key group in ascending order."""

    descriptor: StateDescriptor
    key_group_snapshots: tuple[tuple[int, StateMapSnapshot], ...]
    changed: bytes
    """Per key group of the range, 1 if it changed since the backend's base checkpoint."""
    changed_entries: Mapping[int, ChangedEntries] = field(default_factory=dict)
    """Per changed key group whose entries are known: its changed entries. A changed key
    group not listed changed whole."""

    def __iter__(self) -> Iterator[tuple[int, StateMapSnapshot]]:
        return iter(self.key_group_snapshots)

    def __len__(self) -> int:
        return sum(len(snapshot) for _, snapshot in self.key_group_snapshots)

    def changed_key_groups(self) -> list[int]:
        """The key groups that changed since the backend's base checkpoint, ascending."""
        return [key_group for (key_group, _), flag in zip(self.key_group_snapshots, self.changed)
                if flag]

    def release(self) -> None:
        for _, snapshot in self.key_group_snapshots:
            snapshot.release()

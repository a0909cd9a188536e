"""Which key groups, and which entries of them, changed since the last completed checkpoint.

An incremental checkpoint rewrites only what changed and references the rest
from the checkpoint it builds on (its *base*), so the backend must know, per
state, which key groups changed since the base, and within a key group which
(key, namespace) entries, with each entry's state *at the base* (its prior
value, which the change feed reports as the old value). The knowledge must
survive a checkpoint that fails: a snapshot cannot simply forget what it
captured, because if its checkpoint never completes, the next one still has to
write those changes.

So every snapshot *captures* what changed since the previous snapshot and
keeps it, per snapshot sequence number, until a checkpoint completes. A
snapshot's changes are the union of every capture since the base (an entry's
prior coming from the oldest capture that holds it, the one taken first after
the base); the completion of snapshot ``s`` makes it the new base and drops the
captures up to ``s``. A failed or abandoned checkpoint confirms nothing, so its
captures stay in every later union.

Memory is bounded: a key group tracks at most ``max(64, half its entries)``
entries (see :meth:`KeyGroupChanges.note`); past that it is marked changed
*whole*, and the checkpoint rewrites it rather than writing its entries.

The hot path is :meth:`KeyGroupChanges.note` on each write: a flag store, a
dict lookup, and on the first write of an entry since the snapshot a lookup of
its prior state (copied when the state is mutable). While a key group's entries
are tracked, its map also records the state each write leaves
(:meth:`~statesource.state.statemap.CopyOnWriteStateMap.record_writes`), so
that a snapshot finds the changed entries' states without a lookup each. Only the owning thread
writes and captures the live changes; the captured ones and the base are shared
with the checkpoint thread that reports completion, under :attr:`ChangeTracker.lock`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

_MAX_CAPTURES = 16
"""Captures kept apart per state; older ones are merged (see :meth:`KeyGroupChanges.capture`)."""
TRACKED_ENTRIES_FLOOR = 64
"""A key group tracks up to this many changed entries however small it is."""

EntryPriors = dict[tuple[Any, Any], Any]
"""(key, namespace) -> the entry's state at the base (None: it did not exist)."""
Capture = tuple[bytes, dict[int, EntryPriors]]
"""Per key-group index a changed flag, and the tracked entries of the flagged key groups
that are not changed whole."""
WrittenStates = dict[int, dict[tuple[Any, Any], Any]]
"""Per key-group index, the state the last write since the previous snapshot left at each
entry it wrote (None: removed)."""


class StateMapLike(Protocol):
    """What change tracking needs of a key group's map (a ``CopyOnWriteStateMap``)."""

    def peek(self, key: Any, namespace: Any) -> Any: ...

    def record_writes(self) -> dict[tuple[Any, Any], Any]: ...

    def stop_recording(self) -> None: ...

    def __len__(self) -> int: ...


class KeyGroupChanges:
    """One state's changes: live ones, and those captured by unconfirmed snapshots."""

    __slots__ = ("live", "live_entries", "_recording", "_copier", "_captured")

    def __init__(self, key_groups: int, copier: Callable[[Any], Any] | None = None) -> None:
        self.live = bytearray(key_groups)
        """1 at the index of every key group written since the last snapshot."""
        self.live_entries: list[EntryPriors | None] = [None] * key_groups
        """The entries written since the last snapshot, per flagged key group (None on a
        flagged key group: changed whole)."""
        self._recording: dict[int, tuple[StateMapLike, dict[tuple[Any, Any], Any]]] = {}
        """Per key-group index whose entries are tracked: its map, recording its writes."""
        self._copier = copier
        self._captured: dict[int, Capture] = {}

    def note(self, index: int, key: Any, namespace: Any, state_map: StateMapLike) -> None:
        """Entry (key, namespace) of the key group at ``index`` is about to change.

        Call before the change: the first call for an entry since the snapshot
        records its state then, which is its state at the base. Once the key group
        tracks more than ``max(TRACKED_ENTRIES_FLOOR, half its entries)`` it is
        changed whole and tracks nothing more.
        """
        entries = self.live_entries[index]
        if entries is None:
            if self.live[index]:
                return
            self.live[index] = 1
            entries = self.live_entries[index] = {}
            self._recording[index] = (state_map, state_map.record_writes())
        entry = (key, namespace)
        if entry in entries:
            return
        prior = state_map.peek(key, namespace)
        entries[entry] = prior if prior is None or self._copier is None else self._copier(prior)
        if len(entries) > TRACKED_ENTRIES_FLOOR and len(entries) > len(state_map) // 2:
            self.live_entries[index] = None
            self._recording.pop(index)[0].stop_recording()

    def mark_all(self) -> None:
        """Everything changed whole: a restored state is in no checkpoint of this backend."""
        self.live[:] = b"\x01" * len(self.live)
        self.live_entries = [None] * len(self.live)
        self._take_written()

    def capture(self, sequence: int) -> tuple[bytes, dict[int, EntryPriors], WrittenStates]:
        """Take the live changes for snapshot ``sequence``; return every change since the base,
        and the states this snapshot's writes left (each entry of the union not among
        them was last written before an earlier snapshot, and must be looked up).

        Runs on the owning thread, under the tracker's lock. ``live`` is zeroed
        in place because handles hold that very object.
        """
        flags = bytes(self.live)
        entries = {index: tracked for index, tracked in enumerate(self.live_entries)
                   if tracked is not None}
        self._captured[sequence] = (flags, entries)
        self.live[:] = bytes(len(self.live))
        self.live_entries = [None] * len(self.live)
        written = self._take_written()
        if len(self._captured) > _MAX_CAPTURES:
            self._merge_oldest()
        return (*_union([self._captured[s] for s in sorted(self._captured)]), written)

    def _take_written(self) -> WrittenStates:
        """Stop every map recording; return what each recorded."""
        written = {}
        for index, (state_map, states) in self._recording.items():
            state_map.stop_recording()
            written[index] = states
        self._recording = {}
        return written

    def _merge_oldest(self) -> None:
        """Fold the oldest capture into the next one, so that snapshots whose checkpoints
        never complete cannot grow memory without bound. Safe: the merged changes are
        forgotten only when the later snapshot completes, which is at most later than
        needed (a change written again needlessly, never one missed)."""
        oldest, following = sorted(self._captured)[:2]
        self._captured[following] = _union([self._captured.pop(oldest),
                                            self._captured[following]])

    def reset(self) -> None:
        """Nothing changed: the state is exactly that of the base."""
        self.live[:] = bytes(len(self.live))
        self.live_entries = [None] * len(self.live)
        self._take_written()
        self._captured.clear()

    def forget_through(self, sequence: int) -> None:
        """Drop the captures of snapshots up to ``sequence``, now covered by a base."""
        for captured in [s for s in self._captured if s <= sequence]:
            del self._captured[captured]


def _union(captures: list[Capture]) -> Capture:
    """Captures (oldest first) as one: a key group changed whole in any is changed whole;
    an entry's prior is the one of the oldest capture holding it."""
    flags = np.zeros(len(captures[0][0]), dtype=np.uint8)
    for captured_flags, _ in captures:
        flags |= np.frombuffer(captured_flags, dtype=np.uint8)
    entries: dict[int, EntryPriors] = {}
    whole: set[int] = set()
    for captured_flags, captured_entries in captures:
        whole.update(index for index in np.flatnonzero(np.frombuffer(captured_flags,
                                                                    dtype=np.uint8)).tolist()
                     if index not in captured_entries)
    for _, captured_entries in reversed(captures):
        for index, tracked in captured_entries.items():
            if index not in whole:
                entries.setdefault(index, {}).update(tracked)
    return flags.tobytes(), entries


class ChangeTracker:
    """A backend's snapshot sequence and base: the last checkpoint confirmed complete.

    The base is an opaque token chosen by whoever writes checkpoints (the
    state layer knows nothing of files); ``None`` means no checkpoint of this
    backend has completed, so an incremental checkpoint must be full.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sequence = 0
        self.base: Any = None
        self._base_sequence = 0

    def next_sequence(self) -> int:
        """The sequence number of a new snapshot (call under :attr:`lock`)."""
        self.sequence += 1
        return self.sequence

    def complete(self, sequence: int, token: Any, states: list[KeyGroupChanges]) -> bool:
        """Make snapshot ``sequence`` (described by ``token``) the base, unless a later one is.

        Returns whether the base moved.
        """
        with self.lock:
            if sequence <= self._base_sequence:
                return False
            self._base_sequence, self.base = sequence, token
            for changes in states:
                changes.forget_through(sequence)
            return True

    def rebase(self, token: Any, states: list[KeyGroupChanges]) -> None:
        """Declare the state exactly that of checkpoint ``token`` (just restored from it)."""
        with self.lock:
            self._base_sequence, self.base = self.sequence, token
            for changes in states:
                changes.reset()

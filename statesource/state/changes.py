"""Which key groups of a state changed since the last completed checkpoint.

An incremental checkpoint rewrites only the key groups that changed and
references the rest from the checkpoint it builds on (its *base*), so the
backend must know, per state, which key groups changed since the base. The
knowledge must survive a checkpoint that fails: a snapshot cannot simply
forget what it captured, because if its checkpoint never completes, the next
one still has to rewrite those key groups.

So every snapshot *captures* the flags set since the previous snapshot and
keeps them, per snapshot sequence number, until a checkpoint completes. A
snapshot's changed set is the union of every capture since the base; the
completion of snapshot ``s`` makes it the new base and drops the captures up
to ``s``. A failed or abandoned checkpoint confirms nothing, so its captures
stay in every later union.

The hot path is one byte store per write: each state handle holds its table's
``live`` bytearray and sets ``live[index] = 1``, where ``index`` is the key
group's position in the backend's range (the one the handle already uses to
find its map). Only the owning thread writes and captures ``live``; the
captured flags and the base are shared with the checkpoint thread that
reports completion, under :attr:`ChangeTracker.lock`.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

_MAX_CAPTURES = 16
"""Captures kept apart per state; older ones are merged (see :meth:`KeyGroupChanges.capture`)."""


class KeyGroupChanges:
    """One state's change flags: live ones, and those captured by unconfirmed snapshots."""

    __slots__ = ("live", "_captured")

    def __init__(self, key_groups: int) -> None:
        self.live = bytearray(key_groups)
        """1 at the index of every key group written since the last snapshot."""
        self._captured: dict[int, bytes] = {}

    def mark_all(self) -> None:
        """Everything changed: a restored state is not yet in any checkpoint of this backend."""
        self.live[:] = b"\x01" * len(self.live)

    def capture(self, sequence: int) -> bytes:
        """Take the live flags for snapshot ``sequence``; return every change since the base.

        Runs on the owning thread, under the tracker's lock. ``live`` is zeroed
        in place because handles hold that very object.
        """
        self._captured[sequence] = bytes(self.live)
        self.live[:] = bytes(len(self.live))
        if len(self._captured) > _MAX_CAPTURES:
            self._merge_oldest()
        union = np.zeros(len(self.live), dtype=np.uint8)
        for flags in self._captured.values():
            union |= np.frombuffer(flags, dtype=np.uint8)
        return union.tobytes()

    def _merge_oldest(self) -> None:
        """Fold the oldest capture into the next one, so that snapshots whose checkpoints
        never complete cannot grow memory without bound. Safe: the merged flags are
        forgotten only when the later snapshot completes, which is at most later than
        needed (a key group rewritten needlessly, never one missed)."""
        oldest, following = sorted(self._captured)[:2]
        merged = np.frombuffer(self._captured.pop(oldest), dtype=np.uint8) | np.frombuffer(
            self._captured[following], dtype=np.uint8)
        self._captured[following] = merged.tobytes()

    def reset(self) -> None:
        """Nothing changed: the state is exactly that of the base."""
        self.live[:] = bytes(len(self.live))
        self._captured.clear()

    def forget_through(self, sequence: int) -> None:
        """Drop the captures of snapshots up to ``sequence``, now covered by a base."""
        for captured in [s for s in self._captured if s <= sequence]:
            del self._captured[captured]


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

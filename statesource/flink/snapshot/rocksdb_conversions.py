"""A snapshot's RocksDB handles as canonical keyed-state files: made whole once and kept, made
of their header alone (for the operator's headers, no table read), or made of what a lookup
reads (:class:`~statesource.flink.layouts.rocksdb_canonical.Selection`, not kept).

A mixin of :class:`~statesource.flink.snapshot.directory.FlinkSnapshot`, which holds the
caches and reads the files; kept apart so that the snapshot's module keeps to opening and
reading files.
"""

from __future__ import annotations

from statesource.flink.handles import (
    KeyedHandle,
    KeyedStateHandle,
    OperatorSnapshot,
    RocksDBHandle,
    StreamHandle,
    SubtaskState,
)
from statesource.flink.layouts.legacy_timers import VERSIONED_IDENTIFIER, holds_timers
from statesource.flink.layouts.rocksdb_canonical import Selection, canonical_handle, table_bytes
from statesource.flink.statefiles.keyed_header import KeyedHeader


class RocksDBConversions:
    """The RocksDB handles of a snapshot as the canonical handles every reader takes."""

    _canonical: dict[RocksDBHandle, KeyedHandle]
    _header_only: dict[RocksDBHandle, KeyedHandle]
    _sources: dict[StreamHandle, str]
    _handle_headers: dict[StreamHandle, KeyedHeader]
    _state_ids: dict[StreamHandle, tuple[int, ...]]

    def read_bytes(self, stream: StreamHandle, offset: int, length: int) -> bytes:
        raise NotImplementedError

    def describe(self, stream: StreamHandle) -> str:
        raise NotImplementedError

    def canonical_handle(self, op: OperatorSnapshot, handle: KeyedStateHandle) -> KeyedHandle:
        """``handle``, or for a RocksDB handle its state as a canonical savepoint's file held
        in memory, made once: the keyed handle every reader takes."""
        if not isinstance(handle, RocksDBHandle):
            return handle
        found = self._canonical.get(handle)
        if found is None:
            found = self._canonical[handle] = self._converted(op, handle, None)
        return found

    def unconverted_table_bytes(self, op: OperatorSnapshot) -> dict[int, int] | None:
        """Where every keyed handle of the operator is a RocksDB one not yet converted whole:
        its table files' bytes spread evenly over its key groups (what a planner weighs key
        groups by without converting anything); else None."""
        handles = [h for s in op.subtasks for h in s.keyed]
        rocksdb = [h for h in handles if isinstance(h, RocksDBHandle) and h not in self._canonical]
        return table_bytes(rocksdb) if handles and len(rocksdb) == len(handles) else None

    def heap_timers(self, subtask: SubtaskState) -> bool:
        """Whether ``subtask``'s raw keyed state is the heap timers of its RocksDB state
        (:mod:`~statesource.flink.layouts.legacy_timers`), which the canonical file of that
        state holds: what a rewrite of that file must not copy besides."""
        if not subtask.raw_keyed or not subtask.keyed or not all(
                isinstance(h, RocksDBHandle) for h in subtask.keyed):
            return False
        size = len(VERSIONED_IDENTIFIER)
        return all(h.offsets and h.offsets[0] + size <= h.stream.size
                   and holds_timers(self.read_bytes(h.stream, h.offsets[0], size))
                   for h in subtask.raw_keyed)

    def selected_handle(self, op: OperatorSnapshot, handle: RocksDBHandle,
                        selection: Selection) -> KeyedHandle:
        """A RocksDB handle's state as a canonical file of only what ``selection`` (a lookup)
        reads: the whole file if it is made already, else only the blocks that can hold it."""
        found = self._canonical.get(handle)
        return found if found is not None else self._converted(op, handle, selection)

    def header_handle(self, op: OperatorSnapshot, handle: KeyedStateHandle) -> KeyedHandle:
        """What ``handle``'s header is read from: a RocksDB handle's canonical file if it is
        made, else one of its header alone (no table's blocks read)."""
        if not isinstance(handle, RocksDBHandle):
            return handle
        found = self._canonical.get(handle) or self._header_only.get(handle)
        if found is None:
            found = self._header_only[handle] = self._converted(op, handle,
                                                                Selection(frozenset()))
        return found

    def _converted(self, op: OperatorSnapshot, handle: RocksDBHandle,
                   selection: Selection | None) -> KeyedHandle:
        raw_keyed = next((s.raw_keyed for s in op.subtasks if handle in s.keyed), ())
        found, source = canonical_handle(handle, op.max_parallelism,
                                         lambda s: self.read_bytes(s, 0, s.size), self.describe,
                                         selection, self.read_bytes, raw_keyed)
        self._sources[found.stream] = source
        header_only = self._header_only.get(handle)
        if header_only is not None and header_only.stream in self._handle_headers:
            self._handle_headers[found.stream] = self._handle_headers[header_only.stream]
            if header_only.stream in self._state_ids:
                self._state_ids[found.stream] = self._state_ids[header_only.stream]
        return found

"""Writing a planned savepoint rewrite: each operator's pairs framed into new key groups.

Each keyed operator of the plan (:mod:`statesource.flink.operations.savepoint_plan`) is
walked key group by key group, in whatever layout its files are
(:mod:`statesource.flink.layouts`): every pair is re-keyed by its key alone
(:class:`_Rekeyer`), or whole key groups at once where their layout can
(:mod:`~statesource.flink.layouts.regroup`), and framed into the canonical key group of its
new key group (so a native snapshot is converted on the way); the files an operator keeps
(operator and coordinator state, the keyed files of an operator not rewritten) are copied
byte for byte, but for RocksDB's files, whose state is written as the canonical file it
reads as (the files of an operator whose state does not decode excepted: they are copied,
and only a RocksDB job restores them).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from statesource.errors import (
    CorruptCheckpointError,
    UnsupportedFormatVersionError,
)
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.handles import (
    KeyedHandle,
    KeyedStateHandle,
    OperatorHandle,
    OperatorSnapshot,
    RocksDBFile,
    RocksDBHandle,
    StreamHandle,
    SubtaskState,
)
from statesource.flink.layouts.base import KeyGroupData
from statesource.flink.layouts.canonical_writer import (
    KeyGroupFramer,
    prefix_bytes,
    recompressed_keyed_file,
)
from statesource.flink.layouts.dispatch import layout_of
from statesource.flink.layouts.keyed import check_key_group_range
from statesource.flink.layouts.regroup import Regrouper
from statesource.flink.operations.savepoint_plan import REPLACED, OperatorPlan, erase_form
from statesource.flink.serializers.base import FlinkType
from statesource.flink.serializers.columns import decoder_for
from statesource.flink.snapshot.compression import header_compressed
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.flink.snapshot.publish import SavepointWriter
from statesource.flink.statefiles.keyed_header import SUPPORTED_VERSIONS as HEADER_VERSIONS
from statesource.flink.statefiles.operator_state import decoded_states
from statesource.flink.statefiles.operator_state_writer import recompressed_operator_file
from statesource.keygroups import murmur_hash
from statesource.types import DataType

TIMER_KEY_OFFSET = 8
"""A timer's composite key holds the timer: its sign-flipped timestamp (a long), then the key."""


@dataclass(frozen=True)
class RescaledOperator:
    """What the rescale did to one operator with keyed state."""

    operator: str
    max_parallelism: int
    parallelism: int
    new_max_parallelism: int
    new_parallelism: int
    entries: int
    """Canonical pairs moved (one per value-state entry, list, map user key and timer)."""
    timers: int
    key_groups: int
    """Non-empty key groups written."""
    bytes: int
    """Bytes of the keyed-state files written."""
    removed: tuple[tuple[str, int], ...] = ()
    """Per state (header name), the pairs left out: of the erased keys, or of a dropped
    state (an edit, :mod:`statesource.flink.operations.edit`)."""
    erased: tuple[int, ...] = ()
    """Which of the keys to erase (their positions) this operator's state held."""
    operator_id: str = ""

class FileCopies:
    """Files of the source that the new savepoint keeps (operator and coordinator state),
    copied into it once each, under their own names where free. With ``compressed`` (a
    compression asked for), a canonical keyed-state file or a managed operator-state file
    of the other compression is written again with it; without (None), each file keeps its
    own, a RocksDB state converted to a canonical file the one its meta data records."""

    def __init__(self, snapshot: FlinkSnapshot, writer: SavepointWriter,
                 compressed: bool | None = None) -> None:
        self.snapshot = snapshot
        self.writer = writer
        self.compressed = compressed
        self._copied: dict[tuple[str | None, bool], StreamHandle] = {}
        self._names: set[str] = set()

    def stream(self, stream: StreamHandle | None, data: bytes | None = None
               ) -> StreamHandle | None:
        """``stream``'s file copied (once); ``data``: its bytes, where read already."""
        if stream is None or stream.inline is not None:
            return stream
        key = (stream.path, stream.relative)
        if key not in self._copied:
            if data is None:
                data = self.snapshot.read_bytes(stream, 0, stream.size)
            name = self.snapshot.file_location(stream).name
            copied = self.writer.write_file(data, None if name in self._names else name)
            self._names.add(copied.path or "")
            self._copied[key] = copied
        return self._copied[key]

    def operator_handles(self, handles: tuple[OperatorHandle, ...], drop: tuple[str, ...] = (),
                         raw: bool = False) -> tuple[OperatorHandle, ...]:
        """The handles with their files copied, each checked first (:meth:`_check`); ``drop``
        names operator states left out of them (their elements stay in the file, which no
        handle points at any more). A managed operator-state file of another compression
        than the savepoint's is written again with it."""
        copied = []
        for handle in handles:
            data = self.snapshot.read_bytes(handle.stream, 0, handle.stream.size)
            self._check(handle, raw, data)
            again = None if raw or self.compressed is None else recompressed_operator_file(
                data, handle.states, self.compressed, self.snapshot.describe(handle.stream))
            if again is None:
                stream = self.stream(handle.stream, data)
                assert stream is not None
                handle = dataclasses.replace(handle, stream=stream)
            else:
                handle = dataclasses.replace(handle, stream=self.writer.write_file(again[0]),
                                             states=again[1])
            states = tuple(s for s in handle.states if s.name not in drop)
            copied.append(dataclasses.replace(handle, states=states))
        return tuple(copied)

    def _check(self, handle: OperatorHandle, raw: bool, data: bytes) -> None:
        """Refuse a corrupt operator-state file rather than copy it into a savepoint that
        looks valid: managed state decoded whole; raw state (the operator's own format)
        at least with its offsets inside the file."""
        source = self.snapshot.describe(handle.stream)
        if not raw:
            for _ in decoded_states(data, source, handle):
                pass
            return
        for state in handle.states:
            for offset in state.offsets:
                if not 0 <= offset < len(data):
                    raise CorruptCheckpointError(
                        f"{source}: raw operator state {state.name!r} has offset {offset},"
                        f" outside the file's {len(data)} bytes")

    def keyed_handles(self, op: OperatorSnapshot, handles: tuple[KeyedStateHandle, ...]
                      ) -> tuple[KeyedStateHandle, ...]:
        """The handles of ``op`` with their files copied, each of a keyed-state file version
        Flink reads (its key-group offsets were checked against its size when ``_metadata``
        was read; an operator whose serializers statesource does not know is carried over
        as it is). A canonical file of another compression than the savepoint's is written
        again with it (:meth:`_recompressed`). A RocksDB handle's state is written as the
        canonical file it reads as (:meth:`FlinkSnapshot.canonical_handle`), unless the
        operator's state does not decode: then its RocksDB files are copied as they are."""
        copied: list[KeyedStateHandle] = []
        for handle in handles:
            if isinstance(handle, RocksDBHandle):
                copied.append(self._rocksdb(op, handle))
                continue
            head = self.snapshot.read_bytes(handle.stream, 0, min(4, handle.stream.size))
            version = int.from_bytes(head, "big", signed=True)
            if len(head) < 4 or version not in HEADER_VERSIONS:
                raise UnsupportedFormatVersionError(
                    f"{self.snapshot.describe(handle.stream)}: keyed state file version"
                    f" {version if len(head) == 4 else 'missing'}; statesource copies version"
                    f" {', '.join(map(str, HEADER_VERSIONS))}")
            if (self.compressed is not None and handle.savepoint
                    and self.snapshot.undecodable(op) is None
                    and self.snapshot.handle_header(op, handle).compressed != self.compressed):
                copied.append(self._recompressed(op, handle, self.compressed))
                continue
            stream = self.stream(handle.stream)
            assert stream is not None
            copied.append(dataclasses.replace(handle, stream=stream))
        return tuple(copied)

    def _recompressed(self, op: OperatorSnapshot, handle: KeyedHandle, compress: bool
                      ) -> KeyedHandle:
        """A canonical file written again compressed or not (native files and those of an
        operator whose state does not decode are copied with their own)."""
        data = self.snapshot.read_bytes(handle.stream, 0, handle.stream.size)
        header = self.snapshot.handle_header(op, handle)
        whole, offsets = recompressed_keyed_file(
            data, handle.offsets, handle.start, header.data_start, header.compressed,
            compress, self.snapshot.describe(handle.stream))
        return dataclasses.replace(handle, offsets=tuple(offsets),
                                   stream=self.writer.write_file(whole))

    def _rocksdb(self, op: OperatorSnapshot, handle: RocksDBHandle) -> KeyedStateHandle:
        """A RocksDB handle's state as a canonical file written into the new savepoint; or,
        where the operator's state does not decode (:meth:`FlinkSnapshot.undecodable`), the
        handle with its files copied under their own names, as a native savepoint holds
        them."""
        if self.snapshot.undecodable(op) is None:
            canonical = self.snapshot.canonical_handle(op, handle)
            assert canonical.stream.inline is not None
            compress = self.compressed
            if compress is None:  # the job's setting, recorded in the meta data stream
                compress = header_compressed(self.snapshot, handle.meta)
            if compress:
                return self._recompressed(op, canonical, True)
            return dataclasses.replace(canonical,
                                       stream=self.writer.write_file(canonical.stream.inline))

        def copied(files: tuple[RocksDBFile, ...]) -> tuple[RocksDBFile, ...]:
            return tuple(dataclasses.replace(f, stream=self._file(f.stream)) for f in files)

        return dataclasses.replace(handle, meta=self._file(handle.meta),
                                   shared=copied(handle.shared), private=copied(handle.private))

    def _file(self, stream: StreamHandle) -> StreamHandle:
        copied = self.stream(stream)
        assert copied is not None
        return copied

    def subtask(self, index: int, keyed: tuple[KeyedStateHandle, ...],
                old: SubtaskState | None, drop: tuple[str, ...] = ()) -> SubtaskState:
        """Subtask ``index`` with ``keyed`` and the files of ``old``'s operator state and raw
        state copied; raw keyed state (the operator's own bytes per key group) only at the
        parallelism and max parallelism it was written with: a rescale refuses it, an edit
        keeps both (:func:`~statesource.flink.operations.savepoint_plan.plan_operator`).
        Heap timers of a RocksDB state written as a canonical file are in that file (as
        Flink's canonical savepoint has them), not copied as raw keyed state too."""
        if old is None:
            return SubtaskState(index, keyed, ())
        converted = (self.snapshot.heap_timers(old)
                     and not any(isinstance(h, RocksDBHandle) for h in keyed))
        return SubtaskState(index, keyed, self.operator_handles(old.operator, drop),
                            () if converted else
                            tuple(dataclasses.replace(h, stream=self._file(h.stream))
                                  for h in old.raw_keyed),
                            self.operator_handles(old.raw_operator, raw=True))


def carried(plan: OperatorPlan, copies: FileCopies) -> OperatorSnapshot:
    """An operator whose keyed state is not rewritten: as it was, with its files copied
    (byte for byte), at the plan's max parallelism, without a dropped operator state."""
    op, drop = plan.op, plan.dropped_operator_states
    return dataclasses.replace(
        op, max_parallelism=plan.max_parallelism, coordinator=copies.stream(op.coordinator),
        subtasks=tuple(copies.subtask(s.index, copies.keyed_handles(op, s.keyed), s, drop)
                       for s in op.subtasks))


def write_rescaled(snapshot: FlinkSnapshot, writer: SavepointWriter, plan: OperatorPlan,
              copies: FileCopies) -> tuple[OperatorSnapshot, RescaledOperator]:
    op, header, max_parallelism = plan.op, plan.header, plan.max_parallelism
    assert header is not None
    rekey = _Rekeyer(header.key, plan.key_type, op.max_parallelism, max_parallelism,
                     f"operator {op.label!r}", plan.erase)
    framers: dict[int, KeyGroupFramer] = {}
    """The new key groups, framed as their pairs arrive."""
    old_prefix = prefix_bytes(op.max_parallelism)
    entries = timers = 0
    removed: dict[str, int] = {}
    regrouper = _regrouper(plan, header.key)
    for source in plan.inputs:
        replaced = frozenset(i for i, target in enumerate(source.state_ids) if target == REPLACED)
        if replaced and len(replaced) == len(source.state_ids):
            continue  # the staged states are all of this file: none of its bytes is used
        handle = source.handle
        name = snapshot.describe(handle.stream)
        data = snapshot.read_bytes(handle.stream, 0, handle.stream.size)
        states = source.header.states
        layout = layout_of(handle)
        for key_group, begin, end in check_key_group_range(
                handle.offsets, handle.start, handle.stream.size, source.header.data_start,
                name):
            rekey.start_key_group(key_group, name)
            piece = KeyGroupData(key_group, data[begin:end], name, begin)
            moved = (None if regrouper is None else
                     layout.regroup(piece, source.header, regrouper, replaced))
            for part in moved or ():
                target = source.state_ids[part.state_id]
                if target == REPLACED:
                    continue
                if target < 0:  # a dropped state
                    name_of = states[part.state_id].name
                    removed[name_of] = removed.get(name_of, 0) + part.count
                    continue
                framer = framers.get(part.key_group)
                if framer is None:
                    framer = framers[part.key_group] = KeyGroupFramer(part.key_group,
                                                                      max_parallelism)
                framer.add_framed(target, part.pairs, part.last_key)
                entries += part.count
                if states[part.state_id].is_timer:
                    timers += part.count
            if moved is not None:
                continue
            for state_id, pairs in layout.pairs(piece, source.header, old_prefix):
                info = states[state_id]
                target = source.state_ids[state_id]
                if target == REPLACED:
                    continue
                if target < 0:  # a dropped state
                    removed[info.name] = removed.get(info.name, 0) + len(pairs)
                    continue
                offset = TIMER_KEY_OFFSET if info.is_timer else 0
                kept = 0
                if rekey.same and pairs:  # no key is decoded: every pair stays in its key group
                    framer = framers.get(key_group)
                    if framer is None:
                        framer = framers[key_group] = KeyGroupFramer(key_group, max_parallelism)
                    for body, value in pairs:
                        framer.add(target, body, value)
                    kept = len(pairs)
                known, length = rekey.cache, rekey.length  # the hash cache, looked up inline
                for body, value in (() if rekey.same else pairs):
                    new_group = known.get(body[offset:offset + length]) if length >= 0 else None
                    if new_group is None:
                        new_group = rekey(body, offset, info.name)
                    if new_group < 0:  # an erased key
                        continue
                    framer = framers.get(new_group)
                    if framer is None:
                        framer = framers[new_group] = KeyGroupFramer(new_group, max_parallelism)
                    framer.add(target, body, value)
                    kept += 1
                if kept < len(pairs):
                    removed[info.name] = removed.get(info.name, 0) + len(pairs) - kept
                entries += kept
                if info.is_timer:
                    timers += kept
    for state_id, staged in plan.staged:
        for key_group, body, count in staged.sections():
            framer = framers.get(key_group)
            if framer is None:
                framer = framers[key_group] = KeyGroupFramer(key_group, max_parallelism)
            framer.add_section(state_id, body)
            entries += count
    old_subtasks = {s.index: s for s in op.subtasks}
    written_groups = len(framers)
    handles = writer.write_keyed_files(header, framers, max_parallelism, plan.parallelism)
    written = sum(keyed.stream.size for keyed in handles)
    subtasks = [copies.subtask(index, (keyed,), old_subtasks.get(index),
                               plan.dropped_operator_states)
                for index, keyed in enumerate(handles)]
    assert not framers, "every key group lies in one subtask's range"
    new = dataclasses.replace(op, parallelism=plan.parallelism, max_parallelism=max_parallelism,
                              coordinator=copies.stream(op.coordinator),
                              subtasks=tuple(subtasks))
    return new, RescaledOperator(op.label, op.max_parallelism, op.parallelism,
                                 max_parallelism, plan.parallelism, entries, timers,
                                 written_groups, written, tuple(sorted(removed.items())),
                                 tuple(i for i, k in enumerate(plan.erase)
                                       if k in rekey.found), op.operator_id)


def _regrouper(plan: OperatorPlan, key: FlinkType) -> Regrouper | None:
    """The column-wise mover of whole key groups, where keys are re-keyed (a new max
    parallelism, nothing to erase) and can be decoded column-wise; else None."""
    if plan.key_type is None or plan.erase:
        return None
    decoder = decoder_for(key, plan.key_type.arrow_type)
    if decoder is None:
        return None
    return Regrouper(decoder, plan.key_type, plan.op.max_parallelism, plan.max_parallelism,
                     TIMER_KEY_OFFSET)


class _Rekeyer:
    """The new key group of each composite key, from its key alone; -1 for an erased key.

    The key is decoded (only the key), hashed as Flink hashes it, and checked to give back
    the key group it was read from (also by an edit that keeps every key where it is: a key
    that does not hash back is refused, not copied). Hashes are remembered per key bytes
    within one source key group: every state of a key, and every user key of a map, shares
    them. Keys statesource cannot hash as Flink does (no ``key_type``: ``same``) are not
    decoded at all.
    """

    def __init__(self, key: FlinkType, key_type: DataType | None, old_max: int, new_max: int,
                 where: str, erase: tuple[Any, ...] = ()) -> None:
        self.read = key.read
        self.length = key.length
        self.key = key
        self.key_type = key_type
        self.old_max = old_max
        self.new_max = new_max
        self.where = where
        self.erase = frozenset(erase)
        self.found: set[Any] = set()
        """The erased keys met, in their Java-equality form."""
        self.canonical = (erase_form(key_type, decoded=True)
                          if erase and key_type is not None else None)
        self.same = key_type is None
        self.reader = BinaryReader(b"", where)
        self.key_group = -1
        self.cache: dict[bytes, int] = {}

    def start_key_group(self, key_group: int, source: str) -> None:
        self.key_group = key_group
        self.cache.clear()
        self.reader.source = f"{source} (key group {key_group})"

    def __call__(self, body: bytes, offset: int, state: str) -> int:
        length = self.length
        if length >= 0:
            found = self.cache.get(body[offset:offset + length])
            if found is not None:
                return found
        r = self.reader
        r.data, r.pos, r.end = body, offset, len(body)
        key = self.read(r)
        key_bytes = body[offset:r.pos]
        found = self.cache.get(key_bytes)
        if found is None:
            found = self.cache[key_bytes] = self._new_key_group(key, state)
        return found

    def _new_key_group(self, key: Any, state: str) -> int:
        assert self.key_type is not None
        hashed = murmur_hash(self.key_type.java_hash(key))
        if hashed % self.old_max != self.key_group:
            raise CorruptCheckpointError(
                f"{self.reader.source}, {self.where}, state {state!r}: key {key!r} is stored"
                f" in key group {self.key_group}, but its hash ({self.key_type} keys) gives key"
                f" group {hashed % self.old_max} of {self.old_max}: the file is corrupt, or the"
                " job hashed its keys otherwise than statesource does; a job would never find"
                " the key, so it is neither moved, compared with keys to erase, nor copied")
        if self.erase:
            canonical = key if self.canonical is None else self.canonical(key)
            if canonical in self.erase:
                self.found.add(canonical)
                return -1
        return hashed % self.new_max


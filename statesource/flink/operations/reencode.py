"""The keyed states ``migrate`` re-encodes: Kryo 2 values as Flink 2.x writes them.

A state with Kryo inside (:mod:`~statesource.flink.serializers.kryo_migration`) is read
while planning, every value decoded, so that the plan knows what each state holds before
anything is written (a class statesource does not re-encode refuses the state; a POJO
collection field's element type is inferred from every value). What the scan decoded is
kept, up to a :class:`KeptValues` budget: re-encoded already where the state's 2.x type is
known before the scan (no POJO collection field), else decoded. The write re-encodes what
was kept, and reads and decodes the rest from the source again; each state is handed to
the rewrite as a staged state (:class:`ReencodedState`) with the meta info Flink 2.x
writes for it.
"""

from __future__ import annotations

import dataclasses
import gc
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from statesource.errors import IncompatibleCheckpointError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.handles import OperatorSnapshot
from statesource.flink.layouts.base import KeyGroupData
from statesource.flink.layouts.canonical_writer import prefix_bytes, section_body
from statesource.flink.layouts.dispatch import layout_of
from statesource.flink.layouts.keyed import check_key_group_range
from statesource.flink.operations.staged import StagedState
from statesource.flink.serializers.base import FlinkType
from statesource.flink.serializers.collections import ListType, MapType
from statesource.flink.serializers.encoding import encoder_of
from statesource.flink.serializers.kryo_migration import (
    Kryo2Collection,
    described,
    has_kryo,
    kryo_refusal,
    reading_type,
    writing_type,
)
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.flink.statefiles.keyed_header import StateInfo
from statesource.model import StateKind

LIST_DELIMITER = 0x2C
Pairs = list[tuple[bytes, bytes]]
Decoded = tuple[int | None, list[Any]]
"""A value as :meth:`StateRecoder.decoded` reads it: a map entry's null flag, the parts."""
KEPT_BYTES = 512 << 20
"""What a migration keeps, at most, of the values its plan decoded (an estimate of their
memory), so that the write does not decode them again."""
DECODED_FACTOR = 12
"""The memory of a decoded value (Python objects) per byte of its Kryo 2 bytes, about."""
PAIR_OVERHEAD = 120
"""A kept pair's memory besides its bytes (a tuple, two bytes objects, a list slot)."""


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector paused while values are re-encoded: decoding makes millions
    of small lists, dicts and Java objects (none in a cycle), and each collection
    walks every one the plan keeps (measured: 40% of a migration's time without this)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class KeptValues:
    """The budget of what the plan keeps for the write, shared by every state of a
    migration (0 for a dry run, which writes nothing)."""

    def __init__(self, limit: int = KEPT_BYTES) -> None:
        self.left = limit

    def take(self, size: int) -> bool:
        if size > self.left:
            return False
        self.left -= size
        return True


@dataclass(eq=False)
class Kept:
    """One state's key groups as its scan left them: ``(key group, [(key bytes, value)])``
    in the order the source holds them, each value Flink 2.x's bytes already or
    :data:`Decoded`; None once the budget ran out (the write reads the source again)."""

    groups: deque[tuple[int, list[tuple[bytes, Any]]]] | None
    held: int = 0

    def take(self) -> deque[tuple[int, list[tuple[bytes, Any]]]] | None:
        """The groups, once: a second write reads the source again."""
        groups, self.groups = self.groups, None
        return groups


def refusal(info: StateInfo) -> str:
    """Why a keyed state with Kryo inside cannot be re-encoded, from its header alone."""
    if has_kryo(info.namespace):
        return "its namespace is Kryo's, which statesource does not re-encode"
    if info.kind is StateKind.MAP:
        assert isinstance(info.value, MapType)
        if has_kryo(info.value.key):
            return ("its map keys are Kryo's, which statesource does not re-encode (their"
                    " bytes place and order the entries)")
    return kryo_refusal(info.value)


class StateRecoder:
    """One state's values: read as Flink 1.x wrote them, written as Flink 2.x does."""

    def __init__(self, info: StateInfo, where: str, budget: KeptValues) -> None:
        self.info = info
        self.kind = info.kind
        self.reading = reading_type(info.value, where)
        self.where = where
        self.budget = budget
        self.kept = Kept(deque())
        settled = not any(isinstance(n, Kryo2Collection) for n in self.reading.nested())
        self.early = encoder_of(self.part(self.reading)).write if settled else None
        """The 2.x writer where it is known before the scan: values are kept re-encoded."""

    def part(self, whole: FlinkType) -> FlinkType:
        """The type of what one value of the pair holds (a list's element, a map's value)."""
        if self.kind is StateKind.LIST:
            assert isinstance(whole, ListType)
            return whole.element
        if self.kind is StateKind.MAP:
            assert isinstance(whole, MapType)
            return whole.value
        return whole

    def scan(self, key_group: int, pairs: Pairs, source: str) -> None:
        """Decode one key group's values (recording what a collection field holds), and keep
        them for the write while the budget allows."""
        decoded = [(body, self.decoded(value, source)) for body, value in pairs]
        if self.kept.groups is None:
            return
        if self.early is not None:
            write = self.early
            kept: list[tuple[bytes, Any]] = [(body, self.written(write, value))
                                             for body, value in decoded]
            size = sum(len(body) + len(value) + PAIR_OVERHEAD for body, value in kept)
        else:
            kept = decoded
            size = sum(len(body) + len(value) * DECODED_FACTOR + PAIR_OVERHEAD
                       for body, value in pairs)
        if self.budget.take(size):
            self.kept.groups.append((key_group, kept))
            self.kept.held += size
        else:
            self.drop()

    def drop(self) -> None:
        """Keep nothing of this state (refused, or past the budget)."""
        self.kept.groups = None
        self.budget.left += self.kept.held
        self.kept.held = 0

    def decoded(self, value: bytes, source: str) -> Decoded:
        r = BinaryReader(value, f"{source}, {self.where}, in a value")
        read = self.part(self.reading).read
        flag = r.u8() if self.kind is StateKind.MAP else None
        parts = [read(r)]
        while self.kind is StateKind.LIST and not r.at_end():
            at = r.pos
            if r.u8() != LIST_DELIMITER:
                raise r.error("list state elements not separated by ','", at)
            parts.append(read(r))
        if not r.at_end():
            raise r.error(f"{r.remaining()} bytes after a value of state {self.info.name!r}")
        return flag, parts

    @staticmethod
    def written(write: Callable[[BinaryWriter, Any], None], value: Decoded) -> bytes:
        """A decoded value's bytes as Flink 2.x writes them."""
        flag, parts = value
        w = BinaryWriter()
        if flag is not None:
            w.u8(flag)
        for index, part in enumerate(parts):
            if index:
                w.u8(LIST_DELIMITER)
            write(w, part)
        return w.getvalue()

    def finished(self) -> tuple[StateInfo, Callable[[bytes, str], bytes],
                                Callable[[Any], bytes]]:
        """Once every value was scanned: the meta info Flink 2.x writes, the re-encoder of
        a value read from the source, and the writer of a kept one."""
        writing = writing_type(self.reading)
        write = encoder_of(self.part(writing)).write

        def recode(value: bytes, source: str) -> bytes:
            return self.written(write, self.decoded(value, source))

        def settle(kept: Any) -> bytes:
            return kept if self.early is not None else self.written(write, kept)
        info = dataclasses.replace(self.info, serializers={**self.info.serializers,
                                                           "VALUE_SERIALIZER": writing})
        return info, recode, settle


def state_pairs(snapshot: FlinkSnapshot, op: OperatorSnapshot, names: set[str]
                ) -> Iterator[tuple[str, int, str, Pairs]]:
    """``(state, key group, source, pairs)`` of the keyed states ``names`` of ``op``, by
    key group within each file, as the rewrite walks them."""
    old_prefix = prefix_bytes(op.max_parallelism)
    for handle in snapshot.keyed_handles(op):
        header = snapshot.handle_header(op, handle)
        name = snapshot.describe(handle.stream)
        data = snapshot.read_bytes(handle.stream, 0, handle.stream.size)
        layout = layout_of(handle)
        for key_group, begin, end in check_key_group_range(
                handle.offsets, handle.start, handle.stream.size, header.data_start, name):
            piece = KeyGroupData(key_group, data[begin:end], name, begin)
            for state_id, pairs in layout.pairs(piece, header, old_prefix):
                state = header.states[state_id].name
                if state in names and pairs:
                    yield state, key_group, f"{name} (key group {key_group})", pairs


@dataclass(frozen=True)
class ReencodedState(StagedState):
    """A state's pairs re-encoded from the source as the rewrite asks for them."""

    snapshot: FlinkSnapshot | None = None
    op: OperatorSnapshot | None = None
    recode: Callable[[bytes, str], bytes] | None = None
    settle: Callable[[Any], bytes] | None = None
    kept: Kept | None = None

    def _recoded(self) -> Iterator[tuple[int, Pairs]]:
        """Each key group's pairs in the source's order, re-encoded: from what the scan kept,
        else read and decoded again."""
        assert self.snapshot is not None and self.op is not None and self.recode is not None
        kept = self.kept.take() if self.kept is not None else None
        if kept is not None:
            assert self.settle is not None
            settle = self.settle
            while kept:
                key_group, pairs = kept.popleft()
                yield key_group, [(body, settle(value)) for body, value in pairs]
            return
        recode = self.recode
        for _, key_group, source, pairs in state_pairs(self.snapshot, self.op,
                                                       {self.info.name}):
            yield key_group, [(body, recode(value, source)) for body, value in pairs]

    def sections(self) -> Iterator[tuple[int, bytes, int]]:
        """Each key group's section, as soon as it is re-encoded where the source's files
        hold disjoint key groups (a canonical savepoint's do); else once all were read."""
        assert self.snapshot is not None and self.op is not None
        max_parallelism = self.op.max_parallelism
        handles = sorted(self.snapshot.keyed_handles(self.op), key=lambda h: h.start)
        disjoint = all(a.end < b.start for a, b in zip(handles, handles[1:]))
        groups: dict[int, Pairs] = {}
        for key_group, recoded in self._recoded():
            if disjoint:
                yield key_group, section_body(key_group, max_parallelism, recoded), len(recoded)
            else:
                groups.setdefault(key_group, []).extend(recoded)
        for key_group in sorted(groups):
            pairs = groups.pop(key_group)
            yield key_group, section_body(key_group, max_parallelism, pairs), len(pairs)


def reencoded_states(snapshot: FlinkSnapshot, op: OperatorSnapshot, infos: list[StateInfo],
                     budget: KeptValues | None = None
                     ) -> tuple[list[ReencodedState], dict[str, str], dict[str, str]]:
    """The staged states of ``op``'s ``infos`` after a scan of every value; the states that
    cannot be re-encoded after all, each with why (a class met in its values); and what
    re-encoding does to each of the others. What the scan decoded is kept for the write
    within ``budget`` (None: nothing kept)."""
    budget = budget or KeptValues(0)
    recoders = {info.name: StateRecoder(info, f"operator {op.label!r}, state {info.name!r}",
                                        budget) for info in infos}
    refused: dict[str, str] = {}
    for state, key_group, source, pairs in state_pairs(snapshot, op, set(recoders)):
        if state in refused:
            continue
        try:
            recoders[state].scan(key_group, pairs, source)
        except IncompatibleCheckpointError as error:
            refused[state] = str(error)
            recoders[state].drop()
    staged = []
    for name, recoder in recoders.items():
        if name in refused:
            continue
        try:
            info, recode, settle = recoder.finished()
        except IncompatibleCheckpointError as error:
            refused[name] = str(error)
            recoder.drop()
            continue
        staged.append(ReencodedState(info, "", (), replaces_info=True, snapshot=snapshot,
                                     op=op, recode=recode, settle=settle, kept=recoder.kept))
    return staged, refused, {name: described(r.reading) for name, r in recoders.items()
                             if name not in refused}

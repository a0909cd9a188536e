"""The keyed states ``migrate`` re-encodes: Kryo 2 values as Flink 2.x writes them.

A state with Kryo inside (:mod:`~statesource.flink.serializers.kryo_migration`) is read
while planning, every value, so that the plan knows what each state holds before anything
is written (a class statesource does not re-encode refuses the state; a POJO collection
field's element type is inferred from every value). A value is re-encoded by the fast path
(:mod:`~statesource.flink.serializers.kryo_transcode`: Kryo 2 bytes to 2.x bytes directly,
in worker processes where the state is large: :mod:`.reencode_workers`), else by the exact
path (decoded into Java objects, then written). What the scan made is kept, up to a
:class:`KeptValues` budget: as 2.x bytes, or decoded where the exact path read a value
whose 2.x type is known only after the scan (a POJO collection field). The write settles
what was kept, and reads and re-encodes the rest from the source again; each state is
handed to the rewrite as a staged state (:class:`ReencodedState`) with the meta info Flink
2.x writes for it.
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
from statesource.flink.binary.snappy import unframe
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.handles import OperatorSnapshot
from statesource.flink.layouts.base import KeyGroupData, KeyGroupLayout
from statesource.flink.layouts.canonical import CanonicalLayout
from statesource.flink.layouts.canonical_writer import prefix_bytes, section_body
from statesource.flink.layouts.dispatch import layout_of
from statesource.flink.layouts.framing import canonical_sections
from statesource.flink.layouts.keyed import check_key_group_range
from statesource.flink.operations.reencode_workers import in_workers, worker_count
from statesource.flink.operations.staged import StagedState
from statesource.flink.serializers.base import FlinkType
from statesource.flink.serializers.collections import ListType, MapType
from statesource.flink.serializers.encoding import encoder_of
from statesource.flink.serializers.kryo_columns import batched
from statesource.flink.serializers.kryo_migration import (
    Kryo2Collection,
    described,
    has_kryo,
    kryo_refusal,
    reading_type,
    writing_type,
)
from statesource.flink.serializers.kryo_transcode import remembering, transcoder
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.flink.statefiles.keyed_header import KeyedHeader, StateInfo
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


def _no_fast_path(value: bytes) -> None:
    return None


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
        self.fast = transcoder(self.part(self.reading), self.kind is StateKind.MAP,
                               self.kind is StateKind.LIST)
        """Kryo 2 bytes to 2.x bytes directly, where the shape has a fast path: a value it
        does not take goes the exact path (decoded, then written)."""
        self.transcoded = remembering(self.fast) if self.fast is not None else _no_fast_path
        self.batch = batched(self.part(self.reading), self.kind is StateKind.MAP,
                             self.kind is StateKind.LIST, self.transcoded)
        """The fast path of a chunk of values (``UUID`` s column-wise)."""
        self.collections = [node for node in self.reading.nested()
                            if isinstance(node, Kryo2Collection)]
        """The POJO collection fields, whose element classes the scan records."""

    def part(self, whole: FlinkType) -> FlinkType:
        """The type of what one value of the pair holds (a list's element, a map's value)."""
        if self.kind is StateKind.LIST:
            assert isinstance(whole, ListType)
            return whole.element
        if self.kind is StateKind.MAP:
            assert isinstance(whole, MapType)
            return whole.value
        return whole

    def scan(self, key_group: int, pairs: Pairs, source: str,
             transcoded: list[bytes | None] | None = None) -> None:
        """Read one key group's values (recording what a collection field holds), and keep
        them for the write while the budget allows: as 2.x bytes where the fast path took
        them or the 2.x writer is known already, else decoded. ``transcoded``: what worker
        processes' fast paths made of the values already (None: values they left)."""
        if transcoded is None:
            transcoded = self.batch([value for _, value in pairs])
        if self.kept.groups is None:  # nothing kept: what the fast path left is only checked
            for (_, value), written in zip(pairs, transcoded):
                if written is None:
                    self.decoded(value, source)
            return
        bodies = [body for body, _ in pairs]
        kept: list[tuple[bytes, Any]]
        if None not in transcoded:  # the fast path took every value: no object per pair
            kept = list(zip(bodies, transcoded))
            size = (sum(map(len, bodies)) + sum(map(len, transcoded))  # type: ignore[arg-type]
                    + PAIR_OVERHEAD * len(pairs))
        else:
            kept = [(body, self.exact(value, source) if written is None else written)
                    for (body, value), written in zip(pairs, transcoded)]
            size = sum(len(body) + PAIR_OVERHEAD + (len(value) if type(value) is bytes
                                                    else len(raw) * DECODED_FACTOR)
                       for (body, value), (_, raw) in zip(kept, pairs))
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

    def exact(self, value: bytes, source: str) -> bytes | Decoded:
        """A value the fast path left, as the scan keeps it: its 2.x bytes where the 2.x
        writer is known already, else decoded."""
        decoded = self.decoded(value, source)
        return decoded if self.early is None else self.written(self.early, decoded)

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
            fast = self.transcoded(value)
            return fast if fast is not None else self.written(write, self.decoded(value, source))

        def settle(kept: Any) -> bytes:
            return kept if type(kept) is bytes else self.written(write, kept)
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
        wanted = {info.state_id for info in header.states if info.name in names}
        for key_group, begin, end in check_key_group_range(
                handle.offsets, handle.start, handle.stream.size, header.data_start, name):
            piece = KeyGroupData(key_group, data[begin:end], name, begin)
            for state_id, pairs in _pairs(layout, piece, header, old_prefix, wanted):
                if state_id in wanted and pairs:
                    yield (header.states[state_id].name, key_group,
                           f"{name} (key group {key_group})", pairs)


def _pairs(layout: KeyGroupLayout, piece: KeyGroupData, header: KeyedHeader, old_prefix: int,
           wanted: set[int]) -> list[tuple[int, Pairs]]:
    """A key group's pairs per state id, at least those of the ``wanted`` states. In a
    canonical savepoint's heap file they are framed by numpy
    (:func:`~statesource.flink.layouts.framing.canonical_sections`, which checks what the
    layout checks), up to the last wanted state's section: the states after it are not
    walked pair by pair here (the rewrite reads and checks them). Else, or where that
    framing declines, by the layout, which names a fault."""
    if type(layout) is CanonicalLayout and wanted:
        data = unframe(piece.data, piece.source, piece.base) if header.compressed else piece.data
        sections = canonical_sections(data, piece.key_group, old_prefix, len(header.states),
                                      wanted)
        if sections is not None:
            return [(s.state_id, list(zip(
                map(data.__getitem__, map(slice, (s.key_start + old_prefix).tolist(),
                                          s.key_end.tolist())),
                map(data.__getitem__, map(slice, s.value_start.tolist(),
                                          s.value_end.tolist())))))
                for s in sections if s.state_id in wanted]
    return layout.pairs(piece, header, old_prefix)


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
    fast = {name: (r.batch, r.collections) for name, r in recoders.items() if r.fast is not None}
    workers = worker_count(sum(h.stream.size for h in snapshot.keyed_handles(op)))
    for state, key_group, source, pairs, transcoded in in_workers(
            state_pairs(snapshot, op, set(recoders)), fast, workers):
        if state in refused:
            continue
        try:
            recoders[state].scan(key_group, pairs, source, transcoded)
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

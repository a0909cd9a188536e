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
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from statesource.errors import IncompatibleCheckpointError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.handles import OperatorSnapshot
from statesource.flink.layouts.canonical_writer import (
    section_body,
    section_columns,
    section_revalued,
)
from statesource.flink.operations.reencode_pairs import key_group_sizes, state_pairs
from statesource.flink.operations.reencode_workers import (
    RUNS_PER_WORKER,
    Run,
    in_workers,
    runs,
    worker_count,
)
from statesource.flink.operations.staged import StagedState
from statesource.flink.serializers.base import FlinkType
from statesource.flink.serializers.collections import ListType, MapType
from statesource.flink.serializers.encoding import encoder_of
from statesource.flink.serializers.kryo_columns import Values, batched
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
from statesource.flink.statefiles.keyed_header import StateInfo
from statesource.model import StateKind

LIST_DELIMITER = 0x2C
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


Recoded = tuple[int, bytes | list[tuple[bytes, Any]], int]
"""A key group of one state re-encoded: ``(key group, pairs, count)``, the pairs framed as
its section already (every value Flink 2.x's bytes, the source's key groups disjoint), else
``[(key bytes, value)]`` in the source's order, each value 2.x's bytes or :data:`Decoded`."""


@dataclass(eq=False)
class Kept:
    """One state's key groups as its scan left them (:data:`Recoded`); None once the budget
    ran out (the write reads the source again)."""

    groups: deque[Recoded] | None
    held: int = 0

    def take(self) -> deque[Recoded] | None:
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

    def __init__(self, info: StateInfo, where: str, budget: KeptValues,
                 max_parallelism: int | None = None,
                 declared: Mapping[str, tuple[str, ...]] | None = None) -> None:
        self.info = info
        self.max_parallelism = max_parallelism
        """Of the sections a key group's pairs are framed as once re-encoded (None: the
        source's key groups are not disjoint, and their pairs are kept as pairs)."""
        self.kind = info.kind
        self.reading = reading_type(info.value, where, declared)
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
        """The fast path of a chunk of values (``UUID`` s and POJOs column-wise)."""
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

    def scan(self, key_group: int, keys: Values, values: Values, source: str) -> None:
        """Read one key group's values (recording what a collection field holds), and keep
        them re-encoded for the write while the budget allows."""
        if self.kept.groups is None:  # nothing kept: what the fast path left is only checked
            for index in self.batch(values, None)[1].tolist():
                self.decoded(values.value(index), source)
            return
        pairs = self.recoded(key_group, keys, values, source)
        if isinstance(pairs, bytes):
            size = len(pairs) + PAIR_OVERHEAD
        else:
            size = sum(len(body) + PAIR_OVERHEAD + (len(value) if type(value) is bytes
                                                    else len(values.value(index))
                                                    * DECODED_FACTOR)
                       for index, (body, value) in enumerate(pairs))
        if self.budget.take(size):
            self.kept.groups.append((key_group, pairs, len(keys)))
            self.kept.held += size
        else:
            self.drop()

    def recoded(self, key_group: int, keys: Values, values: Values, source: str
                ) -> bytes | list[tuple[bytes, Any]]:
        """A key group's pairs re-encoded (by the fast path, else by the exact path): as
        their section where every value is 2.x's bytes and sections are framed at once,
        else as pairs."""
        max_parallelism = self.max_parallelism
        written, left = self.batch(values, None if max_parallelism is None else keys)
        if isinstance(written, bytes):  # every value taken column-wise, framed with its key
            return written
        if not len(left) and max_parallelism is not None:
            if keys.pair_starts is not None:  # the source's keys framed: kept as they are
                return section_revalued(keys.data, keys.pair_starts.tolist(),
                                        keys.ends.tolist(), written.listed())
            return section_columns(key_group, max_parallelism, keys.listed(),
                                   written.listed())
        exact = {index: self.exact(values.value(index), source) for index in left.tolist()}
        return [(body, exact.get(index, value)) for index, (body, value)
                in enumerate(zip(keys.listed(), written.listed()))]

    def adopt(self, groups: deque[Recoded] | None, held: int) -> None:
        """What a worker's scan of the next key groups kept (None: nothing, past its share
        of the budget), after what this one kept."""
        if self.kept.groups is None:
            return
        if groups is None or not self.budget.take(held):
            self.drop()
            return
        self.kept.groups.extend(groups)
        self.kept.held += held

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

    def finished(self) -> tuple[StateInfo, Callable[[Any], bytes]]:
        """Once every value was scanned: the meta info Flink 2.x writes, and the writer of
        a value of :meth:`recoded`'s pairs."""
        writing = writing_type(self.reading)
        write = encoder_of(self.part(writing)).write

        def settle(kept: Any) -> bytes:
            return kept if type(kept) is bytes else self.written(write, kept)
        info = dataclasses.replace(self.info, serializers={**self.info.serializers,
                                                           "VALUE_SERIALIZER": writing})
        return info, settle


@dataclass(frozen=True)
class ReencodedState(StagedState):
    """A state's pairs re-encoded from the source as the rewrite asks for them."""

    snapshot: FlinkSnapshot | None = None
    op: OperatorSnapshot | None = None
    recoder: StateRecoder | None = None
    settle: Callable[[Any], bytes] | None = None

    def _recoded(self) -> Iterator[Recoded]:
        """Each key group's pairs in the source's order, re-encoded: what the scan kept,
        else read and re-encoded again."""
        assert self.snapshot is not None and self.op is not None and self.recoder is not None
        recoder = self.recoder
        kept = recoder.kept.take()
        if kept is not None:
            while kept:
                yield kept.popleft()
            return
        for _, key_group, source, keys, values in state_pairs(self.snapshot, self.op,
                                                              {self.info.name}):
            yield key_group, recoder.recoded(key_group, keys, values, source), len(keys)

    def sections(self) -> Iterator[tuple[int, bytes, int]]:
        """Each key group's section, as soon as it is re-encoded where the source's files
        hold disjoint key groups (a canonical savepoint's do); else once all were read."""
        assert self.op is not None and self.settle is not None
        max_parallelism, settle = self.op.max_parallelism, self.settle
        groups: dict[int, list[tuple[bytes, bytes]]] = {}
        for key_group, pairs, count in self._recoded():
            if isinstance(pairs, bytes):
                yield key_group, pairs, count
            elif self.recoder is not None and self.recoder.max_parallelism is not None:
                yield key_group, section_body(key_group, max_parallelism, [
                    (body, settle(value)) for body, value in pairs]), count
            else:
                groups.setdefault(key_group, []).extend(
                    (body, settle(value)) for body, value in pairs)
        for key_group in sorted(groups):
            settled = groups.pop(key_group)
            yield key_group, section_body(key_group, max_parallelism, settled), len(settled)


def reencoded_states(snapshot: FlinkSnapshot, op: OperatorSnapshot, infos: list[StateInfo],
                     budget: KeptValues | None = None,
                     declared: Mapping[str, Mapping[str, tuple[str, ...]]] | None = None
                     ) -> tuple[list[ReencodedState], dict[str, str], dict[str, str]]:
    """The staged states of ``op``'s ``infos`` after a scan of every value; the states that
    cannot be re-encoded after all, each with why (a class met in its values); and what
    re-encoding does to each of the others. What the scan decoded is kept for the write
    within ``budget`` (None: nothing kept). ``declared``: by state, the element classes of
    its POJO collection fields that the user gave."""
    budget = budget or KeptValues(0)
    handles = sorted(snapshot.keyed_handles(op), key=lambda h: h.start)
    disjoint = all(a.end < b.start for a, b in zip(handles, handles[1:]))
    recoders = {info.name: StateRecoder(info, f"operator {op.label!r}, state {info.name!r}",
                                        budget, op.max_parallelism if disjoint else None,
                                        (declared or {}).get(info.name))
                for info in infos}
    refused: dict[str, str] = {}
    sizes = key_group_sizes(snapshot, op)
    workers = worker_count(sum(sizes))
    parts = runs(sizes, RUNS_PER_WORKER * workers)
    if len(parts) < 2:
        _scan(snapshot, op, recoders, refused, (0, len(sizes)))
    else:
        share = budget.left // len(parts)

        def scan_run(first: int, end: int) -> dict[str, Scanned]:
            budget.left = share  # a worker's: each its own share
            return _scanned(snapshot, op, recoders, (first, end))
        for part, scanned in zip(parts, in_workers(scan_run, parts, workers)):
            if scanned is None:  # the worker failed: scanned here, where a fault is named
                _scan(snapshot, op, recoders, refused, part)
            else:
                _merge(recoders, refused, scanned)
    staged = []
    for name, recoder in recoders.items():
        if name in refused:
            continue
        try:
            info, settle = recoder.finished()
        except IncompatibleCheckpointError as error:
            refused[name] = str(error)
            recoder.drop()
            continue
        staged.append(ReencodedState(info, "", (), replaces_info=True, snapshot=snapshot,
                                     op=op, recoder=recoder, settle=settle))
    return staged, refused, {name: described(r.reading) for name, r in recoders.items()
                             if name not in refused}


Scanned = tuple["str | None", "deque[Recoded] | None", int, list[dict[str, set[str]]]]
"""A state after a worker's scan of a run: why it was refused (None: it was not), what was
kept (None: nothing) and its size, and the classes of each POJO collection field met."""


def _scan(snapshot: FlinkSnapshot, op: OperatorSnapshot, recoders: dict[str, StateRecoder],
          refused: dict[str, str], run: Run) -> None:
    """Scan the key groups ``run``: a state refused is not read further."""
    for state, key_group, source, keys, values in state_pairs(snapshot, op, set(recoders),
                                                              run):
        if state in refused:
            continue
        try:
            recoders[state].scan(key_group, keys, values, source)
        except IncompatibleCheckpointError as error:
            refused[state] = str(error)
            recoders[state].drop()


def _scanned(snapshot: FlinkSnapshot, op: OperatorSnapshot, recoders: dict[str, StateRecoder],
             run: Run) -> dict[str, Scanned]:
    """A worker's scan of the key groups ``run``, by state (from nothing kept and no class
    met: a worker scans run after run)."""
    for recoder in recoders.values():
        recoder.kept = Kept(deque())
        for node in recoder.collections:
            for classes in node.classes.values():
                classes.clear()
    refused: dict[str, str] = {}
    _scan(snapshot, op, recoders, refused, run)
    return {name: (refused.get(name), recoder.kept.groups, recoder.kept.held,
                   [node.classes for node in recoder.collections])
            for name, recoder in recoders.items()}


def _merge(recoders: dict[str, StateRecoder], refused: dict[str, str],
           scanned: dict[str, Scanned]) -> None:
    """A worker's scan after the key groups before it (a state refused there stays so)."""
    for name, (refusal, groups, held, classes) in scanned.items():
        if name in refused:
            continue
        recoder = recoders[name]
        if refusal is not None:
            refused[name] = refusal
            recoder.drop()
            continue
        for node, found in zip(recoder.collections, classes):
            for role, met in found.items():
                node.classes[role] |= met
        recoder.adopt(groups, held)


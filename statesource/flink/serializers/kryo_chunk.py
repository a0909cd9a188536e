"""Many Kryo 2 values to Flink 2.x bytes at once, by numpy: the fast path's column part.

A POJO whose ``List`` or ``Map`` fields Flink 1.x gave to Kryo is, per value, a few dozen
small parts (a null flag, a string, a collection's header, each element's tag and bytes),
and :mod:`~statesource.flink.serializers.kryo_transcode` walks them one value at a time:
most of a migration's time where a state holds such POJOs (or Kryo ``UUID`` s, whose
varlongs become fixed longs). Here a chunk of values is walked in lockstep instead, each
part read for every value at once (:class:`Chunk`: a cursor per value into the chunk's
bytes), and each value's 2.x bytes written by numpy at the end, as slices of the chunk and
small written parts placed at offsets counted while reading.

What is taken here is a subset of what the per-value fast path takes, written as it writes
it: a ``UUID`` as Kryo 2 writes one; a POJO's fields of ASCII ``String`` s and fixed-size
primitives, and its collection fields of the classes that path knows, whose elements are
``String`` s in Kryo's ASCII form, ``Long`` s or ``Integer`` s (a map's keys ``String`` s,
none twice), at most :data:`MAX_ITEMS` of them. Every other value, and any value whose
parts do not end exactly at its end, is not taken: the per-value path's, which takes it,
or leaves it to the exact path, which names any fault.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from statesource.flink.serializers import kryo_classes as jdk
from statesource.flink.serializers.base import FlinkType
from statesource.flink.serializers.kryo_graph import KryoGraph
from statesource.flink.serializers.kryo_migration import (
    FIELD_CLASSES,
    Kryo2Collection,
    Kryo2Value,
)
from statesource.flink.serializers.kryo_transcode import heads, pojo_fields
from statesource.flink.serializers.pojo import PojoFlinkType
from statesource.flink.serializers.primitives import PrimitiveType

Rows = np.ndarray
"""Indexes of the values of a chunk a part reads (int64, ascending)."""
Part = Callable[["Chunk", Rows], None]
"""Reads a part of each of ``rows``' values at its cursor, writes its 2.x bytes."""
MAX_ITEMS = 64
"""A collection field of more elements is the per-value path's (each element is a round of
numpy calls for the whole chunk)."""
_PAD = 80
"""Zero bytes before a chunk's first value and after its last: every window read near a
cursor stays inside."""
_STRING_TAG = jdk.BASE_IDS[jdk.STRING] + 2
_LONG_TAG = jdk.BASE_IDS[jdk.LONG] + 2
_INTEGER_TAG = jdk.BASE_IDS[jdk.INTEGER] + 2
_UUID_TAG = jdk.BASE_IDS[jdk.UUID] + 2
_SHIFTS = (7 * np.arange(8)).astype(np.uint64)


class Chunk:
    """A chunk of values read in lockstep: a cursor per value, whether the value is still
    taken, and the 2.x bytes written so far, as pieces placed at each value's output
    length when written."""

    def __init__(self, data: bytes, starts: np.ndarray, ends: np.ndarray) -> None:
        count = len(starts)
        self.ends = ends + _PAD
        self.pos = starts + _PAD
        self.data = np.frombuffer(b"".join((bytes(_PAD), data, bytes(_PAD))), np.uint8)
        self.last = len(self.data) - 1
        self.taken = np.ones(count, bool)
        self.written = np.zeros(count, np.int64)
        self.copies: list[tuple[Rows, np.ndarray, np.ndarray, np.ndarray]] = []
        self.pieces: dict[int, list[tuple[Rows, np.ndarray, np.ndarray]]] = {}
        self.seen: list[tuple[set[str], str, Rows]] = []
        self._flagged: np.ndarray | None = None

    def byte(self, rows: Rows, ahead: int = 0) -> np.ndarray:
        """The byte ``ahead`` of each row's cursor (a zero past the chunk)."""
        return self.data[np.minimum(self.pos[rows] + ahead, self.last)]

    def window(self, rows: Rows, ahead: int, width: int) -> np.ndarray:
        """``width`` bytes from ``ahead`` of each row's cursor, a row each."""
        return self.window_at(self.pos[rows] + ahead, width)

    def window_at(self, start: np.ndarray, width: int) -> np.ndarray:
        return self.data[np.minimum(start[:, None] + np.arange(width), self.last)]

    def refuse(self, rows: Rows) -> None:
        self.taken[rows] = False

    def live(self, rows: Rows) -> Rows:
        return rows[self.taken[rows]]

    def write(self, rows: Rows, piece: np.ndarray | bytes, zeros: int = 0) -> None:
        """``zeros`` zero bytes, then the same ``bytes`` for every row or a row each of
        ``piece``, written next (zeros only counted: the output starts as zeros)."""
        if zeros:
            self.written[rows] += zeros
        if isinstance(piece, bytes):
            if not piece.strip(b"\x00"):
                self.written[rows] += len(piece)
                return
            piece = np.broadcast_to(np.frombuffer(piece, np.uint8), (len(rows), len(piece)))
        at = self.written[rows]
        self.written[rows] = at + piece.shape[1]
        self.pieces.setdefault(piece.shape[1], []).append((rows, at, piece))

    def overwrite(self, rows: Rows, back: int, piece: np.ndarray) -> None:
        """A byte each, ``back`` bytes before what the rows wrote last (after it is copied)."""
        self.pieces.setdefault(1, []).append((rows, self.written[rows] - back, piece[:, None]))

    def copy(self, rows: Rows, start: np.ndarray, length: np.ndarray) -> None:
        """The bytes ``start``, ``length`` of the chunk, written next."""
        at = self.written[rows]
        self.written[rows] = at + length
        self.copies.append((rows, at, start, length))

    def flagged_after(self, at: np.ndarray) -> np.ndarray:
        """The first byte of 0x80 or more at or after each of ``at`` (the chunk's size where
        there is none)."""
        if self._flagged is None:
            self._flagged = np.append(np.flatnonzero(self.data >= 0x80), len(self.data))
        return self._flagged[np.searchsorted(self._flagged, at)]

    def ascii(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Whether no byte in ``[start, end)`` is 0x80 or more."""
        return self.flagged_after(start) >= end

    def signature(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """The length and the first and last eight of the bytes ``[start, end)``, a row
        each: the same for the same bytes anywhere in the chunk (and for no other bytes of
        up to 16)."""
        length = end - start
        head = self.window_at(start, 8) * (np.arange(8) < length[:, None])
        tail = self.window_at(end - 8, 8) * (np.arange(8) >= 8 - length[:, None])
        return np.column_stack([length, head.view(np.int64)[:, 0], tail.view(np.int64)[:, 0]])

    def varints(self, rows: Rows, ahead: int, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """Kryo's unsigned varint of at most ``limit`` bytes ``ahead`` of each row's cursor
        (5: an int, 9: a long) and its length; rows where it is not as Kryo writes one
        (longer, not minimal, an int of more than 32 bits) are refused."""
        first = self.byte(rows, ahead)
        value, size = first.astype(np.uint64), np.ones(len(rows), np.int64)
        longer = np.flatnonzero(first >= 0x80)
        if len(longer):
            value[longer], size[longer] = self._long_varints(rows[longer], ahead, limit)
        return value, size

    def _long_varints(self, rows: Rows, ahead: int, limit: int
                      ) -> tuple[np.ndarray, np.ndarray]:
        raw = self.window(rows, ahead, 9).astype(np.uint64)
        more = raw[:, :8] >= 0x80
        size = np.where(more.all(axis=1), 9, np.argmin(more, axis=1) + 1)
        kept = np.arange(8) < np.minimum(size, 8)[:, None]
        value = (((raw[:, :8] & np.uint64(0x7F)) << _SHIFTS) * kept).sum(axis=1, dtype=np.uint64)
        value |= np.where(size == 9, raw[:, 8] << np.uint64(56), np.uint64(0))
        last = np.take_along_axis(raw, (size - 1)[:, None], 1)[:, 0]
        bad = (size > limit) | ((size > 1) & (last == 0))
        if limit == 5:
            bad |= value >> np.uint64(32) != 0
        self.refuse(rows[bad])
        return value, size

    def record(self, classes: set[str], java_class: str, rows: Rows) -> None:
        """``java_class`` was met in ``rows``' values: recorded if one of them is taken."""
        if len(rows):
            self.seen.append((classes, java_class, rows))

    def finished(self, heads: tuple[np.ndarray, np.ndarray] | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The 2.x bytes of the values taken, one after another, each value's size (0: not
        taken), and which are taken (the classes recorded are those of the values taken).
        Where every value is taken and ``heads`` are given (ranges of the chunk's bytes, a
        value each, each between its value and the one before), each value comes after its
        head and its size (a big-endian int): a canonical section, if the heads are its
        pairs' key lengths and keys."""
        taken = self.taken & (self.pos == self.ends)
        for classes, java_class, rows in self.seen:
            if taken[rows].any():
                classes.add(java_class)
        sizes = np.where(taken, self.written, 0)
        copies = self.copies
        if heads is not None and taken.all():
            head_sizes = heads[1] - heads[0]
            sizes = head_sizes + 4 + sizes
            everyone = np.arange(len(sizes))
            copies = [(everyone, -4 - head_sizes, heads[0] + _PAD, head_sizes), *copies]
            self.pieces.setdefault(4, []).append((everyone, np.full(len(sizes), -4), (
                self.written.astype(">i4").view(np.uint8).reshape(-1, 4))))
            offsets = np.cumsum(sizes) - self.written
        else:
            offsets = np.cumsum(sizes) - sizes
        out = np.zeros(int(sizes.sum()), np.uint8)
        every = bool(taken.all())
        if copies:
            rows, at, start, length = _kept(taken, every, *(
                np.concatenate(column) for column in zip(*copies)))
            _copied(out, offsets[rows] + at, self.data, start, length)
        for width, pieces in self.pieces.items():  # after the copies: an overwrite last
            rows, at, piece = _kept(taken, every, *(
                np.concatenate(column) for column in zip(*pieces)))
            where = offsets[rows] + at
            if width == 1:
                out[where] = piece[:, 0]
            else:
                out[where[:, None] + np.arange(width)] = piece
        return out, sizes, taken


def _kept(taken: np.ndarray, every: bool, rows: np.ndarray, *columns: np.ndarray
          ) -> tuple[np.ndarray, ...]:
    """``rows`` and their ``columns`` (a row each) where the row's value is taken."""
    if every:
        return (rows, *columns)
    keep = taken[rows]
    return (rows[keep], *(column[keep] for column in columns))


def _copied(out: np.ndarray, at: np.ndarray, data: np.ndarray, starts: np.ndarray,
            lengths: np.ndarray) -> None:
    """Copies the ranges ``[starts, starts + lengths)`` of ``data`` to ``at`` in ``out``,
    by an index of every byte (64 bits: a key group may hold 2 GiB or more)."""
    before = np.cumsum(lengths) - lengths
    step = np.arange(int(lengths.sum()))
    out[np.repeat(at - before, lengths) + step] = data[np.repeat(starts - before, lengths) + step]


def _advance(chunk: Chunk, rows: Rows, by: int | np.ndarray) -> None:
    chunk.pos[rows] += by


def _flink_string(chunk: Chunk, rows: Rows) -> None:
    """A String field (Flink's ``StringValue``) of ASCII text, its length minimal: its null
    flag and its bytes as they are (a null: the null flag)."""
    first = chunk.byte(rows).astype(np.int64)
    null = first == 0
    chunk.write(rows[null], b"\x01")
    _advance(chunk, rows[null], 1)
    rows, first = rows[~null], first[~null]
    second = chunk.byte(rows, 1).astype(np.int64)
    two = first >= 0x80
    chunk.refuse(rows[two & ((second == 0) | (second >= 0x80))])
    start = chunk.pos[rows] + 1 + two
    end = start + np.where(two, first & 0x7F | second << 7, first) - 1
    chunk.refuse(rows[(end > chunk.ends[rows]) | ~chunk.ascii(start, end)])
    chunk.write(rows, b"\x00")
    chunk.copy(rows, chunk.pos[rows], end - chunk.pos[rows])
    chunk.pos[rows] = end


def _fixed(width: int, check: Callable[[Chunk, Rows], np.ndarray] | None = None) -> Part:
    """A primitive field of ``width`` bytes: its null flag and its bytes as they are (rows
    that ``check`` finds bad are refused)."""
    def part(chunk: Chunk, rows: Rows) -> None:
        if check is not None:
            chunk.refuse(rows[check(chunk, rows)])
        chunk.refuse(rows[chunk.pos[rows] + width > chunk.ends[rows]])
        chunk.write(rows, b"\x00")
        chunk.copy(rows, chunk.pos[rows], np.full(len(rows), width))
        _advance(chunk, rows, width)
    return part


def _not_flag(chunk: Chunk, rows: Rows) -> np.ndarray:
    return chunk.byte(rows) > 1  # read as true, written as 1


def _not_finite(exponent: int) -> Callable[[Chunk, Rows], np.ndarray]:
    """A NaN or an infinity (written back as Java's canonical NaN: the per-value path's)."""
    def check(chunk: Chunk, rows: Rows) -> np.ndarray:
        return ((chunk.byte(rows) & 0x7F) == 0x7F) & (chunk.byte(rows, 1) >= exponent)
    return check


def _field(field: FlinkType) -> Part | None:
    if isinstance(field, Kryo2Collection):
        return _collection(field)
    if not isinstance(field, PrimitiveType):
        return None
    name = field.data_type().name
    if name == "string":
        return _flink_string
    if name == "boolean":
        return _fixed(1, _not_flag)
    if name in ("double", "float"):
        return _fixed(8 if name == "double" else 4, _not_finite(0xF0 if name == "double" else 0x80))
    width = {"long": 8, "int": 4, "short": 2, "byte": 1}.get(name)
    return None if width is None else _fixed(width)


def _collection(node: Kryo2Collection) -> Part:
    """A POJO's Kryo 2 ``List``, ``Set`` or ``Map`` field as 2.x's serializer writes it (a
    null: the null flag); its classes as they are recorded by the per-value path."""
    graph = KryoGraph(node.registry)
    known = [(np.frombuffer(head, np.uint8), sorted_)
             for head, sorted_ in heads(graph, FIELD_CLASSES[node.kind])]
    is_map = node.kind == "map"
    classes = node.classes

    def part(chunk: Chunk, rows: Rows) -> None:
        null = chunk.byte(rows) == 0
        chunk.write(rows[null], b"\x01")
        _advance(chunk, rows[null], 1)
        rows = rows[~null]
        length = np.zeros(len(rows), np.int64)
        sorted_ = np.zeros(len(rows), bool)
        left = np.arange(len(rows))
        for head, is_sorted in known:  # most rows are of the first class: one window each
            match = left[(chunk.window(rows[left], 0, len(head)) == head).all(axis=1)]
            length[match] = len(head)
            sorted_[match] = is_sorted
            left = left[length[left] == 0]
        chunk.refuse(rows[left])
        _advance(chunk, rows, length)
        chunk.refuse(rows[(chunk.byte(rows) != 1) | (sorted_ & (chunk.byte(rows, 1) != 0))])
        _advance(chunk, rows, 1 + sorted_)
        size, width = chunk.varints(rows, 0, 5)
        size = size.astype(np.int64)
        _advance(chunk, rows, width)
        chunk.refuse(rows[(size > MAX_ITEMS)
                          | ((2 if is_map else 1) * size > chunk.ends[rows] - chunk.pos[rows])])
        # not null, then 2.x's own flag (both 0) and the size
        chunk.write(rows, size.astype(">i4").view(np.uint8).reshape(-1, 4), zeros=2)
        keys: list[tuple[Rows, np.ndarray]] = []
        for item in range(int(size[chunk.taken[rows]].max(initial=0))):
            active = chunk.live(rows[size > item])
            if is_map:
                active = _text(chunk, active, classes["key"], keys)
                _element(chunk, active, classes["value"])
            else:
                _element(chunk, active, classes["element"])
        if keys:
            _refuse_repeated(chunk, keys)
    return part


def _element(chunk: Chunk, rows: Rows, classes: set[str]) -> None:
    """An element: a String in Kryo's ASCII form, a Long or an Integer (others refused)."""
    tag = chunk.byte(rows)
    rest = rows[tag != _STRING_TAG]
    _text(chunk, rows[tag == _STRING_TAG], classes)
    tag = chunk.byte(rest)
    chunk.refuse(rest[(tag != _LONG_TAG) & (tag != _INTEGER_TAG)])
    for java_class, match, limit, number in ((jdk.LONG, _LONG_TAG, 9, ">i8"),
                                             (jdk.INTEGER, _INTEGER_TAG, 5, ">i4")):
        numbers = rest[tag == match]
        raw, width = chunk.varints(numbers, 1, limit)
        chunk.write(numbers, _zigzag(raw).astype(number).view(np.uint8).reshape(
            len(numbers), limit - 1), zeros=1)  # the element's null flag, then its bytes
        _advance(chunk, numbers, 1 + width)
        chunk.record(classes, java_class, numbers)


def _text(chunk: Chunk, rows: Rows, classes: set[str],
          keys: list[tuple[Rows, np.ndarray]] | None = None) -> Rows:
    """A String of 2 to 63 characters in Kryo's ASCII form after its tag and marker, as
    2.x writes it: its null flag, its length + 1 and its characters, the last unflagged.
    Rows whose bytes are not such a string are refused; the others are returned."""
    ascii_form = ((chunk.byte(rows) == _STRING_TAG) & (chunk.byte(rows, 1) == 1)
                  & (chunk.byte(rows, 2) < 0x80))
    chunk.refuse(rows[~ascii_form])
    rows = rows[ascii_form]
    start = chunk.pos[rows] + 2
    end = chunk.flagged_after(start) + 1
    count = end - start
    chunk.refuse(rows[(count >= 64) | (end > chunk.ends[rows])])
    chunk.write(rows, np.minimum(count + 1, 0xFF).astype(np.uint8)[:, None], zeros=1)
    chunk.copy(rows, start, count)
    chunk.overwrite(rows, 1, chunk.data[np.minimum(end - 1, chunk.last)] & 0x7F)
    chunk.pos[rows] = end
    chunk.record(classes, jdk.STRING, rows)
    if keys is not None:
        keys.append((rows, chunk.signature(start, end)))
    return rows


def _refuse_repeated(chunk: Chunk, keys: list[tuple[Rows, np.ndarray]]) -> None:
    """Refuses the rows whose map may hold a key twice (a signature met twice: the per-value
    path decides)."""
    rows = np.concatenate([r for r, _ in keys])
    signatures = np.concatenate([s for _, s in keys])
    order = np.lexsort((*signatures.T, rows))
    rows, signatures = rows[order], signatures[order]
    twice = (rows[1:] == rows[:-1]) & (signatures[1:] == signatures[:-1]).all(axis=1)
    chunk.refuse(rows[1:][twice])


def _pojo(node: PojoFlinkType) -> Part | None:
    fields = pojo_fields(node, _field)
    if fields is None:
        return None

    def part(chunk: Chunk, rows: Rows) -> None:
        chunk.refuse(rows[chunk.byte(rows) != 2])  # not null, of the declared class
        chunk.write(rows, b"\x02")
        _advance(chunk, rows, 1)
        for read in fields:
            rows = chunk.live(rows)
            flag = chunk.byte(rows)
            chunk.refuse(rows[flag > 1])
            chunk.write(rows[flag == 1], b"\x01")
            _advance(chunk, rows, 1)
            read(chunk, rows[flag == 0])
    return part


def _uuid(chunk: Chunk, rows: Rows) -> None:
    """A Kryo ``UUID``: its tag (Flink registers it itself: the same in every registry)
    and marker, then Chill's two zigzag varlongs, which Kryo 5 writes as fixed longs."""
    chunk.refuse(rows[(chunk.byte(rows) != _UUID_TAG) | (chunk.byte(rows, 1) != 1)])
    written = np.zeros((len(rows), 18), np.uint8)
    written[:, 0], written[:, 1] = _UUID_TAG, 1
    _advance(chunk, rows, 2)
    for half in (slice(2, 10), slice(10, 18)):
        raw, width = chunk.varints(rows, 0, 9)
        written[:, half] = _zigzag(raw).astype("<i8").view(np.uint8).reshape(len(rows), 8)
        _advance(chunk, rows, width)
    chunk.write(rows, written)


def _zigzag(raw: np.ndarray) -> np.ndarray:
    return ((raw >> np.uint64(1)) ^ (np.uint64(0) - (raw & np.uint64(1)))).astype(np.int64)


Columns = Callable[[bytes, np.ndarray, np.ndarray, "tuple[np.ndarray, np.ndarray] | None"],
                  tuple[np.ndarray, np.ndarray, np.ndarray]]
"""The values at ``[starts, ends)`` of some bytes (each after its head, where heads are
given): what :meth:`Chunk.finished` gives."""


def chunk_reader(part_type: FlinkType, map_value: bool, list_elements: bool) -> Columns | None:
    """The column part of a state's values: a value state's ``UUID`` s, a value or map
    state's POJOs (a map state's value has a null flag first, kept); None where it has
    none (a list state, another class, a POJO with a field it does not read)."""
    if list_elements:
        return None
    read: Part | None = None
    if isinstance(part_type, PojoFlinkType):
        read = _pojo(part_type)
    elif isinstance(part_type, Kryo2Value) and not map_value:
        read = _uuid
    if read is None:
        return None
    whole = read

    def columns(data: bytes, starts: np.ndarray, ends: np.ndarray,
                heads: tuple[np.ndarray, np.ndarray] | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        chunk = Chunk(data, starts, ends)
        rows = np.arange(len(starts))
        if map_value:
            chunk.refuse(rows[chunk.pos == chunk.ends])
            chunk.copy(rows, chunk.pos.copy(), np.ones(len(rows), np.int64))
            _advance(chunk, rows, 1)
        whole(chunk, chunk.live(rows))
        return chunk.finished(heads)
    return columns

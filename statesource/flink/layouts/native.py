"""The native layout of heap checkpoints and native savepoints: per state, an entry count
and unframed ``(namespace, key, value)`` triples (see :mod:`keyed` for the bytes).

Decoded value by value by :mod:`keyed`, column-wise many key groups at once by
:mod:`native_columns` (one key group alone is not worth it), and converted pair by pair
into the pairs a canonical savepoint holds (:func:`native_pairs`). Nothing frames a
value here: a state whose values statesource cannot delimit (Kryo, but Flink 1.x's of JDK
classes: :mod:`~statesource.flink.serializers.kryo2_framing`) cannot be read, nor can the
states after it in each key group (:meth:`NativeLayout.blockers`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from collections.abc import Set as AbstractSet

import pyarrow as pa

from statesource.errors import IncompatibleCheckpointError, TypeMismatchError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.layouts.base import (
    ColumnsOf,
    DecodedSection,
    KeyGroupData,
    KeyGroupLayout,
    Pairs,
)
from statesource.flink.layouts.keyed import (
    KeyGroupState,
    decode_native,
    native_key_group_reader,
    unwalkable,
    variable_int_bytes,
)
from statesource.flink.layouts.native_columns import native_tables
from statesource.flink.layouts.regroup import Moved, Regrouper
from statesource.flink.serializers.base import FlinkType
from statesource.flink.serializers.collections import ListType, MapType
from statesource.flink.serializers.encoding import encode
from statesource.flink.serializers.kryo import OpaqueType
from statesource.flink.statefiles.keyed_header import KeyedHeader, StateInfo
from statesource.model import StateKind


class NativeLayout(KeyGroupLayout):
    """Heap checkpoints' and native savepoints' key groups."""

    name = "native"
    batch_bytes = 64 << 20
    """The more key groups :mod:`native_columns` decodes together, the fewer steps per entry
    they share."""

    def decode(self, piece: KeyGroupData, header: KeyedHeader, prefix_bytes: int,
               wanted: Collection[int] | None = None, stop_at: Collection[int] = ()
               ) -> dict[int, KeyGroupState]:
        return decode_native(piece.data, piece.source, piece.base, header, piece.key_group,
                             wanted, stop_at)

    def tables(self, pieces: Sequence[KeyGroupData], header: KeyedHeader, info: StateInfo,
               columns: ColumnsOf) -> list[pa.Table] | None:
        if len(pieces) < 2:
            return None
        return native_tables([columns(state) for state in header.states], info.state_id,
                             [piece.key_group for piece in pieces],
                             [piece.data for piece in pieces], header.compressed)

    def sections(self, piece: KeyGroupData, header: KeyedHeader, prefix_bytes: int,
                 columns: ColumnsOf) -> list[DecodedSection] | None:
        return None  # one key group alone is read faster value by value

    def pairs(self, piece: KeyGroupData, header: KeyedHeader, prefix_bytes: int
              ) -> list[tuple[int, Pairs]]:
        return native_pairs(piece.data, piece.source, piece.base, piece.key_group, header)

    def regroup(self, piece: KeyGroupData, header: KeyedHeader, regrouper: Regrouper,
                skipped: AbstractSet[int] = frozenset()) -> list[Moved] | None:
        return None

    def blockers(self, header: KeyedHeader) -> dict[str, str]:
        """Why each state with Kryo values cannot be read, by state name."""
        reasons = {}
        for info in header.states:
            classes = [c for t in info.serializers.values() for c in opaque_classes(t)]
            if classes:
                reasons[info.name] = (
                    f"its {', '.join(sorted(set(classes)))} values are Kryo bytes, not framed"
                    " in a native snapshot: it, and the states after it in each key group,"
                    " read only from a canonical savepoint")
        return reasons


NATIVE = NativeLayout()


def opaque_classes(flink_type: FlinkType) -> list[str]:
    """Java classes of the Kryo values anywhere in a type that native snapshots cannot skip
    (all but Flink 1.x's of JDK classes, :mod:`~statesource.flink.serializers.kryo2_framing`)."""
    return [t.java_class for t in flink_type.nested()
            if isinstance(t, OpaqueType) and not t.self_delimiting]


def native_pairs(raw: bytes, source: str, base: int, key_group: int, header: KeyedHeader
                 ) -> list[tuple[int, Pairs]]:
    """A native key group's entries as the pairs a canonical savepoint holds, per state id.

    A native key group is its id, then per state its id, a count and ``(namespace, key,
    value)`` entries in the state's serializers (timers: the timer elements). Each
    becomes the composite key a canonical savepoint writes (key, namespace, each with its
    length after it when both vary in size, then a map's user key) and the value: a list's
    elements joined by ``,``, a map entry's null flag and value, one pair per map entry.
    An empty list or map has no pair, as in a canonical savepoint.
    """
    r = native_key_group_reader(raw, source, base, key_group, header)
    sections = []
    while not r.at_end():
        at = r.pos
        state_id = r.i16()
        if not 0 <= state_id < len(header.states):
            raise r.error(f"unknown state id {state_id}", at)
        info = header.states[state_id]
        try:
            sections.append((state_id, _section_pairs(r, header, info)))
        except IncompatibleCheckpointError as error:
            raise unwalkable(info, error) from None
    return sections


def _null_value(value: FlinkType) -> bytes:
    """What follows the null flag of a map value in a canonical savepoint: the null, as the
    value's serializer writes one, as Flink writes it (a native snapshot has the flag alone).
    A serializer that writes no null (``Long``) keeps the flag alone: Flink cannot write such
    a canonical savepoint itself, but its restore reads a null value's flag and nothing
    after it (``HeapSavepointRestoreOperation``; RocksDB's map state alike)."""
    try:
        return encode(value, None)
    except TypeMismatchError:
        return b""


def _section_pairs(r: BinaryReader, header: KeyedHeader, info: StateInfo) -> Pairs:
    data = r.data
    count = r.count("entry count")
    pairs: Pairs = []
    if info.is_timer:
        read_timer = info.timer.read
        for _ in range(count):
            start = r.pos
            read_timer(r)
            pairs.append((bytes(data[start:r.pos]), b""))
        return pairs
    read_namespace, read_key = info.namespace.read, header.key.read
    ambiguous = header.key.length < 0 and info.namespace.length < 0
    kind, value = info.kind, info.value
    for _ in range(count):
        start = r.pos
        read_namespace(r)
        namespace = bytes(data[start:r.pos])
        start = r.pos
        read_key(r)
        key = bytes(data[start:r.pos])
        if ambiguous:
            body = key + variable_int_bytes(len(key)) + namespace + variable_int_bytes(
                len(namespace))
        else:
            body = key + namespace
        if kind is StateKind.LIST:
            assert isinstance(value, ListType)
            read_element = value.element.read
            elements = []
            for _ in range(r.count("list length")):
                start = r.pos
                read_element(r)
                elements.append(bytes(data[start:r.pos]))
            if elements:
                pairs.append((body, b",".join(elements)))
        elif kind is StateKind.MAP:
            assert isinstance(value, MapType)
            read_user_key, read_user_value = value.key.read, value.value.read
            null_bytes: bytes | None = None  # what Flink writes after a null, made once a map
            for _ in range(r.count("map size")):
                start = r.pos
                read_user_key(r)
                user_key = bytes(data[start:r.pos])
                start = r.pos
                if r.boolean():
                    if null_bytes is None:
                        null_bytes = _null_value(value.value)
                    null = null_bytes
                else:
                    read_user_value(r)
                    null = b""
                pairs.append((body + user_key, bytes(data[start:r.pos]) + null))
        else:
            start = r.pos
            value.read(r)
            pairs.append((body, bytes(data[start:r.pos])))
    return pairs

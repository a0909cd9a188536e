"""Writing Flink operator-state files: the counterpart of :mod:`operator_state`.

An operator state file (``OperatorBackendSerializationProxy``, version 6) is
the version, the compression flag, a short count and the meta infos of the
list states (split and union: backend type ``OPERATOR``, the distribution mode
as their one option, the element serializer as ``VALUE_SERIALIZER``), a short
count and the meta infos of the broadcast states (backend type ``BROADCAST``,
mode ``BROADCAST``, ``KEY_SERIALIZER`` and ``VALUE_SERIALIZER``), then the
states' data: a list state's elements one after the other, each at an offset
``_metadata`` records; a broadcast state's int size and (key, value) pairs at
one offset. A state without elements has no offset (a broadcast state always
has one).

With compression, a Snappy stream identifier follows the header and each
offset starts the chunks of one flushed piece (Flink flushes its compressing stream
whenever it records an offset): :func:`~statesource.flink.binary.snappy.frame_chunks`.

:func:`write_operator_file` gives the file's bytes and the handle's per-state
offsets (:class:`~statesource.flink.handles.OperatorStateOffsets`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from statesource.errors import InvalidArgumentError, TypeMismatchError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.snappy import STREAM_IDENTIFIER, frame_chunks
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.handles import OperatorStateOffsets
from statesource.flink.serializers.base import FlinkType, flink_type
from statesource.flink.serializers.encoding import inside, value_writer
from statesource.flink.serializers.mapping import PojoClass, serializer_for_schema
from statesource.flink.statefiles.keyed_header import BROADCAST, OPERATOR, StateInfo
from statesource.flink.statefiles.keyed_header_writer import write_state_info
from statesource.flink.statefiles.operator_state import (
    piece_bounds,
    read_operator_header,
    read_piece,
)
from statesource.model import DistributionMode
from statesource.schema import ValueSchema

SUPPORTED_VERSIONS = (6,)
DISTRIBUTION_MODE = "OPERATOR_STATE_DISTRIBUTION_MODE"
VALUE_SERIALIZER = "VALUE_SERIALIZER"
KEY_SERIALIZER = "KEY_SERIALIZER"
MODE_NAMES = {DistributionMode.SPLIT_DISTRIBUTE: "SPLIT_DISTRIBUTE",
              DistributionMode.UNION: "UNION", DistributionMode.BROADCAST: "BROADCAST"}
_MAX_STATES = (1 << 15) - 1
_COMPRESSED_FLAG = 4
"""Where the header's compression flag is: after its int version."""


def mode_of(info: StateInfo) -> DistributionMode:
    """The distribution mode an operator state's meta info records."""
    text = info.options.get(DISTRIBUTION_MODE, "")
    for mode, name in MODE_NAMES.items():
        if name == text:
            return mode
    raise InvalidArgumentError(
        f"operator state {info.name!r} has distribution mode {text or 'none'!r}; Flink's are"
        f" {', '.join(MODE_NAMES.values())}")


def list_state_info(name: str, mode: DistributionMode, element: FlinkType) -> StateInfo:
    """The meta info of a split or union list state of elements of ``element``."""
    if mode is DistributionMode.BROADCAST:
        raise InvalidArgumentError(f"state {name!r}: a broadcast state is not a list state")
    return StateInfo(0, name, OPERATOR, {DISTRIBUTION_MODE: MODE_NAMES[mode]},
                     {VALUE_SERIALIZER: element})


def broadcast_state_info(name: str, key: FlinkType, value: FlinkType) -> StateInfo:
    """The meta info of a broadcast state (Flink writes the value serializer first)."""
    options = {DISTRIBUTION_MODE: MODE_NAMES[DistributionMode.BROADCAST]}
    return StateInfo(0, name, BROADCAST, options, {VALUE_SERIALIZER: value, KEY_SERIALIZER: key})


def operator_state_info(name: str, mode: DistributionMode, schemas: Mapping[str, ValueSchema],
                        pojos: Mapping[str, PojoClass] | None = None,
                        flink_major: int = 2, timestamp_class: str | None = None) -> StateInfo:
    """The meta info of an operator state of statesource's value schemas (by role: ``element``,
    or ``user_key`` and ``user_value``), its serializers derived by
    :func:`~statesource.flink.serializers.mapping.serializer_for_schema` for ``flink_major``
    (timestamps of ``timestamp_class``)."""
    def derived(role: str) -> FlinkType:
        if role not in schemas:
            raise InvalidArgumentError(
                f"operator state {name!r} has no {role} schema; its roles: {sorted(schemas)}")
        try:
            return flink_type(serializer_for_schema(schemas[role], pojos,
                                                    flink_major=flink_major,
                                                    timestamp_class=timestamp_class))
        except TypeMismatchError as error:
            raise TypeMismatchError(f"operator state {name!r}, {role}: {error}") from None

    if mode is DistributionMode.BROADCAST:
        return broadcast_state_info(name, derived("user_key"), derived("user_value"))
    return list_state_info(name, mode, derived("element"))


def write_operator_header(list_states: Sequence[StateInfo], broadcast_states: Sequence[StateInfo],
                          compressed: bool = False, version: int = SUPPORTED_VERSIONS[-1]
                          ) -> bytes:
    """The header of an operator state file; its data follows it."""
    if version not in SUPPORTED_VERSIONS:
        raise InvalidArgumentError(
            f"operator state file version {version} cannot be written; statesource writes"
            f" version {', '.join(map(str, SUPPORTED_VERSIONS))} (Flink 2.x)")
    w = BinaryWriter()
    w.i32(version)
    w.boolean(compressed)
    for infos, backend_type in ((list_states, OPERATOR), (broadcast_states, BROADCAST)):
        if len(infos) > _MAX_STATES:
            raise InvalidArgumentError(
                f"{len(infos)} states do not fit in an operator state file (at most"
                f" {_MAX_STATES} of a kind)")
        w.i16(len(infos))
        for info in infos:
            if info.backend_type != backend_type:
                raise InvalidArgumentError(
                    f"operator state {info.name!r} has backend type {info.backend_type}, not"
                    f" {backend_type}, where the header lists it")
            write_state_info(w, info)
    return w.getvalue()


def encode_elements(info: StateInfo, elements: Iterable[Any]) -> list[bytes]:
    """Each element of a list state, serialized by its element serializer."""
    write = value_writer(info.serializers[VALUE_SERIALIZER])
    encoded = []
    for index, element in enumerate(elements):
        w = BinaryWriter()
        try:
            write(w, element)
        except TypeMismatchError as error:
            raise inside(f"operator state {info.name!r}, element {index}", error) from None
        encoded.append(w.getvalue())
    return encoded


def encode_broadcast(info: StateInfo, entries: Mapping[Any, Any] | Iterable[tuple[Any, Any]]
                     ) -> bytes:
    """A broadcast state's data: its int size, then each key and value."""
    pairs = list(entries.items() if isinstance(entries, Mapping) else entries)
    write_key = value_writer(info.serializers[KEY_SERIALIZER])
    write_value = value_writer(info.serializers[VALUE_SERIALIZER])
    w = BinaryWriter()
    w.i32(len(pairs))
    for key, value in pairs:
        try:
            write_key(w, key)
            write_value(w, value)
        except TypeMismatchError as error:
            raise inside(f"broadcast state {info.name!r}, key {key!r}", error) from None
    return w.getvalue()


@dataclass(frozen=True)
class StatePieces:
    """One state's data in a file: the bytes at each of its offsets, in order."""

    name: str
    mode: DistributionMode
    pieces: tuple[bytes, ...]


def assemble_operator_file(header: bytes, states: Sequence[StatePieces], compressed: bool = False
                           ) -> tuple[bytes, tuple[OperatorStateOffsets, ...]]:
    """The file: ``header``, (with compression, the Snappy stream identifier,) then each state's
    pieces as given (framed already when compressed); and each state's offsets."""
    out = bytearray(header)
    if compressed:
        out += STREAM_IDENTIFIER
    offsets = []
    for state in states:
        at = []
        for piece in state.pieces:
            at.append(len(out))
            out += piece
        offsets.append(OperatorStateOffsets(state.name, state.mode, tuple(at)))
    return bytes(out), tuple(offsets)


def write_operator_file(list_states: Sequence[tuple[StateInfo, Iterable[Any]]],
                        broadcast_states: Sequence[tuple[StateInfo, Mapping[Any, Any]]],
                        compressed: bool = False
                        ) -> tuple[bytes, tuple[OperatorStateOffsets, ...]]:
    """One subtask's operator state file from its list states' elements and its broadcast
    states' entries (values in the shapes the reader gives), with each state's offsets."""
    names = [info.name for info, _ in list_states] + [info.name for info, _ in broadcast_states]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InvalidArgumentError(f"operator states {duplicates} are named twice")
    frame = frame_chunks if compressed else bytes
    header = write_operator_header([info for info, _ in list_states],
                                   [info for info, _ in broadcast_states], compressed)
    pieces = [StatePieces(info.name, mode_of(info),
                          tuple(frame(e) for e in encode_elements(info, elements)))
              for info, elements in list_states]
    pieces += [StatePieces(info.name, DistributionMode.BROADCAST,
                           (frame(encode_broadcast(info, entries)),))
               for info, entries in broadcast_states]
    return assemble_operator_file(header, pieces, compressed)


def recompressed_operator_file(data: bytes, states: tuple[OperatorStateOffsets, ...],
                               compress: bool, source: str
                               ) -> tuple[bytes, tuple[OperatorStateOffsets, ...]] | None:
    """An operator-state file (``data``, whose states ``_metadata`` lists as ``states``) with
    its pieces written again Snappy-compressed or not (``compress``), the header's flag set
    to say so; and the states' new offsets. None where nothing changes: the file already is
    so, or is of version 5 (Flink 1.15 and older), which has no flag. A compressed piece is
    decompressed, its checksums verified, before it is written again."""
    header = read_operator_header(BinaryReader(data, source))
    if header.version not in SUPPORTED_VERSIONS or header.compressed == compress:
        return None
    bounds = piece_bounds(states, header.data_start, len(data), source)
    frame = frame_chunks if compress else bytes
    pieces = []
    for state in states:
        plain = [read_piece(data, source, offset, bounds, header.compressed)
                 for offset in state.offsets]
        pieces.append(StatePieces(state.name, state.mode,
                                  tuple(frame(r.data[r.pos:r.end]) for r in plain)))
    flagged = bytearray(data[:header.data_start])
    flagged[_COMPRESSED_FLAG] = compress
    return assemble_operator_file(bytes(flagged), pieces, compress)

"""Flink operator state: list, union and broadcast states of each subtask.

An operator state file (``OperatorBackendSerializationProxy``, version 6)
starts with the version, the compression flag and the meta infos of its list
states and then of its broadcast states; ``_metadata`` gives each state's
offsets in the file. A list state's offsets point at its elements (each
written with the state's serializer); a broadcast state's single offset at an
int size and its (key, value) pairs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from statesource.errors import (
    CorruptCheckpointError,
    IncompatibleCheckpointError,
    UnsupportedFormatVersionError,
)
from statesource.flink.binary import BinaryReader
from statesource.flink.header import StateInfo, read_state_info
from statesource.flink.metadata import OperatorSnapshot
from statesource.flink.snappy import unframe
from statesource.format.source import OperatorStateShares
from statesource.model import DistributionMode
from statesource.schema import ValueSchema

SUPPORTED_VERSIONS = (6,)


@dataclass(frozen=True)
class OperatorHeader:
    """The header of an operator state file: its list states' and broadcast states' infos."""

    version: int
    compressed: bool
    list_states: tuple[StateInfo, ...]
    broadcast_states: tuple[StateInfo, ...]
    data_start: int


def read_operator_header(r: BinaryReader) -> OperatorHeader:
    """Parse the header at the reader's position (the start of the file)."""
    version = r.i32()
    if version not in SUPPORTED_VERSIONS:
        raise UnsupportedFormatVersionError(
            f"{r.source}: operator state file version {version}; statesource reads version"
            f" {', '.join(map(str, SUPPORTED_VERSIONS))} (Flink 2.x)")
    compressed = r.boolean()
    kinds = []
    for _ in range(2):  # list states, then broadcast states
        kinds.append(tuple(read_state_info(r, index) for index in range(r.i16())))
    return OperatorHeader(version, compressed, kinds[0], kinds[1], r.pos)


def _header(r: BinaryReader) -> tuple[dict[str, StateInfo], bool]:
    header = read_operator_header(r)
    infos = {info.name: info for info in header.list_states + header.broadcast_states}
    return infos, header.compressed


def _schemas(info: StateInfo, mode: DistributionMode) -> dict[str, ValueSchema]:
    if mode is DistributionMode.BROADCAST:
        return {"user_key": ValueSchema.parse(info.serializers["KEY_SERIALIZER"].avro()),
                "user_value": ValueSchema.parse(
                    ["null", info.serializers["VALUE_SERIALIZER"].avro()])}
    return {"element": ValueSchema.parse(info.value.avro())}


def read_operator_states(snapshot: Any, op: OperatorSnapshot) -> dict[str, OperatorStateShares]:
    """Every operator state of ``op`` (a :class:`FlinkSnapshot`'s), by name."""
    shares: dict[str, OperatorStateShares] = {}
    for subtask in op.subtasks:
        for handle in subtask.operator:
            source = snapshot.describe(handle.stream)
            data = snapshot.read_bytes(handle.stream, 0, handle.stream.size)
            infos, compressed = _header(BinaryReader(data, source))
            bounds = sorted({o for state in handle.states for o in state.offsets} | {len(data)})
            for state in handle.states:
                info = infos.get(state.name)
                if info is None:
                    raise IncompatibleCheckpointError(
                        f"{source}: _metadata names operator state {state.name!r}, which the"
                        " file's header does not declare")
                share = shares.get(state.name)
                if share is None:
                    empty: type = dict if state.mode is DistributionMode.BROADCAST else list
                    share = OperatorStateShares(state.name, state.mode, _schemas(info, state.mode),
                                           [empty() for _ in range(op.parallelism)])
                    shares[state.name] = share
                share.size_bytes += handle.stream.size
                pieces = [read_piece(data, source, offset, bounds, compressed)
                          for offset in state.offsets]
                value = decode_pieces(pieces, info, state.mode)
                share.values[subtask.index] = value
                share.rows += len(value)
    return shares


def read_piece(data: bytes, source: str, offset: int, bounds: list[int],
           compressed: bool) -> BinaryReader:
    """A reader of the bytes at ``offset`` (up to the next offset; decompressed if need be)."""
    if not 0 <= offset < len(data):
        raise CorruptCheckpointError(f"{source}: operator state offset {offset} lies outside"
                                     f" the file's {len(data)} bytes")
    if not compressed:
        return BinaryReader(data, source, pos=offset)
    end = next(b for b in bounds if b > offset)
    return BinaryReader(unframe(data[offset:end], source, offset),
                        f"{source} (decompressed from byte offset {offset})", offset)


def decode_pieces(pieces: list[BinaryReader], info: StateInfo, mode: DistributionMode) -> Any:
    if mode is DistributionMode.BROADCAST:
        entries: dict[Any, Any] = {}
        read_key = info.serializers["KEY_SERIALIZER"].read
        read_value = info.serializers["VALUE_SERIALIZER"].read
        for r in pieces:
            for _ in range(r.count("broadcast state size")):
                key = read_key(r)
                entries[key] = read_value(r)
        return entries
    element = info.value
    return [element.to_value(element.read(r)) for r in pieces]

"""Flink operator state: list, union and broadcast states of each subtask.

An operator state file (``OperatorBackendSerializationProxy``, version 6)
starts with the version, the compression flag and the meta infos of its list
states and then of its broadcast states; ``_metadata`` gives each state's
offsets in the file. A list state's offsets point at its elements (each
written with the state's serializer); a broadcast state's single offset at an
int size and its (key, value) pairs.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from statesource.errors import (
    CorruptCheckpointError,
    IncompatibleCheckpointError,
    UnsupportedFormatVersionError,
)
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.snappy import unframe
from statesource.flink.handles import OperatorHandle, OperatorSnapshot, OperatorStateOffsets
from statesource.flink.statefiles.keyed_header import StateInfo, read_state_info, unique_states
from statesource.format.source import OperatorStateShares
from statesource.model import DistributionMode
from statesource.schema import ValueSchema

SUPPORTED_VERSIONS = (5, 6)
"""Version 5 (Flink 1.15 and older) has no compression flag: its files are never compressed."""


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
            f"{r.source}: operator state file version {version}; statesource reads versions"
            f" {' and '.join(map(str, SUPPORTED_VERSIONS))}")
    compressed = r.boolean() if version >= 6 else False
    kinds = []
    for _ in range(2):  # list states, then broadcast states
        kinds.append(tuple(read_state_info(r, index) for index in range(r.i16())))
    unique_states(kinds[0] + kinds[1], r)  # _metadata names them apart by name alone
    return OperatorHeader(version, compressed, kinds[0], kinds[1], r.pos)


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
            for state, info, value in decoded_states(data, source, handle):
                share = shares.get(state.name)
                if share is None:
                    empty: type = dict if state.mode is DistributionMode.BROADCAST else list
                    share = OperatorStateShares(state.name, state.mode, _schemas(info, state.mode),
                                           [empty() for _ in range(op.parallelism)])
                    shares[state.name] = share
                elif share.mode is not state.mode:
                    raise CorruptCheckpointError(
                        f"{source}: _metadata gives operator state {state.name!r} the"
                        f" distribution mode {state.mode.name}, another subtask's"
                        f" {share.mode.name}")
                share.size_bytes += handle.stream.size
                share.values[subtask.index] = value
                share.rows += len(value)
    return shares


def decoded_states(data: bytes, source: str, handle: OperatorHandle
                   ) -> Iterator[tuple[OperatorStateOffsets, StateInfo, Any]]:
    """Each state ``handle`` names in its file (``data``), with its meta info and its
    decoded value: every offset inside the file, every piece read whole, or an error. What
    a new savepoint copies of an operator-state file is checked this way first."""
    header = read_operator_header(BinaryReader(data, source))
    bounds = piece_bounds(handle.states, header.data_start, len(data), source)
    for state in handle.states:
        info = _info(header, state, source)
        pieces = [read_piece(data, source, offset, bounds, header.compressed)
                  for offset in state.offsets]
        yield state, info, decode_pieces(pieces, info, state.mode)


def _info(header: OperatorHeader, state: OperatorStateOffsets, source: str) -> StateInfo:
    """The header's info of the state ``_metadata`` names: a broadcast state's among the
    broadcast states, a list state's (split or union) among the list states."""
    broadcast = state.mode is DistributionMode.BROADCAST
    for info in header.broadcast_states if broadcast else header.list_states:
        if info.name == state.name:
            return info
    other = header.list_states if broadcast else header.broadcast_states
    if any(info.name == state.name for info in other):
        raise CorruptCheckpointError(
            f"{source}: _metadata gives operator state {state.name!r} the distribution mode"
            f" {state.mode.name}, but the file's header declares it a"
            f" {'list' if broadcast else 'broadcast'} state")
    raise IncompatibleCheckpointError(
        f"{source}: _metadata names operator state {state.name!r}, which the file's header"
        " does not declare")


def piece_bounds(states: tuple[OperatorStateOffsets, ...], data_start: int, size: int,
                 source: str) -> list[int]:
    """Where the pieces (elements, broadcast maps) ``_metadata`` lists in a file begin, and
    the file's end: each piece lies after the header, at its own offset, and is decoded up
    to the next one, exactly (Flink writes them one after the other)."""
    offsets = [offset for state in states for offset in state.offsets]
    for offset in offsets:
        if not data_start <= offset < size:
            raise CorruptCheckpointError(
                f"{source}: operator state offset {offset} lies outside the file's data"
                f" (bytes {data_start}..{size}, after its header)")
    if len(set(offsets)) != len(offsets):
        raise CorruptCheckpointError(
            f"{source}: _metadata lists operator state offset"
            f" {next(o for o in offsets if offsets.count(o) > 1)} more than once")
    return sorted(offsets) + [size]


def read_piece(data: bytes, source: str, offset: int, bounds: list[int],
               compressed: bool) -> BinaryReader:
    """A reader of the bytes at ``offset`` up to the next of ``bounds`` (decompressed if
    need be), which the piece must take exactly."""
    end = bounds[bisect.bisect_right(bounds, offset)]
    if not compressed:
        return BinaryReader(data, source, pos=offset, end=end)
    return BinaryReader(unframe(data[offset:end], source, offset),
                        f"{source} (decompressed from byte offset {offset})", offset)


def decode_pieces(pieces: list[BinaryReader], info: StateInfo, mode: DistributionMode) -> Any:
    if mode is DistributionMode.BROADCAST:
        entries: dict[Any, Any] = {}
        read_key = info.serializers["KEY_SERIALIZER"].read
        read_value = info.serializers["VALUE_SERIALIZER"].read
        written: set[bytes] = set()
        for r in pieces:
            for _ in range(r.count("broadcast state size")):
                at = r.pos
                key = read_key(r)
                key_bytes = bytes(r.data[at:r.pos])
                if key_bytes in written:  # Flink writes a map: each key once
                    raise r.error(f"broadcast state {info.name!r} holds key {key!r} twice", at)
                written.add(key_bytes)
                if key in entries:  # Java tells them apart (0.0 and -0.0, two byte[])
                    raise IncompatibleCheckpointError(
                        f"{r.source}: broadcast state {info.name!r} holds keys that Java tells"
                        f" apart but that read as one value here ({key!r}), at byte offset"
                        f" {r.base + at}")
                entries[key] = read_value(r)
            _check_taken(r, info)
        return entries
    element = info.value
    values = []
    for r in pieces:
        values.append(element.to_value(element.read(r)))
        _check_taken(r, info)
    return values


def _check_taken(r: BinaryReader, info: StateInfo) -> None:
    if not r.at_end():
        raise r.error(f"operator state {info.name!r}: {r.remaining()} bytes after a piece,"
                      " before where the next piece _metadata lists (or the file) begins")

"""Flink operator state: list, union and broadcast states of each subtask.

An operator state file (``OperatorBackendSerializationProxy``, version 6)
starts with the version, the compression flag and the meta infos of its list
states and then of its broadcast states; ``_metadata`` gives each state's
offsets in the file. A list state's offsets point at its elements (each
written with the state's serializer); a broadcast state's single offset at an
int size and its (key, value) pairs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from statesource.errors import IncompatibleCheckpointError, UnsupportedFormatVersionError
from statesource.flink.binary import BinaryReader
from statesource.flink.header import StateInfo, read_state_info
from statesource.flink.metadata import OperatorSnapshot
from statesource.model import DistributionMode
from statesource.schema import ValueSchema

SUPPORTED_VERSIONS = (6,)


@dataclass
class OperatorShares:
    """One operator state across the subtasks: each subtask's list (or dict for broadcast)."""

    name: str
    mode: DistributionMode
    schemas: dict[str, ValueSchema]
    values: list[Any]
    size_bytes: int = 0
    rows: int = field(default=0)


def _header(r: BinaryReader) -> dict[str, StateInfo]:
    version = r.i32()
    if version not in SUPPORTED_VERSIONS:
        raise UnsupportedFormatVersionError(
            f"{r.source}: operator state file version {version}; statesource reads version"
            f" {', '.join(map(str, SUPPORTED_VERSIONS))} (Flink 2.x)")
    if r.boolean():
        raise IncompatibleCheckpointError(
            f"{r.source}: compressed operator state is not supported yet")
    infos = {}
    for _ in range(2):  # list states, then broadcast states
        for index in range(r.i16()):
            info = read_state_info(r, index)
            infos[info.name] = info
    return infos


def _schemas(info: StateInfo, mode: DistributionMode) -> dict[str, ValueSchema]:
    if mode is DistributionMode.BROADCAST:
        return {"user_key": ValueSchema.parse(info.serializers["KEY_SERIALIZER"].avro()),
                "user_value": ValueSchema.parse(
                    ["null", info.serializers["VALUE_SERIALIZER"].avro()])}
    return {"element": ValueSchema.parse(info.value.avro())}


def read_operator_states(snapshot: Any, op: OperatorSnapshot) -> dict[str, OperatorShares]:
    """Every operator state of ``op`` (a :class:`FlinkSnapshot`'s), by name."""
    shares: dict[str, OperatorShares] = {}
    for subtask in op.subtasks:
        for handle in subtask.operator:
            source = snapshot.describe(handle.stream)
            data = snapshot.read_bytes(handle.stream, 0, handle.stream.size)
            infos = _header(BinaryReader(data, source))
            for state in handle.states:
                info = infos.get(state.name)
                if info is None:
                    raise IncompatibleCheckpointError(
                        f"{source}: _metadata names operator state {state.name!r}, which the"
                        " file's header does not declare")
                share = shares.get(state.name)
                if share is None:
                    empty: type = dict if state.mode is DistributionMode.BROADCAST else list
                    share = OperatorShares(state.name, state.mode, _schemas(info, state.mode),
                                           [empty() for _ in range(op.parallelism)])
                    shares[state.name] = share
                share.size_bytes += handle.stream.size
                value = _decode(data, source, info, state.mode, state.offsets)
                share.values[subtask.index] = value
                share.rows += len(value)
    return shares


def _decode(data: bytes, source: str, info: StateInfo, mode: DistributionMode,
            offsets: tuple[int, ...]) -> Any:
    if mode is DistributionMode.BROADCAST:
        entries: dict[Any, Any] = {}
        read_key = info.serializers["KEY_SERIALIZER"].read
        read_value = info.serializers["VALUE_SERIALIZER"].read
        for offset in offsets:
            r = BinaryReader(data, source, pos=offset)
            for _ in range(r.count("broadcast state size")):
                key = read_key(r)
                entries[key] = read_value(r)
        return entries
    element = info.value
    return [element.to_value(element.read(BinaryReader(data, source, pos=offset)))
            for offset in offsets]

"""Writing the header of a Flink keyed-state file: the counterpart of :mod:`keyed_header`.

``KeyedBackendSerializationProxy`` version 6: the version, the compression
flag, the key serializer's snapshot, the number of states (a short) and per
state its meta info (name, backend state type, options, serializer snapshots
by role). Each snapshot is written behind the proxy version Flink puts before
it, with the bytes it was read with (:attr:`FlinkType.snapshot`): a snapshot
is Flink's own serialization of its serializer classes, so bytes from a real
Flink file are the ones a restoring Flink is sure to accept.
"""

from __future__ import annotations

from statesource.errors import InvalidArgumentError
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.serializers.base import SNAPSHOT_PROXY_VERSION, FlinkType
from statesource.flink.statefiles.keyed_header import SUPPORTED_VERSIONS, KeyedHeader, StateInfo

_MAX_STATES = (1 << 15) - 1


def write_keyed_header(header: KeyedHeader) -> bytes:
    """The header bytes of a keyed-state file; the key groups follow them."""
    if header.version not in SUPPORTED_VERSIONS:
        raise InvalidArgumentError(
            f"keyed state file version {header.version} cannot be written; statesource writes"
            f" version {', '.join(map(str, SUPPORTED_VERSIONS))} (Flink 2.x)")
    if len(header.states) > _MAX_STATES:
        raise InvalidArgumentError(
            f"{len(header.states)} states do not fit in a keyed state file (at most"
            f" {_MAX_STATES})")
    w = BinaryWriter()
    w.i32(header.version)
    w.boolean(header.compressed)
    write_proxied_snapshot(w, header.key, "the key serializer")
    w.i16(len(header.states))
    for position, info in enumerate(header.states):
        if info.state_id != position:
            raise InvalidArgumentError(
                f"state {info.name!r} has id {info.state_id} but is at position {position}:"
                " a state's id is its position in the header")
        write_state_info(w, info)
    return w.getvalue()


def write_state_info(w: BinaryWriter, info: StateInfo) -> None:
    """One ``StateMetaInfoSnapshot``: name, backend type, options, serializers by role."""
    w.utf(info.name)
    w.i32(info.backend_type)
    w.i32(len(info.options))
    for option, value in info.options.items():
        w.utf(option)
        w.utf(value)
    w.i32(len(info.serializers))
    for role, serializer in info.serializers.items():
        w.utf(role)
        write_proxied_snapshot(w, serializer, f"the {role} of state {info.name!r}")


def write_proxied_snapshot(w: BinaryWriter, serializer: FlinkType, what: str) -> None:
    """A serializer snapshot behind the proxy's version, as ``read_proxied_snapshot`` reads it."""
    if not serializer.snapshot:
        raise InvalidArgumentError(
            f"{what} ({serializer.serializer}) has no snapshot bytes to write: only types read"
            " from a Flink file carry them")
    w.i32(SNAPSHOT_PROXY_VERSION)
    w.raw(serializer.snapshot)

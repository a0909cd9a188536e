"""Heap timers of a RocksDB checkpoint: raw keyed state in Flink's legacy timer format.

A RocksDB job whose timers live on the heap (``state.backend.rocksdb.timer-service.factory:
HEAP``) does not write them into RocksDB: at a checkpoint (not a savepoint) the operator
writes them as raw keyed state, one section per key group at the offsets ``_metadata``
records (``InternalTimeServiceManagerImpl.snapshotToRawKeyedState``). Each section is an
``InternalTimerServiceSerializationProxy``: Flink's versioned identifier, version 2, the
number of timer services, then per service its name, the key's and the namespace's
serializer snapshots (``writeVersionedSnapshot``), the event-time timers and the
processing-time timers, each a count then per timer its key, namespace and plain
timestamp.

A canonical savepoint of the same job holds these timers as priority-queue states
(``_timer_state/processing_<service>``, ``_timer_state/event_<service>``) after the
RocksDB states, each timer a key of ``TimerSerializer`` bytes (sign-flipped timestamp,
key, namespace) and an empty value. :func:`read_legacy_timers` gives them so, for
:mod:`.rocksdb_canonical` to put into the canonical file it makes of the database: every
reader and every rewrite then takes them as it takes RocksDB timers.

Raw keyed state that does not start with the identifier is the operator's own (an
operator that writes raw keyed state itself has no timers there): not read, as before.
"""

from __future__ import annotations

import struct
from collections.abc import Container
from dataclasses import dataclass, field

from statesource.errors import CorruptCheckpointError, UnsupportedFormatVersionError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.handles import KeyedHandle
from statesource.flink.serializers.base import (
    FlinkSerializer,
    FlinkType,
    read_snapshot,
    write_composite,
)
from statesource.flink.serializers.timer import TimerSerializer, flip_sign_bit
from statesource.flink.statefiles.keyed_header import PRIORITY_QUEUE, StateInfo
from statesource.flink.statefiles.state_meta_writer import timer_state_name

VERSIONED_IDENTIFIER = b"\xf1\xcd\x85\x9f"
"""What ``PostVersionedIOReadableWritable`` writes before its version."""
SUPPORTED_VERSION = 2
"""``InternalTimerServiceSerializationProxy``'s version since Flink 1.7, to 2.x."""
_TIMESTAMP = struct.Struct(">q")
_MIN_TIMER = 8
"""Bytes of the smallest timer (a timestamp; a key and namespace may take none)."""


def holds_timers(head: bytes) -> bool:
    """Whether raw keyed state whose first key group starts with ``head`` is Flink's
    timers (the versioned identifier), not the operator's own bytes."""
    return head[:len(VERSIONED_IDENTIFIER)] == VERSIONED_IDENTIFIER


@dataclass
class LegacyTimers:
    """The timer states of one raw keyed handle and their timers per key group.

    ``states``: the meta info of each timer queue, as a canonical header lists them (ids
    given by :meth:`numbered`); ``timers``: per key group, per state name, the timers'
    ``TimerSerializer`` bytes, sorted (as RocksDB would hold them)."""

    states: tuple[StateInfo, ...] = ()
    timers: dict[int, dict[str, list[bytes]]] = field(default_factory=dict)

    def numbered(self, first_id: int) -> tuple[StateInfo, ...]:
        """The states with ids from ``first_id`` on (after the RocksDB states)."""
        return tuple(StateInfo(first_id + i, s.name, s.backend_type, s.options, s.serializers)
                     for i, s in enumerate(self.states))


def read_legacy_timers(handle: KeyedHandle, data: bytes, source: str,
                       wanted: Container[int]) -> LegacyTimers:
    """The timers of raw keyed handle ``handle`` (its file's bytes ``data``, called
    ``source``), those of key groups in ``wanted`` (every key group's section is checked).

    A section that is not Flink's timer format, ends early or leaves bytes unread, or key
    groups naming other services or serializers, are refused with
    :class:`~statesource.errors.CorruptCheckpointError` naming ``source`` and the offset.
    """
    found = LegacyTimers()
    signature: tuple[tuple[str, bytes, bytes], ...] | None = None
    bounds = _sections(handle, len(data), source)
    for index, (start, end) in enumerate(bounds):
        key_group = handle.start + index
        r = BinaryReader(data, f"{source} (raw keyed state, key group {key_group})",
                         pos=start, end=end)
        services = _section(r, key_group in wanted)
        if not r.at_end():
            raise r.error(f"{r.remaining()} bytes after the timers of the key group")
        names = tuple((name, key.snapshot, namespace.snapshot)
                      for name, key, namespace, _ in services)
        if signature is None:
            signature = names
            found.states = tuple(_timer_info(name, key, namespace, event)
                                 for name, key, namespace, _ in services
                                 for event in (False, True))
        elif names != signature:
            raise r.error("timer services or their serializers differ from those of key group"
                          f" {handle.start}", start)
        if key_group in wanted:
            held = {}
            for name, _, _, (event, processing) in services:
                held[timer_state_name(name, False)] = sorted(processing)
                held[timer_state_name(name, True)] = sorted(event)
            found.timers[key_group] = held
    return found


def _sections(handle: KeyedHandle, size: int, source: str) -> list[tuple[int, int]]:
    """Each key group's (start, end) in the file: every key group has a section, in order."""
    ends = [*handle.offsets[1:], size]
    for index, (start, end) in enumerate(zip(handle.offsets, ends)):
        if not 0 <= start <= end <= size:
            raise CorruptCheckpointError(
                f"{source}: raw keyed state of key group {handle.start + index} at byte offset"
                f" {start}, which is not before the next one's ({end}) within the file's"
                f" {size} bytes")
    return list(zip(handle.offsets, ends))


Service = tuple[str, FlinkType, FlinkType, tuple[list[bytes], list[bytes]]]


def _section(r: BinaryReader, keep: bool) -> list[Service]:
    """One key group's timer services: name, key and namespace types, and (if ``keep``) the
    event-time and processing-time timers as ``TimerSerializer`` bytes."""
    at = r.pos
    if r.take(len(VERSIONED_IDENTIFIER)) != VERSIONED_IDENTIFIER:
        raise r.error("not Flink's timer format (no versioned identifier): the operator's own"
                      " raw keyed state", at)
    version = r.i32()
    if version != SUPPORTED_VERSION:
        raise UnsupportedFormatVersionError(
            f"{r.source}: timer service format version {version} at byte offset"
            f" {r.base + at + 4}; statesource reads version {SUPPORTED_VERSION} (Flink 1.7"
            " and later)")
    services: list[Service] = []
    for _ in range(r.count("number of timer services")):
        name = r.utf()
        if any(name == s[0] for s in services):
            raise r.error(f"timer service {name!r} twice")
        key, namespace = read_snapshot(r), read_snapshot(r)
        event = _timers(r, key, namespace, keep)
        services.append((name, key, namespace, (event, _timers(r, key, namespace, keep))))
    return services


def _timers(r: BinaryReader, key: FlinkType, namespace: FlinkType, keep: bool) -> list[bytes]:
    """A count of timers, then each as key, namespace, timestamp: kept as ``TimerSerializer``
    writes them (sign-flipped timestamp first)."""
    count = r.count("number of timers", r.remaining() // _MIN_TIMER)
    found: list[bytes] = []
    data, pack = r.data, _TIMESTAMP.pack
    for _ in range(count):
        start = r.pos
        key.read(r)
        namespace.read(r)
        middle = r.pos
        timestamp = r.i64()
        if keep:
            found.append(pack(flip_sign_bit(timestamp)) + bytes(data[start:middle]))
    if keep and len(set(found)) != len(found):
        raise r.error("the same timer twice in a timer queue")
    return found


class _Written(FlinkSerializer):
    """A serializer snapshot as a Flink file holds it (bytes to write back as they are)."""

    def __init__(self, snapshot: bytes) -> None:
        self.snapshot = snapshot

    def write(self, w: BinaryWriter) -> None:
        w.raw(self.snapshot)


def _timer_info(service: str, key: FlinkType, namespace: FlinkType, event: bool) -> StateInfo:
    """A timer queue's meta info as Flink's canonical savepoint of the job lists it: a
    priority-queue state of ``TimerSerializer`` nesting the snapshots the raw state has."""
    w = BinaryWriter()
    write_composite(w, TimerSerializer.snapshot_class, 2,
                    [_Written(key.snapshot), _Written(namespace.snapshot)])
    data = w.getvalue()
    timers = read_snapshot(BinaryReader(data, f"the timer serializer of {service!r}"))
    return StateInfo(0, timer_state_name(service, event), PRIORITY_QUEUE, {},
                     {"VALUE_SERIALIZER": timers})


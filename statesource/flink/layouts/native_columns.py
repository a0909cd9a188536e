"""Native key groups decoded column-wise, many key groups at once.

Nothing frames the entries of a native key group (see :mod:`keyed`): where one ends is known
only once its namespace, key and value are read, so one key group's entries must be read one
after another. Key groups, though, are independent of each other. Here each key group is a
lane, and each step reads the next entry of every lane at once with the column decoders'
``skip`` (:mod:`~statesource.flink.serializers.columns`), noting where every part of the
wanted state starts. The walk done, each part is decoded at all its positions in one call,
as a canonical key group's are (:mod:`columnar`).

A scan thus costs one numpy step per entry of the longest lane, shared by all
lanes: it pays when many key groups are read together (a Spark partition, a
whole state), not for one. As in :mod:`columnar`, whatever the column decoders
do not take (a fault, text other than ASCII, a state without column decoders
in the way) declines the whole batch (:func:`native_tables` answers None), and
the per-value decoder reads it key group by key group, or names the fault.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa

from statesource.errors import CorruptCheckpointError
from statesource.flink.binary.snappy import unframe
from statesource.flink.layouts.columnar import StateColumns, check_grouped, identity
from statesource.flink.serializers.columns import (
    NotColumnar,
    Positions,
    be_ints,
    check,
    decode_some,
    fixed_end,
)
from statesource.model import StateKind

_INT = np.dtype(np.int32)

MIN_LANES = 16
"""How many key groups of the largest one's size a batch must hold (by bytes) for a step
shared by all of them to pay (each step costs some 50 numpy calls; value by value, an
entry costs about as much as 10 of them)."""


def native_tables(states: Sequence[StateColumns | None], wanted: int,
                  key_groups: Sequence[int], data: Sequence[bytes], compressed: bool
                  ) -> list[pa.Table] | None:
    """The rows of state ``wanted`` in each native key group, one table per key group
    (``data[i]``: the bytes of key group ``key_groups[i]``, its leading id included), in the
    schema of ``states[wanted]``; None where the column decoders decline the batch.

    ``states`` holds every state's column decoder by state id (None: it has none). Key
    groups of very unequal sizes are declined too: the steps follow the largest, and
    with fewer than :data:`MIN_LANES` of its size to share them, value by value is faster.
    """
    sizes = [len(raw) for raw in data]
    if not sizes or sum(sizes) < MIN_LANES * max(sizes):
        return None
    try:
        buf, start, end = _joined(key_groups, data, compressed)
        walk = _Walk(states, wanted, buf, end)
        walk.run(start)
        return walk.tables(np.asarray(key_groups, dtype=np.int32))
    except NotColumnar:
        return None


def _joined(key_groups: Sequence[int], data: Sequence[bytes], compressed: bool
            ) -> tuple[np.ndarray, Positions, Positions]:
    """Every key group's state sections (decompressed) in one buffer, and where each lies."""
    bodies: list[bytes | memoryview] = []
    for key_group, raw in zip(key_groups, data):
        check(len(raw) >= 4 and int.from_bytes(raw[:4], "big", signed=True) == key_group)
        body: bytes | memoryview = memoryview(raw)[4:]
        if compressed:
            try:
                body = unframe(body, "", 4)
            except CorruptCheckpointError:
                raise NotColumnar from None
        bodies.append(body)
    lengths = np.array([len(body) for body in bodies], dtype=np.int64)
    end = np.cumsum(lengths)
    start = end - lengths
    return np.frombuffer(b"".join(bodies), np.uint8), start, end


class _Parts:
    """Positions noted during the walk, one array per step, joined at the end."""

    def __init__(self, *names: str) -> None:
        self.steps: dict[str, list[np.ndarray]] = {name: [] for name in names}

    def note(self, **parts: np.ndarray) -> None:
        for name, positions in parts.items():
            self.steps[name].append(positions)

    def joined(self, name: str) -> np.ndarray:
        steps = self.steps[name]
        return np.concatenate(steps) if steps else np.empty(0, dtype=np.int64)


class _Walk:
    """The lanes' sections walked in step, noting where the wanted state's parts start."""

    def __init__(self, states: Sequence[StateColumns | None], wanted: int, buf: np.ndarray,
                 limit: Positions) -> None:
        self.states = states
        self.wanted = wanted
        self.buf = buf
        self.limit = limit
        self.entries = _Parts("lane", "start", "key", "value")
        self.items = _Parts("owner", "start", "flag")
        self.entry_count = 0

    def run(self, start: Positions) -> None:
        """Walk every lane's sections until the wanted state's has been read, or the end."""
        pos = start.copy()
        active = np.flatnonzero(pos < self.limit)
        while len(active):
            at, limit = pos[active], self.limit[active]
            head = fixed_end(at, 6, limit)
            state_ids = be_ints(self.buf, at, np.dtype(np.int16)).astype(np.int64)
            counts = be_ints(self.buf, at + 2, _INT).astype(np.int64)
            check((state_ids >= 0) & (state_ids < len(self.states)))
            check((counts >= 0) & (counts <= limit - head))
            for state_id in np.unique(state_ids).tolist():
                chosen = state_ids == state_id
                columns = self.states[state_id]
                if columns is None:
                    raise NotColumnar
                pos[active[chosen]] = self._section(columns, active[chosen], head[chosen],
                                                    counts[chosen], state_id == self.wanted)
            active = active[state_ids != self.wanted]
            active = active[pos[active] < self.limit[active]]

    def _section(self, columns: StateColumns, lanes: np.ndarray, pos: Positions,
                 counts: np.ndarray, keep: bool) -> Positions:
        """The ends of one state's sections in ``lanes``, their entries read a step each."""
        limits = self.limit[lanes]
        return _rounds(pos, counts, lambda live, at: self._entry(columns, lanes[live], at,
                                                                 limits[live], keep))

    def _entry(self, columns: StateColumns, lanes: np.ndarray, pos: Positions,
               limit: Positions, keep: bool) -> Positions:
        """The ends of one entry in each lane: (namespace, key, value), or a timer."""
        buf = self.buf
        if columns.kind is None:  # a timer: timestamp, key, namespace
            key_at = value_at = fixed_end(pos, 8, limit)
            end = columns.namespace.skip(buf, columns.key.skip(buf, key_at, limit), limit)
        else:
            key_at = columns.namespace.skip(buf, pos, limit)
            value_at = columns.key.skip(buf, key_at, limit)
            owners = np.arange(self.entry_count, self.entry_count + len(pos)) if keep else None
            end = self._value(columns, value_at, limit, owners)
        if keep:
            self.entries.note(lane=lanes, start=pos, key=key_at, value=value_at)
            self.entry_count += len(pos)
        return end

    def _value(self, columns: StateColumns, pos: Positions, limit: Positions,
               owners: np.ndarray | None) -> Positions:
        """The ends of the values at ``pos``: lists and maps are a count, then their items,
        read a round each (an item of every list or map that has one); where the values are
        kept, their entries are ``owners``, and where each item starts is noted."""
        value = columns.value
        assert value is not None
        if columns.kind is not StateKind.LIST and columns.kind is not StateKind.MAP:
            return value.skip(self.buf, pos, limit)
        items_at = fixed_end(pos, 4, limit)
        counts = be_ints(self.buf, pos, _INT).astype(np.int64)
        check((counts >= 0) & (counts <= limit - items_at))

        def item(live: np.ndarray, at: Positions) -> Positions:
            if columns.kind is StateKind.LIST:
                end = value.skip(self.buf, at, limit[live])
                flags = at
            else:
                end, flags = self._pair(columns, at, limit[live])
            if owners is not None:
                self.items.note(owner=owners[live], start=at, flag=flags)
            return end

        return _rounds(items_at, counts, item)

    def _pair(self, columns: StateColumns, pos: Positions, limit: Positions
              ) -> tuple[Positions, Positions]:
        """The ends of map entries at ``pos`` (user key, null flag, the value unless null),
        and where their flags are."""
        assert columns.user_key is not None and columns.value is not None
        flags = columns.user_key.skip(self.buf, pos, limit)
        ends = fixed_end(flags, 1, limit)
        flag = self.buf[flags]
        check(flag <= 1)  # as Flink writes it: other bytes read the same, differ in bytes
        present = flag == 0
        check(present.all() or not columns.ttl)  # Flink never writes a null with TTL
        ends[present] = columns.value.skip(self.buf, ends[present], limit[present])
        return ends, flags

    def tables(self, key_groups: np.ndarray) -> list[pa.Table]:
        """The wanted state's rows, one table per lane."""
        columns = self.states[self.wanted]
        assert columns is not None
        buf = self.buf
        lanes = self.entries.joined("lane")
        order = np.argsort(lanes, kind="stable")  # noted step by step: lane by lane now
        lanes = lanes[order]
        start, key_at, value_at = (self.entries.joined(part)[order]
                                   for part in ("start", "key", "value"))
        limit = self.limit[lanes]
        if columns.kind is None:
            table, _ = columns.timers(key_groups[lanes], buf, start, limit)
            return _split(table, lanes, len(key_groups))
        namespaces, _ = columns.namespace.decode(buf, start, key_at)
        keys, _ = columns.key.decode(buf, key_at, value_at)
        assert columns.value is not None
        if columns.kind is not StateKind.LIST and columns.kind is not StateKind.MAP:
            values, _ = columns.value.decode(buf, value_at, limit)
            table = columns.assemble(key_groups[lanes], keys, namespaces, [values])
            return _split(table, lanes, len(key_groups))
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        owners = rank[self.items.joined("owner")]
        item_order = np.argsort(owners, kind="stable")
        owners = owners[item_order]
        item_at = self.items.joined("start")[item_order]
        item_lanes = lanes[owners]
        limit = self.limit[item_lanes]
        keys, namespaces = keys.take(owners), namespaces.take(owners)
        if columns.kind is StateKind.LIST:
            parts = [columns.value.decode(buf, item_at, limit)[0]]
        else:
            assert columns.user_key is not None
            flags = self.items.joined("flag")[item_order]
            user_keys, _ = columns.user_key.decode(buf, item_at, flags)
            check_grouped(pa.array(owners), identity(user_keys, buf, item_at, flags - item_at))
            values, _ = decode_some(columns.value, buf, flags + 1, limit, buf[flags] == 0)
            parts = [user_keys, values]
        table = columns.assemble(key_groups[item_lanes], keys, namespaces, parts)
        return _split(table, item_lanes, len(key_groups))


def _rounds(pos: Positions, counts: np.ndarray,
            read: Callable[[np.ndarray, Positions], Positions]) -> Positions:
    """The ends of sequences of ``counts[i]`` items from ``pos[i]``, read a round at a time:
    ``read(live, at)`` reads the next item of the live sequences (their indexes) at ``at``,
    and answers where those items end."""
    pos = pos.copy()
    live = np.arange(len(pos))
    item = 0
    while True:
        live = live[counts[live] > item]
        if not len(live):
            return pos
        pos[live] = read(live, pos[live])
        item += 1


def _split(table: pa.Table, lanes: np.ndarray, count: int) -> list[pa.Table]:
    """One table per lane, of a table whose rows are in lane order (``lanes``: each row's)."""
    ends = np.cumsum(np.bincount(lanes, minlength=count)).tolist()
    return [table.slice(begin, end - begin) for begin, end in zip([0, *ends], ends)]

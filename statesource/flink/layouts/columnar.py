"""A canonical key group's state as an Arrow table, decoded column-wise.

The fast path of :class:`~statesource.flink.reader.FlinkCheckpoint`: the framing is walked
once (:mod:`framing`), then each part of the composite keys (key, namespace, user key, timer
timestamp) and of the values (value, list elements, map values, TTL timestamps) is decoded
for every pair of the state at once (:mod:`~statesource.flink.serializers.columns` and each
family's column decoder), straight into the columns of the format's data schema (of
:func:`~statesource.format.columns.timer_schema` for timers).

:func:`state_decoder` answers None for a state with a serializer the column
decoders lack; :meth:`StateColumns.table` answers None for a key group whose
bytes they cannot take (text other than ASCII, a null POJO, a map whose
entries are not grouped, anything corrupt). Either way the per-value decoder
(:mod:`keyed`) reads it instead: the same rows, in the same order, or the
same error.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from statesource.errors import IncompatibleCheckpointError
from statesource.flink.layouts.framing import Section
from statesource.flink.serializers.base import FlinkType
from statesource.flink.serializers.collections import ListType, MapType
from statesource.flink.serializers.columns import (
    Decoder,
    NotColumnar,
    Positions,
    be_ints,
    check,
    decode_some,
    decoder_for,
    fixed_end,
    ranges_array,
)
from statesource.flink.serializers.nullable import NullableType
from statesource.flink.serializers.pojo import PojoFlinkType
from statesource.flink.serializers.primitives import Void
from statesource.flink.serializers.rows import RowFlinkType
from statesource.flink.serializers.ttl import TtlType
from statesource.flink.serializers.tuples import TupleFlinkType
from statesource.flink.statefiles.keyed_header import KeyedHeader, StateInfo
from statesource.format.columns import TTL_ARROW_TYPE
from statesource.model import StateKind
from statesource.types import (
    BYTE,
    BYTES,
    CHAR,
    INT,
    LONG,
    SHORT,
    STRING,
    TIMEWINDOW,
    VOID,
)

LIST_DELIMITER = ord(",")
_BYTE_EXACT = (STRING, LONG, INT, SHORT, BYTE, CHAR, BYTES, VOID, TIMEWINDOW)


def _byte_exact(flink_type: FlinkType) -> bool:
    """Whether values are equal exactly when their serialized bytes are, so that a map's
    entries and user keys can be told apart by their bytes (not so floating point: 0.0 and
    -0.0 differ in bytes, not in Python; nor booleans: any byte but 0 is true)."""
    if isinstance(flink_type, (TupleFlinkType, RowFlinkType)):
        return all(_byte_exact(f) for f in flink_type.fields)
    if isinstance(flink_type, PojoFlinkType):
        return all(_byte_exact(f) for _, f in flink_type.fields)
    if isinstance(flink_type, NullableType):  # a null's padding may hold any bytes
        return flink_type.padding == 0 and _byte_exact(flink_type.inner)
    try:
        return flink_type.data_type() in _BYTE_EXACT
    except IncompatibleCheckpointError:
        return False


class StateColumns:
    """Decodes one keyed or timer state's sections into tables of ``schema``."""

    def __init__(self, info: StateInfo, schema: pa.Schema, key: Decoder, namespace: Decoder,
                 value: Decoder | None, user_key: Decoder | None, ttl: bool, ambiguous: bool,
                 prefix_bytes: int) -> None:
        self.info = info
        self.schema = schema
        self.key = key
        self.namespace = namespace
        self.value = value
        self.user_key = user_key
        self.ttl = ttl
        self.ambiguous = ambiguous
        self.prefix_bytes = prefix_bytes
        self.kind = None if info.is_timer else info.kind

    def table(self, buf: np.ndarray, key_group: int, section: Section) -> pa.Table | None:
        """The section's rows (None: for the per-value decoder to read)."""
        try:
            return self._table(buf, key_group, section)
        except NotColumnar:
            return None

    def _table(self, buf: np.ndarray, key_group: int, s: Section) -> pa.Table:
        pos = s.key_start + self.prefix_bytes
        if self.kind is None:
            return self._timers(buf, key_group, s, pos)
        keys, pos = self._part(self.key, buf, pos, s.key_end)
        namespaces, pos = self._part(self.namespace, buf, pos, s.key_end)
        if self.kind is StateKind.MAP:
            return self._map(buf, key_group, s, pos, keys, namespaces)
        check(pos == s.key_end)
        assert self.value is not None
        if self.kind is StateKind.LIST:
            values, owners = self._list(buf, s)
            keys, namespaces = keys.take(owners), namespaces.take(owners)
        else:
            values, end = self.value.decode(buf, s.value_start, s.value_end)
            check(end == s.value_end)
        return self._assemble(key_group, keys, namespaces, [values])

    def _part(self, decoder: Decoder, buf: np.ndarray, pos: Positions, limit: Positions
              ) -> tuple[pa.Array, Positions]:
        """The key or the namespace, and, where both vary in size, the length after it."""
        values, end = decoder.decode(buf, pos, limit)
        if self.ambiguous:  # the length, low byte first, while any is left
            length = end - pos
            width = 1 + (length >= 1 << 8) + (length >= 1 << 16) + (length >= 1 << 24)
            check(end + width <= limit)
            for index in range(int(width.max(initial=0))):
                written = width > index
                check(buf[end[written] + index] == (length[written] >> 8 * index) & 0xFF)
            end = end + width
        return values, end

    def _timers(self, buf: np.ndarray, key_group: int, s: Section, pos: Positions
                ) -> pa.Table:
        check(s.value_end == s.value_start)
        table, end = self.timers(np.full(len(s), key_group, dtype=np.int32), buf, pos,
                                 s.key_end)
        check(end == s.key_end)
        return table

    def timers(self, key_groups: np.ndarray, buf: np.ndarray, pos: Positions,
               limit: Positions) -> tuple[pa.Table, Positions]:
        """The timers at ``pos`` (sign-flipped timestamp, key, namespace), and their ends."""
        check(pos + 8 <= limit)
        flipped = be_ints(buf, pos, np.dtype(np.uint64)) ^ np.uint64(1 << 63)
        keys, pos = self.key.decode(buf, pos + 8, limit)
        namespaces, pos = self.namespace.decode(buf, pos, limit)
        return pa.Table.from_arrays(
            [pa.array(key_groups), keys, namespaces, pa.array(flipped.view(np.int64))],
            schema=self.schema), pos

    def _list(self, buf: np.ndarray, s: Section) -> tuple[pa.Array, np.ndarray]:
        """Every element of every list, list by list, and the pair each belongs to.

        Elements are joined by ``,``: each round reads the next element of every
        list that has one.
        """
        assert self.value is not None
        rounds: list[pa.Array] = []
        owners: list[np.ndarray] = []
        active = np.arange(len(s))
        pos = s.value_start.copy()
        while len(active):
            limit = s.value_end[active]
            values, end = self.value.decode(buf, pos, limit)
            rounds.append(values)
            owners.append(active)
            more = end < limit
            check(buf[end[more]] == LIST_DELIMITER)
            active, pos = active[more], end[more] + 1
        owner = np.concatenate(owners)
        order = np.argsort(owner, kind="stable")
        flat = pa.concat_arrays(rounds) if len(rounds) > 1 else rounds[0]
        if len(rounds) > 1:
            flat = flat.take(order)
            owner = owner[order]
        return flat, owner

    def _map(self, buf: np.ndarray, key_group: int, s: Section, pos: Positions,
             keys: pa.Array, namespaces: pa.Array) -> pa.Table:
        """One row per pair; the per-value decoder gathers a key's pairs into one map, which
        keeps them as they are only when each key's pairs are together and no user key
        repeats (else it reads the key group)."""
        assert self.user_key is not None and self.value is not None
        entry_end = pos
        user_keys, pos = self.user_key.decode(buf, pos, s.key_end)
        check(pos == s.key_end)
        check(s.value_start < s.value_end)
        # After a null's flag Flink still writes the null: skipped, as the per-value decoder does.
        present = buf[s.value_start] == 0
        check(present.all() or not self.ttl)
        values, end = decode_some(self.value, buf, s.value_start + 1, s.value_end, present)
        check(end[present] == s.value_end[present])
        body = s.key_start + self.prefix_bytes
        entries = identity(keys if isinstance(self.namespace, Void) else None, buf, body,
                            entry_end - body)
        check_grouped(entries, identity(user_keys, buf, entry_end, s.key_end - entry_end))
        return self._assemble(key_group, keys, namespaces, [user_keys, values])

    def _assemble(self, key_group: int, keys: pa.Array, namespaces: pa.Array,
                  values: list[pa.Array]) -> pa.Table:
        return self.assemble(np.full(len(keys), key_group, dtype=np.int32), keys, namespaces,
                             values)

    def assemble(self, key_groups: np.ndarray, keys: pa.Array, namespaces: pa.Array,
                 values: list[pa.Array]) -> pa.Table:
        """The table of rows whose columns are decoded (``values``: the TTL wrapper's struct
        last, where the state has TTL)."""
        columns = [pa.array(key_groups), keys, namespaces]
        if self.ttl:
            *values, last = values
            assert isinstance(last, pa.StructArray)
            values.append(last.field(1))
            columns += values
            columns.append(last.field(0).cast(TTL_ARROW_TYPE))
        else:
            columns += values
        return pa.Table.from_arrays(columns, schema=self.schema)


def check_grouped(entries: pa.Array, user_keys: pa.Array) -> None:
    """That each entry's pairs are together, and no entry repeats a user key (given each
    pair's entry and user key in forms equal exactly when the values are)."""
    if len(entries) < 2:
        return
    changed = pc.not_equal(entries[1:], entries[:-1]).to_numpy(zero_copy_only=False)
    heads = np.concatenate([[0], np.flatnonzero(changed) + 1])
    check(pc.count_distinct(entries.take(heads)).as_py() == len(heads))
    runs = np.concatenate([[0], np.cumsum(changed)])
    codes = pc.dictionary_encode(user_keys).indices.to_numpy(zero_copy_only=False)
    pairs = runs * (int(codes.max()) + 1) + codes
    if int(pairs.max()) < 4 * len(pairs):  # few user keys: count them in place
        check(np.bincount(pairs).max() == 1)
    else:
        check(len(np.unique(pairs)) == len(pairs))


_IDENTICAL_TYPES = (pa.string(), pa.binary(), pa.int64(), pa.int32(), pa.int16(), pa.int8())


def identity(decoded: pa.Array | None, buf: np.ndarray, start: Positions,
              lengths: np.ndarray) -> pa.Array:
    """Values as they are where their type compares exactly (and has no nulls), else their
    bytes: what tells map entries and user keys apart as the per-value decoder does."""
    if decoded is not None and decoded.type in _IDENTICAL_TYPES and not decoded.null_count:
        return decoded
    return ranges_array(pa.binary(), buf, start, lengths)


class Ttl(Decoder):
    """TTL's wrapper: the last-access timestamp, then the value (a struct of the two)."""

    def __init__(self, value: Decoder) -> None:
        self.value = value
        self.arrow_type = pa.struct([pa.field("timestamp", pa.int64()),
                                     pa.field("value", value.arrow_type)])

    def decode(self, buf: np.ndarray, pos: Positions, limit: Positions
               ) -> tuple[pa.Array, Positions]:
        check(pos + 8 <= limit)
        timestamps = pa.array(be_ints(buf, pos, np.dtype(np.int64)))
        values, end = self.value.decode(buf, pos + 8, limit)
        return pa.StructArray.from_arrays([timestamps, values], fields=list(self.arrow_type)), end

    def skip(self, buf: np.ndarray, pos: Positions, limit: Positions) -> Positions:
        return self.value.skip(buf, fixed_end(pos, 8, limit), limit)


def state_decoder(header: KeyedHeader, info: StateInfo, schema: pa.Schema,
                  prefix_bytes: int) -> StateColumns | None:
    """The column decoder of one state (its rows in ``schema``), or None if it has none."""
    if info.is_timer:
        timer = info.timer
        key = decoder_for(timer.key, schema.field("key").type)
        namespace = decoder_for(timer.namespace, schema.field("namespace").type)
        if key is None or namespace is None:
            return None
        return StateColumns(info, schema, key, namespace, None, None, False, False,
                            prefix_bytes)
    key = decoder_for(header.key, schema.field("key").type)
    namespace = decoder_for(info.namespace, schema.field("namespace").type)
    if key is None or namespace is None:
        return None
    kind, flink_value = info.kind, info.value
    user_key = None
    if kind is StateKind.MAP:
        assert isinstance(flink_value, MapType)
        if not all(_byte_exact(t) for t in (header.key, info.namespace, flink_value.key)):
            return None
        user_key = decoder_for(flink_value.key, schema.field(3).type)
        if user_key is None:
            return None
        flink_value = flink_value.value
    elif kind is StateKind.LIST:
        assert isinstance(flink_value, ListType)
        flink_value = flink_value.element
    value_field = schema.field(4 if kind is StateKind.MAP else 3)
    ttl = isinstance(flink_value, TtlType)
    if ttl:
        assert isinstance(flink_value, TtlType)
        if flink_value.timestamp.serializer.rsplit(".", 1)[-1] != \
                "LongSerializer$LongSerializerSnapshot":
            return None
        flink_value = flink_value.user
    value = decoder_for(flink_value, value_field.type)
    if value is None:
        return None
    return StateColumns(info, schema, key, namespace, Ttl(value) if ttl else value, user_key,
                        ttl, header.key.length < 0 and info.namespace.length < 0, prefix_bytes)

"""A Flink snapshot behind the same surface as a statesource :class:`Checkpoint`.

Spark's planning, ``inspect`` and the importer work on operators described by
statesource's :class:`OperatorMeta` and on key groups delivered as Arrow tables
in the format's data schema. :class:`FlinkCheckpoint` offers exactly that over
a Flink savepoint or checkpoint, so those consumers need no Flink-specific
path (:class:`~statesource.format.source.StateSource`): only timers, which
statesource's own format does not keep, have their own table,
:func:`~statesource.format.columns.timer_schema`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs

from statesource.errors import IncompatibleCheckpointError, StateNotFoundError
from statesource.flink.declarations import operator_meta, stored_converter, value_avro
from statesource.flink.handles import OperatorSnapshot
from statesource.flink.layouts.base import DecodedSection, KeyGroupLayout
from statesource.flink.layouts.canonical_writer import prefix_bytes
from statesource.flink.layouts.columnar import StateColumns, state_decoder
from statesource.flink.layouts.dispatch import blockers, layout_of
from statesource.flink.layouts.keyed import KeyGroupState
from statesource.flink.layouts.rocksdb_canonical import Selection
from statesource.flink.serializers.encoding import encode
from statesource.flink.snapshot.directory import FlinkSnapshot, KeyGroupBytes
from statesource.flink.statefiles.keyed_header import KeyedHeader, StateInfo
from statesource.flink.statefiles.operator_state import read_operator_states
from statesource.format.columns import RowEncoder, data_schema, timer_schema
from statesource.format.ipc import ReadListener
from statesource.format.metadata import OperatorMeta
from statesource.format.source import (
    FLINK,
    OperatorStateShares,
    SourceRef,
    StateSummary,
    TimerState,
)
from statesource.format.storage import Location, PathOrLocation
from statesource.keygroups import KeyGroupRange, assign_to_key_group

BYTES_PER_ROW = 32
"""Snapshot bytes that cost about as much to read as one row of a statesource checkpoint
(a pair's framing alone is 8 bytes; a small key and value as many again, and every
state's bytes are scanned to read one), so that Spark tasks get work of about the size
the format's row counts give them."""


class FlinkCheckpoint:
    """A Flink savepoint or checkpoint, read like a statesource checkpoint (a
    :class:`~statesource.format.source.StateSource`)."""

    kind = FLINK

    def __init__(self, snapshot: FlinkSnapshot) -> None:
        self.snapshot = snapshot
        self._column_decoders: dict[tuple[str, str], StateColumns | None] = {}

    @classmethod
    def open(cls, path: PathOrLocation, *, checkpoint_id: int | None = None,
             filesystem: pafs.FileSystem | None = None) -> FlinkCheckpoint:
        return cls(FlinkSnapshot.open(path, checkpoint_id=checkpoint_id, filesystem=filesystem))

    @property
    def location(self) -> Location:
        return self.snapshot.location

    @property
    def checkpoint_id(self) -> int:
        return self.snapshot.checkpoint_id

    def __repr__(self) -> str:
        return (f"FlinkCheckpoint(checkpoint_id={self.checkpoint_id},"
                f" location={str(self.location)!r})")

    def ref(self) -> SourceRef:
        return SourceRef(self.kind, self.location, self.checkpoint_id)

    def _op(self, uid: str | None) -> OperatorSnapshot:
        return self.snapshot.operator(uid)

    def operator(self, uid: str | None = None) -> OperatorMeta:
        """The operator (by uid, hex id, or the name Flink gave it where unique) as statesource
        metadata, timers left out."""
        op = self._op(uid)
        return operator_meta(op.label, op.parallelism, op.max_parallelism,
                             self.snapshot.header(op))

    def timer_states(self, operator: str | None = None) -> list[TimerState]:
        header = self.snapshot.header(self._op(operator))
        return [TimerState(info.name, info.timer.key.data_type(),
                           info.timer.namespace.data_type())
                for info in (header.states if header else ()) if info.is_timer]

    def arrow_layout(self, operator: str, state: str) -> None:
        """None: a Flink snapshot's key groups are Flink's serialized streams."""
        return None

    def unreadable_states(self, operator: str | None = None) -> dict[str, str]:
        """Keyed states this snapshot's format cannot deliver, with the reason, by name.

        Their layout says which (:meth:`KeyGroupLayout.blockers`): in native snapshots
        (and checkpoints), those with Kryo values, whose bytes are not framed there.
        """
        op = self._op(operator)
        header = self.snapshot.header(op)
        handles = [self.snapshot.header_handle(op, h) for s in op.subtasks for h in s.keyed]
        return {} if header is None else blockers(header, handles)

    def key_group_weights(self, operator: str | None = None, state: str | None = None
                          ) -> dict[int, int]:
        """The cost of each non-empty key group in rows' worth: its bytes, all states
        together (rows are known only once decoded, and reading one state scans the whole
        key group's framing), over :data:`BYTES_PER_ROW`. RocksDB state not yet converted
        is weighed by its table files' bytes, spread over each subtask's key groups, so that
        planning converts nothing: each Spark task then reads only its key groups' blocks."""
        op = self._op(operator)
        spread = self.snapshot.unconverted_table_bytes(op)
        if spread is not None:  # RocksDB state: weighed by its tables, nothing converted
            return {key_group: max(1, size // BYTES_PER_ROW) for key_group, size in spread.items()}
        return {piece.key_group: max(1, (piece.end - piece.begin) // BYTES_PER_ROW)
                for piece in self.snapshot.key_group_bytes(op)}

    # -- rows ------------------------------------------------------------------------------

    def entries(self, state: str | None = None, *, operator: str | None = None,
                key_groups: KeyGroupRange | Collection[int] | None = None,
                listener: ReadListener | None = None
                ) -> Iterator[tuple[int, list[Any], list[Any], list[Any]]]:
        """``(key group, keys, namespaces, stored)`` per non-empty key group of a keyed state.

        Stored values have the shapes of :mod:`statesource.model` and of the
        state's Avro schemas (for timers: the timestamps).
        """
        op = self._op(operator)
        info = self.snapshot.keyed_state_info(op, state)
        wanted = None if key_groups is None else set(key_groups)
        yield from _entries_of(info, self.snapshot.read_key_groups(op, (info.state_id,), wanted,
                                                                   listener))

    def read_keyed_state(self, state: str | None = None, *, operator: str | None = None,
                         key_groups: KeyGroupRange | Collection[int] | None = None,
                         listener: ReadListener | None = None,
                         keys: Collection[Any] | None = None) -> Iterator[pa.Table]:
        """One table per non-empty key group, in the format's data schema (timers: theirs).

        ``keys``: a lookup of these keys (in the wanted key groups): the rows of at least
        those keys, which a RocksDB snapshot finds reading only the blocks that can hold
        them (the caller filters the rows by key, as it would anyway)."""
        op = self._op(operator)
        info = self.snapshot.keyed_state_info(op, state)
        wanted = None if key_groups is None else set(key_groups)
        lookup = None
        if wanted is not None or keys is not None:
            lookup = self._lookup(op, wanted, keys)
            wanted = set(lookup.key_groups)
        pieces = [piece for piece in self.snapshot.key_group_bytes(op, lookup)
                  if wanted is None or piece.key_group in wanted]
        for layout, batch in _batches(pieces):
            data = [self.snapshot.piece_bytes(piece, listener) for piece in batch]
            yield from self._tables(op, info, layout, batch, data)

    def _lookup(self, op: OperatorSnapshot, wanted: set[int] | None,
                keys: Collection[Any] | None) -> Selection:
        """What a read of ``wanted`` key groups (None: all) and ``keys`` reads."""
        if keys is None:
            assert wanted is not None
            return Selection(frozenset(wanted))
        header = self.snapshot.header(op)
        meta = self.operator(op.label)
        located = []
        for key in keys:
            key_group = assign_to_key_group(key, meta.keyed_key_type, op.max_parallelism)
            if header is not None and (wanted is None or key_group in wanted):
                located.append((key_group, encode(header.key, key)))
        return Selection(frozenset(k for k, _ in located), tuple(located))

    def piece_tables(self, op: OperatorSnapshot, info: StateInfo, piece: KeyGroupBytes,
                     data: bytes) -> Iterator[pa.Table]:
        """The rows of one state in one key group whose bytes (:meth:`FlinkSnapshot.piece_bytes`)
        are ``data``: none if it has no entries there."""
        return self._tables(op, info, layout_of(piece.handle), [piece], [data])

    def _tables(self, op: OperatorSnapshot, info: StateInfo, layout: KeyGroupLayout,
                pieces: list[KeyGroupBytes], data: list[bytes]) -> Iterator[pa.Table]:
        """The rows of one state in key groups of one layout whose bytes are ``data``, a table
        per key group that has entries.

        Decoded column-wise where the layout and the state's serializers allow
        (:meth:`KeyGroupLayout.tables`); anything else, and any key groups the column
        decoders decline, value by value (:meth:`KeyGroupLayout.decode`).
        """
        for own, run in self._by_file_header(op, pieces, data):
            own_info = next((i for i in own.states if i.name == info.name), None)
            if own_info is None:
                continue  # subtasks that never obtained the state: none of its rows
            stored = [self.snapshot.key_group_data(piece, piece_data)
                      for piece, piece_data in run]
            tables = layout.tables(stored, own, own_info,
                                   lambda state: self._columns(op, state))
            if tables is not None:
                yield from (table for table in tables if table.num_rows)
            else:
                yield from self._decoded_tables(op, info, run)

    def _by_file_header(self, op: OperatorSnapshot, pieces: list[KeyGroupBytes],
                        data: list[bytes]
                        ) -> Iterator[tuple[KeyedHeader, list[tuple[KeyGroupBytes, bytes]]]]:
        """Runs of consecutive pieces whose files have the same header (each file is decoded
        with its own: a subtask lists the states it obtained, in its own order)."""
        run: list[tuple[KeyGroupBytes, bytes]] = []
        header: KeyedHeader | None = None
        for piece, piece_data in zip(pieces, data):
            own = self.snapshot.handle_header(op, piece.handle)
            if run and own is not header:
                assert header is not None
                yield header, run
                run = []
            header = own
            run.append((piece, piece_data))
        if run:
            assert header is not None
            yield header, run

    def _decoded_tables(self, op: OperatorSnapshot, info: StateInfo,
                        run: list[tuple[KeyGroupBytes, bytes]]) -> Iterator[pa.Table]:
        """The rows of one state in key groups decoded value by value."""
        for piece, piece_data in run:
            decoded = [(piece.key_group, self.snapshot.decode_piece(op, piece, piece_data,
                                                                    (info.state_id,)))]
            if info.is_timer:
                yield from _timer_tables(info, decoded)
            else:
                yield from self.keyed_tables(op, info, decoded)

    def column_decoder(self, op: OperatorSnapshot, info: StateInfo) -> StateColumns | None:
        """The state's column decoder, or None where it has none (also what the JVM reader
        decodes: :mod:`statesource.flink.jvm_layout`)."""
        return self._columns(op, info)

    def _columns(self, op: OperatorSnapshot, info: StateInfo) -> StateColumns | None:
        """The state's column decoder (None: it has none), made once per state: by name, as
        the operator's files declare each state alike under their own ids."""
        cache = (op.operator_id, info.name)
        if cache not in self._column_decoders:
            header = self.snapshot.header(op)
            assert header is not None
            merged = next(i for i in header.states if i.name == info.name)
            self._column_decoders[cache] = state_decoder(
                header, merged, self._schema(op, merged), prefix_bytes(op.max_parallelism))
        return self._column_decoders[cache]

    def _schema(self, op: OperatorSnapshot, info: StateInfo) -> pa.Schema:
        if info.is_timer:
            return timer_schema(info.timer.key.data_type(), info.timer.namespace.data_type())
        meta = operator_meta(op.label, op.parallelism, op.max_parallelism,
                             self.snapshot.header(op))
        return data_schema(meta.keyed_key_type, meta.keyed_state(info.name).declaration)

    def columnar_sections(self, op: OperatorSnapshot, piece: KeyGroupBytes, data: bytes
                          ) -> list[DecodedSection] | None:
        """Every state's section of one key group, each decoded column-wise; None where its
        layout declines it (:meth:`KeyGroupLayout.sections`: then
        :meth:`FlinkSnapshot.decode_piece` reads it, or names its fault)."""
        if self.snapshot.header(op) is None:
            return None
        sections = layout_of(piece.handle).sections(
            self.snapshot.key_group_data(piece, data),
            self.snapshot.handle_header(op, piece.handle), prefix_bytes(op.max_parallelism),
            lambda info: self._columns(op, info))
        ids = self.snapshot.state_ids(op, piece.handle)
        if sections is None or ids is None:
            return sections
        return [section._replace(state_id=ids[section.state_id]) for section in sections]

    def keyed_tables(self, op: OperatorSnapshot, info: StateInfo,
                     decoded: Iterable[tuple[int, dict[int, KeyGroupState]]]
                     ) -> Iterator[pa.Table]:
        """Tables in the format's data schema of a keyed (non-timer) state, one per non-empty
        key group, from decoded ``(key group, entries per state id)``."""
        header = self.snapshot.header(op)
        meta = operator_meta(op.label, op.parallelism, op.max_parallelism, header)
        encoder = RowEncoder(meta.keyed_key_type, meta.keyed_state(info.name).declaration, None)
        for _, batches, _ in encoder.encode(_entries_of(info, decoded)):
            yield pa.Table.from_batches(batches, schema=encoder.schema)

    def operator_state(self, name: str, *, operator: str | None = None
                       ) -> OperatorStateShares:
        """Operator state ``name``: its mode, value schemas and every subtask's share."""
        op = self._op(operator)
        shares = read_operator_states(self.snapshot, op)
        if name not in shares:
            raise StateNotFoundError(
                f"no operator state named {name!r} in operator {op.label!r}; available:"
                f" {', '.join(map(repr, sorted(shares))) or 'none'}")
        return shares[name]

    def read_operator_state(self, name: str, *, operator: str | None = None
                            ) -> list[list | dict]:
        """Each subtask's share of operator state ``name``, in subtask order."""
        return self.operator_state(name, operator=operator).values

    def summaries(self) -> list[StateSummary]:
        """One row per keyed, timer and operator state, as ``flinkstate-metadata`` shows.

        Value types are the Avro schemas as Flink's serializers declare them,
        so a value kept as bytes names its Java class (``java-class``). An operator whose
        keyed state cannot be decoded gets one row without a state name, saying why
        (``unreadable``), and its operator states their rows as usual; so does a state of a
        native snapshot whose values are not framed there.
        """
        return [row for op in self.snapshot.operators for row in self.operator_summaries(op)]

    def operator_summaries(self, op: OperatorSnapshot) -> list[StateSummary]:
        """The rows of :meth:`summaries` of one operator (keyed and timer states uncounted:
        counting decodes every key group, :mod:`statesource.flink.operations.census`)."""
        rows = self._keyed_summaries(op)
        for name, share in sorted(read_operator_states(self.snapshot, op).items()):
            rows.append(StateSummary(self.checkpoint_id, op.label, op.parallelism,
                                     op.max_parallelism, name,
                                     f"operator-{share.mode.value}", None,
                                     {r: s.avro for r, s in share.schemas.items()},
                                     share.rows, share.rows, share.size_bytes,
                                     operator_name=op.name, operator_id=op.operator_id))
        return rows

    def _keyed_summaries(self, op: OperatorSnapshot) -> list[StateSummary]:
        reason = self.snapshot.undecodable(op)
        meta = None
        if reason is None:
            try:  # a key type statesource does not read (a SQL key of no fields, or of an
                # ARRAY): the operator fails alone, as in the census
                meta = self.operator(op.operator_id)
            except IncompatibleCheckpointError as error:
                reason = str(error)
        if meta is None:
            return [StateSummary(self.checkpoint_id, op.label, op.parallelism,
                                 op.max_parallelism, None, "keyed", None, {}, None, None, None,
                                 reason, op.name, op.operator_id)]
        key_type = None if meta.key_type is None else meta.key_type.name
        header = self.snapshot.header(op)
        blocked = self.unreadable_states(op.operator_id)
        rows = []
        for info in header.states if header else ():
            kind = "timers" if info.is_timer else info.kind.value
            types = {} if info.is_timer else value_avro(info)
            rows.append(StateSummary(self.checkpoint_id, op.label, op.parallelism,
                                     op.max_parallelism, info.name, kind, key_type, types,
                                     None, None, None, blocked.get(info.name), op.name,
                                     op.operator_id))
        return rows


def _batches(pieces: list[KeyGroupBytes]
             ) -> Iterator[tuple[KeyGroupLayout, list[KeyGroupBytes]]]:
    """The pieces in order, in runs of one layout of up to its
    :attr:`~KeyGroupLayout.batch_bytes` (a piece alone where that is 0), with the layout."""
    batch: list[KeyGroupBytes] = []
    layout: KeyGroupLayout | None = None
    size = 0
    for piece in pieces:
        length = piece.end - piece.begin
        own = layout_of(piece.handle)
        if batch and (own is not layout or size + length > own.batch_bytes):
            assert layout is not None
            yield layout, batch
            batch, size = [], 0
        batch.append(piece)
        size += length
        layout = own
    if batch:
        assert layout is not None
        yield layout, batch


def _timer_tables(info: StateInfo, decoded: Iterable[tuple[int, dict[int, KeyGroupState]]]
                  ) -> Iterator[pa.Table]:
    timer = info.timer
    schema = timer_schema(timer.key.data_type(), timer.namespace.data_type())
    for key_group, keys, namespaces, timestamps in _entries_of(info, decoded):
        try:
            columns = [timer.key.data_type().to_arrow(keys),
                       timer.namespace.data_type().to_arrow(namespaces)]
        except (pa.ArrowException, UnicodeError, OverflowError, TypeError, ValueError) as error:
            # Java strings may hold lone surrogates, which no Arrow string can.
            raise IncompatibleCheckpointError(
                f"timer state {info.name!r}, key group {key_group}: cannot encode keys or"
                f" namespaces: {error}") from None
        yield pa.Table.from_arrays(
            [pa.array(np.full(len(keys), key_group, dtype=np.int32)), *columns,
             pa.array(timestamps, pa.int64())], schema=schema)


def _entries_of(info: StateInfo, decoded: Iterable[tuple[int, dict[int, KeyGroupState]]]
                ) -> Iterator[tuple[int, list[Any], list[Any], list[Any]]]:
    """``(key group, keys, namespaces, stored)`` of one state from decoded key groups, the
    stored values converted to the shapes of its Avro schemas; empty key groups left out."""
    convert = None if info.is_timer else stored_converter(info)
    for key_group, states in decoded:
        found = states.get(info.state_id)
        if found is None or not found.keys:
            continue
        stored = found.stored if convert is None else [convert(s) for s in found.stored]
        yield key_group, found.keys, found.namespaces, stored

"""What the JVM reader needs to decode a keyed state of a Flink savepoint itself.

The JVM shim decodes key groups straight into Spark's column vectors
(jvm-shim/.../FlinkKeyGroupReader.java). Everything else stays here: the
metadata, the serializer snapshots and which of them the shim can decode are
interpreted by the same column decoders the Python fast path uses
(:func:`~statesource.flink.layouts.columnar.state_decoder`), and each decoder becomes
a compact type descriptor (FlinkValueDecoder.java reads it), for keyed and
timer states alike. Native snapshots and checkpoints (the heap backend's own
layout) carry every state's descriptors, since nothing delimits a value there
and a key group is walked through each section before the wanted one. RocksDB
state (native savepoints and RocksDB checkpoints: a database per subtask) is
planned from each database's meta data and MANIFEST alone, nothing converted: the
live tables of the state's column family, which the shim reads key group by key
group and frames as canonical key groups (RocksKeyGroupSource.java). A state
those decoders do not take (in a native snapshot: any state of its operator),
heap timers a RocksDB job keeps in raw keyed state, or state stored inline in
``_metadata``, gets a reason instead, and the Python reader reads it.

Each file is decoded with its own header, as the Python readers decode it: a job
that obtains states lazily writes files that lack states, or number them otherwise
(:mod:`~statesource.flink.statefiles.merged_header`). The descriptors are the
operator's states by name, in the merged numbering; each file names its variant,
the merged id of each of its own states by its own id, and the files that lack the
wanted state are left out, as the Python readers skip them: they hold no rows of it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from statesource.flink.handles import KeyedHandle, OperatorSnapshot, RocksDBHandle
from statesource.flink.layouts.columnar import StateColumns, Ttl
from statesource.flink.layouts.dispatch import layout_of
from statesource.flink.layouts.rocksdb_canonical import (
    database_source,
    live_tables,
    table_names,
)
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.serializers.binary_row_columns import BinaryRowColumns
from statesource.flink.serializers.columns import Decoder, Struct
from statesource.flink.serializers.nullable import Nullable
from statesource.flink.serializers.primitives import (
    Bytes,
    Char,
    Fixed,
    FlinkString,
    TimeWindow,
    Void,
)
from statesource.flink.serializers.rows import RowDecoder
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.flink.statefiles.keyed_header import StateInfo
from statesource.model import StateKind
from statesource.types.sql import MAX_COMPACT_TIMESTAMP, SqlType

_FIXED = {"i8": "long", "i4": "int", "i2": "short", "i1": "byte", "u1": "bool",
          "f8": "double", "f4": "float"}
_SCALARS: dict[type, str] = {Char: "char", FlinkString: "string", Bytes: "bytes",
                             Void: "void", TimeWindow: "window"}
_KINDS = {StateKind.VALUE: "value", StateKind.REDUCING: "value",
          StateKind.AGGREGATING: "value", StateKind.LIST: "list", StateKind.MAP: "map"}
_NATIVE_FLAG = {"canonical": False, "native": True}
"""The layouts the shim decodes (by name), and its ``native`` flag for each: whether a key
group is walked through every state's section before the wanted one."""


class NotForJvm(Exception):
    """A decoder the shim has no counterpart of: the state is read by Python."""


@dataclass(frozen=True)
class KeyGroupRange:
    key_group: int
    file: int
    offset: int
    length: int


@dataclass(frozen=True)
class JvmLayout:
    """One keyed state of a Flink snapshot as the shim decodes it."""

    state: dict[str, Any]
    """The plan's ``flink`` part (FlinkStatePlan.java)."""
    files: list[tuple[str, str, int]]
    """Each data file holding the state: its real local path, its name for errors, its size
    (of RocksDB state: the live tables of its column family, database by database)."""
    key_groups: list[KeyGroupRange]
    """Every non-empty key group of those files, ascending (of RocksDB state: every key group
    of each database holding it, its ``file`` the database's first table, its ``length``
    its share of their bytes)."""


def jvm_layout(checkpoint: FlinkCheckpoint, operator: str, state: str) -> JvmLayout | str:
    """The layout of ``state``, or why the shim does not decode it."""
    snapshot = checkpoint.snapshot
    op = snapshot.operator(operator)
    header = snapshot.header(op)
    if header is None:
        return f"operator {op.label!r} has no keyed state"
    info = snapshot.keyed_state_info(op, state)
    if any(isinstance(h, RocksDBHandle) for s in op.subtasks for h in s.keyed):
        # asked before the handles, which would convert every RocksDB database on the driver
        return _rocksdb_layout(checkpoint, op, info)
    handles = snapshot.keyed_handles(op)
    if any(snapshot.handle_header(op, h).compressed != header.compressed for h in handles):
        return ("the operator's keyed-state files differ in Snappy compression; they are"
                " decoded by the Python source")
    if any(h.stream.inline is not None for h in handles):
        return "state stored inline in _metadata is decoded by the Python source"
    layouts = sorted({layout_of(handle).name for handle in handles})
    if len(layouts) > 1:
        return f"the operator's key groups mix the {' and the '.join(layouts)} layout"
    if layouts[0] not in _NATIVE_FLAG:
        return f"the JVM reader does not decode the {layouts[0]} layout; the Python source does"
    native = _NATIVE_FLAG[layouts[0]]
    common = {"compressed": header.compressed}
    try:
        described = {**_described(checkpoint, op, info), **common, "native": native}
        if native:
            described["sections"] = _sections(checkpoint, op, common)
    except NotForJvm as reason:
        return str(reason)
    files: list[tuple[str, str, int]] = []
    index: dict[str, int] = {}
    variants: list[list[int]] = []
    file_variants: list[int] = []
    ranges = []
    for piece in snapshot.key_group_bytes(op):
        ids = _own_states(snapshot, op, piece.handle)
        if info.state_id not in ids:
            continue  # the file's subtask never obtained the state: none of its rows here
        location = snapshot.file_location(piece.handle.stream)
        if not location.is_local:
            return f"{location} is not on the local filesystem"
        if location.path not in index:  # the path tells files apart; str() is for show
            index[location.path] = len(files)
            files.append((os.path.realpath(location.path), str(location),
                          piece.handle.stream.size))
            if ids not in variants:
                variants.append(ids)
            file_variants.append(variants.index(ids))
        ranges.append(KeyGroupRange(piece.key_group, index[location.path], piece.begin,
                                    piece.end - piece.begin))
    described.update(variants=variants, fileVariants=file_variants)
    return JvmLayout(described, files, ranges)


def _rocksdb_layout(checkpoint: FlinkCheckpoint, op: OperatorSnapshot, info: StateInfo
                    ) -> JvmLayout | str:
    """The layout of a state of RocksDB databases, planned from their meta data and
    MANIFESTs alone (no database converted, no table opened): the live tables of the state's
    column family of each database holding it, and each of its key groups (which are empty
    is known only once they are read), weighed by the database's tables' bytes spread evenly
    (as :meth:`~statesource.flink.reader.FlinkCheckpoint.key_group_weights` weighs them)."""
    snapshot = checkpoint.snapshot
    handles = [h for s in op.subtasks for h in s.keyed]
    if not all(isinstance(h, RocksDBHandle) for h in handles):
        return ("the operator's keyed state mixes RocksDB databases and keyed-state files;"
                " the Python source reads it")
    try:
        described = {**_described(checkpoint, op, info), "compressed": False, "native": False}
    except NotForJvm as reason:
        return str(reason)
    files: list[tuple[str, str, int]] = []
    variants: list[list[int]] = []
    file_variants: list[int] = []
    databases = []
    ranges = []
    for handle in handles:
        assert isinstance(handle, RocksDBHandle)
        ids = _own_states(snapshot, op, snapshot.header_handle(op, handle))
        if info.state_id not in ids:
            continue  # the subtask never obtained the state: none of its rows here
        tables = live_tables(handle, lambda s: snapshot.read_bytes(s, 0, s.size),
                             snapshot.describe).get(info.name)
        if tables is None:
            return (f"state {info.name!r} is heap timers kept in the raw keyed state of a"
                    " RocksDB job, which the Python source reads")
        if not tables:
            continue  # the state's column family is empty in this database
        named = table_names(handle, snapshot.describe)
        if ids not in variants:
            variants.append(ids)
        first = len(files)
        for table in tables:
            location = snapshot.file_location(table.file.stream)
            if not location.is_local:
                return f"{location} is not on the local filesystem"
            files.append((os.path.realpath(location.path), named(table.file.name),
                          table.file.stream.size))
            file_variants.append(variants.index(ids))
        databases.append({"firstFile": first, "fileCount": len(tables),
                          "largestSeqnos": [table.largest_seqno for table in tables],
                          "source": database_source(handle, snapshot.describe)})
        share = sum(table.file.stream.size for table in tables) // handle.count
        ranges += [KeyGroupRange(key_group, first, 0, share)
                   for key_group in range(handle.start, handle.end + 1)]
    described.update(variants=variants, fileVariants=file_variants, rocksdb=databases)
    return JvmLayout(described, files, sorted(ranges, key=lambda r: r.key_group))


def _own_states(snapshot: FlinkSnapshot, op: OperatorSnapshot, handle: KeyedHandle
                ) -> list[int]:
    """The merged id of each of the states of ``handle``'s file, by the file's own id (the
    id its key groups carry), as :meth:`FlinkSnapshot.decode_piece` maps them: the file's
    variant, which the shim decodes its key groups with."""
    ids = snapshot.state_ids(op, handle)
    if ids is None:
        return list(range(len(snapshot.handle_header(op, handle).states)))
    return list(ids)


def _sections(checkpoint: FlinkCheckpoint, op: OperatorSnapshot, common: dict[str, Any]
              ) -> list[dict[str, Any]]:
    """Every state's descriptors, by state id: nothing delimits a native value, so a key
    group is walked through each section before the wanted one, and Flink writes them in
    no fixed order (the heap backend iterates a hash map of its states)."""
    header = checkpoint.snapshot.header(op)
    assert header is not None
    sections = []
    for other in header.states:
        try:
            sections.append({**_described(checkpoint, op, other), **common})
        except NotForJvm as reason:
            raise NotForJvm(f"{reason}; a native key group is walked through every state's"
                            " section") from None
    return sections


def _described(checkpoint: FlinkCheckpoint, op: OperatorSnapshot, info: StateInfo
               ) -> dict[str, Any]:
    columns = checkpoint.column_decoder(op, info)
    if columns is None:
        raise NotForJvm(f"state {info.name!r} has serializers the column decoders do not take")
    try:
        return _state(columns)
    except NotForJvm as reason:
        raise NotForJvm(f"state {info.name!r}: {reason}") from None


def _state(columns: StateColumns) -> dict[str, Any]:
    kind = columns.kind
    described: dict[str, Any] = {
        "prefixBytes": columns.prefix_bytes, "stateId": columns.info.state_id,
        "stateName": columns.info.name, "ambiguous": columns.ambiguous, "ttl": columns.ttl,
        "key": _descriptor(columns.key, True), "namespace": _descriptor(columns.namespace, True)}
    if kind is None:  # timers: the timestamp, key and namespace make the key; no value
        return {**described, "kind": "timer"}
    assert columns.value is not None
    value = columns.value
    if columns.ttl:
        assert isinstance(value, Ttl)
        value = value.value
    described.update(kind=_KINDS[kind], value=_descriptor(value, False))
    if columns.user_key is not None:
        described["userKey"] = _descriptor(columns.user_key, False)
    return described


def _descriptor(decoder: Decoder, top_level: bool) -> Any:
    """The shim's type descriptor of a column decoder (FlinkValueDecoder.of reads it)."""
    if isinstance(decoder, Fixed):
        return _FIXED[decoder.dtype.str.lstrip("<>|=")]
    for decoder_type, name in _SCALARS.items():
        if type(decoder) is decoder_type:
            if name == "void" and not top_level:
                raise NotForJvm("a void value outside key and namespace")
            return name
    if isinstance(decoder, Nullable):
        return {"nullable": _descriptor(decoder.inner, False), "padding": decoder.padding}
    if isinstance(decoder, Struct):
        return {"pojo" if decoder.pojo_flags else "tuple":
                [_descriptor(f, False) for f in decoder.fields]}
    if isinstance(decoder, BinaryRowColumns):
        return {"binaryRow": [_binary_row_field(t) for t in decoder.types],
                "withKind": decoder.with_kind}
    if isinstance(decoder, RowDecoder):
        return {"row": [_descriptor(f, False) for f in decoder.fields],
                "kindInMask": decoder.kind_in_mask}
    raise NotForJvm(f"no JVM decoder of {type(decoder).__name__}")


_BINARY_ROW_FIELDS = {"TINYINT": "i1", "SMALLINT": "i2", "INTEGER": "i4", "BIGINT": "i8",
                      "INTERVAL_YEAR_MONTH": "i4", "INTERVAL_DAY_TIME": "i8", "FLOAT": "f4",
                      "DOUBLE": "f8", "BOOLEAN": "bool", "DATE": "date", "CHAR": "text",
                      "VARCHAR": "text", "BINARY": "binary", "VARBINARY": "binary"}


def _binary_row_field(sql_type: SqlType) -> Any:
    """The shim's descriptor of one field of a binary row (FlinkBinaryRowDecoder.java)."""
    root = sql_type.root
    if root in _BINARY_ROW_FIELDS:
        return _BINARY_ROW_FIELDS[root]
    if root == "DECIMAL":
        return {"decimal": sql_type.precision}
    if root.startswith("TIMESTAMP"):
        return "tsMillis" if sql_type.precision <= MAX_COMPACT_TIMESTAMP else "tsMicros"
    raise NotForJvm(f"no JVM decoder of {sql_type.describe()} in a binary row")

"""What the JVM reader needs to decode a keyed state of a Flink savepoint itself.

The JVM shim decodes key groups straight into Spark's column vectors
(jvm-shim/.../FlinkKeyGroupReader.java). Everything else stays here: the
metadata, the serializer snapshots and which of them the shim can decode are
interpreted by the same column decoders the Python fast path uses
(:func:`~statesource.flink.layouts.columnar.state_decoder`), and each decoder becomes
a compact type descriptor (FlinkValueDecoder.java reads it), for keyed and
timer states alike. Native snapshots and checkpoints (the heap backend's own
layout) carry every state's descriptors, since nothing delimits a value there
and a key group is walked through each section before the wanted one. A state
those decoders do not take (in a native snapshot: any state of its operator),
RocksDB state, or state stored inline in ``_metadata``, gets a reason instead, and the Python
reader reads it.

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
    """Each data file holding the state: its real local path, its name for errors, its size."""
    key_groups: list[KeyGroupRange]
    """Every non-empty key group of those files, ascending."""


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
        return "RocksDB state (its SST files) is decoded by the Python source"
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

"""What every serializer family shares: the two bases, the registry, and snapshot framing.

A state file's header names each serializer by the class of its snapshot, then its version
and a payload only that class knows how to read. Each family module (:mod:`primitives`,
:mod:`collections`, :mod:`rows`, ...) holds everything statesource knows about its snapshot
classes and registers them here by class name (:func:`register`); :func:`read_snapshot`
looks the name up, so a snapshot class is one entry in one module. The package imports
every family, so the registry is complete whenever anything of it is imported.

- :class:`FlinkType`, a serializer read from a snapshot: how a value reads, its types,
  and, by methods each family overrides, how values encode (:meth:`FlinkType.encoder`),
  decode column-wise (:meth:`FlinkType.column_decoder`) and which declaration writes the
  snapshot again (:meth:`FlinkType.declared`);
- :class:`FlinkSerializer`, a serializer declared: what its snapshot records;
- the framing of composite snapshots (magic numbers, outer version and payload, nested
  snapshots) and Flink's ``LinkedOptionalMap``, both ways.

A snapshot of an unknown serializer (a custom one) has a payload of unknown length, so
nothing after it in the header can be found: reading that file fails with an error naming
the serializer's class. States of other operators, and operator states, stay readable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any

import pyarrow as pa

from statesource.errors import (
    CorruptCheckpointError,
    IncompatibleCheckpointError,
    InvalidArgumentError,
    TypeMismatchError,
)
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.serializers.columns import Decoder
from statesource.flink.serializers.encoding import Encoder
from statesource.types import DataType


class FlinkSerializer:
    """One Flink serializer, declared: what its snapshot records."""

    snapshot_class: str

    def write(self, w: BinaryWriter) -> None:
        """The snapshot: class name, version, payload (``writeVersionedSnapshot``)."""
        raise NotImplementedError

    def describe(self) -> str:
        return self.snapshot_class.rsplit(".", 1)[-1].split("$")[0]


class FlinkType:
    """One Flink serializer: how to read a value, its length, its types."""

    serializer: str
    length: int = -1
    """Bytes of every value, or -1 when values vary in size (as Flink's ``getLength``)."""
    snapshot: bytes = b""
    """The snapshot this type was read from, as written (class name, version, payload), so
    that a header can be written back with Flink's own bytes, which only Flink's classes
    could otherwise produce (empty for a type built by hand)."""

    def read(self, r: BinaryReader) -> Any:
        raise NotImplementedError

    def read_whole(self, r: BinaryReader) -> Any:
        """A value that fills all of ``r`` (a canonical savepoint frames each value)."""
        return self.read(r)

    def data_type(self) -> DataType:
        """The statesource type of keys and namespaces of this serializer."""
        raise IncompatibleCheckpointError(
            f"values of {self.serializer} cannot be a key or namespace type in statesource")

    def avro(self) -> Any:
        """The Avro schema of values of this serializer."""
        return self.data_type().to_avro()

    def to_value(self, value: Any) -> Any:
        """A decoded value in the shape its Avro schema takes (records as dicts)."""
        return value

    def describe(self) -> str:
        return self.serializer.rsplit(".", 1)[-1].split("$")[0]

    def encoder(self) -> Encoder:
        """The writer of one value as this serializer writes it (built once, by
        :func:`~statesource.flink.serializers.encoding.encoder_of`)."""
        raise TypeMismatchError(
            f"statesource cannot encode values of {self.describe()} ({self.serializer})")

    def column_decoder(self, arrow_type: pa.DataType) -> Decoder | None:
        """A decoder of many values at once into ``arrow_type``, or None (see
        :func:`~statesource.flink.serializers.columns.decoder_for`)."""
        return None

    def nested(self) -> list[FlinkType]:
        """This serializer and every one nested in it, depth first: what a question about
        any part of a type (does it hold Kryo values anywhere?) walks."""
        found: list[FlinkType] = [self]
        for attribute in vars(self).values():
            for child in attribute if isinstance(attribute, list) else [attribute]:
                if isinstance(child, tuple) and len(child) == 2:  # a POJO's (name, field)
                    child = child[1]
                if isinstance(child, FlinkType):
                    found += child.nested()
        return found

    def declared(self) -> FlinkSerializer:
        """The declaration of this serializer, read from a Flink file (whose snapshot it
        rewrites); refused (:class:`TypeMismatchError`) for the serializers listed in
        :data:`REFUSED`, and any other statesource cannot derive, naming the snapshot class."""
        if self.serializer in REFUSED:
            raise TypeMismatchError(refusal(self.serializer))
        raise TypeMismatchError(f"{self.serializer} is not a serializer statesource derives")


# -- the registry ---------------------------------------------------------------------------

SnapshotReader = Callable[[str, BinaryReader, int], FlinkType]
"""Reads the payload of a snapshot of a class (given its class name and version)."""

SNAPSHOTS: dict[str, SnapshotReader] = {}
"""The reader of each snapshot class statesource knows, by class name (filled by the family
modules as the package imports them)."""

REFUSED: dict[str, str] = {}
"""Snapshot classes real Flink files hold that are never derived from a declared type, and
why (filled by their family modules)."""


def register(snapshot_class: str, read: SnapshotReader, refused: str | None = None) -> None:
    """Makes ``read`` the reader of snapshots of ``snapshot_class``; ``refused``: why it is
    never derived from a declared type (see :data:`REFUSED`)."""
    if snapshot_class in SNAPSHOTS:
        raise AssertionError(f"serializer snapshot {snapshot_class} is registered twice")
    SNAPSHOTS[snapshot_class] = read
    if refused is not None:
        REFUSED[snapshot_class] = refused


def refusal(snapshot_class: str) -> str:
    """Why a snapshot of ``snapshot_class`` (one of :data:`REFUSED`) is not derived."""
    return (f"{snapshot_class} is not derived: {REFUSED[snapshot_class]}; a state with it keeps"
            " the snapshot of the Flink snapshot it comes from")


def check_serializer(value: Any, what: str) -> None:
    if not isinstance(value, FlinkSerializer):
        raise InvalidArgumentError(f"{what} must be a FlinkSerializer, got {value!r}")


# -- reading snapshots ----------------------------------------------------------------------

MAX_SNAPSHOT_NESTING = 64
"""How deep serializer snapshots may nest (a list of maps of rows ... of a type): far more
than any type a program declares, and few enough that a hostile file cannot exhaust the
stack of the reader or of what it builds."""

_nesting: ContextVar[int] = ContextVar("serializer_snapshot_nesting", default=0)


def read_snapshot(r: BinaryReader) -> FlinkType:
    """One ``writeVersionedSnapshot``: class name, version, payload (kept as ``snapshot``)."""
    at = r.pos
    depth = _nesting.get()
    if depth >= MAX_SNAPSHOT_NESTING:
        raise r.error(f"serializer snapshots nested more than {MAX_SNAPSHOT_NESTING} deep")
    token = _nesting.set(depth + 1)
    try:
        found = _read_snapshot(r)
    finally:
        _nesting.reset(token)
    found.snapshot = bytes(r.data[at:r.pos])
    return found


def _read_snapshot(r: BinaryReader) -> FlinkType:
    at = r.pos
    name = r.utf()
    version = r.i32()
    read = SNAPSHOTS.get(name)
    if read is not None:
        return read(name, r, version)
    raise IncompatibleCheckpointError(
        f"{r.source}: serializer snapshot {name} at byte offset {at} is not supported; its"
        " payload cannot be skipped, so the states of this file cannot be read")


def read_proxied_snapshot(r: BinaryReader) -> FlinkType:
    """A snapshot behind ``TypeSerializerSnapshotSerializationProxy`` (an int version first)."""
    r.i32()
    return read_snapshot(r)


SNAPSHOT_PROXY_VERSION = 2
"""The version ``TypeSerializerSnapshotSerializationProxy`` writes before a snapshot (Flink 2.x)."""


# -- composite snapshots --------------------------------------------------------------------
#
# A ``CompositeTypeSerializerSnapshot``: version 3, then the magic number 911108, the outer
# version and outer payload, then the magic number 1333245, version 1, the number of nested
# serializers and their snapshots.

COMPOSITE_MAGIC = 911108
NESTED_MAGIC = 1333245
_COMPOSITE_VERSION = 3
_NESTED_VERSION = 1


def _outer_version(r: BinaryReader) -> int:
    """A composite snapshot starts with a magic number and its outer version."""
    if r.i32() != COMPOSITE_MAGIC:
        raise r.error("bad composite serializer snapshot magic number", r.pos - 4)
    return r.i32()


def nested_serializers(r: BinaryReader) -> list[FlinkType]:
    """Flink's ``NestedSerializersSnapshotDelegate``: a magic number, a version, the number of
    nested serializers and their snapshots (the end of composite and row-data snapshots)."""
    if r.i32() != NESTED_MAGIC:
        raise r.error("bad nested serializer snapshot magic number", r.pos - 4)
    r.i32()  # version
    return [read_snapshot(r) for _ in range(r.count("number of nested serializers"))]


def composite(build: Callable[[str, Any, list[FlinkType]], FlinkType],
              outer: Callable[[BinaryReader, int], Any] | None = None,
              arity: int | None = None) -> SnapshotReader:
    """A composite snapshot's reader: ``build`` takes the class name, what ``outer`` read of
    the outer payload (given the outer version) and the nested serializers; ``arity``: how
    many nested serializers it has, where that is fixed (a map's two, not a tuple's any
    number)."""
    def read(name: str, r: BinaryReader, version: int) -> FlinkType:
        at = r.pos
        outer_version = _outer_version(r)
        extra = outer(r, outer_version) if outer is not None else None
        nested = nested_serializers(r)
        try:
            if arity is not None and len(nested) != arity:
                raise ValueError(arity)
            return build(name, extra, nested)
        except (IndexError, ValueError):
            raise CorruptCheckpointError(
                f"{r.source}: serializer snapshot {name} at byte offset {at} has"
                f" {len(nested)} nested serializers") from None
    return read


def write_composite(w: BinaryWriter, snapshot_class: str, outer_version: int,
                    nested: Sequence[FlinkSerializer],
                    outer: Callable[[BinaryWriter], None] | None = None) -> None:
    """A composite snapshot as Flink 2.x writes it (``outer`` writes the outer payload)."""
    w.utf(snapshot_class)
    w.i32(_COMPOSITE_VERSION)
    w.i32(COMPOSITE_MAGIC)
    w.i32(outer_version)
    if outer is not None:
        outer(w)
    w.i32(NESTED_MAGIC)
    w.i32(_NESTED_VERSION)
    w.i32(len(nested))
    for serializer in nested:
        serializer.write(w)


OPTIONAL_MAP_HEADER = 0x4F2C69A3D70
"""The long that starts Flink's ``LinkedOptionalMap`` (POJO and Kryo snapshots)."""


def optional_map(r: BinaryReader) -> list[tuple[str, bytes | None, bytes | None]]:
    """Flink's ``LinkedOptionalMap``: (name, key bytes, value bytes) entries, each optional."""
    if r.i64() != OPTIONAL_MAP_HEADER:
        raise r.error("bad optional map header", r.pos - 8)
    entries = []
    for _ in range(r.count("optional map size")):
        name = r.utf()
        key = r.take(r.count("entry length")) if r.boolean() else None
        value = r.take(r.count("entry length")) if r.boolean() else None
        entries.append((name, key, value))
    return entries


# -- between the two ------------------------------------------------------------------------

def snapshot_bytes(serializer: FlinkSerializer) -> bytes:
    """The snapshot as a keyed-state header holds it (after the proxy's version)."""
    check_serializer(serializer, "a serializer")
    w = BinaryWriter()
    serializer.write(w)
    return w.getvalue()


def flink_type(serializer: FlinkSerializer) -> FlinkType:
    """The reader's type of ``serializer``, carrying its snapshot bytes (for the header
    writer) and decoding its values."""
    data = snapshot_bytes(serializer)
    r = BinaryReader(data, f"the derived snapshot of {serializer.describe()}")
    found = read_snapshot(r)
    assert r.pos == len(data)
    return found


# -- Avro schemas of composite values -------------------------------------------------------

def nullable_schema(schema: Any) -> Any:
    return ["null", schema]


def record_schema(name: str, fields: list[tuple[str, FlinkType]],
                  row_kind: bool = False) -> Any:
    """The Avro record of values whose fields are of ``fields`` (each may be null)."""
    declared = [{"name": n, "type": nullable_schema(f.avro())} for n, f in fields]
    if row_kind:
        declared.insert(0, {"name": "row_kind", "type": "string"})
    return {"type": "record", "name": name, "fields": declared}

"""The registry of serializer snapshot classes: one family module per class, each complete.

Every snapshot class statesource knew before the families had a home of their own (the
primitives, the composites, Avro), and Flink SQL's, is registered exactly once, and so is
every Flink class the fixtures' keyed-state headers hold. Each registered class parses,
writes its snapshot again (or is refused, saying why), encodes values (SQL's: refused), and
decodes column-wise where it did; an unknown class is still refused with the error that
names it.
"""

from __future__ import annotations

import pickle
import struct
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from java_objects import logical_type_spec, serialize

from statesource.errors import IncompatibleCheckpointError, TypeMismatchError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.serializers.avro import AVRO_SNAPSHOT
from statesource.flink.serializers.base import (
    REFUSED,
    SNAPSHOTS,
    FlinkSerializer,
    FlinkType,
    flink_type,
    read_snapshot,
    refusal,
    register,
    snapshot_bytes,
)
from statesource.flink.serializers.collections import ListSerializer, MapSerializer, SetSerializer
from statesource.flink.serializers.columns import decoder_for
from statesource.flink.serializers.encoding import type_name, value_writer
from statesource.flink.serializers.java_values import JAVA_VALUE_CLASSES, JavaValueSerializer
from statesource.flink.serializers.kryo import KRYO_SNAPSHOT
from statesource.flink.serializers.nullable import NullableSerializer
from statesource.flink.serializers.pojo import PojoField, PojoSerializer
from statesource.flink.serializers.primitives import BYTE_ARRAY_WRAPPER, GLOBAL_WINDOW, SIMPLE
from statesource.flink.serializers.rows import RowSerializer
from statesource.flink.serializers.sql_rows import ROW_DATA
from statesource.flink.serializers.sql_values import (
    DECIMAL_DATA,
    EXTERNAL,
    NULL,
    RAW_VALUE_DATA,
    STRING_DATA,
    TIMESTAMP_DATA,
)
from statesource.flink.serializers.timer import TimerSerializer
from statesource.flink.serializers.ttl import TtlSerializer
from statesource.flink.serializers.tuples import TupleSerializer
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.flink.statefiles.keyed_header import read_keyed_header

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "flink"
_BASE = "org.apache.flink.api.common.typeutils.base."
_RUNTIME = "org.apache.flink.api.java.typeutils.runtime."
_WINDOWS = "org.apache.flink.streaming.api.windowing.windows."

PRIMITIVE_CLASSES = {
    _BASE + "StringSerializer$StringSerializerSnapshot",
    _BASE + "LongSerializer$LongSerializerSnapshot",
    _BASE + "IntSerializer$IntSerializerSnapshot",
    _BASE + "ShortSerializer$ShortSerializerSnapshot",
    _BASE + "ByteSerializer$ByteSerializerSnapshot",
    _BASE + "BooleanSerializer$BooleanSerializerSnapshot",
    _BASE + "CharSerializer$CharSerializerSnapshot",
    _BASE + "DoubleSerializer$DoubleSerializerSnapshot",
    _BASE + "FloatSerializer$FloatSerializerSnapshot",
    _BASE + "array.BytePrimitiveArraySerializer$BytePrimitiveArraySerializerSnapshot",
    "org.apache.flink.streaming.api.utils.ByteArrayWrapperSerializer"
    "$ByteArrayWrapperSerializerSnapshot",
    "org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot",
    _WINDOWS + "GlobalWindow$Serializer$GlobalWindowSerializerSnapshot",
    _WINDOWS + "TimeWindow$Serializer$TimeWindowSerializerSnapshot",
}
COMPOSITE_CLASSES = {
    _BASE + "ListSerializerSnapshot",
    _BASE + "MapSerializerSnapshot",
    _BASE + "SetSerializerSnapshot",
    _RUNTIME + "NullableSerializer$NullableSerializerSnapshot",
    "org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot",
    "org.apache.flink.streaming.api.operators.TimerSerializerSnapshot",
    _RUNTIME + "TupleSerializerSnapshot",
    _RUNTIME + "RowSerializer$RowSerializerSnapshot",
    _RUNTIME + "PojoSerializerSnapshot",
    _RUNTIME + "kryo.KryoSerializerSnapshot",
}
"""The snapshot classes statesource read before each family had one module (the primitives,
the composites, and Avro)."""
SQL_CLASSES = {ROW_DATA, STRING_DATA, DECIMAL_DATA, TIMESTAMP_DATA, RAW_VALUE_DATA, EXTERNAL,
               NULL}
"""Flink SQL's (flink-table-runtime): read, and written under the savepoint's own snapshots
(never derived from a declaration)."""
KNOWN = (PRIMITIVE_CLASSES | COMPOSITE_CLASSES | JAVA_VALUE_CLASSES | {AVRO_SNAPSHOT}
         | SQL_CLASSES)
COLUMNAR = (PRIMITIVE_CLASSES | {_RUNTIME + "NullableSerializer$NullableSerializerSnapshot",
                                 _RUNTIME + "TupleSerializerSnapshot",
                                 _RUNTIME + "RowSerializer$RowSerializerSnapshot",
                                 _RUNTIME + "PojoSerializerSnapshot", STRING_DATA, EXTERNAL,
                                 ROW_DATA})
"""The classes whose values decode column-wise."""

LONG, STRING = SIMPLE["long"], SIMPLE["string"]
DERIVED: list[tuple[FlinkSerializer, pa.DataType | None]] = [
    *((s, None) for s in SIMPLE.values()), (GLOBAL_WINDOW, None),
    (ListSerializer(LONG), None),
    (MapSerializer(STRING, LONG), None),
    (SetSerializer(LONG), None),
    (NullableSerializer(LONG, 8), pa.int64()),
    (TtlSerializer(STRING), None),
    (TimerSerializer(LONG, SIMPLE["void"]), None),
    (TupleSerializer((LONG, STRING)),
     pa.struct([pa.field("f0", pa.int64()), pa.field("f1", pa.string())])),
    (RowSerializer((LONG,)),
     pa.struct([pa.field("row_kind", pa.string()), pa.field("f0", pa.int64())])),
    (PojoSerializer("com.example.Event", (PojoField("id", LONG),)),
     pa.struct([pa.field("id", pa.int64())])),
    *((JavaValueSerializer(c), None) for c in sorted(JAVA_VALUE_CLASSES)),
]
"""A declared serializer of every class statesource derives, and the Arrow type a column
decoder of a composite one gives (a primitive's decoder says its own)."""


def _refused_snapshots() -> list[FlinkType]:
    """A snapshot of each class that is never derived, as Flink writes it."""
    wrapper = BinaryWriter()
    wrapper.utf(BYTE_ARRAY_WRAPPER)
    wrapper.i32(3)
    kryo = BinaryWriter()
    kryo.utf(KRYO_SNAPSHOT)
    kryo.i32(2)
    kryo.utf("com.example.Blob")
    for _ in range(3):
        kryo.i64(0x4F2C69A3D70)
        kryo.i32(0)
    avro = BinaryWriter()
    avro.utf(AVRO_SNAPSHOT)
    avro.i32(2)
    avro.utf("org.apache.avro.generic.GenericRecord")
    avro.utf('{"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]}')
    return [read_snapshot(BinaryReader(w.getvalue(), "hand-made"))
            for w in (wrapper, kryo, avro, *_sql_snapshots())]


def _sql_snapshots() -> list[BinaryWriter]:
    """A snapshot of each Flink SQL class, as flink-table-runtime writes it (a string's
    ``LogicalType`` and ``DataType`` as Java objects, by tests/java_objects.py)."""
    varchar = logical_type_spec("VARCHAR", length=10)
    data_type = ("object", "org.apache.flink.table.types.AtomicDataType",
                 [("L", "conversionClass", "Ljava/lang/Class;", ("class", "java.lang.String"))],
                 ("object", "org.apache.flink.table.types.DataType",
                  [("L", "logicalType", "Lorg/apache/flink/table/types/logical/LogicalType;",
                    varchar)], None))

    def snapshot(name: str, version: int, payload: bytes = b"") -> BinaryWriter:
        w = BinaryWriter()
        w.utf(name)
        w.i32(version)
        w.raw(payload)
        return w

    def nested(*snapshots: BinaryWriter) -> bytes:
        w = BinaryWriter()
        w.i32(1333245)
        w.i32(1)
        w.i32(len(snapshots))
        for inner in snapshots:
            w.raw(inner.getvalue())
        return w.getvalue()

    composite = struct.Struct(">ii").pack
    string = snapshot(STRING_DATA, 3)
    return [string, snapshot(DECIMAL_DATA, 3, struct.pack(">ii", 10, 2)),
            snapshot(TIMESTAMP_DATA, 1, struct.pack(">i", 3)), snapshot(NULL, 3),
            snapshot(RAW_VALUE_DATA, 3, composite(911108, 0) + nested(snapshot(NULL, 3))),
            snapshot(EXTERNAL, 3, composite(911108, 1) + serialize(data_type) + b"\0"
                     + nested(string)),
            snapshot(ROW_DATA, 3, struct.pack(">i", 1) + serialize(varchar) + nested(string))]


def _examples() -> dict[str, tuple[FlinkType, pa.DataType | None]]:
    found = {}
    for serializer, arrow_type in DERIVED:
        read = flink_type(serializer)
        found[read.serializer] = (read, arrow_type)
    for read in _refused_snapshots():
        arrow_type = pa.string() if read.serializer in (EXTERNAL, STRING_DATA) else None
        if read.serializer == ROW_DATA:  # a value row: its kind, then its fields
            arrow_type = pa.struct([("row_kind", pa.string()), ("f0", pa.string())])
        found[read.serializer] = (read, arrow_type)
    return found


EXAMPLES = _examples()


def _fixture_classes() -> tuple[set[str], set[str]]:
    """The snapshot classes of every keyed-state header of the fixtures, and the classes of
    those refused as unknown (a job's own serializer)."""
    classes: set[str] = set()
    unknown: set[str] = set()
    for metadata in sorted(FIXTURES.glob("**/_metadata")):
        snapshot = FlinkSnapshot.open(str(metadata.parent))
        for op in snapshot.operators:
            for handle in snapshot.keyed_handles(op):
                data = snapshot.read_bytes(handle.stream, 0, handle.stream.size)
                try:
                    header = read_keyed_header(BinaryReader(data, "fixture"))
                except IncompatibleCheckpointError as error:
                    unknown.add(str(error).split("serializer snapshot ", 1)[1].split(" ")[0])
                    continue
                roots = [header.key] + [s for info in header.states
                                        for s in info.serializers.values()]
                classes |= {t.serializer for root in roots for t in root.nested()}
    return classes, unknown


def test_the_registry_holds_every_class_statesource_read_and_no_other():
    assert set(SNAPSHOTS) == KNOWN
    assert set(REFUSED) == {BYTE_ARRAY_WRAPPER, KRYO_SNAPSHOT, AVRO_SNAPSHOT} | SQL_CLASSES
    assert set(EXAMPLES) == KNOWN


def test_every_flink_class_of_the_fixtures_is_registered():
    classes, unknown = _fixture_classes()
    assert classes and classes <= set(SNAPSHOTS)
    assert not any(c.startswith("org.apache.flink.") for c in unknown), unknown


def test_a_class_is_registered_once():
    name = _BASE + "LongSerializer$LongSerializerSnapshot"
    before = SNAPSHOTS[name]
    with pytest.raises(AssertionError, match="registered twice"):
        register(name, before)
    assert SNAPSHOTS[name] is before


def test_the_registry_is_complete_whichever_module_is_imported_first():
    code = ("from statesource.flink.serializers.columns import decoder_for\n"
            "import sys\n"
            "print(len(sys.modules['statesource.flink.serializers.base'].SNAPSHOTS))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == str(len(KNOWN))


@pytest.mark.parametrize("snapshot_class", sorted(KNOWN))
def test_each_class_parses_writes_encodes_and_decodes_in_one_home(snapshot_class):
    read, arrow_type = EXAMPLES[snapshot_class]
    again = read_snapshot(BinaryReader(read.snapshot, "again"))
    assert type(again) is type(read) and again.snapshot == read.snapshot
    if snapshot_class != AVRO_SNAPSHOT:  # a type travels to Spark's tasks (Avro's is compiled)
        assert pickle.loads(pickle.dumps(read)).snapshot == read.snapshot
    family = type(read).__module__
    if snapshot_class in REFUSED:
        with pytest.raises(TypeMismatchError) as refused:
            read.declared()
        assert str(refused.value) == refusal(snapshot_class)
    else:
        declared = read.declared()
        assert snapshot_bytes(declared) == read.snapshot
        assert type(declared).__module__ == family
    assert type(read).encoder is not FlinkType.encoder
    if snapshot_class in SQL_CLASSES:  # SQL state is rewritten under its own snapshots only
        encoder = read.encoder()
        assert callable(encoder.write) and encoder.name
    else:
        assert callable(value_writer(read)) and type_name(read)
    columnar = type(read).column_decoder is not FlinkType.column_decoder
    assert columnar == (snapshot_class in COLUMNAR)
    if columnar:
        if arrow_type is None:
            decoder = read.column_decoder(pa.null())
            assert decoder is not None
            arrow_type = decoder.arrow_type
        decoder = decoder_for(read, arrow_type)
        assert decoder is not None and type(decoder).__module__ in {
            family, "statesource.flink.serializers.columns",
            "statesource.flink.serializers.binary_row_columns"}


def test_an_unknown_class_is_refused_naming_it():
    w = BinaryWriter()
    w.i32(7)  # what comes before it
    w.utf("com.example.CustomSerializer$Snapshot")
    w.i32(1)
    r = BinaryReader(w.getvalue(), "the header")
    r.i32()
    with pytest.raises(IncompatibleCheckpointError) as refused:
        read_snapshot(r)
    assert str(refused.value) == (
        "the header: serializer snapshot com.example.CustomSerializer$Snapshot at byte offset 4"
        " is not supported; its payload cannot be skipped, so the states of this file cannot be"
        " read")

"""Serializer snapshots the real files do not hold: old Row snapshots, POJO declaring classes,
Flink 2.x's nullable collections."""

from __future__ import annotations

import pytest

from statesource.errors import CorruptCheckpointError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.serializers.base import (
    COMPOSITE_MAGIC,
    MAX_SNAPSHOT_NESTING,
    NESTED_MAGIC,
    flink_type,
    read_snapshot,
)
from statesource.flink.serializers.collections import ListSerializer
from statesource.flink.serializers.mapping import extracted_list, extracted_set
from statesource.flink.serializers.nullable import NullableSerializer
from statesource.flink.serializers.pojo import PojoFlinkType
from statesource.flink.serializers.primitives import SIMPLE
from statesource.flink.serializers.rows import RowFlinkType
from statesource.types import Row, RowKind

_ROW = "org.apache.flink.api.java.typeutils.runtime.RowSerializer$RowSerializerSnapshot"
_LONG = "org.apache.flink.api.common.typeutils.base.LongSerializer$LongSerializerSnapshot"
_POJO = "org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot"
_OPTIONAL_MAP = 0x4F2C69A3D70


def _row_snapshot(outer_version: int, flag: bool | None) -> bytes:
    w = BinaryWriter()
    w.utf(_ROW)
    w.i32(3)
    w.i32(COMPOSITE_MAGIC)
    w.i32(outer_version)
    if flag is not None:
        w.boolean(flag)
    w.i32(NESTED_MAGIC)
    w.i32(1)
    w.i32(1)
    w.utf(_LONG)
    w.i32(3)
    return w.getvalue()


def test_row_snapshots_of_every_outer_version_say_whether_rows_carry_their_kind():
    # 4 writes the flag; 3 (Flink 1.11-1.13) always had the kind and writes nothing; 2 never had it
    for outer_version, flag, kind_in_mask in [(4, True, True), (4, False, False), (3, None, True),
                                              (2, None, False)]:
        data = _row_snapshot(outer_version, flag) + b"rest"
        r = BinaryReader(data, "test")
        row = read_snapshot(r)
        assert isinstance(row, RowFlinkType)
        assert row.kind_in_mask is kind_in_mask
        assert data[r.pos:] == b"rest"
    with_kind = read_snapshot(BinaryReader(_row_snapshot(3, None), "test"))
    value = with_kind.read(BinaryReader(bytes([0b0100_0000]) + (7).to_bytes(8, "big"), "value"))
    assert value == Row(7, kind=RowKind.UPDATE_AFTER)


def test_a_pojo_snapshot_keeps_the_class_declaring_each_field():
    w = BinaryWriter()
    w.utf(_POJO)
    w.i32(2)
    w.utf("com.acme.Child")
    w.i64(_OPTIONAL_MAP)
    w.i32(2)
    for declaring, name in [("com.acme.Base", "id"), ("com.acme.Child", "name")]:
        w.utf(name)
        field = BinaryWriter()
        field.utf(declaring)
        field.utf(name)
        w.boolean(True)
        w.length_prefixed(field.getvalue())
        nested = BinaryWriter()
        nested.utf(_LONG)
        nested.i32(3)
        w.boolean(True)
        w.length_prefixed(nested.getvalue())
    for _ in range(2):
        w.i64(_OPTIONAL_MAP)
        w.i32(0)
    pojo = read_snapshot(BinaryReader(w.getvalue(), "test"))
    assert isinstance(pojo, PojoFlinkType)
    assert [name for name, _ in pojo.fields] == ["id", "name"]
    assert pojo.declaring_classes == {"id": "com.acme.Base", "name": "com.acme.Child"}


def test_nullable_and_set_serializers_decode_their_values():
    """Flink 2.x's type extraction makes a POJO's List<String> Nullable(List(Nullable(String)))."""
    strings = flink_type(extracted_list(SIMPLE["string"]))
    w = BinaryWriter()
    w.boolean(False)  # the list is there
    w.i32(3)
    for item in ["a", None, "bc"]:
        w.boolean(item is None)
        if item is not None:
            w.raw(bytes([len(item) + 1]) + item.encode())  # StringValue: ASCII, one byte each
    w.boolean(True)  # then a null list
    r = BinaryReader(w.getvalue(), "values")
    assert strings.read(r) == ["a", None, "bc"]
    assert strings.read(r) is None and r.pos == len(w.getvalue())
    assert strings.avro() == {"type": "array", "items": ["null", "string"]}

    ints = flink_type(extracted_set(SIMPLE["int"]))
    data = bytes([0]) + (2).to_bytes(4, "big") + bytes([0]) + (7).to_bytes(4, "big") + bytes([1])
    assert ints.read(BinaryReader(data, "values")) == [7, None]

    padded = flink_type(NullableSerializer(SIMPLE["long"], padding=8))
    r = BinaryReader(bytes([1]) + bytes(8) + bytes([0]) + (5).to_bytes(8, "big"), "values")
    assert padded.read(r) is None and padded.read(r) == 5


def _lists_of_strings(depth: int) -> bytes:
    """A list of lists ... of strings, ``depth`` lists deep: each list's snapshot ends with
    its element's, so it is the same bytes before the string's each time."""
    strings, lists = BinaryWriter(), BinaryWriter()
    SIMPLE["string"].write(strings)
    ListSerializer(SIMPLE["string"]).write(lists)
    layer = lists.getvalue()[:-len(strings.getvalue())]
    return layer * depth + strings.getvalue()


def test_snapshots_nested_up_to_the_bound_are_read():
    found = read_snapshot(BinaryReader(_lists_of_strings(MAX_SNAPSHOT_NESTING - 1), "deep"))
    for _ in range(MAX_SNAPSHOT_NESTING - 1):
        found = found.element
    assert found.serializer.endswith("StringSerializerSnapshot")


@pytest.mark.parametrize("depth", [MAX_SNAPSHOT_NESTING, 2000])
def test_snapshots_nested_past_the_bound_are_refused_not_a_recursion_error(depth):
    """A hostile header can nest snapshots until Python's stack runs out."""
    with pytest.raises(CorruptCheckpointError,
                       match=f"deep: serializer snapshots nested more than"
                             f" {MAX_SNAPSHOT_NESTING} deep at byte offset"):
        read_snapshot(BinaryReader(_lists_of_strings(depth), "deep"))

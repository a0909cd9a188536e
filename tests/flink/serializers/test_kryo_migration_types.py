"""A 1.x POJO's Kryo ``List``/``Map`` fields typed for Flink 2.x from their values, or refused.

The POJO is ``KryoJob$Profile`` as Flink 1.20 recorded it in the ``kryo`` fixture (its
``counts`` and ``tags`` fields are ``KryoSerializer``s of ``java.util.Map`` and ``List``);
its values are built here by hand, field by field, in Kryo 2's bytes (class names ASCII
with the last byte flagged, a reference marker, the size, each element's class and bytes).
That the types derived from real values are Flink 2.3's is checked end to end by
``tests/flink/operations/test_migrate_kryo.py`` (the header equals Flink 2.3's own).
"""

from __future__ import annotations

import struct

import pytest

from flink_fixture_checks import FIXTURES
from statesource.errors import IncompatibleCheckpointError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.serializers.base import OPTIONAL_MAP_HEADER, read_snapshot
from statesource.flink.serializers.kryo import KRYO_SNAPSHOT, KryoType
from statesource.flink.serializers.kryo_migration import (
    has_kryo,
    kryo_refusal,
    reading_type,
    writing_type,
)
from statesource.flink.snapshot.directory import FlinkSnapshot


def _name(java_class: str) -> bytes:
    data = bytearray(java_class.encode("ascii"))
    data[-1] |= 0x80
    return bytes(data)


ARRAY_LIST = b"\x01\x00" + _name("java.util.ArrayList") + b"\x01"
HASH_MAP = b"\x01\x00" + _name("java.util.HashMap") + b"\x01"
INT_ONE, LONG_ONE, STRING_A = b"\x02\x02", b"\x09\x02", b"\x03\x01\x82a"


@pytest.fixture(scope="module")
def profile():
    snapshot = FlinkSnapshot.open(str(FIXTURES / "kryo" / "flink-1.20" / "canonical"))
    for op in snapshot.operators:
        header = snapshot.header(op)
        for info in header.states if header is not None else ():
            if info.name == "profile":
                return info.value
    raise AssertionError("no profile state")


def _pojo(counts: bytes | None, tags: bytes | None) -> bytes:
    """Fields by name: counts, name (null), tags, visits (7)."""
    def field(data: bytes | None) -> bytes:
        return b"\x01" if data is None else b"\x00" + data
    return b"\x02" + field(counts) + b"\x01" + field(tags) + b"\x00" + struct.pack(">q", 7)


def _read_all(profile, values: list[bytes]):
    reading = reading_type(profile, "state 'profile'")
    read = [reading.read(BinaryReader(v, "file")) for v in values]
    return reading, read


def test_elements_of_one_class_give_the_field_its_type(profile):
    reading, read = _read_all(profile, [
        _pojo(HASH_MAP + b"\x01" + STRING_A + LONG_ONE, ARRAY_LIST + b"\x02" + STRING_A + b"\x00"),
        _pojo(None, None)])
    assert read[0] == {"counts": {"a": 1}, "name": None, "tags": ["a", None], "visits": 7}
    assert read[1]["tags"] is None
    written = writing_type(reading)
    fields = dict(written.fields)
    assert fields["tags"].describe() != "Kryo java.util.List field"
    assert "ListSerializer" in fields["tags"].inner.serializer


@pytest.mark.parametrize("tags, problem", [
    (ARRAY_LIST + b"\x02" + INT_ONE + STRING_A, "they are of java.lang.Integer, java.lang.String"),
    (ARRAY_LIST + b"\x01\x00", "no value holds one"),
])
def test_a_field_of_unknown_element_type_refuses_the_state(profile, tags, problem):
    reading, _ = _read_all(profile, [_pojo(HASH_MAP + b"\x01" + STRING_A + LONG_ONE, tags)])
    with pytest.raises(IncompatibleCheckpointError,
                       match=f"field 'tags'.*element type .* not known.*{problem}"):
        writing_type(reading)


@pytest.mark.parametrize("counts, problem", [
    (HASH_MAP + b"\x01" + STRING_A + b"\x01\x01" + _name("com.a.Thing") + b"\x01",
     r"file, field 'counts', byte offset \d+: a Kryo value of com.a.Thing"),
    (ARRAY_LIST + b"\x00", "a java.util.ArrayList in a java.util.Map field"),
    (HASH_MAP + b"\x01" + b"\x0a" + b"\x00" * 8 + LONG_ONE, "a java.lang.Double key"),
])
def test_what_a_field_cannot_hold_refuses_the_state(profile, counts, problem):
    with pytest.raises(IncompatibleCheckpointError, match=problem):
        _read_all(profile, [_pojo(counts, None)])


def test_a_user_class_under_kryo_is_refused_from_the_snapshot(profile):
    assert kryo_refusal(profile) == ""
    note = FlinkSnapshot.open(str(FIXTURES / "kryo" / "flink-1.20" / "canonical"))
    infos = [i for op in note.operators if note.header(op) is not None
             for i in note.header(op).states if i.name == "note"]
    assert "KryoJob$Note, whose field layout the snapshot does not carry" in kryo_refusal(
        infos[0].value)


def _kryo_snapshot(registrations: list[tuple[str, int, str]],
                   defaults: list[str] = ()) -> bytes:
    """A Kryo snapshot as Flink writes it (``KryoSerializerSnapshotData``): the class, then
    the registrations (class, kind, serializer class), then two maps of default serializers."""
    w = BinaryWriter()
    w.utf(KRYO_SNAPSHOT)
    w.i32(2)
    w.utf("java.util.UUID")
    w.i64(OPTIONAL_MAP_HEADER)
    w.i32(len(registrations))
    for name, kind, serializer in registrations:
        key, value = BinaryWriter(), BinaryWriter()
        key.utf(name)
        value.utf(name)
        value.i32(kind)
        if kind:
            value.utf(serializer)
        w.utf(name)
        w.boolean(True)
        w.length_prefixed(key.getvalue())
        w.boolean(True)
        w.length_prefixed(value.getvalue())
    for entries in (defaults, []):
        w.i64(OPTIONAL_MAP_HEADER)
        w.i32(len(entries))
        for name in entries:
            w.utf(name)
            w.boolean(False)
            w.boolean(False)
    return w.getvalue()


AVRO = ("org.apache.avro.generic.GenericData$Array", 1,
        "org.apache.flink.api.java.typeutils.runtime.kryo.Serializers"
        "$DummyAvroKryoSerializerClass")


@pytest.mark.parametrize("registrations, defaults, problem", [
    ([("java.util.UUID", 0, ""), AVRO], [], ""),
    ([("java.util.UUID", 0, ""), ("com.a.Thing", 1, "com.a.ThingSerializer"), AVRO], [],
     "a custom Kryo serializer of com.a.Thing"),
    ([("java.util.UUID", 0, ""), AVRO], ["com.a.Thing"],
     "default Kryo serializers for com.a.Thing"),
    # 1.20 (flink-scala) has scala.Tuple2 at id 37, so a job's registration of it takes no
    # id and ArrayList gets 85; 2.3 gives Tuple2 85 and ArrayList 86 (both checked in Java)
    ([("java.util.UUID", 0, ""), ("scala.Tuple2", 0, ""), ("java.util.ArrayList", 0, ""),
      AVRO], [], "Kryo registration of the Scala class scala.Tuple2"),
])
def test_the_jobs_own_kryo_serializers_are_refused(registrations, defaults, problem):
    data = _kryo_snapshot(registrations, defaults)
    r = BinaryReader(data, "header")
    kryo = read_snapshot(r)
    assert r.at_end() and kryo.registered[0] == "java.util.UUID"
    assert (problem in kryo_refusal(kryo)) and bool(kryo_refusal(kryo)) == bool(problem)


@pytest.mark.parametrize("registered", [(), ("java.util.UUID",),
                                        ("java.util.UUID", "java.util.Date"),
                                        ("a.B", "c.D", "e.F")])
def test_a_kryo_snapshot_of_any_registration_count_is_found_nested(registered):
    """Bug fixed: a Kryo snapshot registering fewer than two classes crashed ``nested()``
    (its tuple of class names was taken for a POJO's (name, field) pair)."""
    kryo = KryoType(KRYO_SNAPSHOT, "java.util.UUID", registered, "")
    assert kryo.nested() == [kryo]
    assert has_kryo(kryo)

"""Flink 1.x Kryo values found where they end without a frame (a native snapshot's values).

:class:`Kryo2Framed` reads one value at a time from bytes holding more after it: it must
consume exactly one value (real Kryo 2 bytes of 1.20, test_kryo_reencoding.py's), whatever
follows, and on any bytes answer with a prefix of them or refuse with one of our errors.
The fixtures' native snapshots (1.15 to 1.20) check it against real Flink's files:
tests/flink/snapshot/test_generated_fixtures.py, test_migrate_kryo_native.py.
"""

from __future__ import annotations

import contextlib

from hypothesis import given, settings
from hypothesis import strategies as st
from test_kryo_reencoding import AVRO_DUMMY, VALID

from statesource.errors import CorruptCheckpointError, IncompatibleCheckpointError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.serializers.kryo import KRYO_SNAPSHOT, KryoType
from statesource.flink.serializers.kryo2_framing import Kryo2Framed, kryo2_framed

ARRAY_LIST = "java.util.ArrayList"
FRAMED = Kryo2Framed(KryoType(KRYO_SNAPSHOT, ARRAY_LIST, (ARRAY_LIST, AVRO_DUMMY), ""))
"""A serializer of ``ArrayList`` (class id 85, as VALID's ``list`` is written)."""


@given(st.lists(st.sampled_from(sorted(VALID)), max_size=6), st.binary(max_size=12))
def test_values_are_found_one_after_another(names, tail):
    data = b"".join(VALID[name][1] for name in names) + tail
    r = BinaryReader(data, "file.bin")
    for name in names:
        assert FRAMED.read(r) == VALID[name][1]
    assert r.pos == len(data) - len(tail)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=60))
def test_any_bytes_give_a_prefix_or_are_refused(data):
    r = BinaryReader(data, "file.bin")
    with contextlib.suppress(CorruptCheckpointError, IncompatibleCheckpointError):
        assert data.startswith(FRAMED.read(r))  # anything else (an IndexError) fails the test


def test_a_class_it_cannot_parse_names_where_and_what_to_do():
    user = bytes.fromhex("0100636f6d2e612e557365f201")  # a com.a.User, by name
    r = BinaryReader(user + b"\x00", "file.bin")
    try:
        FRAMED.read(r)
    except IncompatibleCheckpointError as error:
        assert "com.a.User" in str(error) and "a canonical savepoint frames" in str(error)
    else:
        raise AssertionError("a user class was read past")


def test_only_what_can_be_parsed_is_framed():
    plain = KryoType(KRYO_SNAPSHOT, ARRAY_LIST, (ARRAY_LIST, AVRO_DUMMY), "")
    framed = kryo2_framed(plain)
    assert isinstance(framed, Kryo2Framed)
    assert (framed.java_class, framed.registered) == (plain.java_class, plain.registered)
    for refused in (KryoType(KRYO_SNAPSHOT, "com.a.User", ("com.a.User", AVRO_DUMMY), ""),
                    KryoType(KRYO_SNAPSHOT, ARRAY_LIST, (ARRAY_LIST, AVRO_DUMMY),
                             "a custom Kryo serializer of java.util.ArrayList"),
                    KryoType(KRYO_SNAPSHOT, "scala.Option", ("scala.Option", AVRO_DUMMY), "")):
        assert kryo2_framed(refused) is refused

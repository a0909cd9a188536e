"""Kryo 2 bytes of Flink 1.20 re-encoded as the Kryo 5 bytes of Flink 2.3, against both real Flinks.

The truth is ``tests/flinkrestore/KryoVectors.java`` run on Flink 1.20.5's jars (the bytes to
decode) and on Flink 2.3's (the bytes to produce, and a read of statesource's bytes by 2.3's
``KryoSerializer``, which must give a value equal to the original): one JVM per Flink per
batch. The decoded value is checked against a model built from the spec alone
(``tests/kryo_truth.py``). Marked ``realflink``. The hostile-bytes tests need no JVM.
"""

from __future__ import annotations

import base64
import contextlib
import json
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kryo_truth import AVRO_DUMMY, ENUM_CONSTANTS, canonical, expected, run_1x, run_kryo_vectors

from statesource.errors import CorruptCheckpointError, IncompatibleCheckpointError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.serializers.kryo2 import Kryo2Reader
from statesource.flink.serializers.kryo5 import Kryo5Writer
from statesource.flink.serializers.kryo_classes import JavaObject, KryoRegistry

LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
OBJECT = "java.lang.Object"
FIXED = {
    "null": ("java.util.UUID", None),
    "uuid": ("java.util.UUID", ["uuid", str(LONG_MIN), str(LONG_MAX)]),
    "string of one char": (OBJECT, ["str", "a"]),
    "string of 32 ascii": (OBJECT, ["str", "x" * 32]),
    "string of 33 ascii": (OBJECT, ["str", "x" * 33]),
    "string of 63 ascii": (OBJECT, ["str", "y" * 63]),
    "string of 64 ascii": (OBJECT, ["str", "y" * 64]),
    "string with surrogates": (OBJECT, ["str", "a\U0001F600\ud800b\x00"]),
    "long string": (OBJECT, ["str", "é" * 9000]),
    "nan payload": (OBJECT, ["double", str(0x7FF0000000000001)]),
    "negative date": (OBJECT, ["date", LONG_MIN]),
    "zero bigdecimal": (OBJECT, ["bigdec", "0", 0]),
    "huge bigdecimal": (OBJECT, ["bigdec", str(-(1 << 200)), -7]),
    "negative powers of 256": (OBJECT, ["list", [["bigint", "-128"], ["bigint", str(LONG_MIN)],
                                                 ["bigdec", "-32768", 2]]]),
    "enum repeated": (OBJECT, ["list", [["enum", "java.util.concurrent.TimeUnit", "DAYS"],
                                        ["enum", "java.util.concurrent.TimeUnit", "DAYS"],
                                        ["ref", 0]]]),
    "shared string and uuid": ("java.util.ArrayList", ["list", [
        ["str", "s"], ["uuid", "1", "2"], ["ref", 0], ["ref", 1], ["linkedlist", [["ref", 1]]]]]),
    "nulls of one class": ("java.util.List", ["list", [["long", 1], None, ["long", 2]]]),
    "strings and nulls": ("java.util.List", ["linkedlist", [["str", "a"], None]]),
    "only nulls": ("java.util.List", ["list", [None, None]]),
    "empty treeset": (OBJECT, ["treeset", []]),
    "empty map": ("java.util.Map", ["hashmap", []]),
    "nested maps": ("java.util.HashMap", ["hashmap", [
        [["str", "k"], ["treemap", [[["str", "b"], ["list", []]], [["str", "a"], None]]]],
        [["long", 5], ["linkedhashmap", [[["int", 1], ["bigint", "-129"]]]]]]]),
    "ordered set": ("java.util.Set", ["linkedhashset", [["bool", True], ["char", 0xFFFF],
                                                        ["short", -1], ["byte", 127],
                                                        ["float", -1], ["char", 0x20AC],
                                                        ["short", -2]]]),
}


REGISTERED = {"registered classes": (OBJECT, ["list", [["bigdec", "5", 1], ["linkedlist", []],
                                                      ["list", []]]])}
"""Cases whose job registers BigDecimal and ArrayList with Kryo (ids after the declared one)."""
JOB_REGISTERED = ["java.math.BigDecimal", "java.util.ArrayList"]


def _registry(declared: str, registered: list[str] = ()) -> KryoRegistry:
    """The class ids of a Kryo serializer, as its snapshot lists them: the declared class,
    the job's, then the one Flink adds for Avro."""
    return KryoRegistry.of([declared, *registered, AVRO_DUMMY])


def _reencoded(declared: str, data: bytes, where: str, registered: list[str] = ()
               ) -> tuple[JavaObject | None, bytes]:
    r = BinaryReader(data, where)
    value = Kryo2Reader(_registry(declared, registered), where).read(r)
    assert r.at_end(), f"{where}: {r.remaining()} bytes left"
    return value, Kryo5Writer(_registry(declared, registered)).write(value)


def _check_against_flink(cases: dict[str, tuple[str, object]], registered: list[str] = ()
                         ) -> None:
    """Decode 1.20's bytes (equal to the spec's model), re-encode, and compare with 2.3's
    bytes; 2.3 must read ours back to an equal value."""
    given_cases = [{"id": k, "declared": d, "value": v, "registered": list(registered)}
                   for k, (d, v) in cases.items()]
    old = run_1x(given_cases)
    ours = {}
    for case in given_cases:
        value, ours[case["id"]] = _reencoded(case["declared"], old[case["id"]], case["id"],
                                             registered)
        assert canonical(value) == canonical(expected(case["value"])), case["id"]
    new = run_kryo_vectors([{**c, "check": base64.b64encode(ours[c["id"]]).decode()}
                            for c in given_cases])
    mismatched = {k: (ours[k].hex(), new[k].hex()) for k in ours if ours[k] != new[k]}
    assert not mismatched


@pytest.mark.realflink
def test_fixed_values_are_flink_2s_bytes():
    _check_against_flink(FIXED)


@pytest.mark.realflink
def test_classes_the_job_registers_keep_their_ids():
    _check_against_flink(REGISTERED, JOB_REGISTERED)
    snapshots = [{"id": "s", "snapshot": OBJECT, "registered": JOB_REGISTERED}]
    assert run_1x(snapshots) == run_kryo_vectors(snapshots)  # 2.x writes 1.x's snapshot


@pytest.mark.realflink
def test_kryo_snapshots_are_the_same_in_flink_2():
    snapshots = [{"id": c, "snapshot": c} for c in ("java.util.UUID", "java.util.ArrayList",
                                                   "java.util.HashMap", OBJECT)]
    assert run_1x(snapshots) == run_kryo_vectors(snapshots)


@pytest.mark.realflink
def test_back_references_stay_references():
    """1.20 writes a shared object once, then a reference: decoded, it is one object."""
    data = run_1x([{"id": "v", "declared": "java.util.ArrayList",
                    "value": FIXED["shared string and uuid"][1]}])["v"]
    value, _ = _reencoded("java.util.ArrayList", data, "v")
    assert value is not None
    first, uuid, again, uuid_again, inner = value.content
    assert again is first and uuid_again is uuid and inner.content[0] is uuid


def _signed(bits: int, width: int) -> int:
    return bits - (1 << width) if bits >= 1 << (width - 1) else bits


TEXT = st.one_of(st.text(max_size=20), st.text(string.ascii_letters, min_size=30, max_size=70),
                 st.text(st.sampled_from(["\ud800", "\udfff", "\x00", "é", "€", "a"]),
                         max_size=5))
KEYS = st.one_of(
    TEXT.map(lambda s: ["str", s]),
    st.integers(-(1 << 31), (1 << 31) - 1).map(lambda n: ["int", n]),
    st.integers(LONG_MIN, LONG_MAX).map(lambda n: ["long", n]),
    st.tuples(st.integers(LONG_MIN, LONG_MAX), st.integers(LONG_MIN, LONG_MAX)).map(
        lambda t: ["uuid", str(t[0]), str(t[1])]))
SCALARS = st.one_of(
    KEYS,
    st.integers(-(1 << 15), (1 << 15) - 1).map(lambda n: ["short", n]),
    st.integers(-128, 127).map(lambda n: ["byte", n]),
    st.integers(0, 0xFFFFFFFF).map(lambda b: ["float", _signed(b, 32)]),
    st.integers(0, (1 << 64) - 1).map(lambda b: ["double", str(_signed(b, 64))]),
    st.booleans().map(lambda b: ["bool", b]),
    st.integers(0, 0xFFFF).map(lambda c: ["char", c]),
    st.tuples(st.integers(-(1 << 130), 1 << 130), st.integers(-(1 << 31), (1 << 31) - 1)).map(
        lambda t: ["bigdec", str(t[0]), t[1]]),
    st.integers(-(1 << 100), 1 << 100).map(lambda n: ["bigint", str(n)]),
    st.integers(LONG_MIN, LONG_MAX).map(lambda n: ["date", n]),
    st.sampled_from([["enum", c, n] for c, names in ENUM_CONSTANTS.items() for n in names]))
STRING_SPECS = TEXT.map(lambda s: ["str", s])


def _containers(children: st.SearchStrategy) -> st.SearchStrategy:
    optional = st.one_of(st.none(), children)
    unique = {"unique_by": json.dumps}
    return st.one_of(
        st.tuples(st.sampled_from(["list", "linkedlist"]), st.lists(optional, max_size=5)),
        st.tuples(st.sampled_from(["hashset", "linkedhashset"]),
                  st.lists(KEYS, max_size=5, **unique)),
        st.tuples(st.just("treeset"), st.lists(STRING_SPECS, max_size=5,
                                               unique_by=lambda s: s[1])),
        st.tuples(st.sampled_from(["hashmap", "linkedhashmap"]),
                  st.lists(st.tuples(KEYS, optional), max_size=4,
                           unique_by=lambda kv: json.dumps(kv[0]))),
        st.tuples(st.just("treemap"), st.lists(st.tuples(STRING_SPECS, optional), max_size=4,
                                               unique_by=lambda kv: kv[0][1])),
    ).map(lambda t: [t[0], [list(i) if isinstance(i, tuple) else i for i in t[1]]])


VALUES = st.recursive(SCALARS, _containers, max_leaves=12)
DECLARED = st.sampled_from([OBJECT, "java.util.ArrayList", "java.util.HashMap",
                            "java.lang.String", "java.util.UUID"])


@pytest.mark.realflink
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(DECLARED, st.one_of(st.none(), VALUES)), min_size=40, max_size=40))
def test_random_values_are_flink_2s_bytes(values):
    _check_against_flink({f"v{i}": (d, v) for i, (d, v) in enumerate(values)})


# -- hostile bytes (no JVM) ---------------------------------------------------------------------

VALID = {  # 1.20's bytes, written by KryoVectors.java
    "list": ("java.util.ArrayList",  # "a", 1, null, a UUID and that UUID again
             bytes.fromhex("57010503018261020200540102045404")),
    "names": (OBJECT, bytes.fromhex(  # an ArrayList of BigInteger 1, 2 and an empty ArrayList
        "01006a6176612e7574696c2e41727261794c6973f4010301016a6176612e6d6174682e426967496e"
        "74656765f2010201010101020201000100")),
}


ARRAY_LIST = bytes.fromhex("01006a6176612e7574696c2e41727261794c6973f4")
"""The class of an ArrayList, by name (the first name of a value)."""


def _decode(declared: str, data: bytes) -> None:
    r = BinaryReader(data, "file.bin", base=100)
    Kryo2Reader(_registry(declared), "state 'v'").read(r)


@pytest.mark.parametrize("number", [0, -1, 127, 128, -128, -129, -(1 << 15), -(1 << 31),
                                    LONG_MIN, LONG_MIN - 1])
def test_a_big_integer_is_java_s_minimal_bytes_both_ways(number):
    """``BigInteger.toByteArray`` is the shortest two's complement: -128 is one byte (Python's
    ``bit_length`` counts 8 bits for it). Class by name, a new object, the length + 1, the
    bytes: the same in Kryo 2 and 5 (a name of 20 ASCII characters)."""
    size = 1
    while not -(1 << (8 * size - 1)) <= number < 1 << (8 * size - 1):
        size += 1
    data = (b"\x01\x00java.math.BigIntege\xf2\x01" + bytes([size + 1])
            + number.to_bytes(size, "big", signed=True))
    value, again = _reencoded(OBJECT, data, "v")
    assert value is not None and value.content == number
    assert again == data


@pytest.mark.parametrize("name", VALID)
def test_every_truncation_is_refused_with_its_offset(name):
    declared, data = VALID[name]
    _decode(declared, data)
    for end in range(len(data)):
        with pytest.raises(CorruptCheckpointError, match=r"file\.bin: .* at byte offset \d+"):
            _decode(declared, data[:end])


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=60), st.sampled_from([OBJECT, "java.util.UUID"]))
def test_any_bytes_decode_or_are_refused(data, declared):
    with contextlib.suppress(CorruptCheckpointError, IncompatibleCheckpointError):
        _decode(declared, data)  # anything else (an IndexError, a hang) fails the test


@pytest.mark.parametrize("data, error, match", [
    (ARRAY_LIST + bytes.fromhex("01ffffffff0f"), CorruptCheckpointError, "ArrayList size"),
    (ARRAY_LIST + bytes.fromhex("0101010002"), IncompatibleCheckpointError, "contains itself"),
    (bytes.fromhex("0c"), IncompatibleCheckpointError, "Scala"),
    (bytes.fromhex("b001"), IncompatibleCheckpointError, "class id 174"),
    (bytes.fromhex("0100636f6d2e612e557365f201"), IncompatibleCheckpointError, "com.a.User"),
    (bytes.fromhex("0305"), CorruptCheckpointError, "reference 3 to no object"),
    (bytes.fromhex("028000"), CorruptCheckpointError, "non-minimal"),
    (bytes.fromhex("0502"), CorruptCheckpointError, "boolean"),
    (bytes.fromhex("5400"), CorruptCheckpointError, "null reference"),
    (bytes.fromhex("030180"), CorruptCheckpointError, "null String"),
    (bytes.fromhex("03018461"), CorruptCheckpointError, "string length"),
    (bytes.fromhex("0301836162"), CorruptCheckpointError, "does not write so"),
])
def test_hostile_values_are_refused(data, error, match):
    with pytest.raises(error, match=match):
        _decode(OBJECT, data)


def test_deep_nesting_is_refused_without_recursing_forever():
    data = ARRAY_LIST + b"\x01\x01" + (b"\x01\x00\x01\x01" * 500) + b"\x00"
    with pytest.raises(IncompatibleCheckpointError, match="nested deeper"):
        _decode(OBJECT, data)

"""``migrate``'s fast path (Kryo 2 bytes to 2.x bytes directly) against its exact path.

The exact path (Kryo 2 decoded into Java objects, written again as Kryo 5 or as Flink 2.x's
collection serializers) is checked against both real Flinks by ``test_kryo_reencoding.py``
and ``tests/flink/operations/test_migrate_kryo*.py``; here the fast path must give its bytes
exactly, for random values of every shape it takes, and leave to it every value it does not
take: the shapes it does not handle, and every corrupt or hostile value, which the exact
path then refuses naming the state.

Kryo 2 bytes are built here from :class:`JavaObject` trees (:func:`kryo2`), as Kryo 2.24
writes them (the class by registered id or by name once per value, a reference marker
before every object but the boxed primitives, big-endian fixed-size numbers, Chill's
``UUID``); the exact reader refuses anything else, which the tests check first.
"""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from kryo_truth import AVRO_DUMMY

from flink_fixture_checks import FIXTURES
from statesource.errors import CorruptCheckpointError, IncompatibleCheckpointError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.operations.reencode import KeptValues, StateRecoder
from statesource.flink.serializers import kryo_classes as jdk
from statesource.flink.serializers.encoding import encoder_of
from statesource.flink.serializers.kryo import KRYO_SNAPSHOT, KryoType
from statesource.flink.serializers.kryo2 import Kryo2Reader, kryo2_string
from statesource.flink.serializers.kryo5 import Kryo5Writer
from statesource.flink.serializers.kryo5 import varint as _varint
from statesource.flink.serializers.kryo_classes import JavaObject, KryoRegistry
from statesource.flink.serializers.kryo_columns import Values
from statesource.flink.serializers.kryo_migration import (
    Kryo2Collection,
    Kryo2Value,
    reading_type,
    writing_type,
)
from statesource.flink.serializers.kryo_transcode import Fallback, transcoder
from statesource.flink.serializers.pojo import PojoFlinkType
from statesource.flink.serializers.primitives import SIMPLE, PrimitiveType
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.flink.statefiles.keyed_header import same_state

LONG = (-(1 << 63), (1 << 63) - 1)
INT = (-(1 << 31), (1 << 31) - 1)
OBJECT = "java.lang.Object"
REGISTRATIONS = [[], ["java.util.ArrayList", "java.math.BigDecimal"],
                 ["java.util.HashMap", "java.util.concurrent.TimeUnit", "java.lang.String"]]
"""The job's Kryo registrations: none, or classes then written by id (String is Flink's
already: no new id)."""


# -- Kryo 2's bytes of Java objects ------------------------------------------------------------

def _zigzag(value: int, bits: int) -> bytes:
    return _varint(((value << 1) ^ (value >> (bits - 1))) & ((1 << bits) - 1))


def _big_integer(number: int) -> bytes:
    size = 1
    while not -(1 << (8 * size - 1)) <= number < 1 << (8 * size - 1):
        size += 1
    return _varint(size + 1) + number.to_bytes(size, "big", signed=True)


def kryo2(value: JavaObject | None, registry: KryoRegistry) -> bytes:
    """``writeClassAndObject`` of Kryo 2.24 with references on (an object met again is a
    reference to the number of its first write)."""
    ids = {name: class_id for class_id, name in registry.ids.items()}
    names: dict[str, int] = {}
    objects: dict[int, int] = {}
    out = bytearray()

    def write(item: JavaObject | None) -> None:
        if item is None:
            out.append(0)
            return
        java_class = item.java_class
        if java_class in ids:
            out.extend(_varint(ids[java_class] + 2))
        elif java_class in names:
            out.extend(b"\x01" + _varint(names[java_class]))
        else:
            names[java_class] = len(names)
            out.extend(b"\x01" + _varint(names[java_class]) + kryo2_string(java_class))
        if java_class not in jdk.WRAPPERS:
            if id(item) in objects:
                out.extend(_varint(objects[id(item)] + 2))
                return
            objects[id(item)] = len(objects)
            out.append(1)
        content(item)

    def content(item: JavaObject) -> None:
        java_class, value = item.java_class, item.content
        packed = {jdk.BYTE: ">b", jdk.SHORT: ">h", jdk.CHARACTER: ">H", jdk.FLOAT: ">I",
                  jdk.DOUBLE: ">Q"}
        if java_class == jdk.STRING:
            out.extend(kryo2_string(value))
        elif java_class == jdk.INTEGER:
            out.extend(_zigzag(value, 32))
        elif java_class == jdk.LONG:
            out.extend(_zigzag(value, 64))
        elif java_class == jdk.BOOLEAN:
            out.append(int(value))
        elif java_class in packed:
            out.extend(struct.pack(packed[java_class], value))
        elif java_class == jdk.UUID:
            out.extend(_zigzag(value[0], 64) + _zigzag(value[1], 64))
        elif java_class == jdk.DATE:
            out.extend(_varint(value & ((1 << 64) - 1)))
        elif java_class == jdk.BIG_INTEGER:
            out.extend(_big_integer(value))
        elif java_class == jdk.BIG_DECIMAL:
            out.extend(_big_integer(value[0]) + _zigzag(value[1], 32))
        elif java_class in jdk.ENUMS:
            out.extend(_varint(value + 1))
        else:
            if java_class in jdk.SORTED:
                out.append(0)  # the null comparator: natural order
            out.extend(_varint(len(value)))
            for element in value:
                for part in (element if java_class in jdk.MAPS else (element,)):
                    write(part)
    write(value)
    return bytes(out)


def _java(java_class: str) -> callable:
    return lambda content: JavaObject(java_class, content)


ASCII = st.one_of(st.text(st.characters(max_codepoint=0x7F), max_size=70),
                 st.integers(0, 128).map(lambda n: "x" * n),
                 st.sampled_from([0, 1, 2, 31, 32, 33, 63, 64, 126, 127]).flatmap(
                     lambda n: st.text(st.characters(max_codepoint=0x7F), min_size=n,
                                       max_size=n)))
"""ASCII text, often of the lengths where Kryo's or Flink's forms change."""
TEXT = st.one_of(ASCII, st.text(st.characters(max_codepoint=0xFFFF), max_size=8))
SCALARS = st.one_of(
    TEXT.map(_java(jdk.STRING)),
    st.integers(*INT).map(_java(jdk.INTEGER)), st.integers(*LONG).map(_java(jdk.LONG)),
    st.booleans().map(_java(jdk.BOOLEAN)), st.integers(-128, 127).map(_java(jdk.BYTE)),
    st.integers(-(1 << 15), (1 << 15) - 1).map(_java(jdk.SHORT)),
    st.integers(0, 0xFFFF).map(_java(jdk.CHARACTER)),
    st.integers(0, (1 << 32) - 1).map(_java(jdk.FLOAT)),
    st.integers(0, (1 << 64) - 1).map(_java(jdk.DOUBLE)),
    st.tuples(st.integers(*LONG), st.integers(*LONG)).map(_java(jdk.UUID)),
    st.integers(*LONG).map(_java(jdk.DATE)),
    st.integers(-(1 << 100), 1 << 100).map(_java(jdk.BIG_INTEGER)),
    st.tuples(st.integers(-(1 << 70), 1 << 70), st.integers(*INT)).map(_java(jdk.BIG_DECIMAL)),
    st.sampled_from([(name, n) for name, count in jdk.ENUMS.items() for n in range(count)])
    .map(lambda e: JavaObject(*e)))


def _containers(children: st.SearchStrategy) -> st.SearchStrategy:
    optional = st.one_of(st.none(), children)
    return st.one_of(
        st.tuples(st.sampled_from(sorted(jdk.COLLECTIONS)), st.lists(optional, max_size=5))
        .map(lambda c: JavaObject(*c)),
        st.tuples(st.sampled_from(sorted(jdk.MAPS)),
                  st.lists(st.tuples(optional, optional), max_size=4))
        .map(lambda c: JavaObject(*c)))


VALUES = st.recursive(SCALARS, _containers, max_leaves=12)


def _exact(registry: KryoRegistry, data: bytes) -> bytes:
    """The exact path: Kryo 2 decoded into Java objects, written as Kryo 5."""
    r = BinaryReader(data, "file.bin")
    value = Kryo2Reader(registry, "state 'v'").read(r)
    if not r.at_end():
        raise CorruptCheckpointError(f"{r.remaining()} bytes after the value")
    return Kryo5Writer(registry).write(value)


def _fast(registered: list[str], map_value: bool = False, list_elements: bool = False):
    kryo = KryoType(KRYO_SNAPSHOT, OBJECT, (OBJECT, *registered, AVRO_DUMMY), "")
    fast = transcoder(Kryo2Value(kryo), map_value, list_elements)
    assert fast is not None
    return fast, KryoRegistry.of([OBJECT, *registered, AVRO_DUMMY])


def _strings(value: JavaObject | None) -> list[str]:
    if value is None:
        return []
    if value.java_class == jdk.STRING:
        return [value.content]
    if value.java_class in jdk.COLLECTIONS:
        return [s for item in value.content for s in _strings(item)]
    if value.java_class in jdk.MAPS:
        return [s for pair in value.content for item in pair for s in _strings(item)]
    return []


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.none(), VALUES), st.sampled_from(REGISTRATIONS))
def test_values_are_the_exact_paths_bytes(value, registered):
    """Every value the fast path takes is the exact path's bytes; it takes every value of
    its shapes: all but a null and non-ASCII text (then the exact path re-encodes it)."""
    fast, registry = _fast(registered)
    data = kryo2(value, registry)
    exact = _exact(registry, data)
    if value is None or not all(text.isascii() for text in _strings(value)):
        with pytest.raises(Fallback):
            fast(data)
        return
    assert fast(data) == exact


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(VALUES, min_size=1, max_size=3), st.integers(0, 1))
def test_a_map_states_flag_and_a_list_states_elements_frame_the_values(values, flag):
    """A map state's value is its null flag, then the value; a list state's elements are
    separated by commas: both kept around the transcoded values."""
    assume(all(text.isascii() for value in values for text in _strings(value)))
    as_map, registry = _fast([], map_value=True)
    as_list, _ = _fast([], list_elements=True)
    parts = [kryo2(value, registry) for value in values]
    assert as_map(bytes([flag]) + parts[0]) == bytes([flag]) + _exact(registry, parts[0])
    assert as_list(b",".join(parts)) == b",".join(_exact(registry, p) for p in parts)
    with pytest.raises(Fallback):
        as_list(b",".join(parts) + b",")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), VALUES, st.sampled_from(REGISTRATIONS))
def test_corrupt_bytes_are_left_to_the_exact_path(data, value, registered):
    """A value with a byte changed, cut short or grown: what the fast path takes is what
    the exact path re-encodes; all else it leaves, and the exact path names the fault."""
    fast, registry = _fast(registered)
    _agree(fast, registry, mutated(data, kryo2(value, registry)))


def mutated(data: st.DataObject, value: bytes) -> bytes:
    """``value`` with a byte changed, cut short, or grown by a few bytes."""
    raw = bytearray(value)
    at = data.draw(st.integers(0, len(raw) - 1))
    how = data.draw(st.sampled_from(["change", "cut", "grow"]))
    if how == "change":
        raw[at] = data.draw(st.integers(0, 255))
    elif how == "cut":
        del raw[at:]
    else:
        raw[at:at] = data.draw(st.binary(min_size=1, max_size=3))
    return bytes(raw)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=40), st.sampled_from(REGISTRATIONS))
def test_any_bytes_are_taken_as_the_exact_path_takes_them(data, registered):
    fast, registry = _fast(registered)
    _agree(fast, registry, data)


def _agree(fast, registry: KryoRegistry, data: bytes) -> None:
    try:
        taken = fast(data)
    except Fallback:
        return
    assert taken == _exact(registry, data)  # raises where the exact path refuses


HASH_MAP = b"\x01\x00java.util.HashMa\xf0"


@pytest.mark.parametrize("data", [
    "028000", "02ffffffff1f", "09808080808080808000", "5401" + "80" * 9, "0502",
    "030180", "0301836162", "03018461", "0301" + "61" * 63 + "e1", "0305",
    "0101", "0100616263", "b001", "0c", "0b", "5400", "5402",
    HASH_MAP.hex() + "0102", HASH_MAP.hex() + "018000", HASH_MAP.hex() + "0101" + "01",
    "01006a6176612e7574696c2e5472656553e5" + "01" + "0301" + "8100",
    "01006a6176612e6d6174682e426967496e74656765f2" + "01" + "03" + "0001",
    "01006a6176612e6d6174682e426967496e74656765f2" + "01" + "01",
    "01006a6176612e7574696c2e636f6e63757272656e742e54696d65556e69f4" + "01" + "08",
])
def test_hostile_values_are_left_to_the_exact_path_which_refuses_them(data):
    """Non-minimal varints, a boolean 2, a null String after its class, a string Kryo 2
    writes otherwise, a reference, a void or Scala class id, a map bigger than its bytes, a
    TreeSet with a comparator, a BigInteger not minimal or empty, an enum ordinal out of
    range, a registered class by name: the exact path refuses each."""
    fast, registry = _fast([])
    with pytest.raises(Fallback):
        fast(bytes.fromhex(data))
    with pytest.raises((CorruptCheckpointError, IncompatibleCheckpointError)):
        _exact(registry, bytes.fromhex(data))


def test_a_registered_class_by_name_is_left_to_the_exact_path():
    """Kryo 2 writes String by its id; by name, the exact path reads it and writes the id."""
    fast, registry = _fast([])
    data = b"\x01\x00java.lang.Strin\xe7\x01\x81"
    with pytest.raises(Fallback):
        fast(data)
    assert _exact(registry, data) == b"\x03\x01\x81"


@pytest.mark.parametrize("value, why", [
    (JavaObject("java.util.ArrayList", [JavaObject(jdk.STRING, "s")] * 2), "a back reference"),
    (JavaObject(jdk.STRING, "é"), "non-ASCII text"),
    (JavaObject("java.util.ArrayList", [JavaObject(jdk.STRING, "a" * 200)]), "(taken)"),
])
def test_what_the_fast_path_leaves_the_exact_path_re_encodes(value, why):
    fast, registry = _fast([])
    data = kryo2(value, registry)
    if why == "(taken)":
        assert fast(data) == _exact(registry, data)
        return
    with pytest.raises(Fallback):
        fast(data)
    assert _exact(registry, data)


# -- a POJO's fields (the kryo fixture's KryoJob$Profile) ---------------------------------------

def _fixture_states() -> dict[str, object]:
    snapshot = FlinkSnapshot.open(str(FIXTURES / "kryo" / "flink-1.20" / "canonical"))
    return {info.name: info for op in snapshot.operators if snapshot.header(op) is not None
            for info in snapshot.header(op).states}


@pytest.fixture(scope="module")
def states():
    return _fixture_states()


ELEMENTS = st.one_of(
    st.sampled_from(["a", "b"]).map(_java(jdk.STRING)),
    st.integers(0, 2).map(_java(jdk.LONG)), st.integers(0, 2).map(_java(jdk.INTEGER)),
    ASCII.map(_java(jdk.STRING)), st.integers(*LONG).map(_java(jdk.LONG)),
    st.integers(*INT).map(_java(jdk.INTEGER)),
    st.integers(-(1 << 15), (1 << 15) - 1).map(_java(jdk.SHORT)),
    st.integers(-128, 127).map(_java(jdk.BYTE)), st.booleans().map(_java(jdk.BOOLEAN)))
ODD_ELEMENTS = st.one_of(st.none(), TEXT.map(_java(jdk.STRING)),
                         st.integers(0, (1 << 64) - 1).map(_java(jdk.DOUBLE)), VALUES)


def _field(classes: list[str], items: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(st.none(), st.tuples(st.sampled_from(classes), items).map(
        lambda c: JavaObject(*c)))


def _profiles(elements: st.SearchStrategy) -> st.SearchStrategy:
    """``counts`` (a Map field), ``name`` (a String), ``tags`` (a List field), ``visits``."""
    return st.tuples(
        _field(sorted(jdk.MAPS), st.lists(st.tuples(elements, elements), max_size=4)),
        st.one_of(st.none(), TEXT),
        _field(["java.util.ArrayList", "java.util.LinkedList"],
               st.lists(elements, max_size=4)),
        st.one_of(st.none(), st.integers(*LONG)))


def _pojo(profile, counts, name, tags, visits) -> bytes:
    registry = [f for f in profile.fields if f[0] == "counts"][0][1]
    registry = KryoRegistry.of(list(registry.registered))
    w = BinaryWriter()
    w.u8(2)
    for field in (counts, name, tags, visits):
        w.u8(1 if field is None else 0)
        if field is None:
            continue
        if isinstance(field, JavaObject):
            w.raw(kryo2(field, registry))
        elif isinstance(field, str):
            w.flink_string(field)
        else:
            w.i64(field)
    return w.getvalue()


ELEMENT_CLASSES = {jdk.STRING, jdk.LONG, jdk.INTEGER, jdk.SHORT, jdk.BYTE, jdk.BOOLEAN}


def _taken(counts, name, tags, visits) -> bool:
    """Whether the fast path takes such a POJO: ASCII text, elements of the classes 2.x's
    collection fields have (not Double or Float), no nulls inside a field, no Short or
    Byte map keys, no key twice (as a Python dict tells keys apart: True is 1)."""
    items = [item for field in (counts, tags) if field is not None for entry in field.content
             for item in (entry if isinstance(entry, tuple) else (entry,))]
    keys = [key for key, _ in counts.content] if counts is not None else []
    return ((name or "").isascii() and None not in items
            and all(i.java_class in ELEMENT_CLASSES and str(i.content).isascii()
                    for i in items)
            and all(k.java_class not in (jdk.SHORT, jdk.BYTE) for k in keys)
            and len({k.content for k in keys}) == len(keys))


def _collection_classes(reading) -> list[dict[str, set[str]]]:
    return [node.classes for node in reading.nested() if isinstance(node, Kryo2Collection)]


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(_profiles(ELEMENTS), _profiles(ODD_ELEMENTS)))
def test_pojo_collection_fields_are_the_exact_paths_bytes(states, profile):
    """A POJO with Kryo ``Map`` and ``List`` fields: the fast path gives the bytes of 2.x's
    map and list serializers the exact path gives, and records the same element classes
    (which decide the state's 2.x type, or refuse it); it leaves nulls inside a field,
    non-ASCII text, Doubles and nested collections to the exact path."""
    info = states["profile"]
    data = _pojo(info.value, *profile)
    exact_reading, fast_reading = (reading_type(info.value, "state 'profile'") for _ in "ab")
    fast = transcoder(fast_reading, False, False)
    try:
        decoded = exact_reading.read(BinaryReader(data, "file.bin"))
    except IncompatibleCheckpointError:
        with pytest.raises(Fallback):
            fast(data)
        return
    try:
        taken = fast(data)
    except Fallback:
        assert not _taken(*profile)
        return
    assert _collection_classes(fast_reading) == _collection_classes(exact_reading)
    try:
        writing = writing_type(exact_reading)
    except IncompatibleCheckpointError:
        return  # refused for its element classes: no bytes are written
    w = BinaryWriter()
    encoder_of(writing).write(w, decoded)
    assert taken == w.getvalue()


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data(), _profiles(ELEMENTS))
def test_corrupt_pojo_bytes_are_left_to_the_exact_path(states, data, profile):
    info = states["profile"]
    raw = bytearray(_pojo(info.value, *profile))
    at = data.draw(st.integers(0, len(raw) - 1))
    if data.draw(st.booleans()):
        raw[at] = data.draw(st.integers(0, 255))
    else:
        del raw[at:]
    fast_reading = reading_type(info.value, "state 'profile'")
    try:
        taken = transcoder(fast_reading, False, False)(bytes(raw))
    except Fallback:
        return
    exact_reading = reading_type(info.value, "state 'profile'")
    r = BinaryReader(bytes(raw), "file.bin")
    decoded = exact_reading.read(r)  # raises where the exact path refuses
    assert r.at_end()
    assert _collection_classes(fast_reading) == _collection_classes(exact_reading)
    with contextlib.suppress(IncompatibleCheckpointError):  # no element: no 2.x type
        w = BinaryWriter()
        encoder_of(writing_type(exact_reading)).write(w, decoded)
        assert taken == w.getvalue()


# -- in a migration's scan ----------------------------------------------------------------------

def test_the_fixture_states_have_a_fast_path_and_a_user_class_has_none(states):
    for name in ("profile", "last_uuid", "bag"):
        assert StateRecoder(states[name], name, KeptValues(0)).fast is not None, name


def test_a_value_left_to_the_exact_path_is_kept_as_it_re_encodes_it(states):
    """A UUID met twice in a HashMap value (a back reference): the fast path leaves it, the
    scan keeps what the exact path writes."""
    recoder = StateRecoder(states["bag"], "operator 'uuids', state 'bag'", KeptValues(1 << 20))
    registry = recoder.reading.registry
    uuid = JavaObject(jdk.UUID, (1, -2))
    value = kryo2(JavaObject("java.util.HashMap", [(uuid, uuid)]), registry)
    plain = kryo2(JavaObject("java.util.HashMap", [(JavaObject(jdk.STRING, "k"), None)]),
                  registry)
    with pytest.raises(Fallback):
        recoder.fast(value)
    recoder.scan(3, Values.of([b"k1", b"k2"]), Values.of([value, plain]), "file.bin")
    _, settle = recoder.finished()
    kept = recoder.kept.take()
    assert [(body, settle(v)) for body, v in kept[0][1]] == [
        (b"k1", _exact(recoder.reading.registry, value)),
        (b"k2", _exact(recoder.reading.registry, plain))]


@pytest.mark.parametrize("state, value, match", [
    ("last_uuid", bytes.fromhex("5400"), "a null reference after a class"),
    ("last_uuid", bytes.fromhex("5401ff"), "truncated"),
    ("bag", bytes.fromhex("5701010301"), "truncated"),
    ("profile", bytes.fromhex("0200"), "truncated"),
])
def test_corrupt_values_refuse_naming_the_state(states, state, value, match):
    recoder = StateRecoder(states[state], f"operator 'x', state {state!r}", KeptValues(0))
    with pytest.raises(CorruptCheckpointError, match=f"state {state!r}.*{match}"):
        recoder.scan(0, Values.of([b"key"]), Values.of([value]), "file.bin")


@pytest.mark.parametrize("registered", [
    [], ["java.util.ArrayList", "java.util.HashMap"],
    ["java.util.ArrayList", "java.util.LinkedList", "java.util.HashMap"]])
def test_collection_fields_of_classes_the_job_registers(registered):
    """A POJO with a ``List`` and a ``Map`` field under a Kryo serializer that registers
    collection classes (then written by id, not by name): a list in the list field is
    taken as the exact path takes it, a map there is left (the exact path refuses it)."""
    kryo = {declared: KryoType(KRYO_SNAPSHOT, declared, (declared, *registered, AVRO_DUMMY), "")
            for declared in ("java.util.List", "java.util.Map")}
    pojo = PojoFlinkType("PojoSerializerSnapshot", "a.Pojo", [
        ("counts", kryo["java.util.Map"]), ("tags", kryo["java.util.List"])])
    registry = KryoRegistry.of(list(kryo["java.util.List"].registered))
    maps = KryoRegistry.of(list(kryo["java.util.Map"].registered))
    strings = [JavaObject(jdk.STRING, text) for text in ("a", "bc")]
    counts = kryo2(JavaObject("java.util.HashMap", [(strings[1], JavaObject(jdk.LONG, 7))]),
                   maps)
    for tags, taken in [(JavaObject("java.util.ArrayList", strings), True),
                        (JavaObject("java.util.LinkedList", strings[:1]), True),
                        (JavaObject("java.util.HashMap", [(strings[0], strings[1])]), False),
                        (JavaObject("java.util.HashMap", []), False)]:
        data = b"\x02\x00" + counts + b"\x00" + kryo2(tags, registry)
        fast_reading, exact_reading = (reading_type(pojo, "state 'p'") for _ in "ab")
        fast = transcoder(fast_reading, False, False)
        if not taken:
            with pytest.raises(Fallback):
                fast(data)
            with pytest.raises(IncompatibleCheckpointError, match="a java.util.HashMap in"):
                exact_reading.read(BinaryReader(data, "file.bin"))
            continue
        decoded = exact_reading.read(BinaryReader(data, "file.bin"))
        written = fast(data)
        w = BinaryWriter()
        encoder_of(writing_type(exact_reading)).write(w, decoded)
        assert written == w.getvalue()


PRIMITIVES = ["boolean", "byte", "double", "float", "int", "long", "short", "string"]
"""A POJO's fields besides Kryo ones that keep their bytes (a to h, in this order)."""
WIDTHS = {"boolean": 1, "byte": 1, "double": 8, "float": 4, "int": 4, "long": 8, "short": 2}


def _primitive_pojo():
    fields = [(chr(ord("a") + i), PrimitiveType(SIMPLE[name].snapshot_class))
              for i, name in enumerate(PRIMITIVES)]
    uuid = KryoType(KRYO_SNAPSHOT, jdk.UUID, (jdk.UUID, AVRO_DUMMY), "")
    return PojoFlinkType("PojoSerializerSnapshot", "a.Pojo", [*fields, ("u", uuid)])


FIELD_BYTES = st.one_of(
    st.just(None), st.binary(min_size=8, max_size=8),
    st.sampled_from([b"\x7f\xf0" + bytes(6), b"\xff\xf8" + bytes(6), b"\x7f\x80\x00\x01" * 2,
                     b"\x80" + bytes(7), b"\x01" * 8, b"\x02" * 8]))
"""A field's bytes (cut to its width; None: a null): NaNs, infinities, -0.0, a boolean 2."""


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(FIELD_BYTES, min_size=7, max_size=7), st.one_of(st.none(), TEXT),
       st.one_of(st.none(), st.tuples(st.integers(*LONG), st.integers(*LONG))))
def test_pojo_primitive_fields_keep_the_bytes_the_exact_path_writes(fields, text, uuid):
    """Each primitive field kept as its bytes where the exact path writes those back; a
    NaN or infinity (2.x writes Java's canonical NaN), a boolean byte other than 0 or 1 and
    non-ASCII text are left to the exact path."""
    pojo = _primitive_pojo()
    w = BinaryWriter()
    w.u8(2)
    for name, raw in zip(PRIMITIVES, fields):
        w.u8(1 if raw is None else 0)
        if raw is not None:
            w.raw(raw[:WIDTHS[name]])
    w.u8(1 if text is None else 0)
    if text is not None:
        w.flink_string(text)
    w.u8(1 if uuid is None else 0)
    if uuid is not None:
        w.raw(kryo2(JavaObject(jdk.UUID, uuid), KryoRegistry.of([jdk.UUID, AVRO_DUMMY])))
    data = w.getvalue()
    fast = transcoder(reading_type(pojo, "state 'p'"), False, False)
    exact_reading = reading_type(pojo, "state 'p'")
    decoded = exact_reading.read(BinaryReader(data, "file.bin"))
    exact = BinaryWriter()
    encoder_of(writing_type(exact_reading)).write(exact, decoded)
    try:
        taken = fast(data)
    except Fallback:
        assert _left(dict(zip(PRIMITIVES, fields)), text)
        return
    assert taken == exact.getvalue()


def _left(fields: dict[str, bytes | None], text: str | None) -> bool:
    """Whether the fast path leaves such a POJO: a NaN or infinity, a boolean byte other
    than 0 or 1, non-ASCII text."""
    boolean, double, single = fields["boolean"], fields["double"], fields["float"]
    return ((boolean is not None and boolean[0] > 1)
            or (double is not None and double[0] & 0x7F == 0x7F and double[1] >= 0xF0)
            or (single is not None and single[0] & 0x7F == 0x7F and single[1] >= 0x80)
            or not (text or "").isascii())


# -- element classes the user declares (--field-type) -----------------------------------------

def _flink_2_3_state(name: str):
    snapshot = FlinkSnapshot.open(str(FIXTURES / "kryo" / "flink-2.3" / "canonical"))
    return next(info for op in snapshot.operators if snapshot.header(op) is not None
                for info in snapshot.header(op).states if info.name == name)


def _scanned(states, declared, value: bytes) -> StateRecoder:
    recoder = StateRecoder(states["profile"], "state 'profile'", KeptValues(1 << 20),
                           declared=declared)
    recoder.scan(0, Values.of([b"key"]), Values.of([value]), "file.bin")
    return recoder


def test_declared_element_classes_type_fields_no_value_tells(states):
    """A POJO state whose collection fields are all empty or null: no value says what the
    2.x POJO declares, so it cannot migrate unless the user declares the classes; then its
    meta info is what Flink 2.3 writes for the same POJO (``List<String>``,
    ``Map<String, Long>``), and the empty collections' bytes are 2.x's."""
    profile = states["profile"].value
    empty = _pojo(profile, JavaObject("java.util.HashMap", []), "n",
                  JavaObject("java.util.ArrayList", []), 3)
    with pytest.raises(IncompatibleCheckpointError,
                       match="field 'counts': the key type .* not known.* no value holds one"):
        _scanned(states, None, empty).finished()
    declared = {"counts": (jdk.STRING, jdk.LONG), "tags": (jdk.STRING,)}
    recoder = _scanned(states, declared, empty)
    info, settle = recoder.finished()
    assert same_state(info, _flink_2_3_state("profile"))
    assert settle(recoder.kept.take()[0][1][0][1]) == (
        b"\x02" + b"\x00\x00" + bytes(4) + b"\x00\x02n" + b"\x00\x00" + bytes(4)
        + b"\x00" + (3).to_bytes(8, "big"))


def test_declared_element_classes_must_be_those_of_the_values(states):
    profile = states["profile"].value
    tagged = _pojo(profile, None, "n", JavaObject(
        "java.util.ArrayList", [JavaObject(jdk.STRING, "ab")]), 3)
    with pytest.raises(IncompatibleCheckpointError,
                       match="field 'tags': the values .* hold java.lang.String as elements,"
                             " where --field-type declares java.lang.Long"):
        _scanned(states, {"counts": (jdk.STRING, jdk.LONG), "tags": (jdk.LONG,)},
                 tagged).finished()

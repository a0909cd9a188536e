"""Kryo's truth for the tests: real Flink 1.20 and 2.3 ``KryoSerializer``s, and JSON value specs.

``tests/flinkrestore/KryoVectors.java`` is compiled against each Flink's jars and writes the
values of the specs (see its comment) with that Flink's ``KryoSerializer``, in one JVM per
batch. :func:`expected` builds, independently of statesource's decoder, the
:class:`JavaObject` a spec's value decodes to, and :func:`canonical` gives a comparable
form (hash and tree containers unordered, as Java's own iteration decides their order).
"""

from __future__ import annotations

import base64
import json
import os
import struct
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from java_bits import java_double_bits, java_float_bits

from flink_restore import (
    FLINK_1X_VERSION,
    FLINK_VERSION,
    JVM_FLAGS,
    SOURCES,
    _tool,
    compiled_classes,
    flink_lib,
)
from statesource.flink.serializers.kryo_classes import JavaObject

KRYO_VECTORS = SOURCES / "KryoVectors.java"
AVRO_DUMMY = "org.apache.flink.api.java.typeutils.runtime.kryo.Serializers$DummyAvroRegisteredClass"
"""What Flink registers for Avro's ``GenericData.Array`` when Avro is not on the classpath: the
last class of a default Kryo snapshot's registrations."""
ENUM_CONSTANTS = {
    "java.util.concurrent.TimeUnit": ["NANOSECONDS", "MICROSECONDS", "MILLISECONDS", "SECONDS",
                                      "MINUTES", "HOURS", "DAYS"],
    "java.math.RoundingMode": ["UP", "DOWN", "CEILING", "FLOOR", "HALF_UP", "HALF_DOWN",
                               "HALF_EVEN", "UNNECESSARY"],
    "java.time.DayOfWeek": ["MONDAY", "TUESDAY", "WEDNESDAY", "THURSDAY", "FRIDAY", "SATURDAY",
                            "SUNDAY"],
    "java.time.Month": ["JANUARY", "FEBRUARY", "MARCH", "APRIL", "MAY", "JUNE", "JULY",
                        "AUGUST", "SEPTEMBER", "OCTOBER", "NOVEMBER", "DECEMBER"],
    "java.time.temporal.ChronoUnit": ["NANOS", "MICROS", "MILLIS", "SECONDS", "MINUTES",
                                      "HOURS", "HALF_DAYS", "DAYS", "WEEKS", "MONTHS", "YEARS",
                                      "DECADES", "CENTURIES", "MILLENNIA", "ERAS", "FOREVER"],
}
CLASSES = {"str": "java.lang.String", "int": "java.lang.Integer", "long": "java.lang.Long",
           "short": "java.lang.Short", "byte": "java.lang.Byte", "float": "java.lang.Float",
           "double": "java.lang.Double", "bool": "java.lang.Boolean",
           "char": "java.lang.Character", "uuid": "java.util.UUID",
           "bigdec": "java.math.BigDecimal", "bigint": "java.math.BigInteger",
           "date": "java.util.Date", "list": "java.util.ArrayList",
           "linkedlist": "java.util.LinkedList", "hashset": "java.util.HashSet",
           "linkedhashset": "java.util.LinkedHashSet", "treeset": "java.util.TreeSet",
           "hashmap": "java.util.HashMap", "linkedhashmap": "java.util.LinkedHashMap",
           "treemap": "java.util.TreeMap"}
UNORDERED = {"java.util.HashSet", "java.util.TreeSet", "java.util.HashMap", "java.util.TreeMap"}


def run_kryo_vectors(cases: list[dict[str, Any]], version: str = FLINK_VERSION) -> dict[str, bytes]:
    """Each case's bytes as the ``KryoSerializer`` of Flink ``version`` writes them."""
    classes = compiled_classes([KRYO_VECTORS], version)
    lib = flink_lib(version)
    with tempfile.TemporaryDirectory(prefix="kryo-vectors-") as work:
        given, out = Path(work) / "cases.json", Path(work) / "out.json"
        given.write_text(json.dumps(cases))
        run = subprocess.run([_tool("java") or "java", *JVM_FLAGS, "-cp",
                              os.pathsep.join([str(classes), f"{lib}/*"]), "KryoVectors",
                              str(given), str(out)], capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-4000:]
        return {k: base64.b64decode(v) for k, v in json.loads(out.read_text()).items()}


def run_1x(cases: list[dict[str, Any]]) -> dict[str, bytes]:
    return run_kryo_vectors(cases, FLINK_1X_VERSION)


def java_units(text: str) -> str:
    """``text`` as Java holds it: one character per UTF-16 unit."""
    data = text.encode("utf-16-le", "surrogatepass")
    return "".join(chr(int.from_bytes(data[i:i + 2], "little")) for i in range(0, len(data), 2))


def expected(spec: Any, built: list[JavaObject] | None = None) -> JavaObject | None:
    """The value of ``spec`` as statesource's decoder must give it (built as the Java side
    builds it: children first, references to the n-th object built)."""
    built = [] if built is None else built
    if spec is None:
        return None
    tag = spec[0]
    if tag == "ref":
        return built[spec[1]]
    value = JavaObject(_class_of(spec), _content(spec, built))
    built.append(value)
    return value


def _class_of(spec: list[Any]) -> str:
    return spec[1] if spec[0] == "enum" else CLASSES[spec[0]]


def _content(spec: list[Any], built: list[JavaObject]) -> Any:
    tag = spec[0]
    if tag == "str":
        return java_units(spec[1])
    if tag in ("int", "long", "short", "byte", "char", "date"):
        return int(spec[1])
    if tag == "float":  # Java writes floatToIntBits: one NaN
        bits = spec[1] & 0xFFFFFFFF
        return java_float_bits(struct.unpack("<f", struct.pack("<I", bits))[0]) & 0xFFFFFFFF
    if tag == "double":
        bits = int(spec[1]) & 0xFFFFFFFFFFFFFFFF
        return java_double_bits(struct.unpack("<d", struct.pack("<Q", bits))[0]) & (1 << 64) - 1
    if tag == "bool":
        return spec[1]
    if tag == "uuid":
        return int(spec[1]), int(spec[2])
    if tag == "bigdec":
        return int(spec[1]), spec[2]
    if tag == "bigint":
        return int(spec[1])
    if tag == "enum":
        return ENUM_CONSTANTS[spec[1]].index(spec[2])
    if tag.endswith("map"):
        return [(expected(k, built), expected(v, built)) for k, v in spec[1]]
    return [expected(item, built) for item in spec[1]]


def canonical(value: JavaObject | None) -> Any:
    """A comparable form of a decoded value: containers whose order Java's hashing or
    sorting decides compare unordered."""
    if value is None:
        return None
    content = value.content
    if isinstance(content, list):
        items = [(canonical(item[0]), canonical(item[1])) if isinstance(item, tuple)
                 else canonical(item) for item in content]
        if value.java_class in UNORDERED:
            items = sorted(items, key=repr)
        return value.java_class, tuple(items)
    return value.java_class, content

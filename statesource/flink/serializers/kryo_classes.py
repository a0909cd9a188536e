"""The Java values Kryo writes that statesource re-encodes, and the class ids Flink gives them.

Flink 1.x (Kryo 2.24) and 2.x (Kryo 5.6) write a generic value as ``writeClassAndObject``:
its class (a registered class by id, any other by name, once per value), then its bytes.
What a value decodes to here is a :class:`JavaObject`: its class and its content, in one
shape per class (:data:`KINDS`), so that the Kryo 5 writer can write it as Kryo 5 would
write the Java object Kryo 2 read. An object read through a back reference is the same
:class:`JavaObject`, as Kryo gives the same Java object: Kryo 5 writes the reference again.

Class ids are Kryo's registrations in Flink's ``KryoSerializer``. Both sides register the
primitives and ``String`` (ids 0 to 8) and, from Chill's Java registrations, ``UUID`` (82)
among others (73 to 84); Flink 1.x's Kryo 2 registers ``void`` at 9 and, with
``flink-scala`` on the classpath, Chill's Scala classes at 10 to 72; 2.x nothing there.
Then both register the snapshot's classes in its order (the declared class first), from 85
(Flink's Chill registrar fixes it, with or without ``flink-scala``: checked against the 1.20
and 2.3 jars): so every id that stays in use means the same class on both sides, unless
the job registers a Scala class, which 1.x may have already (refused: ``kryo_refusal``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from statesource.errors import IncompatibleCheckpointError

STRING = "java.lang.String"
INTEGER, LONG = "java.lang.Integer", "java.lang.Long"
SHORT, BYTE = "java.lang.Short", "java.lang.Byte"
FLOAT, DOUBLE = "java.lang.Float", "java.lang.Double"
BOOLEAN, CHARACTER = "java.lang.Boolean", "java.lang.Character"
UUID = "java.util.UUID"
BIG_DECIMAL, BIG_INTEGER, DATE = "java.math.BigDecimal", "java.math.BigInteger", "java.util.Date"
TREE_SET, TREE_MAP = "java.util.TreeSet", "java.util.TreeMap"

WRAPPERS = frozenset({INTEGER, LONG, SHORT, BYTE, FLOAT, DOUBLE, BOOLEAN, CHARACTER})
"""Kryo writes no reference marker before these (``Util.isWrapperClass``)."""
COLLECTIONS = frozenset({"java.util.ArrayList", "java.util.LinkedList", "java.util.HashSet",
                         "java.util.LinkedHashSet", TREE_SET})
MAPS = frozenset({"java.util.HashMap", "java.util.LinkedHashMap", TREE_MAP})
SORTED = frozenset({TREE_SET, TREE_MAP})
"""Written after their comparator, which must be null (natural order) to be re-encoded."""
ENUMS = {
    "java.util.concurrent.TimeUnit": 7,
    "java.time.DayOfWeek": 7,
    "java.time.Month": 12,
    "java.time.temporal.ChronoUnit": 16,
    "java.math.RoundingMode": 8,
}
"""JDK enums (constants without bodies) by their number of constants. Kryo writes an enum
as its ordinal, and only for these does the ordinal name the same constant in every job; a
user's enum is refused, since its constants are in no snapshot of a Kryo serializer."""
SCALARS = frozenset({STRING, *WRAPPERS, UUID, BIG_DECIMAL, BIG_INTEGER, DATE})
SUPPORTED = frozenset({*SCALARS, *COLLECTIONS, *MAPS, *ENUMS})

DECLARABLE = frozenset({*SUPPORTED, "java.lang.Object", "java.io.Serializable",
                        "java.lang.Comparable", "java.lang.Number", "java.lang.CharSequence",
                        "java.util.Collection", "java.util.List", "java.util.Set",
                        "java.util.Map", "java.util.SortedMap", "java.util.SortedSet",
                        "java.util.NavigableMap", "java.util.NavigableSet",
                        "java.util.AbstractMap", "java.util.AbstractList",
                        "java.lang.Iterable"})
"""Declared classes whose values can all be of :data:`SUPPORTED` classes."""

BASE_IDS = {INTEGER: 0, STRING: 1, FLOAT: 2, BOOLEAN: 3, BYTE: 4, CHARACTER: 5, SHORT: 6,
            LONG: 7, DOUBLE: 8, UUID: 82}
"""The supported classes Flink registers itself, on both sides."""
CHILL_JAVA = {73: "java.util.Arrays$ArrayList", 74: "java.util.BitSet",
              75: "java.util.PriorityQueue", 76: "java.util.regex.Pattern",
              77: "java.sql.Date", 78: "java.sql.Time", 79: "java.sql.Timestamp",
              80: "java.net.URI", 81: "java.net.InetSocketAddress", 83: "java.util.Locale",
              84: "java.text.SimpleDateFormat"}
"""Chill's other Java registrations: known by name, written by Chill's serializers."""
FIRST_SNAPSHOT_ID = 85
VOID_ID = 9
SCALA_IDS = range(10, 73)
"""Flink 1.x's Chill registrations of Scala classes (``flink-scala``)."""


@dataclass(eq=False)
class JavaObject:
    """One Java object Kryo wrote: its class and its content.

    Content by class: ``str`` (a String, one character per UTF-16 unit); ``int`` (Integer,
    Long, Short, Byte, Character's code unit, BigInteger, a Date's milliseconds, an enum's
    ordinal); ``bool``; the IEEE bits as an ``int`` (Float, Double: NaN payloads kept);
    ``(most, least)`` significant bits (UUID); ``(unscaled, scale)`` (BigDecimal); a list of
    elements, each a :class:`JavaObject` or None (collections); a list of ``(key, value)``
    (maps). Identity matters: Kryo writes an object met again as a reference.
    """

    java_class: str
    content: Any


@dataclass(frozen=True)
class KryoRegistry:
    """The class ids of one ``KryoSerializer`` (both sides), from its snapshot."""

    ids: dict[int, str]
    """Every id in use, to its class's name."""

    @classmethod
    def of(cls, registered: list[str]) -> KryoRegistry:
        """The ids given the classes the snapshot registers, in its order."""
        ids = {v: k for k, v in BASE_IDS.items()}
        ids.update(CHILL_JAVA)
        taken = set(ids.values())
        next_id = FIRST_SNAPSHOT_ID
        for name in registered:
            if name not in taken:
                ids[next_id] = name
                taken.add(name)
                next_id += 1
        return cls(ids)

    @cached_property
    def readable(self) -> dict[int, str]:
        """The ids :meth:`class_of` answers with a class (not void's, not Scala's): the
        readers' lookup, without building the message of a refusal for every class."""
        return {class_id: name for class_id, name in self.ids.items()
                if class_id != VOID_ID and class_id not in SCALA_IDS}

    def class_of(self, class_id: int, where: str) -> str:
        """The class of a registered ``class_id``; refused where no 2.x class has it."""
        if class_id == VOID_ID:
            raise IncompatibleCheckpointError(f"{where}: a value of class void (Kryo id 9)")
        if class_id in SCALA_IDS:
            raise IncompatibleCheckpointError(
                f"{where}: a Scala value (Flink 1.x's Chill registration {class_id}): Flink"
                " 2.x removed the Scala API and its serializers")
        name = self.ids.get(class_id)
        if name is None:
            raise IncompatibleCheckpointError(
                f"{where}: Kryo class id {class_id}, which Flink's registrations for this"
                " serializer do not give (a job with other Kryo registrations, or without"
                " flink-scala in lib/)")
        return name

    def id_of(self, java_class: str) -> int | None:
        for class_id, name in self.ids.items():
            if name == java_class:
                return class_id
        return None


def unsupported(java_class: str, where: str) -> IncompatibleCheckpointError:
    return IncompatibleCheckpointError(
        f"{where}: a Kryo value of {java_class}, which statesource does not re-encode (its"
        " layout is Kryo's field serializer or a custom one, which the snapshot does not"
        " carry); only JDK strings, numbers, UUID, BigDecimal, BigInteger, Date, JDK enums"
        " and JDK lists, sets and maps of them are")

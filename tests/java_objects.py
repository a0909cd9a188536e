"""A writer of Java serialization streams for Flink's LogicalTypes, for the tests only.

Independent of statesource and of javaobj: it writes what Java's ``ObjectOutputStream`` writes
for ``InstantiationUtil.serializeObject(stream, logicalType)`` (the Java Object Serialization
Specification, chapter 6: stream header, class descriptors with their fields, primitives
sorted by name before objects sorted by name, superclass data before subclass data, enums as
their constant's name, handles for back references), so that the reader of SQL snapshots can
be checked on types no fixture holds. Serial version UIDs are arbitrary: no reader checks them.
"""

from __future__ import annotations

import struct
from typing import Any

LOGICAL = "org.apache.flink.table.types.logical."
TEXT_CLASSES = {"CHAR": "CharType", "VARCHAR": "VarCharType", "BINARY": "BinaryType",
                "VARBINARY": "VarBinaryType"}
PLAIN_CLASSES = {"BOOLEAN": "BooleanType", "TINYINT": "TinyIntType",
                 "SMALLINT": "SmallIntType", "INTEGER": "IntType", "BIGINT": "BigIntType",
                 "FLOAT": "FloatType", "DOUBLE": "DoubleType", "DATE": "DateType"}
TIME_CLASSES = {"TIME_WITHOUT_TIME_ZONE": "TimeType",
                "TIMESTAMP_WITHOUT_TIME_ZONE": "TimestampType",
                "TIMESTAMP_WITH_LOCAL_TIME_ZONE": "LocalZonedTimestampType"}


class JavaStream:
    """One ``ObjectOutputStream``: ``write_object(spec)`` then ``getvalue()``.

    A spec is ``("object", class name, [(field type code, field name, field class, value)],
    superclass spec or None)``, ``("enum", class name, constant)``, ``("class", name)``,
    ``("list", [specs])`` (an ``ArrayList`` wrapped by ``Collections.unmodifiableList``, whose
    two fields refer to one list), a str, or None.
    """

    def __init__(self) -> None:
        self.out = bytearray(b"\xac\xed\x00\x05")
        self.handles = 0
        self.strings: dict[str, int] = {}

    def getvalue(self) -> bytes:
        return bytes(self.out)

    def _utf(self, text: str) -> None:
        data = text.encode("utf-8")
        self.out += struct.pack(">H", len(data)) + data

    def _handle(self) -> int:
        self.handles += 1
        return 0x7E0000 + self.handles - 1

    def string(self, text: str) -> None:
        if text in self.strings:  # a back reference, as Java writes a repeated string
            self.out += b"\x71" + struct.pack(">i", self.strings[text])
            return
        self.out += b"\x74"
        self._utf(text)
        self.strings[text] = self._handle()

    def _class_desc(self, name: str, flags: int, fields: list[tuple[str, str, str | None]],
                    superclass: Any) -> None:
        self.out += b"\x72"
        self._utf(name)
        self.out += struct.pack(">qB", hash(name) & 0x7FFFFFFFFFFFFFFF, flags)
        self._handle()
        self.out += struct.pack(">H", len(fields))
        for code, field_name, field_class in fields:
            self.out += code.encode()
            self._utf(field_name)
            if field_class is not None:
                self.string(field_class)
        self.out += b"\x78"  # no class annotation
        if superclass is None:
            self.out += b"\x70"
        else:
            self._class_desc(*superclass)

    def write_object(self, spec: Any) -> None:
        if spec is None:
            self.out += b"\x70"
        elif isinstance(spec, str):
            self.string(spec)
        elif spec[0] == "enum":
            self.out += b"\x7e"
            self._class_desc(spec[1], 0x12, [], ("java.lang.Enum", 0x12, [], None))
            self._handle()
            self.string(spec[2])
        elif spec[0] == "class":
            self.out += b"\x76"
            self._class_desc(spec[1], 0x02, [], None)
            self._handle()
        elif spec[0] == "list":
            self._list(spec[1])
        else:
            self._object(spec)

    def _object(self, spec: Any) -> None:
        _, name, fields, superclass = spec
        chain = [(name, fields)]
        while superclass is not None:
            chain.append((superclass[1], superclass[2]))
            superclass = superclass[3]
        self.out += b"\x73"
        self._class_desc(*_desc_of(chain))
        self._handle()
        for _, class_fields in reversed(chain):  # superclass data first
            for code, _, _, value in _sorted(class_fields):
                self._value(code, value)

    def _value(self, code: str, value: Any) -> None:
        if code == "I":
            self.out += struct.pack(">i", value)
        elif code == "Z":
            self.out += struct.pack(">?", value)
        else:
            self.write_object(value)

    def _list(self, items: list[Any]) -> None:
        # Collections$UnmodifiableList(list) extends UnmodifiableCollection(c): c, then list,
        # both the one ArrayList (the second a back reference)
        self.out += b"\x73"
        self._class_desc("java.util.Collections$UnmodifiableList", 0x02,
                         [("L", "list", "Ljava/util/List;")],
                         ("java.util.Collections$UnmodifiableCollection", 0x02,
                          [("L", "c", "Ljava/util/Collection;")], None))
        self._handle()
        self.out += b"\x73"
        self._class_desc("java.util.ArrayList", 0x03, [("I", "size", None)], None)
        array_list = self._handle()
        self.out += struct.pack(">i", len(items))
        self.out += b"\x77\x04" + struct.pack(">i", len(items))  # writeObject's block data
        for item in items:
            self.write_object(item)
        self.out += b"\x78"
        self.out += b"\x71" + struct.pack(">i", array_list)


def _sorted(fields: list[tuple[str, str, str | None, Any]]) -> list[tuple[str, str, str | None,
                                                                          Any]]:
    """Java's field order in a class descriptor: primitives by name, then objects by name."""
    return sorted(fields, key=lambda f: (f[0] in "L[", f[1]))


def _desc_of(chain: list[tuple[str, list]]) -> tuple[str, int, list, Any]:
    superclass = None
    for name, fields in reversed(chain[1:]):
        superclass = (name, 0x02, [(c, n, k) for c, n, k, _ in _sorted(fields)], superclass)
    name, fields = chain[0]
    return (name, 0x02, [(c, n, k) for c, n, k, _ in _sorted(fields)], superclass)


def logical_type_spec(root: str, nullable: bool = True, precision: int = 0, scale: int = 0,
                      length: int = 0, fields: tuple = (), java_class: str = "") -> Any:
    """The object spec of the Flink ``LogicalType`` of root ``root`` and these parameters
    (``fields``: (name, spec) pairs of a ROW)."""
    base = ("object", LOGICAL + "LogicalType",
            [("Z", "isNullable", None, nullable),
             ("L", "typeRoot", "L" + (LOGICAL + "LogicalTypeRoot;").replace(".", "/"),
              ("enum", LOGICAL + "LogicalTypeRoot", root))], None)
    if root in TEXT_CLASSES:
        return ("object", LOGICAL + TEXT_CLASSES[root], [("I", "length", None, length)], base)
    if root == "DECIMAL":
        return ("object", LOGICAL + "DecimalType",
                [("I", "precision", None, precision), ("I", "scale", None, scale)], base)
    if root in TIME_CLASSES:
        own = [("I", "precision", None, precision)]
        if root != "TIME_WITHOUT_TIME_ZONE":
            own.append(("L", "kind", "L" + (LOGICAL + "TimestampKind;").replace(".", "/"),
                        ("enum", LOGICAL + "TimestampKind", "REGULAR")))
        return ("object", LOGICAL + TIME_CLASSES[root], own, base)
    if root == "ROW":
        row_fields = [("object", LOGICAL + "RowType$RowField",
                       [("L", "description", "Ljava/lang/String;", None),
                        ("L", "name", "Ljava/lang/String;", name),
                        ("L", "type", "L" + (LOGICAL + "LogicalType;").replace(".", "/"), spec)],
                       None) for name, spec in fields]
        return ("object", LOGICAL + "RowType",
                [("L", "fields", "Ljava/util/List;", ("list", row_fields))], base)
    if root == "RAW":
        return ("object", LOGICAL + "RawType",
                [("L", "clazz", "Ljava/lang/Class;", ("class", java_class)),
                 ("L", "serializer", "Lorg/apache/flink/api/common/typeutils/TypeSerializer;",
                  ("object", "org.apache.flink.table.dataview.NullSerializer", [], None))], base)
    return ("object", LOGICAL + PLAIN_CLASSES.get(root, root.title() + "Type"), [], base)


def serialize(spec: Any) -> bytes:
    """The bytes ``InstantiationUtil.serializeObject`` writes for ``spec``."""
    stream = JavaStream()
    stream.write_object(spec)
    return stream.getvalue()

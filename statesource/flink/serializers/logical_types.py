"""Flink SQL's ``LogicalType``s and ``DataType``s, as table-runtime snapshots Java-serialize them.

``RowDataSerializerSnapshot`` records each field's ``LogicalType`` (and
``ExternalSerializerSnapshot`` its ``DataType``) as a Java object written by an
``ObjectOutputStream`` of its own: the stream header ``AC ED 00 05``, then the object, and
no length before it. Where it ends is only known by parsing it, which a maintained reader of
Java serialization streams does here (``javaobj-py3``: :func:`read_java_object` reads
exactly one object and leaves the reader just after it). The object's fields then give
statesource's :class:`~statesource.types.sql.SqlType`: the ``typeRoot`` enum, ``isNullable``,
and per root ``length``, ``precision`` / ``scale``, a ``RowType``'s ``fields`` (a list of
``RowField``: name, type, description), a ``RawType``'s ``clazz``.

The bytes are untrusted: a stream that does not parse, or a type whose numbers Flink would
never write (a DECIMAL of precision 0, a TIMESTAMP of precision 12), raises
:class:`~statesource.errors.CorruptCheckpointError` naming the file and the offset where the
object starts. A root statesource does not read parses all the same (:class:`SqlType` keeps
it, and reading its values is refused, naming it).
"""

from __future__ import annotations

from typing import Any

from javaobj.v1.beans import JavaClass, JavaEnum, JavaObject

from statesource.flink.binary.java_objects import read_java_object
from statesource.flink.binary.reader import BinaryReader
from statesource.types.sql import BINARY, MAX_DECIMAL, TEXT, TIMESTAMPS, SqlType

_MAX_FRACTION = 9
_TIME_ROOTS = TIMESTAMPS | {"TIME_WITHOUT_TIME_ZONE", "TIMESTAMP_WITH_TIME_ZONE"}


class _Fault(Exception):
    """A Java object that is not the type it should be (turned into the reader's error)."""


def read_logical_type(r: BinaryReader) -> SqlType:
    """A Java-serialized ``LogicalType`` at ``r``, as a :class:`SqlType`."""
    at = r.pos
    found = read_java_object(r, "a SQL field type (a Java-serialized LogicalType)")
    try:
        return logical_type(found)
    except _Fault as fault:
        raise r.error(f"a Java-serialized LogicalType {fault}", at) from None


def read_data_type(r: BinaryReader) -> SqlType:
    """A Java-serialized ``DataType`` (``ExternalSerializer``'s) at ``r``: its logical type."""
    at = r.pos
    found = read_java_object(r, "a SQL data type (a Java-serialized DataType)")
    try:
        return logical_type(_field(found, "logicalType"))
    except _Fault as fault:
        raise r.error(f"a Java-serialized DataType {fault}", at) from None


def logical_type(found: Any) -> SqlType:
    """The :class:`SqlType` of a parsed ``LogicalType`` object (raises :class:`_Fault`)."""
    if not isinstance(found, JavaObject) or isinstance(found, JavaEnum):
        raise _Fault(f"is {found!r}, not an object")
    root = _field(found, "typeRoot")
    if not isinstance(root, JavaEnum) or not isinstance(root.constant, str):
        raise _Fault(f"of class {_class(found)} has no type root")
    name = str(root.constant)
    nullable = _field(found, "isNullable")
    if not isinstance(nullable, bool):
        raise _Fault(f"{name} has no nullability")
    if name in TEXT | BINARY:
        return SqlType(name, nullable, length=_number(found, "length", 0, 2**31 - 1))
    if name == "DECIMAL":
        precision = _number(found, "precision", 1, MAX_DECIMAL)
        return SqlType(name, nullable, precision, _number(found, "scale", 0, precision))
    if name in _TIME_ROOTS:
        return SqlType(name, nullable, _number(found, "precision", 0, _MAX_FRACTION))
    if name == "ROW":
        return SqlType(name, nullable, fields=tuple(_row_field(f) for f in
                                                    _items(_field(found, "fields"))))
    if name == "RAW":
        return SqlType(name, nullable, java_class=_raw_class(found))
    return SqlType(name, nullable)


def _field(found: Any, name: str) -> Any:
    """The value of field ``name`` of a parsed object (its class or a superclass declares it)."""
    if not isinstance(found, JavaObject):
        raise _Fault(f"is {found!r} where an object with field {name} belongs")
    if not hasattr(found, name):
        raise _Fault(f"of class {_class(found)} has no field {name}")
    return getattr(found, name)


def _number(found: Any, name: str, low: int, high: int) -> int:
    value = _field(found, name)
    if type(value) is not int or not low <= value <= high:
        raise _Fault(f"of class {_class(found)} has {name} {value!r}, not {low} .. {high}")
    return value


def _items(found: Any) -> list[Any]:
    """The elements of a parsed ``java.util.List``: an ``ArrayList``, maybe wrapped by
    ``Collections.unmodifiableList`` (its ``writeObject`` writes the size, then each element)."""
    if isinstance(found, JavaObject) and hasattr(found, "list"):
        found = found.list
    size = _field(found, "size")
    items = [item for item in found.annotations if isinstance(item, JavaObject)]
    if type(size) is not int or len(items) != size:
        raise _Fault(f"holds a list of {len(items)} elements that says it has {size}")
    return items


def _row_field(found: Any) -> tuple[str, SqlType]:
    name = _field(found, "name")
    if not isinstance(name, str):
        raise _Fault(f"has a row field named {name!r}")
    return str(name), logical_type(_field(found, "type"))


def _raw_class(found: Any) -> str:
    """The class a RAW type holds (``RawType.clazz``; a legacy ``TypeInformationRawType``
    names only its type information)."""
    if hasattr(found, "clazz"):
        clazz = found.clazz
        if not isinstance(clazz, JavaClass) or not isinstance(clazz.name, str):
            raise _Fault(f"RAW has class {clazz!r}")
        return str(clazz.name)
    return _class(found)


def _class(found: JavaObject) -> str:
    return str(found.classdesc.name) if found.classdesc is not None else "unknown"

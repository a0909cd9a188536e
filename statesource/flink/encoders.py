"""Encoding values into the bytes Flink's serializers read: the write side of :mod:`serializers`.

:func:`value_writer` gives, for a :class:`FlinkType` read from a serializer
snapshot, the function that writes one value as that serializer writes it, so
that what a Flink job restores is what it would have written itself:

- ``String``: Flink's ``StringValue`` layout, a varint of the length in UTF-16
  units plus one (0 is null), then each unit as a varint (a character beyond
  the BMP is its surrogate pair; a lone surrogate is written as it is);
- ``Long``, ``Integer``, ``Short``, ``Byte``, ``Character``: big-endian, of
  their width; ``Boolean`` one byte; ``Float`` and ``Double`` big-endian IEEE
  754 with every NaN written as Java's ``floatToIntBits`` / ``doubleToLongBits``
  canonical NaN, ``-0.0`` kept; ``byte[]``: an int length and the bytes;
  ``VoidNamespace`` and ``GlobalWindow`` one zero byte; ``TimeWindow`` two longs;
- ``List``: an int count, the elements; ``Map``: an int count, then per entry
  the key, a null flag and the value unless null;
- ``Tuple``: the fields in order, none null; ``Row``: a null mask (the row kind
  in its first two bits unless the serializer is in legacy mode), then the
  non-null fields; POJO: a flags byte (null, or "no subclass"), then per field
  in the snapshot's order a null flag and the value unless null;
- TTL: the last-access timestamp, then the user value; timers: the timestamp
  with its sign bit flipped, the key, the namespace;
- Avro: by the schema in its snapshot (:mod:`~statesource.flink.avro_encoder`),
  or the bytes as read where the reader keeps them as bytes;
- Kryo: the bytes as read (:class:`~statesource.flink.serializers.OpaqueType`
  values of a canonical savepoint); anything else is refused, since only Kryo
  with the job's registrations could write it.

Values take the shapes the reader returns (:meth:`FlinkType.read`: tuples,
:class:`~statesource.types.Row`, :class:`~statesource.schema.RecordKey` for
POJOs, ``(start, end)`` windows, ``(value, timestamp)`` for TTL) and the
shapes of statesource's value schemas (:meth:`FlinkType.to_value` and
:func:`~statesource.flink.declarations.stored_converter`: a Tuple as a dict of
``f0``..., a Row as a dict with its ``row_kind``, a map with other keys than
strings as a list of ``{"key", "value"}`` entries). A value that does not fit
its serializer (another Python type, an int out of range, a null the
serializer cannot write, a float too large for a Java ``float``) is refused
with :class:`~statesource.errors.TypeMismatchError` naming the value, the
Flink type and, inside a composite, where it is.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Collection, Mapping
from typing import Any

from statesource.errors import InvalidArgumentError, TypeMismatchError
from statesource.flink.avro import AvroFlinkType
from statesource.flink.avro_encoder import avro_writer
from statesource.flink.binary_writer import BinaryWriter
from statesource.flink.flink_type import FlinkType
from statesource.flink.serializers import (
    ListType,
    MapType,
    NullableType,
    OpaqueType,
    PojoFlinkType,
    RowFlinkType,
    SetType,
    TimerType,
    TtlType,
    TupleFlinkType,
    _Primitive,
)
from statesource.schema import hashable_record
from statesource.types import Row, RowKind

Write = Callable[[BinaryWriter, Any], None]
"""Writes one value of a serializer to a :class:`BinaryWriter`."""

_NULL_FLAG, _PRESENT_FLAG = 1, 0
_POJO_NULL, _POJO_PLAIN = 1, 2
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_BY_KIND_NAME = {kind.short_string: kind for kind in RowKind}
_BYTES = (bytes, bytearray, memoryview)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def misfit(value: Any, type_name: str, why: str) -> TypeMismatchError:
    """The error for a value its serializer cannot write: the value, the type, the reason."""
    return TypeMismatchError(f"{_shown(value)} does not fit {type_name}: {why}")


def inside(where: str, error: TypeMismatchError) -> TypeMismatchError:
    """``error`` of a part of a composite value, prefixed with where that part is."""
    return TypeMismatchError(f"{where}: {error}")


def write_part(w: BinaryWriter, write: Write, value: Any, where: str, *args: Any) -> None:
    """``write`` one part of a composite; an error names it (``where`` formatted with ``args``)."""
    try:
        write(w, value)
    except TypeMismatchError as error:
        raise inside(where.format(*args), error) from None


def _flagged(w: BinaryWriter, write: Write, value: Any, where: str, *args: Any) -> None:
    """A null flag, then the value unless it is null (map values, POJO fields)."""
    if value is None:
        w.u8(_NULL_FLAG)
        return
    w.u8(_PRESENT_FLAG)
    write_part(w, write, value, where, *args)


def _not_null(value: Any, name: str, expected: str) -> TypeMismatchError:
    return misfit(value, name, f"{name} cannot be null" if value is None else
                  f"expected {expected}")


# -- primitives ----------------------------------------------------------------------------

def _integral(bits: int, name: str) -> Write:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    put = {8: lambda w, v: w.u8(v & 0xFF), 16: BinaryWriter.i16, 32: BinaryWriter.i32,
           64: BinaryWriter.i64}[bits]

    def write(w: BinaryWriter, value: Any) -> None:
        if type(value) is not int:
            raise _not_null(value, name, "an int")
        if not low <= value <= high:
            raise misfit(value, name, f"out of range {low} .. {high}")
        put(w, value)
    return write


def _floating(put: Callable[[BinaryWriter, float], None], exact: int, name: str) -> Write:
    """Floats; also an int the type holds exactly, as statesource's value schemas accept."""
    def write(w: BinaryWriter, value: Any) -> None:
        if type(value) is not float:
            if type(value) is not int or not -exact <= value <= exact:
                raise _not_null(value, name, "a float")
            value = float(value)
        try:
            put(w, value)
        except InvalidArgumentError:
            raise misfit(value, name, "too large for a Java float") from None
    return write


def _write_string(w: BinaryWriter, value: Any) -> None:
    if value is not None and type(value) is not str:
        raise misfit(value, "String", "expected a str")
    try:
        w.flink_string(value)
    except InvalidArgumentError as error:
        raise misfit(value, "String", str(error)) from None


def _write_char(w: BinaryWriter, value: Any) -> None:
    if type(value) is not str or len(value) != 1 or ord(value) > 0xFFFF:
        raise _not_null(value, "Character", "a str of one UTF-16 code unit")
    w.u16(ord(value))


def _write_boolean(w: BinaryWriter, value: Any) -> None:
    if type(value) is not bool:
        raise _not_null(value, "Boolean", "a bool")
    w.boolean(value)


def _write_bytes(w: BinaryWriter, value: Any) -> None:
    if not isinstance(value, _BYTES):
        raise _not_null(value, "byte[]", "bytes")
    w.length_prefixed(bytes(value))


def _void(name: str) -> Write:
    def write(w: BinaryWriter, value: Any) -> None:
        if value is not None:
            raise misfit(value, name, f"the only {name} is None")
        w.u8(0)
    return write


def _write_window(w: BinaryWriter, value: Any) -> None:
    if isinstance(value, Mapping) and set(value) == {"start", "end"}:
        value = (value["start"], value["end"])
    if (not isinstance(value, tuple) or len(value) != 2
            or any(type(v) is not int or not _LONG_MIN <= v <= _LONG_MAX for v in value)):
        raise _not_null(value, "TimeWindow", "(start, end), two longs")
    w.i64(value[0])
    w.i64(value[1])


_PRIMITIVES: dict[str, tuple[str, Write]] = {
    "string": ("String", _write_string),
    "long": ("Long", _integral(64, "Long")),
    "int": ("Integer", _integral(32, "Integer")),
    "short": ("Short", _integral(16, "Short")),
    "byte": ("Byte", _integral(8, "Byte")),
    "boolean": ("Boolean", _write_boolean),
    "char": ("Character", _write_char),
    "double": ("Double", _floating(BinaryWriter.f64, 1 << 53, "Double")),
    "float": ("Float", _floating(BinaryWriter.f32, 1 << 24, "Float")),
    "bytes": ("byte[]", _write_bytes),
    "void": ("VoidNamespace", _void("VoidNamespace")),
    "timewindow": ("TimeWindow", _write_window),
}


# -- composites ----------------------------------------------------------------------------

class _Encoder:
    """One serializer's writer and the name errors call its type by."""

    __slots__ = ("name", "write")

    def __init__(self, name: str, write: Write) -> None:
        self.name = name
        self.write = write


def _sequence(value: Any, count: int, name: str, what: str) -> tuple[Any, ...] | list[Any]:
    if not isinstance(value, (tuple, list)) or len(value) != count:
        raise _not_null(value, name, what)
    return value


def _list(t: ListType) -> _Encoder:
    return _collection(t.element, "List", (list, tuple), "a list", write_part)


def _set(t: SetType) -> _Encoder:
    """A set's elements each carry a null flag, a list's do not."""
    return _collection(t.element, "Set", (list, tuple, set, frozenset), "a set or a list",
                       _flagged)


def _collection(element_type: FlinkType, kind: str, accepted: tuple[type[Collection[Any]], ...],
                expected: str, write_element_part: Callable[..., None]) -> _Encoder:
    """An int count, then each element (written by ``write_element_part``)."""
    element = _encoder(element_type)
    name = f"{kind}<{element.name}>"
    write_element = element.write

    def write(w: BinaryWriter, value: Any) -> None:
        if not isinstance(value, accepted):
            raise _not_null(value, name, expected)
        w.i32(len(value))
        for index, item in enumerate(value):
            write_element_part(w, write_element, item, "element {} of {}", index, name)
    return _Encoder(name, write)


def _nullable(t: NullableType) -> _Encoder:
    """A null flag, then the value; a null is followed by ``padding`` zero bytes (Flink pads a
    null of a fixed-length serializer to its length)."""
    inner = _encoder(t.inner)
    padding = bytes(t.padding)
    write_inner = inner.write

    def write(w: BinaryWriter, value: Any) -> None:
        if value is None:
            w.u8(_NULL_FLAG)
            w.raw(padding)
            return
        w.u8(_PRESENT_FLAG)
        write_inner(w, value)
    return _Encoder(inner.name, write)


def map_items(value: Any, name: str) -> list[tuple[Any, Any]]:
    """A map's entries: a dict, or statesource's list of ``{"key", "value"}`` entries."""
    if isinstance(value, Mapping):
        return list(value.items())
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(e, Mapping) and {"key"} <= set(e) <= {"key", "value"} for e in value):
        raise _not_null(value, name, "a dict, or a list of {'key', 'value'} entries")
    items = [(e["key"], e.get("value")) for e in value]
    seen = set()
    for key, _ in items:
        held = hashable_record(key)
        if held in seen:
            raise misfit(value, name, f"the key {_shown(key)} is there twice")
        seen.add(held)
    return items


def _map(t: MapType) -> _Encoder:
    key, value_encoder = _encoder(t.key), _encoder(t.value)
    name = f"Map<{key.name}, {value_encoder.name}>"
    write_key, write_value = key.write, value_encoder.write

    def write(w: BinaryWriter, value: Any) -> None:
        items = map_items(value, name)
        w.i32(len(items))
        for user_key, user_value in items:
            write_part(w, write_key, user_key, "a key of {}", name)
            _flagged(w, write_value, user_value, "the value of key {} of {}", _shown(user_key),
                     name)
    return _Encoder(name, write)


def _ttl(t: TtlType) -> _Encoder:
    timestamp, user = _encoder(t.timestamp), _encoder(t.user)
    name = f"TTL<{user.name}>"
    write_timestamp, write_user = timestamp.write, user.write

    def write(w: BinaryWriter, value: Any) -> None:
        user_value, last_access = _sequence(value, 2, name, "(value, last-access timestamp)")
        write_part(w, write_timestamp, last_access, "the last-access timestamp of {}", name)
        write_part(w, write_user, user_value, "the value of {}", name)
    return _Encoder(name, write)


def flip_sign_bit(timestamp: int) -> int:
    """Flink's ``MathUtils.flipSignBit`` as a signed long (timers sort by it as bytes)."""
    return timestamp - (1 << 63) if timestamp >= 0 else timestamp + (1 << 63)


def _timer(t: TimerType) -> _Encoder:
    key, namespace = _encoder(t.key), _encoder(t.namespace)
    name = f"Timer<{key.name}, {namespace.name}>"
    write_key, write_namespace = key.write, namespace.write

    def write(w: BinaryWriter, value: Any) -> None:
        timestamp, timer_key, timer_namespace = _sequence(
            value, 3, name, "(timestamp, key, namespace)")
        if type(timestamp) is not int or not _LONG_MIN <= timestamp <= _LONG_MAX:
            raise misfit(timestamp, name, "the timestamp is a long")
        w.i64(flip_sign_bit(timestamp))
        write_part(w, write_key, timer_key, "the key of {}", name)
        write_part(w, write_namespace, timer_namespace, "the namespace of {}", name)
    return _Encoder(name, write)


def _fields_of(value: Any, count: int, name: str, extra: tuple[str, ...] = ()) -> list[Any]:
    """Positional fields: a tuple or list, or statesource's dict of ``f0``, ``f1``, ...

    As for a statesource record, a field missing from the dict is a null one.
    """
    if isinstance(value, (tuple, list)) and len(value) == count:
        return list(value)
    names = [f"f{i}" for i in range(count)]
    if isinstance(value, Mapping) and set(value) - set(extra) <= set(names):
        return [value.get(n) for n in names]
    raise _not_null(value, name, f"{count} fields (a tuple, or a dict of {', '.join(names)})")


def _tuple(t: TupleFlinkType) -> _Encoder:
    fields = [_encoder(f) for f in t.fields]
    name = f"Tuple{len(fields)}<{', '.join(f.name for f in fields)}>"
    writes = [f.write for f in fields]

    def write(w: BinaryWriter, value: Any) -> None:
        for index, (write_field, field) in enumerate(
                zip(writes, _fields_of(value, len(writes), name))):
            if field is None:
                raise misfit(value, name, f"field f{index} is null: Flink tuples hold no nulls")
            write_part(w, write_field, field, "field f{} of {}", index, name)
    return _Encoder(name, write)


def _row_kind(value: Any, name: str) -> RowKind:
    if isinstance(value, Row):
        return value.kind
    if isinstance(value, Mapping) and "row_kind" in value:
        kind = value["row_kind"]
        found = _BY_KIND_NAME.get(kind) if isinstance(kind, str) else kind
        if not isinstance(found, RowKind):
            raise misfit(value, name, f"unknown row kind {kind!r}; expected one of"
                                      f" {', '.join(_BY_KIND_NAME)}")
        return found
    return RowKind.INSERT


def _row(t: RowFlinkType) -> _Encoder:
    fields = [_encoder(f) for f in t.fields]
    name = f"Row<{', '.join(f.name for f in fields)}>"
    writes = [f.write for f in fields]
    with_kind = t.kind_in_mask
    bits = len(fields) + (2 if with_kind else 0)
    mask_bytes = (bits + 7) // 8

    def write(w: BinaryWriter, value: Any) -> None:
        kind = _row_kind(value, name)
        values = _fields_of(value.fields if isinstance(value, Row) else value, len(writes),
                            name, ("row_kind",))
        if not with_kind and kind is not RowKind.INSERT:
            raise misfit(value, name, "this serializer (legacy mode) has no row kind: only"
                                      " INSERT rows")
        # the first bit is the kind's low bit, the second its high bit
        mask = (kind.byte_value & 1) << 1 | kind.byte_value >> 1 if with_kind else 0
        for field in values:
            mask = mask << 1 | (field is None)
        w.raw((mask << (mask_bytes * 8 - bits)).to_bytes(mask_bytes, "big"))
        for index, (write_field, field) in enumerate(zip(writes, values)):
            if field is not None:
                write_part(w, write_field, field, "field f{} of {}", index, name)
    return _Encoder(name, write)


def _pojo(t: PojoFlinkType) -> _Encoder:
    fields = [(field_name, _encoder(f)) for field_name, f in t.fields]
    name = f"POJO {t.pojo_class}"
    names = {field_name for field_name, _ in fields}
    writes = [(field_name, f.write) for field_name, f in fields]

    def write(w: BinaryWriter, value: Any) -> None:
        if value is None:
            w.u8(_POJO_NULL)
            return
        if not isinstance(value, Mapping) or not set(value) <= names:
            raise misfit(value, name, f"expected a dict of the fields {', '.join(sorted(names))}"
                                      " (a missing one is null)")
        w.u8(_POJO_PLAIN)
        for field_name, write_field in writes:
            _flagged(w, write_field, value.get(field_name), "field {!r} of {}", field_name, name)
    return _Encoder(name, write)


def _raw_bytes(name: str, why: str) -> Write:
    def write(w: BinaryWriter, value: Any) -> None:
        if not isinstance(value, _BYTES):
            raise misfit(value, name, why)
        w.raw(bytes(value))
    return write


def _opaque(t: OpaqueType) -> _Encoder:
    name = f"Kryo {t.java_class}"
    return _Encoder(name, _raw_bytes(name, (
        "statesource writes back the bytes Kryo wrote (as a canonical savepoint's values read);"
        " only Kryo, with the job's registrations, can serialize other values")))


def _avro(t: AvroFlinkType) -> _Encoder:
    name = f"Avro {t.runtime_class}"
    if t.unmapped is not None:
        return _Encoder(name, _raw_bytes(name, (
            "its schema has no statesource mapping, so its values are the bytes Flink wrote"
            f" ({t.unmapped})")))
    return _Encoder(name, avro_writer(t.schema, name))


def _primitive(t: _Primitive) -> _Encoder:
    if t.describe() == "GlobalWindow":
        return _Encoder("GlobalWindow", _void("GlobalWindow"))
    return _Encoder(*_PRIMITIVES[t.data_type().name])


_BUILDERS: dict[type, Callable[[Any], _Encoder]] = {
    _Primitive: _primitive,
    ListType: _list,
    MapType: _map,
    SetType: _set,
    NullableType: _nullable,
    TtlType: _ttl,
    TimerType: _timer,
    TupleFlinkType: _tuple,
    RowFlinkType: _row,
    PojoFlinkType: _pojo,
    OpaqueType: _opaque,
    AvroFlinkType: _avro,
}
"""How to build the writer of each kind of :class:`FlinkType` (by its exact class)."""
_CACHE: weakref.WeakKeyDictionary[FlinkType, _Encoder] = weakref.WeakKeyDictionary()


def _encoder(flink_type: FlinkType) -> _Encoder:
    found = _CACHE.get(flink_type)
    if found is None:
        build = _BUILDERS.get(type(flink_type))
        if build is None:
            raise TypeMismatchError(
                f"statesource cannot encode values of {flink_type.describe()}"
                f" ({flink_type.serializer})")
        found = _CACHE[flink_type] = build(flink_type)
    return found


def value_writer(flink_type: FlinkType) -> Write:
    """The function writing one value of ``flink_type`` as its Flink serializer writes it."""
    return _encoder(flink_type).write


def type_name(flink_type: FlinkType) -> str:
    """How errors name the values of ``flink_type`` (``Tuple2<String, Long>``, ``POJO ...``)."""
    return _encoder(flink_type).name


def encode(flink_type: FlinkType, value: Any) -> bytes:
    """``value`` serialized as ``flink_type``'s serializer serializes it."""
    w = BinaryWriter()
    value_writer(flink_type)(w, value)
    return w.getvalue()

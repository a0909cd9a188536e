"""Encoding values into the bytes Flink's serializers read: what every family's encoder shares.

:func:`value_writer` gives, for a :class:`FlinkType` read from a serializer snapshot, the
function that writes one value as that serializer writes it, so that what a Flink job
restores is what it would have written itself. Each family builds its own
(:meth:`FlinkType.encoder`, the layout in its module); this module holds the helpers they
share and builds each type's encoder once.

Values take the shapes the reader returns (:meth:`FlinkType.read`: tuples,
:class:`~statesource.types.Row`, :class:`~statesource.schema.RecordKey` for POJOs,
``(start, end)`` windows, ``(value, timestamp)`` for TTL) and the shapes of statesource's
value schemas (:meth:`FlinkType.to_value` and
:func:`~statesource.flink.declarations.stored_converter`: a Tuple as a dict of ``f0``...,
a Row as a dict with its ``row_kind``, a map with other keys than strings as a list of
``{"key", "value"}`` entries). A value that does not fit its serializer (another Python
type, an int out of range, a null the serializer cannot write, a float too large for a
Java ``float``) is refused with :class:`~statesource.errors.TypeMismatchError` naming the
value, the Flink type and, inside a composite, where it is. A serializer no family encodes
is refused too, since only Flink could write its values.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from statesource.errors import TypeMismatchError
from statesource.flink.binary.writer import BinaryWriter

Write = Callable[[BinaryWriter, Any], None]
"""Writes one value of a serializer to a :class:`BinaryWriter`."""

NULL_FLAG, PRESENT_FLAG = 1, 0
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
BYTES_LIKE = (bytes, bytearray, memoryview)


class Encoder:
    """One serializer's writer and the name errors call its type by."""

    __slots__ = ("name", "write")

    def __init__(self, name: str, write: Write) -> None:
        self.name = name
        self.write = write


class Encodable(Protocol):
    """What values are encoded by: a serializer that builds its encoder (every
    :class:`~statesource.flink.serializers.base.FlinkType`, which builds on this module)."""

    def encoder(self) -> Encoder: ...


_CACHE: weakref.WeakKeyDictionary[Encodable, Encoder] = weakref.WeakKeyDictionary()


def encoder_of(flink_type: Encodable) -> Encoder:
    """The encoder of ``flink_type``, built once (a composite's holds its parts')."""
    found = _CACHE.get(flink_type)
    if found is None:
        found = _CACHE[flink_type] = flink_type.encoder()
    return found


def value_writer(flink_type: Encodable) -> Write:
    """The function writing one value of ``flink_type`` as its Flink serializer writes it."""
    return encoder_of(flink_type).write


def type_name(flink_type: Encodable) -> str:
    """How errors name the values of ``flink_type`` (``Tuple2<String, Long>``, ``POJO ...``)."""
    return encoder_of(flink_type).name


def encode(flink_type: Encodable, value: Any) -> bytes:
    """``value`` serialized as ``flink_type``'s serializer serializes it."""
    w = BinaryWriter()
    value_writer(flink_type)(w, value)
    return w.getvalue()


# -- what encoders share --------------------------------------------------------------------

def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def misfit(value: Any, type_name: str, why: str) -> TypeMismatchError:
    """The error for a value its serializer cannot write: the value, the type, the reason."""
    return TypeMismatchError(f"{shown(value)} does not fit {type_name}: {why}")


def inside(where: str, error: TypeMismatchError) -> TypeMismatchError:
    """``error`` of a part of a composite value, prefixed with where that part is."""
    return TypeMismatchError(f"{where}: {error}")


def write_part(w: BinaryWriter, write: Write, value: Any, where: str, *args: Any) -> None:
    """``write`` one part of a composite; an error names it (``where`` formatted with ``args``)."""
    try:
        write(w, value)
    except TypeMismatchError as error:
        raise inside(where.format(*args), error) from None


def flagged(w: BinaryWriter, write: Write, value: Any, where: str, *args: Any) -> None:
    """A null flag, then the value unless it is null (map values, POJO fields)."""
    if value is None:
        w.u8(NULL_FLAG)
        return
    w.u8(PRESENT_FLAG)
    write_part(w, write, value, where, *args)


def not_null(value: Any, name: str, expected: str) -> TypeMismatchError:
    return misfit(value, name, f"{name} cannot be null" if value is None else
                  f"expected {expected}")


def sequence(value: Any, count: int, name: str, what: str) -> tuple[Any, ...] | list[Any]:
    if not isinstance(value, (tuple, list)) or len(value) != count:
        raise not_null(value, name, what)
    return value


def fields_of(value: Any, count: int, name: str, extra: tuple[str, ...] = ()) -> list[Any]:
    """Positional fields: a tuple or list, or statesource's dict of ``f0``, ``f1``, ...

    As for a statesource record, a field missing from the dict is a null one.
    """
    if isinstance(value, (tuple, list)) and len(value) == count:
        return list(value)
    names = [f"f{i}" for i in range(count)]
    if isinstance(value, Mapping) and set(value) - set(extra) <= set(names):
        return [value.get(n) for n in names]
    raise not_null(value, name, f"{count} fields (a tuple, or a dict of {', '.join(names)})")


def raw_bytes(name: str, why: str) -> Write:
    """Writes back bytes as read, where statesource cannot encode other values (``why``)."""
    def write(w: BinaryWriter, value: Any) -> None:
        if not isinstance(value, BYTES_LIKE):
            raise misfit(value, name, why)
        w.raw(bytes(value))
    return write

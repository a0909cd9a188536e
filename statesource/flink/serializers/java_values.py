"""Flink's serializers of the Java classes Avro's logical types stand for: ``LocalDate``,
``LocalTime``, ``LocalDateTime``, ``Instant``, ``java.sql.Timestamp`` and ``BigDecimal``.

A Flink job keeps a date, a time, a timestamp or a decimal as a Java object, and Flink's type
extraction gives each class a serializer of its own (``Types.LOCAL_DATE_TIME``,
``Types.INSTANT``, ``Types.BIG_DEC``, ``SqlTimeTypeInfo.TIMESTAMP``). A statesource value
schema says the same with an Avro logical type, so :func:`logical_type_serializer` picks the
serializer of the class Avro's own Java mapping gives it: ``date`` a ``LocalDate``,
``time-millis`` and ``time-micros`` a ``LocalTime``, ``timestamp-*`` (instants) an
``Instant``, ``local-timestamp-*`` (wall-clock times) a ``LocalDateTime``, ``decimal`` a
``BigDecimal``. A timestamp has three classes in Flink, so the caller may pick another
(:data:`TIMESTAMP_CLASSES`). ``uuid`` is refused: Flink has no serializer of
``java.util.UUID`` and writes it with Kryo, whose bytes statesource does not write.

Each is a ``SimpleTypeSerializerSnapshot`` (its class name, version 3, no payload), and each
writes a null too (a marker the reader maps back to None). Values, big-endian:

- ``LocalDate``: the year (int), month and day (a byte each); null: ``Integer.MIN_VALUE``,
  ``Short.MIN_VALUE``;
- ``LocalTime``: hour, minute, second (a byte each), nanoseconds (int); null: ``-128``,
  ``Short.MIN_VALUE``, ``Integer.MIN_VALUE``;
- ``LocalDateTime``: the ``LocalDate`` then the ``LocalTime`` (null: both nulls);
- ``Instant``: epoch seconds (long), nanoseconds (int); null: ``Long.MIN_VALUE``,
  ``Integer.MIN_VALUE``;
- ``Timestamp``: epoch milliseconds (long), nanoseconds of the second (int); null:
  ``Long.MIN_VALUE``, 0;
- ``BigDecimal``: the unscaled value as ``BigIntSerializer`` writes it (an int, the length of
  its two's complement bytes plus 4, then the bytes; 0 is null), then the scale (int).

An aware ``datetime`` becomes a ``LocalDateTime`` at UTC; a naive one an ``Instant`` or
``Timestamp`` as if it were UTC: the format's timestamps carry no other zone. Values read
back as Python's types (a ``Timestamp`` or ``Instant`` as an aware datetime in UTC, a
``BigDecimal`` as a ``Decimal``, typed in Avro as a string with ``java-class``
``java.math.BigDecimal``, as Avro's reflection does); a nanosecond part Python cannot hold
is refused, naming the value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any, NamedTuple

from statesource.errors import IncompatibleCheckpointError, InvalidArgumentError, TypeMismatchError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.writer import BinaryWriter
from statesource.flink.serializers.base import FlinkSerializer, FlinkType, register
from statesource.flink.serializers.encoding import Encoder, Write, misfit
from statesource.flink.serializers.primitives import SimpleSerializer

_BASE = "org.apache.flink.api.common.typeutils.base."
_SIMPLE_VERSION = 3
INT_MIN, SHORT_MIN, BYTE_MIN, LONG_MIN = -(1 << 31), -(1 << 15), -(1 << 7), -(1 << 63)
_EPOCH = datetime(1970, 1, 1)
_MICROS, _NANOS_PER_MICRO = 1_000_000, 1000


def _snapshot(serializer: str) -> str:
    return f"{_BASE}{serializer}${serializer}Snapshot"


LOCAL_DATE = _snapshot("LocalDateSerializer")
LOCAL_TIME = _snapshot("LocalTimeSerializer")
LOCAL_DATE_TIME = _snapshot("LocalDateTimeSerializer")
INSTANT = _snapshot("InstantSerializer")
SQL_TIMESTAMP = _snapshot("SqlTimestampSerializer")
BIG_DEC = _snapshot("BigDecSerializer")

TIMESTAMP_CLASSES = {"LocalDateTime": LOCAL_DATE_TIME, "Instant": INSTANT,
                     "Timestamp": SQL_TIMESTAMP}
"""The classes a timestamp can be in a Flink job (``java.time.LocalDateTime``,
``java.time.Instant``, ``java.sql.Timestamp``), by the name the option takes."""

UUID_REFUSAL = ("Flink has no serializer of java.util.UUID: its type extraction makes it a"
                " generic type, written by Kryo, whose bytes statesource does not write; keep"
                ' the UUID as a plain string (schema {"type": "string"}), which a job holding'
                " it as a String restores")


# -- reading --------------------------------------------------------------------------------

def _python(r: BinaryReader, at: int, make: Callable[[], Any], shown: str) -> Any:
    """``make()``, or the error naming a Java value Python's types cannot hold."""
    try:
        return make()
    except (ValueError, OverflowError):
        raise IncompatibleCheckpointError(
            f"{r.source}: the value {shown} at byte offset {r.base + at} has no Python"
            " counterpart (years 1 .. 9999, whole microseconds)") from None


def _micros(r: BinaryReader, at: int, nanos: int) -> int:
    if nanos % _NANOS_PER_MICRO:
        raise IncompatibleCheckpointError(
            f"{r.source}: the time at byte offset {r.base + at} has {nanos} nanoseconds;"
            " Python's times hold whole microseconds")
    return nanos // _NANOS_PER_MICRO


def _date_parts(r: BinaryReader) -> tuple[int, int, int] | None:
    year = r.i32()
    if year == INT_MIN:
        r.i16()
        return None
    return year, r.i8(), r.i8()


def _time_parts(r: BinaryReader) -> tuple[int, int, int, int] | None:
    hour = r.i8()
    if hour == BYTE_MIN:
        r.i16()
        r.i32()
        return None
    return hour, r.i8(), r.i8(), r.i32()


def _read_date(r: BinaryReader) -> date | None:
    at = r.pos
    parts = _date_parts(r)
    return None if parts is None else _python(r, at, lambda: date(*parts), f"{parts}")


def _read_time(r: BinaryReader) -> time | None:
    at = r.pos
    parts = _time_parts(r)
    if parts is None:
        return None
    hour, minute, second, nanos = parts
    return _python(r, at, lambda: time(hour, minute, second, _micros(r, at, nanos)), f"{parts}")


def _read_date_time(r: BinaryReader) -> datetime | None:
    at = r.pos
    day, moment = _date_parts(r), _time_parts(r)
    if day is None or moment is None:
        return None
    micros = _micros(r, at, moment[3])
    return _python(r, at, lambda: datetime(*day, *moment[:3], micros), f"{day} {moment}")


def _from_epoch(r: BinaryReader, at: int, seconds: int, nanos: int) -> datetime:
    micros = _micros(r, at, nanos)
    return _python(r, at, lambda: (_EPOCH + timedelta(seconds=seconds, microseconds=micros)
                                   ).replace(tzinfo=timezone.utc), f"{seconds} s {nanos} ns")


def _read_instant(r: BinaryReader) -> datetime | None:
    at = r.pos
    seconds, nanos = r.i64(), r.i32()
    return None if seconds == LONG_MIN else _from_epoch(r, at, seconds, nanos)


def _read_sql_timestamp(r: BinaryReader) -> datetime | None:
    at = r.pos
    millis, nanos = r.i64(), r.i32()
    return None if millis == LONG_MIN else _from_epoch(r, at, millis // 1000, nanos)


def _read_big_decimal(r: BinaryReader) -> Decimal | None:
    at = r.pos
    length = r.i32()
    if length == 0:
        return None
    if length < 0:
        raise r.error(f"a BigDecimal of length {length}", at)
    if length < 4:  # BigIntSerializer's shortcuts for ZERO, ONE and TEN
        unscaled = (0, 1, 10)[length - 1]
    else:
        unscaled = int.from_bytes(r.take(length - 4), "big", signed=True)
    scale = r.i32()
    digits = tuple(int(d) for d in str(abs(unscaled)))
    return Decimal((int(unscaled < 0), digits, -scale))


# -- encoding -------------------------------------------------------------------------------

def _utc(value: datetime) -> datetime:
    """A datetime as a naive one in UTC (a naive one is taken as UTC already)."""
    return value if value.tzinfo is None else value.astimezone(timezone.utc).replace(tzinfo=None)


def _epoch_micros(value: datetime) -> int:
    delta = _utc(value) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * _MICROS + delta.microseconds


def _put_date(w: BinaryWriter, value: date | None) -> None:
    if value is None:
        w.i32(INT_MIN)
        w.i16(SHORT_MIN)
        return
    w.i32(value.year)
    w.u8(value.month)
    w.u8(value.day)


def _put_time(w: BinaryWriter, value: time | None) -> None:
    if value is None:
        w.u8(BYTE_MIN & 0xFF)
        w.i16(SHORT_MIN)
        w.i32(INT_MIN)
        return
    w.u8(value.hour)
    w.u8(value.minute)
    w.u8(value.second)
    w.i32(value.microsecond * _NANOS_PER_MICRO)


def _checked(name: str, accepts: Callable[[Any], bool], expected: str,
             put: Callable[[BinaryWriter, Any], None]) -> Write:
    """A writer of values ``accepts`` takes (and None, which these serializers write)."""
    def write(w: BinaryWriter, value: Any) -> None:
        if value is not None and not accepts(value):
            raise misfit(value, name, f"expected {expected}")
        put(w, value)
    return write


def _is_date(value: Any) -> bool:
    return isinstance(value, date) and not isinstance(value, datetime)


def _is_time(value: Any) -> bool:
    return isinstance(value, time) and value.tzinfo is None


def _write_date_time(w: BinaryWriter, value: datetime | None) -> None:
    moment = None if value is None else _utc(value)
    _put_date(w, None if moment is None else moment.date())
    _put_time(w, None if moment is None else moment.time())


def _write_instant(w: BinaryWriter, value: datetime | None) -> None:
    if value is None:
        w.i64(LONG_MIN)
        w.i32(INT_MIN)
        return
    seconds, micros = divmod(_epoch_micros(value), _MICROS)
    w.i64(seconds)
    w.i32(micros * _NANOS_PER_MICRO)


def _write_sql_timestamp(w: BinaryWriter, value: datetime | None) -> None:
    if value is None:
        w.i64(LONG_MIN)
        w.i32(0)
        return
    micros = _epoch_micros(value)
    w.i64(micros // 1000)
    w.i32(micros % _MICROS * _NANOS_PER_MICRO)


def _write_big_decimal(w: BinaryWriter, value: Decimal | None) -> None:
    if value is None:
        w.i32(0)
        return
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)  # finite: checked by the encoder
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    # Java's BigInteger.toByteArray: the shortest two's complement
    data = unscaled.to_bytes((unscaled + (unscaled < 0)).bit_length() // 8 + 1, "big",
                             signed=True)
    w.i32(len(data) + 4)
    w.raw(data)
    w.i32(-exponent)


def _is_datetime(value: Any) -> bool:
    return isinstance(value, datetime)


def _is_decimal(value: Any) -> bool:
    return isinstance(value, Decimal) and value.is_finite()


# -- the serializers ------------------------------------------------------------------------

class _JavaClass(NamedTuple):
    """What statesource knows of the serializer of one Java class."""

    java_class: str
    length: int
    read: Callable[[BinaryReader], Any]
    write: Write
    avro: Any
    """The Avro schema its values read as."""


_TIMESTAMP = {"type": "long", "logicalType": "timestamp-micros"}
_CLASSES: dict[str, _JavaClass] = {
    LOCAL_DATE: _JavaClass("java.time.LocalDate", 6, _read_date, _checked(
        "LocalDate", _is_date, "a date", _put_date), {"type": "int", "logicalType": "date"}),
    LOCAL_TIME: _JavaClass("java.time.LocalTime", 7, _read_time, _checked(
        "LocalTime", _is_time, "a time without a zone", _put_time),
        {"type": "long", "logicalType": "time-micros"}),
    LOCAL_DATE_TIME: _JavaClass("java.time.LocalDateTime", 13, _read_date_time, _checked(
        "LocalDateTime", _is_datetime, "a datetime", _write_date_time),
        {"type": "long", "logicalType": "local-timestamp-micros"}),
    INSTANT: _JavaClass("java.time.Instant", 12, _read_instant, _checked(
        "Instant", _is_datetime, "a datetime", _write_instant), _TIMESTAMP),
    SQL_TIMESTAMP: _JavaClass("java.sql.Timestamp", 12, _read_sql_timestamp, _checked(
        "Timestamp", _is_datetime, "a datetime", _write_sql_timestamp), _TIMESTAMP),
    BIG_DEC: _JavaClass("java.math.BigDecimal", -1, _read_big_decimal, _checked(
        "BigDecimal", _is_decimal, "a finite Decimal", _write_big_decimal),
        {"type": "string", "java-class": "java.math.BigDecimal"}),
}


JAVA_VALUE_CLASSES = frozenset(_CLASSES)
"""The snapshot classes of this module's serializers."""


class JavaValueType(FlinkType):
    """The serializer of one of the Java classes above, read from its snapshot."""

    def __init__(self, serializer: str) -> None:
        self.serializer = serializer
        self.length = _CLASSES[serializer].length

    def read(self, r: BinaryReader) -> Any:
        return _CLASSES[self.serializer].read(r)

    def avro(self) -> Any:
        return _CLASSES[self.serializer].avro

    def to_value(self, value: Any) -> Any:
        # a BigDecimal's scale is its own, so it reads as its text (Avro reflection's string)
        return str(value) if isinstance(value, Decimal) else value

    def encoder(self) -> Encoder:
        known = _CLASSES[self.serializer]
        return Encoder(known.java_class.rsplit(".", 1)[-1], known.write)

    def declared(self) -> FlinkSerializer:
        return JavaValueSerializer(self.serializer)


@dataclass(frozen=True)
class JavaValueSerializer(SimpleSerializer):
    """The serializer of one of the Java classes above, declared (a snapshot without payload)."""

    def __post_init__(self) -> None:
        if self.snapshot_class not in _CLASSES:
            raise InvalidArgumentError(
                f"{self.snapshot_class} is not a serializer of a Java date, time or decimal"
                f" class statesource writes; known: {', '.join(sorted(_CLASSES))}")


def _read_snapshot(name: str, r: BinaryReader, version: int) -> FlinkType:
    return JavaValueType(name)


for _snapshot_class in _CLASSES:
    register(_snapshot_class, _read_snapshot)


def timestamp_class_serializer(name: str | None) -> str | None:
    """The snapshot class of the timestamp class named ``name`` (None: each timestamp's own,
    see :func:`logical_type_serializer`); another name is refused, naming it."""
    if name is None:
        return None
    if name not in TIMESTAMP_CLASSES:
        raise InvalidArgumentError(
            f"timestamp class {name!r} is not one Flink has a serializer of; choose one of"
            f" {', '.join(TIMESTAMP_CLASSES)} (java.time.LocalDateTime, java.time.Instant,"
            " java.sql.Timestamp)")
    return TIMESTAMP_CLASSES[name]


_FIXED = {"date": LOCAL_DATE, "time-millis": LOCAL_TIME, "time-micros": LOCAL_TIME,
          "decimal": BIG_DEC}
_INSTANTS = ("timestamp-millis", "timestamp-micros")
_WALL_CLOCK = ("local-timestamp-millis", "local-timestamp-micros")


def logical_type_serializer(logical: str, timestamp_class: str | None = None
                            ) -> JavaValueSerializer:
    """The serializer Flink uses for the Java class of Avro's logical type ``logical``.

    ``timestamp_class`` (a key of :data:`TIMESTAMP_CLASSES`) is the class of every
    timestamp; None keeps Avro's: ``Instant`` for ``timestamp-*``, ``LocalDateTime`` for
    ``local-timestamp-*``. ``uuid`` and other logical types are refused
    (:class:`TypeMismatchError` saying why).
    """
    chosen = timestamp_class_serializer(timestamp_class)
    if logical in _INSTANTS or logical in _WALL_CLOCK:
        default = INSTANT if logical in _INSTANTS else LOCAL_DATE_TIME
        return JavaValueSerializer(chosen or default)
    if logical in _FIXED:
        return JavaValueSerializer(_FIXED[logical])
    if logical == "uuid":
        raise TypeMismatchError(f"logical type 'uuid': {UUID_REFUSAL}")
    raise TypeMismatchError(f"logical type {logical!r} has no Flink serializer statesource"
                            " derives")

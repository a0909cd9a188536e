"""Keys as Java's ``equals`` sees them: one canonical Python value per Java-equal key.

Flink finds a key's state with ``hashCode`` *and* ``equals``, so two keys share
state exactly when Java calls them equal. Python's ``==`` differs in three places
that would silently merge or split a user's state:

* ``Double.equals`` / ``Float.equals`` compare bit patterns (``doubleToLongBits``):
  every NaN is one key while ``0.0`` and ``-0.0`` are two. Python has
  ``nan != nan`` and ``0.0 == -0.0``. :class:`JavaFloat` is a ``float`` that
  compares and hashes the Java way.
* a ``float`` key is a Java ``float``: a Python float is rounded to float32 before
  it is hashed *and* matched, so two doubles that round alike are one key.
* a plain tuple given for a ``row<...>`` key is the Row of kind INSERT (both are
  kept as the plain tuple, the cheaper form; a Row of another kind stays a ``Row``).

:func:`key_canonicalizer` builds, once per type, the function that validates a value
and returns that canonical form. Every path that compares keys (the state map, the
checkpoint reader regrouping rows, restore, pushdown) goes through it, so the rules
exist once. Columns of floating-point values compare the Java way through
:func:`java_float_bits`, the bit patterns ``equals`` compares.

Strings also get a check here: a Java ``String`` may hold any UTF-16 code units, but
the checkpoint format stores UTF-8 and cannot hold a surrogate code point (a lone
one, or a pair spelled as two Python characters). Such a value is refused where it
is given, never accepted and failed later in a background checkpoint.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from statesource.errors import TypeMismatchError
from statesource.types import (
    CHAR,
    DOUBLE,
    FLOAT,
    STRING,
    DataType,
    Row,
    RowKind,
    RowType,
    TupleType,
)

_copysign = math.copysign
_isnan = math.isnan
_float_eq = float.__eq__
_float_ne = float.__ne__


class JavaFloat(float):
    """A float with Java's ``Double.equals``: bit-pattern equality, one NaN.

    Make them with :func:`java_double` or :func:`java_float`, never directly: every NaN
    key must be the one :data:`NAN` object, because Python hashes a NaN by identity.
    That lets the hash stay ``float.__hash__`` (a C slot, on the state map's hot path),
    consistent with plain floats except for the pairs Java tells apart.
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, float):
            return NotImplemented
        if _float_eq(self, other):
            return _float_ne(self, 0.0) or _copysign(1.0, self) == _copysign(1.0, other)
        return _isnan(self) and _isnan(other)

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = float.__hash__

    def __reduce__(self) -> tuple[Any, tuple[float]]:
        return java_double, (float(self),)  # unpickled NaN keys are the one NAN again

    def __repr__(self) -> str:
        return float.__repr__(self)


NAN = JavaFloat("nan")
"""The canonical NaN key (every NaN is this one key, as in Java)."""


def java_double(value: float) -> JavaFloat:
    """``value`` as a key compared by Java's ``Double.equals``."""
    return NAN if _isnan(value) else JavaFloat(value)  # not ``!=``: a JavaFloat NaN equals itself


def java_float(value: float) -> JavaFloat:
    """``value`` cast to Java ``float`` (round to nearest, overflow to infinity)."""
    if _isnan(value):
        return NAN
    try:
        return JavaFloat(struct.unpack("<f", struct.pack("<f", value))[0])
    except OverflowError:
        return JavaFloat(math.inf if value > 0 else -math.inf)


_CANONICAL_NAN_BITS = {np.dtype(np.float64): np.int64(0x7FF8000000000000),
                       np.dtype(np.float32): np.int32(0x7FC00000)}


def java_float_bits(values: np.ndarray) -> np.ndarray:
    """``doubleToLongBits`` of float64 values (as int64), ``floatToIntBits`` of float32 ones
    (as int32).

    Two values are ``Double.equals`` / ``Float.equals`` exactly when these bits are equal
    (every NaN has the one canonical pattern, ``0.0`` and ``-0.0`` differ in the sign bit),
    and ``hashCode`` hashes them; so a column compares, sorts and hashes the Java way as
    integers, where numpy's float comparison would not.
    """
    canonical_nan = _CANONICAL_NAN_BITS.get(values.dtype)
    if canonical_nan is None:
        raise TypeMismatchError(f"Java floating-point bits need float32 or float64, not"
                                f" {values.dtype}")
    return np.where(np.isnan(values), canonical_nan, values.view(canonical_nan.dtype))


def check_storable_string(value: str) -> str:
    """``value`` itself, or an error if it holds a surrogate code point (UTF-8 cannot)."""
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as error:
            raise TypeMismatchError(
                f"{value!r} holds the surrogate code point"
                f" U+{ord(value[error.start]):04X} at index {error.start}: a Java String may,"
                " but the checkpoint format stores UTF-8, which cannot; give the text as"
                " proper Unicode characters"
            ) from None
    return value


Canonicalizer = Callable[[Any], Any]


def key_canonicalizer(data_type: DataType, *, validate: bool = True) -> Canonicalizer:
    """The function mapping a value of ``data_type`` to its Java-equality form.

    With ``validate`` it first checks the value (raising :class:`TypeMismatchError`);
    without, the caller has checked it already (for instance by hashing it). Either
    way a string the format cannot store is refused. Canonical values compare with
    ``==`` and hash consistently exactly when Java's ``equals`` says they are equal,
    and canonicalising a canonical value again gives an equal value.
    """
    canonical = _field_canonicalizer(data_type)
    if not validate:
        return canonical
    check = data_type.validate

    def validated(value: Any) -> Any:
        check(value)
        return canonical(value)
    return validated


def decoded_key_canonicalizer(data_type: DataType) -> Canonicalizer | None:
    """What values read back from a column of ``data_type`` still need, or None.

    Decoded strings are valid UTF-8; floating-point values (alone or in a Tuple or
    Row) must become :class:`JavaFloat`, and decoded INSERT rows plain tuples.
    """
    return key_canonicalizer(data_type, validate=False) if _needs_decoding(data_type) else None


def _needs_decoding(data_type: DataType) -> bool:
    if isinstance(data_type, RowType):
        return True
    if isinstance(data_type, TupleType):
        return any(_needs_decoding(field) for field in data_type.fields)
    return data_type is DOUBLE or data_type is FLOAT


def _composite(data_type: TupleType | RowType) -> Canonicalizer:
    """Rebuild an already validated Tuple or Row from canonical fields.

    A Row of kind INSERT becomes the plain tuple of its fields, which is what a plain
    tuple given for a ``row<...>`` means: one cheap form (hashed and compared in C)
    for the common kind. A Row of another kind stays a ``Row``, which never equals a
    tuple, as Java's ``Row.equals`` compares kinds.
    """
    fields = tuple(_field_canonicalizer(t) for t in data_type.fields)
    checked = [(index, f) for index, f in enumerate(fields) if f is not _identity]
    if all(f is check_storable_string for _, f in checked):
        def canonical_fields(values: tuple[Any, ...]) -> tuple[Any, ...]:
            for index, check in checked:  # fields that canonicalise to themselves
                if values[index] is not None:
                    check(values[index])
            return values if type(values) is tuple else tuple(values)
    else:
        def canonical_fields(values: tuple[Any, ...]) -> tuple[Any, ...]:
            return tuple(None if v is None else f(v) for f, v in zip(fields, values))

    if not isinstance(data_type, RowType):
        return canonical_fields if checked else _identity

    def row(value: Any) -> Any:
        if not isinstance(value, Row):
            return canonical_fields(value)
        if value.kind is RowKind.INSERT:
            return canonical_fields(value.fields)
        return Row(*canonical_fields(value.fields), kind=value.kind)
    return row


def _field_canonicalizer(data_type: DataType) -> Canonicalizer:
    """Like :func:`key_canonicalizer` for a field of a value validated as a whole."""
    if data_type is DOUBLE:
        return java_double
    if data_type is FLOAT:
        return java_float
    if data_type is STRING or data_type is CHAR:
        return check_storable_string
    if isinstance(data_type, (TupleType, RowType)):
        return _composite(data_type)
    return _identity


def _identity(value: Any) -> Any:
    return value

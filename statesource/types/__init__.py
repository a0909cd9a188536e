"""The type vocabulary shared by keys, state values and checkpoint metadata.

A key's key group depends on its *Java* ``hashCode``, and the same Python
value hashes differently as a Java ``int``, ``long`` or ``short``. So a key type
is always declared, never guessed from a Python value, and the declared type
alone decides how a value is hashed, validated and stored.

Types are written as short strings that also serve as their canonical form in
checkpoint metadata: ``string``, ``int``, ``long``, ``short``, ``byte``,
``boolean``, ``char``, ``float``, ``double``, ``bytes``, ``tuple<t1,...,tN>`` and
``row<t1,...,tN>``, plus ``void``, the type of the namespace of states that
have none, and ``timewindow``, Flink's ``TimeWindow`` namespace of window
states. Java spellings are accepted on input (``Integer``,
``Character``, ``byte[]``, ``Tuple2<String,Long>``). ``bytes`` is only valid
inside a Row: a bare array key has an identity ``hashCode`` in Java, which is
why Flink rejects it, and inside a Tuple it would hash by identity as well.

The package: :mod:`~statesource.types.datatype` (what every type does),
:mod:`~statesource.types.primitives` and :mod:`~statesource.types.composites`
(the types), :mod:`~statesource.types.parsing` (type strings) and
:mod:`~statesource.types.java_hash` (Java's ``hashCode`` arithmetic), and for the state
of Flink SQL operators :mod:`~statesource.types.sql` (SQL logical types),
:mod:`~statesource.types.binary_row` (the bytes and hash of a ``BinaryRowData``) and
:mod:`~statesource.types.sql_row` (their key type, ``sqlrow<...>``, which
:func:`parse_type` does not read: it is only ever derived from a snapshot). Import the
vocabulary from here.
"""

from statesource.types.composites import Row, RowKind, RowType, TupleType
from statesource.types.datatype import DataType
from statesource.types.parsing import key_type, parse_type
from statesource.types.primitives import (
    BOOLEAN,
    BYTE,
    BYTES,
    CHAR,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    SHORT,
    STRING,
    TIMEWINDOW,
    VOID,
)
from statesource.types.sql import SqlType
from statesource.types.sql_row import SqlRowType

__all__ = [
    "BOOLEAN", "BYTE", "BYTES", "CHAR", "DOUBLE", "FLOAT", "INT", "LONG", "SHORT", "STRING",
    "TIMEWINDOW", "VOID", "DataType", "Row", "RowKind", "RowType", "SqlRowType", "SqlType",
    "TupleType", "key_type", "parse_type",
]

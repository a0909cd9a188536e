"""Flink's serializers: their snapshots, statesource's types for them, and their values' bytes.

A state file's header names, per state, the snapshot of each serializer its values were
written with. From that snapshot statesource knows how to read a value (one by one, and
column-wise), which statesource type and Avro schema it has, how to encode a value back,
and how to write the snapshot for a declared type.

Everything statesource knows about one snapshot class lives in its family's module, which
registers the class by name in :mod:`.base` as it is imported: :mod:`.primitives` (the
primitives, ``String``, ``byte[]``, ``VoidNamespace``, ``GlobalWindow``, ``TimeWindow``),
:mod:`.collections` (``List``, ``Map``, ``Set``), :mod:`.nullable`, :mod:`.ttl`,
:mod:`.timer`, :mod:`.tuples`, :mod:`.rows`, :mod:`.pojo`, :mod:`.java_values`
(``LocalDate``, ``LocalTime``, ``LocalDateTime``, ``Instant``, ``Timestamp``,
``BigDecimal``: Avro's logical types), :mod:`.kryo`, :mod:`.avro`
(its values' writer in :mod:`.avro_encoder`), and Flink SQL's :mod:`.sql_rows` (``RowData``:
its logical types in :mod:`.logical_types`, its binary rows in :mod:`.binary_rows`) and
:mod:`.sql_values` (``StringData``, ``DecimalData``, ``TimestampData``, ``RawValueData``,
``ExternalSerializer``, ...). What they share is in :mod:`.base`,
:mod:`.columns` (column-wise decoding) and :mod:`.encoding`; :mod:`.mapping` derives
serializers from statesource's types and value schemas, across families.

Importing anything of this package runs this module first, and it imports every family:
so the registry :func:`~.base.read_snapshot` looks snapshot classes up in is always
complete.
"""

from statesource.flink.serializers import (  # noqa: F401  (each registers its snapshots)
    avro,
    collections,
    java_values,
    kryo,
    nullable,
    pojo,
    primitives,
    rows,
    sql_rows,
    sql_values,
    timer,
    ttl,
    tuples,
)

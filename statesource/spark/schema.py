"""The DataFrame schema of a state: derived from the checkpoint metadata alone.

Columns: ``key_group``, ``operator_index`` (the subtask owning the row under
the requested parallelism), ``key``, ``namespace``, the value columns of the
state's kind and, with TTL, ``ttl_timestamp``. With ``flattenCollections``
off, a list state has one ``list_value`` array per entry and a map state one
``map_value`` map (TTL timestamps then come as ``ttl_timestamps``, aligned with
the elements or keyed like the map).

Spark checks every Arrow batch a Python source yields against the Arrow form
of the declared schema, so batches are cast to exactly that form.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

from statesource.format.columns import (
    KEY,
    KEY_GROUP,
    NAMESPACE,
    TTL_ARROW_TYPE,
    TTL_TIMESTAMP,
    VALUE_COLUMNS,
    data_schema,
)
from statesource.format.keyed_state_meta import KeyedStateMeta
from statesource.format.metadata import OperatorMeta
from statesource.model import StateKind

OPERATOR_INDEX = "operator_index"
LIST_VALUE = "list_value"
MAP_VALUE = "map_value"
TTL_TIMESTAMPS = "ttl_timestamps"


@dataclass(frozen=True)
class OutputSchema:
    """The Spark schema, the Arrow schema rows are built in, and its Spark-exact form."""

    spark: StructType
    arrow: pa.Schema
    spark_arrow: pa.Schema
    nested: bool


def output_schema(op: OperatorMeta, state: KeyedStateMeta, flatten: bool) -> OutputSchema:
    declaration = state.declaration
    stored = data_schema(op.keyed_key_type, declaration)
    fields = [stored.field(KEY_GROUP), pa.field(OPERATOR_INDEX, pa.int32()),
              stored.field(KEY), stored.field(NAMESPACE)]
    nested = not flatten and state.kind in (StateKind.LIST, StateKind.MAP)
    if nested and state.kind is StateKind.LIST:
        element = declaration.schemas["element"].arrow_type
        fields.append(pa.field(LIST_VALUE, pa.list_(element)))
        if declaration.ttl is not None:
            fields.append(pa.field(TTL_TIMESTAMPS, pa.list_(TTL_ARROW_TYPE)))
    elif nested:
        user_key = declaration.schemas["user_key"].arrow_type
        fields.append(pa.field(MAP_VALUE,
                               pa.map_(user_key, declaration.schemas["user_value"].arrow_type)))
        if declaration.ttl is not None:
            fields.append(pa.field(TTL_TIMESTAMPS, pa.map_(user_key, TTL_ARROW_TYPE)))
    else:
        fields.extend(stored.field(column) for column, _ in VALUE_COLUMNS[state.kind])
        if declaration.ttl is not None:
            fields.append(stored.field(TTL_TIMESTAMP))
    return spark_output(fields, nested)


def spark_output(fields: list[pa.Field], nested: bool = False) -> OutputSchema:
    """The Spark schema of rows built with Arrow ``fields``, and its Spark-exact Arrow form."""
    arrow = pa.schema(fields)
    spark = from_arrow_schema(pa.schema([f.with_type(_spark_compatible(f.type)) for f in arrow]))
    return OutputSchema(spark, arrow, to_arrow_schema(spark, timezone="UTC"), nested)


def _spark_compatible(arrow_type: pa.DataType) -> pa.DataType:
    """The nearest type Spark's Arrow conversion accepts (it lacks time32 and fixed binary)."""
    if pa.types.is_time32(arrow_type):
        return pa.time64("us")
    if pa.types.is_fixed_size_binary(arrow_type):
        return pa.binary()
    if pa.types.is_timestamp(arrow_type):
        return pa.timestamp("us", tz=arrow_type.tz)
    if pa.types.is_list(arrow_type):
        return pa.list_(_spark_compatible(arrow_type.value_type))
    if pa.types.is_map(arrow_type):
        return pa.map_(_spark_compatible(arrow_type.key_type),
                       _spark_compatible(arrow_type.item_type))
    if pa.types.is_struct(arrow_type):
        return pa.struct([f.with_type(_spark_compatible(f.type)) for f in arrow_type])
    return arrow_type

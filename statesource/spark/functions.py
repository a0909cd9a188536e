"""Flink-exact key-group functions in Spark SQL: ``flink_key_group`` and ``flink_operator_index``.

``register_functions(spark)`` registers them on a session: from the shim when
it can be built or is cached (a Catalyst expression and a Java UDF: they run
inside the JVM, with no Python round trip), otherwise as Arrow UDFs over the vectorised Python
implementation (statesource.keygroups.columns). Both give identical results;
the tests run Flink's golden vectors through each.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from statesource.keygroups.columns import key_groups_of_column, operator_indexes_of_columns
from statesource.spark.jvm.plan import load_shim
from statesource.spark.jvm.session import (
    KEY_GROUP_FUNCTION,
    OPERATOR_INDEX_FUNCTION,
    register_java_functions,
)


def register_functions(spark: Any, *, use_jvm: bool = True) -> str:
    """Register both functions on ``spark``; returns ``"jvm"`` or ``"python"``, the path taken.

    ``use_jvm=False`` forces the Python implementation (the tests compare the two).
    """
    if use_jvm and load_shim(spark):
        register_java_functions(spark)
        return "jvm"
    from pyspark.sql.functions import arrow_udf

    # The functions' pa.Array type hints make them scalar Arrow UDFs; pyarrow has no stubs, so
    # mypy cannot match pyspark's overloads.
    key_group_udf = arrow_udf(_key_group_batch, "int")  # type: ignore[call-overload]
    operator_index_udf = arrow_udf(_operator_index_batch, "int")  # type: ignore[call-overload]
    spark.udf.register(KEY_GROUP_FUNCTION, key_group_udf)
    spark.udf.register(OPERATOR_INDEX_FUNCTION, operator_index_udf)
    return "python"


def flink_key_group(key: Any, max_parallelism: Any) -> Any:
    """Column expression ``flink_key_group(key, maxParallelism)`` (registered functions only)."""
    from pyspark.sql.functions import call_function

    return call_function(KEY_GROUP_FUNCTION, _column(key), _column(max_parallelism))


def flink_operator_index(key_group: Any, max_parallelism: Any, parallelism: Any) -> Any:
    """Column ``flink_operator_index(keyGroup, maxParallelism, parallelism)``."""
    from pyspark.sql.functions import call_function

    return call_function(OPERATOR_INDEX_FUNCTION, _column(key_group), _column(max_parallelism),
                         _column(parallelism))


def _column(value: Any) -> Any:
    """Column names and Columns as they are; Python ints as literals."""
    from pyspark.sql import Column
    from pyspark.sql.functions import col, lit

    if isinstance(value, Column):
        return value
    return col(value) if isinstance(value, str) else lit(value)


def _key_group_batch(keys: pa.Array, max_parallelism: pa.Array) -> pa.Array:
    return key_groups_of_column(keys, max_parallelism)


def _operator_index_batch(key_groups: pa.Array, max_parallelism: pa.Array,
                          parallelism: pa.Array) -> pa.Array:
    return operator_indexes_of_columns(key_groups, max_parallelism, parallelism)

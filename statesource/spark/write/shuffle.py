"""The Spark job of a keyed-state write: rows shuffled by Flink subtask, one task per subtask.

Each task receives whole Flink subtasks (hashing the subtask index), so the
files of different tasks never share a key group; the task itself
(:func:`~statesource.spark.write.task.write_partition`) recomputes every key
group, so the shuffle is never trusted, only made cheap.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from statesource.format.columns import KEY
from statesource.format.locations import DataFile
from statesource.keygroups import key_groups, operator_indexes
from statesource.model import StateKind
from statesource.spark.compat import is_connect
from statesource.spark.executor import guarded, raised_by_tasks
from statesource.spark.jvm.session import (
    KEY_GROUP_FUNCTION,
    OPERATOR_INDEX_FUNCTION,
    register_java_functions,
    shim_loaded,
)
from statesource.spark.schema import spark_output
from statesource.spark.write.plan import StateWrite
from statesource.spark.write.task import key_column, write_partition
from statesource.types import DataType

_ORDER = "__statesource_order"
_SUBTASK = "__statesource_subtask"
"""The shuffle's column: a user's own ``key_group`` / ``operator_index`` stay, to be checked."""


def write_state_files(df: Any, target: StateWrite) -> list[DataFile]:
    """Run the Spark job that writes ``df`` as ``target``'s data files (nothing committed).

    A failing task removes its own files; files of tasks that finished before
    a job failed stay unreferenced (readers never see them; ``retain`` does not
    list them either).
    """
    shuffled, target = _by_subtask(df, target)
    with raised_by_tasks():
        rows = shuffled.mapInArrow(_task(target), "file string").collect()
    return [DataFile.from_json_text(row.file) for row in rows]


def _by_subtask(df: Any, target: StateWrite) -> tuple[Any, StateWrite]:
    """``df`` with one Spark partition per Flink subtask (hashing the subtask index), computed
    by the shim's Java functions where they apply, else in a Python pass.

    List elements keep the DataFrame's order unless an order column is given:
    their position is recorded before the shuffle and sorted by in the task.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, StructType

    if target.order_column is None and target.declaration.kind is StateKind.LIST:
        df = df.withColumn(_ORDER, F.monotonically_increasing_id())
        target = dataclasses.replace(target, order_column=_ORDER)
    subtask = jvm_subtask_column(df, KEY, target.key_type, target.max_parallelism,
                                 target.parallelism)
    if subtask is not None:
        with_subtask = df.withColumn(_SUBTASK, subtask)
    else:
        schema = StructType([*df.schema.fields]).add(_SUBTASK, IntegerType())
        with_subtask = df.mapInArrow(_subtask_column(target), schema)
    return with_subtask.repartition(target.parallelism, _SUBTASK), target


def jvm_subtask_column(df: Any, key: str, key_type: DataType, max_parallelism: int,
                       parallelism: int) -> Any | None:
    """The Flink subtask of each row's ``key``, computed in the JVM; None where it cannot be.

    With the shim loaded on the session the shuffle costs no Python pass. The
    Java functions read the key type off the column's Spark type, so they are
    used only when that type is exactly the one ``flinkstate`` reads for
    ``key_type`` (an ``int`` column holding the keys of a ``long`` state hashes
    differently). The write tasks recompute every key group anyway, so a
    shuffle is never trusted, only made cheap.
    """
    expected = spark_output([pa.field(key, key_type.arrow_type)]).spark[key].dataType
    spark = df.sparkSession
    if (df.schema[key].dataType.simpleString() != expected.simpleString()
            or is_connect(spark) or not shim_loaded(spark)):
        return None
    from pyspark.sql import functions as F

    register_java_functions(spark)
    key_group = F.call_function(KEY_GROUP_FUNCTION, F.col(key), F.lit(max_parallelism))
    return F.call_function(OPERATOR_INDEX_FUNCTION, key_group, F.lit(max_parallelism),
                           F.lit(parallelism))


def _subtask_column(target: StateWrite) -> Callable[[Iterator[pa.RecordBatch]],
                                                     Iterator[pa.RecordBatch]]:
    def add(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            keys = key_column(target.key_type, pa.chunked_array([batch.column("key")]))
            groups = key_groups(keys, target.key_type, target.max_parallelism)
            subtasks = operator_indexes(target.max_parallelism, target.parallelism, groups)
            yield batch.append_column(_SUBTASK, pa.array(subtasks))
    return add


def _task(target: StateWrite) -> Callable[[Iterator[pa.RecordBatch]],
                                           Iterator[pa.RecordBatch]]:
    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        files = write_partition(target, batches)
        yield pa.record_batch([pa.array([f.to_json_text() for f in files], pa.string())],
                              names=["file"])

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return guarded(None, write(batches))
    return run

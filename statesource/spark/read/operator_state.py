"""``flinkstate`` with ``operatorState``: an operator state as rows, one per element or entry.

Operator state is small (it is sent to every subtask on restore) and not
partitioned by key, so it is read in one Spark partition: per old subtask,
its list elements (split and union states) or map entries (broadcast
states), with ``operator_index`` naming the subtask that held them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from statesource.format.operator_columns import operator_state_schema, operator_state_table
from statesource.format.source import SourceRef, StateSource
from statesource.model import DistributionMode
from statesource.schema import ValueSchema
from statesource.sources import reopen
from statesource.spark.executor import guarded
from statesource.spark.options import ReadOptions
from statesource.spark.schema import OPERATOR_INDEX, OutputSchema, spark_output


@dataclass(frozen=True)
class OperatorStateTarget:
    """The operator state a scan reads; small and picklable, as Spark ships it to the task."""

    source: SourceRef
    operator: str | None
    name: str
    mode: DistributionMode
    schemas: dict[str, ValueSchema]
    output: OutputSchema

    @property
    def spark_schema(self) -> StructType:
        return self.output.spark


def open_operator_state_target(parsed: ReadOptions, source: StateSource
                               ) -> OperatorStateTarget:
    assert parsed.operator_state is not None
    share = source.operator_state(parsed.operator_state, operator=parsed.operator)
    return OperatorStateTarget(source.ref(), parsed.operator, parsed.operator_state, share.mode,
                               share.schemas, operator_state_output(share.mode, share.schemas))


class OperatorStateReader(DataSourceReader):
    def __init__(self, target: OperatorStateTarget) -> None:
        self.target = target

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return guarded(self.target.source.location, self._read())

    def _read(self) -> Iterator[pa.RecordBatch]:
        target = self.target
        shares = reopen(target.source).operator_state(target.name, operator=target.operator)
        for index, share in enumerate(shares.values):
            if not share:
                continue
            table = operator_state_table(target.mode, target.schemas, share)
            columns = [pa.array(np.full(table.num_rows, index, dtype=np.int32)), *table.columns]
            yield from pa.Table.from_arrays(columns, schema=target.output.arrow).cast(
                target.output.spark_arrow).to_batches()


def operator_state_output(mode: DistributionMode, schemas: dict[str, ValueSchema]
                          ) -> OutputSchema:
    """``operator_index`` (the owning subtask), then the format's operator-state columns."""
    stored = operator_state_schema(mode, schemas)
    return spark_output([pa.field(OPERATOR_INDEX, pa.int32()), *stored])

"""The rows of ``flinkstate-metadata``: one per state of a snapshot.

A statesource checkpoint records every state's entries, rows and bytes in its
metadata: one partition reads them. A Flink snapshot records only where each
key group's bytes lie, so its keyed and timer states are counted by decoding
their key groups, as ``inspect`` counts them
(:func:`statesource.flink.operations.census.count_operator`): one Spark
partition per operator, so the operators are decoded in parallel.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from statesource.flink.operations.census import count_operator
from statesource.flink.reader import FlinkCheckpoint
from statesource.format.source import StateSource, StateSummary

METADATA_SCHEMA = pa.schema([
    ("checkpoint_id", pa.int64()),
    ("operator_uid", pa.string()),
    ("operator_name", pa.string()),
    ("operator_id", pa.string()),
    ("parallelism", pa.int32()),
    ("max_parallelism", pa.int32()),
    ("state_name", pa.string()),
    ("kind", pa.string()),
    ("key_type", pa.string()),
    ("value_types", pa.string()),
    ("entries", pa.int64()),
    ("rows", pa.int64()),
    ("bytes", pa.int64()),
    ("unreadable", pa.string()),
])
METADATA_DDL = ("checkpoint_id bigint, operator_uid string, operator_name string,"
                " operator_id string, parallelism int, max_parallelism int, state_name string,"
                " kind string, key_type string, value_types string, entries bigint, rows bigint,"
                " bytes bigint, unreadable string")


class MetadataReader(DataSourceReader):
    def __init__(self, checkpoint: StateSource) -> None:
        self.checkpoint = checkpoint

    def partitions(self) -> list[InputPartition]:
        """One per operator of a Flink snapshot (each decodes its own key groups), else one."""
        if isinstance(self.checkpoint, FlinkCheckpoint) and self.checkpoint.snapshot.operators:
            return [InputPartition(i) for i in range(len(self.checkpoint.snapshot.operators))]
        return [InputPartition(None)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if partition.value is None:
            summaries = self.checkpoint.summaries()
        else:
            assert isinstance(self.checkpoint, FlinkCheckpoint)
            summaries = counted_summaries(self.checkpoint, partition.value)
        rows = [
            (s.checkpoint_id, s.operator_uid, s.operator_name, s.operator_id, s.parallelism,
             s.max_parallelism, s.state_name, s.kind, s.key_type, json.dumps(s.value_types),
             s.entries, s.rows, s.size_bytes, s.unreadable)
            for s in summaries
        ]
        columns: list[Sequence[object]] = (
            list(zip(*rows)) if rows else [[] for _ in METADATA_SCHEMA]
        )
        yield pa.RecordBatch.from_arrays(
            [pa.array(c, f.type) for c, f in zip(columns, METADATA_SCHEMA)],
            schema=METADATA_SCHEMA)


def counted_summaries(checkpoint: FlinkCheckpoint, index: int) -> list[StateSummary]:
    """The rows of the ``index``-th operator of a Flink snapshot, its keyed and timer states
    with the entries, rows and bytes its decoded key groups hold. A state that cannot be
    counted keeps NULLs, and its row says why (``unreadable``)."""
    op = checkpoint.snapshot.operators[index]
    summaries = checkpoint.operator_summaries(op)
    if not any(s.entries is None and s.state_name is not None for s in summaries):
        return summaries
    counted = {state.name: state for state in count_operator(checkpoint, op).states
               if not state.kind.startswith("operator-")}
    filled = []
    for summary in summaries:
        state = counted.get(summary.state_name or "")
        if summary.entries is None and state is not None and state.entries is not None:
            summary = dataclasses.replace(summary, entries=state.entries, rows=state.rows,
                                          size_bytes=state.size_bytes)
        elif summary.entries is None and state is not None and summary.unreadable is None:
            summary = dataclasses.replace(summary, unreadable=state.unreadable)
        filled.append(summary)
    return filled

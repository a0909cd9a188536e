"""The rows of ``flinkstate-metadata``: one per state of a snapshot, from its metadata alone."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from statesource.format.source import StateSource

METADATA_SCHEMA = pa.schema([
    ("checkpoint_id", pa.int64()),
    ("operator_uid", pa.string()),
    ("operator_name", pa.string()),
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
                " parallelism int, max_parallelism int, state_name string, kind string,"
                " key_type string, value_types string, entries bigint, rows bigint, bytes bigint,"
                " unreadable string")


class MetadataReader(DataSourceReader):
    def __init__(self, checkpoint: StateSource) -> None:
        self.checkpoint = checkpoint

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        rows = [
            (s.checkpoint_id, s.operator_uid, s.operator_name, s.parallelism, s.max_parallelism,
             s.state_name, s.kind, s.key_type, json.dumps(s.value_types), s.entries, s.rows,
             s.size_bytes, s.unreadable)
            for s in self.checkpoint.summaries()
        ]
        columns: list[Sequence[object]] = (
            list(zip(*rows)) if rows else [[] for _ in METADATA_SCHEMA]
        )
        yield pa.RecordBatch.from_arrays(
            [pa.array(c, f.type) for c, f in zip(columns, METADATA_SCHEMA)],
            schema=METADATA_SCHEMA)

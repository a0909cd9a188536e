"""``spark.read.format("flinkstate-metadata")``: one row per state of a checkpoint.

The analogue of Spark's ``state-metadata`` source and Flink's
``savepoint_metadata``: what a checkpoint holds, before reading any of its rows (a
Flink snapshot's keyed states are counted by decoding them, :mod:`.read.metadata`).
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader

from statesource.sources import open_source
from statesource.spark.options import parse_read_options
from statesource.spark.read.metadata import METADATA_DDL, MetadataReader


class FlinkStateMetadataDataSource(DataSource):
    """Options: path, checkpointId."""

    @classmethod
    def name(cls) -> str:
        return "flinkstate-metadata"

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        parsed = parse_read_options(dict(options), metadata_view=True)
        self._checkpoint = open_source(parsed.path, parsed.checkpoint_id)

    def schema(self) -> str:
        return METADATA_DDL

    def reader(self, schema: object) -> DataSourceReader:
        return MetadataReader(self._checkpoint)

"""``format("flinkstate")``: the front door of reads and writes, as Spark finds it.

It only dispatches. Reads: a keyed or timer state, an operator state or the
change feed (:mod:`statesource.spark.read`); writes: a new checkpoint with one
state replaced (:mod:`statesource.spark.write`). Options: docs/SPARK.md.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, DataSourceReader
from pyspark.sql.types import StructType

from statesource.errors import InvalidArgumentError
from statesource.format.source import StateSource
from statesource.spark.read import ReadTarget, open_read, reader_for
from statesource.spark.write.rewrite import FlinkStateWriter


class FlinkStateDataSource(DataSource):
    """Spark's ``flinkstate`` source: Python workers call ``schema`` and ``reader`` (or
    ``writer``) to plan a query; the reader or writer they return runs the tasks."""

    @classmethod
    def name(cls) -> str:
        return "flinkstate"

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self._opened: ReadTarget | None = None
        self._snapshot: StateSource | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Spark pickles the source between planning steps: leave the metadata behind."""
        return {**self.__dict__, "_snapshot": None}

    def _source(self) -> ReadTarget:
        """What the read options name, opened on first use (a write needs none of it)."""
        if self._opened is None:
            self._opened, self._snapshot = open_read(dict(self.options))
        return self._opened

    def schema(self) -> StructType:
        return self._source().spark_schema

    def reader(self, schema: StructType) -> DataSourceReader:
        source = self._source()
        derived = source.spark_schema
        if schema.simpleString() != derived.simpleString():
            raise InvalidArgumentError(
                f"flinkstate derives its schema from the checkpoint ({derived.simpleString()});"
                f" a user-supplied schema ({schema.simpleString()}) is not supported"
            )
        return reader_for(source, self._snapshot)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        """A new checkpoint with one state replaced (docs/SPARK.md)."""
        if overwrite:
            raise InvalidArgumentError(
                "mode('overwrite') is not supported: a write appends a new checkpoint and never"
                " overwrites one; use mode('append')")
        return FlinkStateWriter.plan(self.options, schema)

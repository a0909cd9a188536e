"""A keyed (or timer) state as a Spark scan: the target, its readers, and the rows of a slice.

Spark runs the readers in Python workers: ``partitions`` once to plan a
query, ``read`` once per partition. Everything shipped to the tasks is a
:class:`ScanTarget` and a key-group slice; data never travels with the plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition
from pyspark.sql.types import StructType

from statesource.errors import IncompatibleCheckpointError, InvalidArgumentError
from statesource.flink.reader import FlinkCheckpoint
from statesource.format.columns import (
    KEY,
    KEY_GROUP,
    NAMESPACE,
    TIMER_TIMESTAMP,
    TTL_TIMESTAMP,
    VALUE_COLUMNS,
)
from statesource.format.entries import entry_starts
from statesource.format.ipc import ReadListener
from statesource.format.keyed_state_meta import KeyedStateMeta
from statesource.format.source import SourceRef, StateSource
from statesource.keygroups import check_parallelism, operator_index_for_key_group
from statesource.model import StateKind
from statesource.sources import open_source, reopen
from statesource.spark.executor import guarded
from statesource.spark.options import ReadOptions
from statesource.spark.read.pushdown import Pushdown, accept_filter
from statesource.spark.read.slices import KeyGroupSlice, plan_slices
from statesource.spark.schema import OPERATOR_INDEX, OutputSchema, output_schema, spark_output


@dataclass(frozen=True)
class ScanTarget:
    """The state a scan reads; small and picklable, as Spark ships it to every task."""

    source: SourceRef
    operator: str
    state: str
    parallelism: int
    max_parallelism: int
    output: OutputSchema
    filter_pushdown: bool

    @property
    def spark_schema(self) -> StructType:
        return self.output.spark


def open_target(parsed: ReadOptions, source: StateSource | None = None) -> ScanTarget:
    """Resolve the options to one keyed (or timer) state of one checkpoint or Flink snapshot
    (``source``: the snapshot the options name, where it is open already)."""
    if source is None:
        source = open_source(parsed.path, checkpoint_id=parsed.checkpoint_id)
    op = source.operator(parsed.operator)
    timers = timer_output(source, parsed.operator, parsed.state)
    if not op.keyed_states and timers is None:
        raise IncompatibleCheckpointError(
            f"operator {op.uid!r} has no keyed state; read an operator state with"
            " option('operatorState', <name>); format('flinkstate-metadata') lists them"
        )
    state_name = parsed.state if timers is not None else op.keyed_state(parsed.state).name
    assert state_name is not None
    parallelism = op.parallelism if parsed.parallelism is None else parsed.parallelism
    try:
        check_parallelism(parallelism, op.max_parallelism)
    except InvalidArgumentError as error:
        raise InvalidArgumentError(f"option parallelism: {error}") from None
    output = timers or output_schema(op, op.keyed_state(state_name), parsed.flatten_collections)
    return ScanTarget(source.ref(), op.uid, state_name, parallelism, op.max_parallelism, output,
                      parsed.python_filter_pushdown())


def timer_output(source: StateSource, operator: str | None, state: str | None
                 ) -> OutputSchema | None:
    """The schema of a timer state (``key``, ``namespace``, ``timestamp``), else None."""
    if state is None:
        return None
    for timer in source.timer_states(operator):
        if timer.name == state:
            return spark_output([pa.field(KEY_GROUP, pa.int32()),
                                 pa.field(OPERATOR_INDEX, pa.int32()),
                                 pa.field(KEY, timer.key_type.arrow_type),
                                 pa.field(NAMESPACE, timer.namespace_type.arrow_type),
                                 pa.field(TIMER_TIMESTAMP, pa.int64())])
    return None


def keyed_reader(target: ScanTarget, snapshot: StateSource | None = None) -> FlinkStateReader:
    """The reader of a keyed or timer state scan: with pushdown if ``filterPushdown`` is on."""
    reader = PushdownFlinkStateReader if target.filter_pushdown else FlinkStateReader
    return reader(target, snapshot)


class SlicePartition(InputPartition):
    def __init__(self, piece: KeyGroupSlice) -> None:
        super().__init__(piece)
        self.piece = piece


class FlinkStateReader(DataSourceReader):
    """Reads every key group of the state (Spark applies any filter itself)."""

    def __init__(self, target: ScanTarget, snapshot: StateSource | None = None) -> None:
        self.target = target
        self.pushdown = Pushdown()
        self.read_listener: ReadListener | None = None  # set by tests to observe byte ranges
        self._opened = snapshot

    def __getstate__(self) -> dict[str, Any]:
        """Spark pickles the reader into every task: leave the metadata behind."""
        return {**self.__dict__, "_opened": None}

    def _snapshot(self) -> StateSource:
        """The snapshot, opened once per process: by the source that planned this reader, or
        here after Spark shipped the reader elsewhere."""
        if self._opened is None:
            self._opened = reopen(self.target.source)
        return self._opened

    def partitions(self) -> list[InputPartition]:
        weights = self._snapshot().key_group_weights(self.target.operator, self.target.state)
        slices = plan_slices(weights, self.target.max_parallelism,
                             self.target.parallelism, self.pushdown.key_groups)
        return [SlicePartition(piece) for piece in slices]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if partition.value is None:  # Spark's stand-in when partitions() found nothing
            return iter(())
        return guarded(self.target.source.location, self._read(partition.value))

    def _read(self, piece: KeyGroupSlice) -> Iterator[pa.RecordBatch]:
        yield from read_slice(self.target, piece, self.pushdown.keys, self.read_listener,
                              self._snapshot())


class PushdownFlinkStateReader(FlinkStateReader):
    """Also prunes by pushed key, key_group and operator_index predicates.

    A separate class because Spark refuses any reader that defines
    ``pushFilters`` unless ``spark.sql.python.filterPushdown.enabled`` is set.
    """

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        """Accept key, key_group and operator_index predicates; return the rest to Spark.

        Spark may call this again on a reader it already pushed filters into,
        so every call starts from no restriction.
        """
        self.pushdown = Pushdown()
        for predicate in filters:
            if not self._accept(predicate):
                yield predicate

    def _accept(self, predicate: Filter) -> bool:
        op = self._snapshot().operator(self.target.operator)
        return accept_filter(predicate, op, self.target.parallelism,
                             self.pushdown, (KEY_GROUP, OPERATOR_INDEX))


def read_slice(target: ScanTarget, part: KeyGroupSlice, keys: list[Any] | None,
               listener: ReadListener | None = None,
               source: StateSource | None = None) -> Iterator[pa.RecordBatch]:
    """The rows of one partition, as batches in exactly the declared Spark schema
    (``source``: the snapshot, where it is open already)."""
    checkpoint = reopen(target.source) if source is None else source
    op = checkpoint.operator(target.operator)
    state = op.keyed_state(target.state) if target.output.nested else None
    key_type = op.keyed_key_type
    wanted = None if keys is None else key_type.to_arrow(keys)
    if keys is not None and isinstance(checkpoint, FlinkCheckpoint):  # RocksDB: seek the keys
        tables = checkpoint.read_keyed_state(target.state, operator=target.operator,
                                             key_groups=part.key_groups(), listener=listener,
                                             keys=keys)
    else:
        tables = checkpoint.read_keyed_state(target.state, operator=target.operator,
                                             key_groups=part.key_groups(), listener=listener)
    for table in tables:
        if wanted is not None:
            table = table.filter(pc.is_in(table.column(KEY), value_set=wanted))
            if not table.num_rows:
                continue
        yield from _output_table(target, state, table).to_batches()


def _output_table(target: ScanTarget, state: KeyedStateMeta | None, table: pa.Table) -> pa.Table:
    key_group = table.column(KEY_GROUP)[0].as_py()
    operator_index = operator_index_for_key_group(target.max_parallelism, target.parallelism,
                                                  key_group)
    output = target.output
    if output.nested:
        assert state is not None
        table = _nest(state, table)
    columns = [table.column(KEY_GROUP),
               pa.array(np.full(table.num_rows, operator_index, dtype=np.int32)),
               *(table.column(name) for name in output.arrow.names[2:])]
    return pa.Table.from_arrays(columns, schema=output.arrow).cast(output.spark_arrow)


def _nest(state: KeyedStateMeta, table: pa.Table) -> pa.Table:
    """One row per entry: list elements (or map entries) gathered into one array (or map)."""
    declaration = state.declaration
    starts = entry_starts(table.column(KEY), table.column(NAMESPACE))
    offsets = pa.array(starts, pa.int32())
    first_rows = table.take(pa.array(starts[:-1], pa.int64()))
    columns = {KEY_GROUP: first_rows.column(KEY_GROUP), KEY: first_rows.column(KEY),
               NAMESPACE: first_rows.column(NAMESPACE)}
    ttl = table.column(TTL_TIMESTAMP).combine_chunks() if declaration.ttl is not None else None
    if state.kind is StateKind.LIST:
        element = table.column(VALUE_COLUMNS[StateKind.LIST][0][0]).combine_chunks()
        columns["list_value"] = pa.ListArray.from_arrays(offsets, element)
        if ttl is not None:
            columns["ttl_timestamps"] = pa.ListArray.from_arrays(offsets, ttl)
    else:
        user_keys = table.column("user_key").combine_chunks()
        user_values = table.column("user_value").combine_chunks()
        columns["map_value"] = pa.MapArray.from_arrays(offsets, user_keys, user_values)
        if ttl is not None:
            columns["ttl_timestamps"] = pa.MapArray.from_arrays(offsets, user_keys, ttl)
    return pa.table(columns)

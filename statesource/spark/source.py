"""``spark.read.format("flinkstate")``: a keyed state of a checkpoint as a DataFrame.

Spark runs these classes in Python workers: ``schema`` and ``reader`` once to
plan a query, ``read`` once per partition. Everything shipped to the tasks is
a :class:`ScanTarget` and a key-group slice; data never travels with the plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    Filter,
    InputPartition,
)
from pyspark.sql.types import StructType

from statesource.errors import IncompatibleCheckpointError, InvalidArgumentError
from statesource.format.columns import KEY_GROUP
from statesource.format.ipc import ReadListener
from statesource.format.source import StateSource
from statesource.keygroups import check_parallelism
from statesource.sources import open_source, reopen
from statesource.spark.changefeed_source import (
    ChangeFeedTarget,
    change_feed_reader,
    change_feed_target,
)
from statesource.spark.operator_state import (
    OperatorStateReader,
    OperatorStateTarget,
    open_operator_state_target,
)
from statesource.spark.options import ReadOptions, parse_read_options
from statesource.spark.planning import (
    KeyGroupSlice,
    Pushdown,
    ScanTarget,
    plan_slices,
    read_slice,
)
from statesource.spark.pushdown import accept_filter
from statesource.spark.schema import OPERATOR_INDEX, output_schema
from statesource.spark.snapshots import timer_output
from statesource.spark.write_plan import plan_write
from statesource.spark.writer import FlinkStateWriter


def open_target(options: dict[str, str] | ReadOptions, source: StateSource | None = None
                ) -> ScanTarget:
    """Resolve the options to one keyed (or timer) state of one checkpoint or Flink snapshot
    (``source``: the snapshot the options name, where it is open already)."""
    parsed = options if isinstance(options, ReadOptions) else parse_read_options(options)
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


class FlinkStateDataSource(DataSource):
    """Read options: path, checkpointId, operator, state, parallelism, flattenCollections,
    filterPushdown, operatorState; readChangeFeed, changeStartCheckpointId,
    changeEndCheckpointId for the change feed; write options: see
    :mod:`statesource.spark.write_plan` (docs/SPARK.md)."""

    @classmethod
    def name(cls) -> str:
        return "flinkstate"

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self._opened: ScanTarget | OperatorStateTarget | ChangeFeedTarget | None = None
        self._snapshot: StateSource | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Spark pickles the source between planning steps: leave the metadata behind."""
        return {**self.__dict__, "_snapshot": None}

    def _source(self) -> ScanTarget | OperatorStateTarget | ChangeFeedTarget:
        """What the read options name, opened on first use (a write needs none of them):
        a keyed or timer state, an operator state, or a change feed."""
        if self._opened is None:
            options = dict(self.options)
            change_feed = change_feed_target(options)
            if change_feed is not None:
                self._opened = change_feed
            else:
                parsed = parse_read_options(options)
                self._snapshot = open_source(parsed.path, checkpoint_id=parsed.checkpoint_id)
                self._opened = (open_target(parsed, self._snapshot)
                                if parsed.operator_state is None
                                else open_operator_state_target(parsed, self._snapshot))
        return self._opened

    def schema(self) -> StructType:
        source = self._source()
        return source.spark if isinstance(source, ChangeFeedTarget) else source.output.spark

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        """A new checkpoint with one state replaced (docs/SPARK.md)."""
        if overwrite:
            raise InvalidArgumentError(
                "mode('overwrite') is not supported: a write appends a new checkpoint and never"
                " overwrites one; use mode('append')")
        return FlinkStateWriter(*plan_write(dict(self.options), schema))

    def reader(self, schema: StructType) -> DataSourceReader:
        source = self._source()
        derived = self.schema()
        if schema.simpleString() != derived.simpleString():
            raise InvalidArgumentError(
                f"flinkstate derives its schema from the checkpoint ({derived.simpleString()});"
                f" a user-supplied schema ({schema.simpleString()}) is not supported"
            )
        if isinstance(source, ChangeFeedTarget):
            return change_feed_reader(source)
        if isinstance(source, OperatorStateTarget):
            return OperatorStateReader(source)
        reader = (PushdownFlinkStateReader if source.filter_pushdown else FlinkStateReader)
        return reader(source, self._snapshot)


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
        return read_slice(self.target, partition.value, self.pushdown.keys, self.read_listener,
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

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
    DataSourceReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.types import StructType

from statesource.errors import IncompatibleCheckpointError, InvalidArgumentError
from statesource.format.columns import KEY, KEY_GROUP
from statesource.format.ipc import ReadListener
from statesource.format.reader import Checkpoint
from statesource.keygroups import check_parallelism
from statesource.spark.changefeed_source import ChangeFeedReader, change_feed_target
from statesource.spark.compat import pushdown_safe_by_default
from statesource.spark.options import parse_read_options
from statesource.spark.planning import (
    KeyGroupSlice,
    Pushdown,
    ScanTarget,
    accept_key_filter,
    key_groups_matching,
    plan_slices,
    read_slice,
)
from statesource.spark.schema import OPERATOR_INDEX, output_schema

_COMPARISON_TYPES = (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)
_COMPARISONS = {EqualTo: "=", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<",
                LessThanOrEqual: "<="}


def open_target(options: dict[str, str]) -> ScanTarget:
    """Resolve the options to one keyed state of one checkpoint (all errors named)."""
    parsed = parse_read_options(options)
    pushdown = (pushdown_safe_by_default() if parsed.filter_pushdown is None
                else parsed.filter_pushdown)
    checkpoint = Checkpoint.open(parsed.path, checkpoint_id=parsed.checkpoint_id)
    op = checkpoint.operator(parsed.operator)
    if not op.keyed_states:
        raise IncompatibleCheckpointError(
            f"operator {op.uid!r} has no keyed state; its operator states"
            f" ({', '.join(s.name for s in op.operator_states)}) are listed by"
            " format('flinkstate-metadata')"
        )
    state = op.keyed_state(parsed.state)
    parallelism = op.parallelism if parsed.parallelism is None else parsed.parallelism
    try:
        check_parallelism(parallelism, op.max_parallelism)
    except InvalidArgumentError as error:
        raise InvalidArgumentError(f"option parallelism: {error}") from None
    return ScanTarget(checkpoint.location, checkpoint.checkpoint_id, op.uid, state.name,
                      parallelism, op.max_parallelism,
                      output_schema(op, state, parsed.flatten_collections), pushdown)


class FlinkStateDataSource(DataSource):
    """Options: path, checkpointId, operator, state, parallelism, flattenCollections,
    filterPushdown; readChangeFeed, changeStartCheckpointId, changeEndCheckpointId for the
    change feed (docs/SPARK.md)."""

    @classmethod
    def name(cls) -> str:
        return "flinkstate"

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self._change_feed = change_feed_target(dict(options))
        if self._change_feed is None:
            self._target = open_target(dict(options))

    def schema(self) -> StructType:
        if self._change_feed is not None:
            return self._change_feed.spark
        return self._target.output.spark

    def reader(self, schema: StructType) -> DataSourceReader:
        derived = (self._target.output.spark if self._change_feed is None
                   else self._change_feed.spark)
        if schema.simpleString() != derived.simpleString():
            raise InvalidArgumentError(
                f"flinkstate derives its schema from the checkpoint ({derived.simpleString()});"
                f" a user-supplied schema ({schema.simpleString()}) is not supported"
            )
        if self._change_feed is not None:
            return ChangeFeedReader(self._change_feed)
        if self._target.filter_pushdown:
            return PushdownFlinkStateReader(self._target)
        return FlinkStateReader(self._target)


class SlicePartition(InputPartition):
    def __init__(self, piece: KeyGroupSlice) -> None:
        super().__init__(piece)
        self.piece = piece


class FlinkStateReader(DataSourceReader):
    """Reads every key group of the state (Spark applies any filter itself)."""

    def __init__(self, target: ScanTarget) -> None:
        self.target = target
        self.pushdown = Pushdown()
        self.read_listener: ReadListener | None = None  # set by tests to observe byte ranges
        self._op: Any = None

    def __getstate__(self) -> dict[str, Any]:
        """Spark pickles the reader into every task: leave the metadata behind."""
        return {**self.__dict__, "_op": None}

    def _operator(self) -> Any:
        if self._op is None:
            checkpoint = Checkpoint.open(self.target.location.path,
                                         checkpoint_id=self.target.checkpoint_id,
                                         filesystem=self.target.location.filesystem)
            self._op = checkpoint.operator(self.target.operator)
        return self._op

    def partitions(self) -> list[InputPartition]:
        op = self._operator()
        slices = plan_slices(op.keyed_state(self.target.state), self.target.max_parallelism,
                             self.target.parallelism, self.pushdown.key_groups)
        return [SlicePartition(piece) for piece in slices]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if partition.value is None:  # Spark's stand-in when partitions() found nothing
            return iter(())
        return read_slice(self.target, partition.value, self.pushdown.keys, self.read_listener)


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
        attribute = getattr(predicate, "attribute", None)
        if attribute is None or len(attribute) != 1:
            return False
        column = attribute[0]
        if column == KEY:
            if isinstance(predicate, EqualTo):
                return accept_key_filter(self._operator(), (predicate.value,), self.pushdown)
            if isinstance(predicate, In):
                return accept_key_filter(self._operator(), tuple(predicate.value), self.pushdown)
            return False
        if column not in (KEY_GROUP, OPERATOR_INDEX):
            return False
        if isinstance(predicate, In):
            operator, bound = "in", tuple(predicate.value)
        elif isinstance(predicate, _COMPARISON_TYPES) and type(predicate) in _COMPARISONS:
            operator, bound = _COMPARISONS[type(predicate)], predicate.value
        else:
            return False
        matching = key_groups_matching(column, operator, bound, self._operator(),
                                       self.target.parallelism)
        if matching is None:
            return False
        self.pushdown.restrict_key_groups(matching)
        return True

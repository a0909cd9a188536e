"""``flinkstate`` with ``readChangeFeed``: the change feed of one keyed state as a DataFrame.

Between checkpoints ``changeStartCheckpointId`` and ``changeEndCheckpointId``
(default: the newest) of the root at ``path``: a directory of statesource
checkpoints or of retained Flink ``chk-<id>`` checkpoints. Planning reads only
metadata: the partitions are the key groups whose bytes differ between the two
checkpoints (are not the same range of the same file), split evenly; a task
reads and diffs just its key groups. With ``filterPushdown``, ``key`` and
``key_group`` predicates prune those key groups, as for a state read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

from statesource.errors import InvalidArgumentError
from statesource.format.changefeed import KeyGroupChangeFeed
from statesource.format.columns import KEY, KEY_GROUP
from statesource.format.storage import Location, resolve
from statesource.sources import kind_of, open_change_feed
from statesource.spark.executor import guarded
from statesource.spark.options import ReadOptions, parse_read_options
from statesource.spark.read.pushdown import Pushdown, accept_filter
from statesource.spark.schema import _spark_compatible

_NOT_WITH_CHANGE_FEED = {"checkpoint_id": "checkpointId", "parallelism": "parallelism"}
_KEY_GROUPS_PER_TASK = 64


@dataclass(frozen=True)
class ChangeFeedTarget:
    """The feed a scan reads; small and picklable, as Spark ships it to every task."""

    location: Location
    """Where the feed was opened: a root, or one checkpoint of it."""
    start_id: int
    end_id: int
    operator: str
    state: str
    spark_schema: StructType
    spark_arrow: pa.Schema
    filter_pushdown: bool
    kind: str
    """Of the snapshots: decided once, when the feed was planned."""

    def open(self) -> KeyGroupChangeFeed:
        return open_change_feed(self.location, self.start_id, self.end_id,
                                operator=self.operator, state=self.state, kind=self.kind)


def change_feed_target(options: dict[str, str]) -> ChangeFeedTarget | None:
    """The feed the options ask for; None unless ``readChangeFeed`` is true."""
    parsed = parse_read_options(options)
    if not parsed.read_change_feed:
        _refuse_feed_options(parsed)
        return None
    for attribute, name in _NOT_WITH_CHANGE_FEED.items():
        if getattr(parsed, attribute) is not None:
            raise InvalidArgumentError(
                f"option {name} does not apply with readChangeFeed: use changeStartCheckpointId"
                " and changeEndCheckpointId")
    if parsed.change_start_checkpoint_id is None:
        raise InvalidArgumentError(
            "option changeStartCheckpointId is required with readChangeFeed: the checkpoint"
            " the changes are counted from")
    root = resolve(parsed.path)
    kind = kind_of(root)
    feed = open_change_feed(parsed.path, parsed.change_start_checkpoint_id,
                            parsed.change_end_checkpoint_id, operator=parsed.operator,
                            state=parsed.state, kind=kind)
    arrow = pa.schema([f.with_type(_spark_compatible(f.type)) for f in feed.schema])
    spark = from_arrow_schema(arrow)
    return ChangeFeedTarget(root, feed.start_id, feed.end_id, feed.operator, feed.state, spark,
                            to_arrow_schema(spark, timezone="UTC"),
                            parsed.python_filter_pushdown(), kind)


def _refuse_feed_options(parsed: ReadOptions) -> None:
    if parsed.change_start_checkpoint_id is not None or \
            parsed.change_end_checkpoint_id is not None:
        raise InvalidArgumentError(
            "options changeStartCheckpointId and changeEndCheckpointId need readChangeFeed"
            " set to true")


class KeyGroupsPartition(InputPartition):
    def __init__(self, key_groups: tuple[int, ...]) -> None:
        super().__init__(key_groups)
        self.key_groups = key_groups


class ChangeFeedReader(DataSourceReader):
    """One partition per run of changed key groups; unchanged ones are never planned."""

    def __init__(self, target: ChangeFeedTarget) -> None:
        self.target = target
        self.pushdown = Pushdown()

    def partitions(self) -> list[InputPartition]:
        allowed = self.pushdown.key_groups
        changed = [kg for kg in self.target.open().changed_key_groups()
                   if allowed is None or kg in allowed]
        count = max(1, min(-(-len(changed) // _KEY_GROUPS_PER_TASK) * (os.cpu_count() or 1),
                           len(changed)))
        size = -(-len(changed) // count) if changed else 1
        return [KeyGroupsPartition(tuple(changed[i:i + size]))
                for i in range(0, len(changed), size)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if partition.value is None:  # Spark's stand-in when partitions() found nothing
            return iter(())
        return guarded(self.target.location, self._read(partition.value))

    def _read(self, key_groups: tuple[int, ...]) -> Iterator[pa.RecordBatch]:
        arrow = self.target.spark_arrow
        feed = self.target.open()
        keys = self.pushdown.keys
        wanted = None if keys is None else feed.key_type.to_arrow(keys)
        for table in feed.read(set(key_groups)):
            if wanted is not None:
                table = table.filter(pc.is_in(table.column(KEY), value_set=wanted))
            yield from table.cast(arrow).to_batches()


class PushdownChangeFeedReader(ChangeFeedReader):
    """Also prunes by pushed ``key`` and ``key_group`` predicates (a separate class, as
    Spark refuses a reader with ``pushFilters`` unless Python filter pushdown is on)."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        """Accept key and key_group predicates; return the rest to Spark. Every call starts
        from no restriction (Spark may push into one reader twice)."""
        self.pushdown = Pushdown()
        operator = self.target.open().end_operator
        for predicate in filters:
            if not accept_filter(predicate, operator, operator.parallelism, self.pushdown,
                                 (KEY_GROUP,)):
                yield predicate


def change_feed_reader(target: ChangeFeedTarget) -> ChangeFeedReader:
    """The reader of a change feed: with pushdown if ``filterPushdown`` is on."""
    return PushdownChangeFeedReader(target) if target.filter_pushdown else ChangeFeedReader(
        target)

"""The read side of ``flinkstate``: which scan the options ask for, and its reader.

Three scans share the source: a keyed or timer state (:mod:`.keyed`), an
operator state (:mod:`.operator_state`) and the change feed between two
checkpoints (:mod:`.changefeed`). Each target is small and picklable and
exposes the Spark schema it yields.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSourceReader

from statesource.format.source import StateSource
from statesource.sources import open_source
from statesource.spark.options import parse_read_options
from statesource.spark.read.changefeed import (
    ChangeFeedTarget,
    change_feed_reader,
    change_feed_target,
)
from statesource.spark.read.keyed import ScanTarget, keyed_reader, open_target
from statesource.spark.read.operator_state import (
    OperatorStateReader,
    OperatorStateTarget,
    open_operator_state_target,
)

ReadTarget = ScanTarget | OperatorStateTarget | ChangeFeedTarget


def open_read(options: dict[str, str]) -> tuple[ReadTarget, StateSource | None]:
    """The scan the options name, and the snapshot opened for it (None for a change feed,
    which opens two)."""
    change_feed = change_feed_target(options)
    if change_feed is not None:
        return change_feed, None
    parsed = parse_read_options(options)
    snapshot = open_source(parsed.path, checkpoint_id=parsed.checkpoint_id)
    if parsed.operator_state is None:
        return open_target(parsed, snapshot), snapshot
    return open_operator_state_target(parsed, snapshot), snapshot


def reader_for(target: ReadTarget, snapshot: StateSource | None) -> DataSourceReader:
    """The Spark reader of ``target`` (``snapshot``: opened already by the planner)."""
    if isinstance(target, ChangeFeedTarget):
        return change_feed_reader(target)
    if isinstance(target, OperatorStateTarget):
        return OperatorStateReader(target)
    return keyed_reader(target, snapshot)

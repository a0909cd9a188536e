"""One entry point for both kinds of input: statesource checkpoints and Flink snapshots.

The ``flinkstate`` sources plan and read through :func:`open_snapshot`, which
returns a statesource :class:`Checkpoint` or a :class:`FlinkCheckpoint`. Both
describe operators as :class:`OperatorMeta` and deliver key groups as Arrow
tables in the format's data schema, so schema derivation, partition planning,
pushdown and row output are the same code for either. The few differences
live here: how key groups are weighed for partitioning (rows vs bytes), the
schema of Flink timer states, and reading operator state.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from statesource.flink.reader import TIMESTAMP, FlinkCheckpoint
from statesource.flink.snapshot import find_flink_snapshot
from statesource.format.columns import KEY, KEY_GROUP, NAMESPACE
from statesource.format.operator_columns import operator_state_schema
from statesource.format.reader import Checkpoint
from statesource.format.storage import resolve
from statesource.model import DistributionMode
from statesource.schema import ValueSchema
from statesource.spark.schema import OPERATOR_INDEX, OutputSchema, spark_output

Snapshot = Checkpoint | FlinkCheckpoint


def open_snapshot(path: str, checkpoint_id: int | None = None,
                  filesystem: pafs.FileSystem | None = None) -> Snapshot:
    """A Flink savepoint/checkpoint (``_metadata``) or else a statesource checkpoint."""
    if find_flink_snapshot(resolve(path, filesystem), checkpoint_id) is not None:
        return FlinkCheckpoint.open(path, checkpoint_id=checkpoint_id, filesystem=filesystem)
    return Checkpoint.open(path, checkpoint_id=checkpoint_id, filesystem=filesystem)


def key_group_weights(snapshot: Snapshot, operator: str, state: str) -> dict[int, int]:
    """What partitions are balanced by: rows per key group, or bytes for a Flink snapshot."""
    if isinstance(snapshot, FlinkCheckpoint):
        return snapshot.key_group_weights(operator)
    meta = snapshot.operator(operator).keyed_state(state)
    return {loc.key_group: loc.rows for _, loc in meta.key_group_locations()}


def timer_output(snapshot: Snapshot, operator: str | None, state: str | None
                 ) -> OutputSchema | None:
    """The schema of a Flink timer state (``key``, ``namespace``, ``timestamp``), else None."""
    if not isinstance(snapshot, FlinkCheckpoint) or state is None:
        return None
    for info in snapshot.timer_states(operator):
        if info.name == state:
            timer = info.timer
            return spark_output([pa.field(KEY_GROUP, pa.int32()),
                                 pa.field(OPERATOR_INDEX, pa.int32()),
                                 pa.field(KEY, timer.key.data_type().arrow_type),
                                 pa.field(NAMESPACE, timer.namespace.data_type().arrow_type),
                                 pa.field(TIMESTAMP, pa.int64())])
    return None


def operator_state_shares(snapshot: Snapshot, operator: str | None, name: str
                          ) -> tuple[DistributionMode, dict[str, ValueSchema], list[Any]]:
    """An operator state's mode, value schemas and each subtask's share."""
    if isinstance(snapshot, FlinkCheckpoint):
        share = snapshot.operator_state(name, operator=operator)
        return share.mode, share.schemas, share.values
    meta = snapshot.operator(operator).operator_state(name)
    return (meta.mode, dict(meta.schemas),
            snapshot.read_operator_state(name, operator=operator))


def operator_state_output(mode: DistributionMode, schemas: dict[str, ValueSchema]
                          ) -> OutputSchema:
    """``operator_index`` (the owning subtask), then the format's operator-state columns."""
    stored = operator_state_schema(mode, schemas)
    return spark_output([pa.field(OPERATOR_INDEX, pa.int32()), *stored])

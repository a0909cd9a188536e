"""statesource: Flink-style keyed state in Python, checkpointed as Arrow, read with Spark.

The names here are the public API a program needs: keep state in backends,
checkpoint it, open checkpoints (statesource's own or Flink's: :func:`open_source`),
restore, rescale and retain them, and the errors all of it raises. Spark lives in
:mod:`statesource.spark`, which this package does not import (it would start nothing,
but pulls in PySpark).
"""

from importlib.metadata import PackageNotFoundError, version

from statesource.checkpointing import (
    CheckpointWriter,
    PendingCheckpoint,
    SubtaskBackends,
    restore_keyed_backend,
    restore_operator_backend,
)
from statesource.errors import (
    CheckpointExistsError,
    CheckpointNotFoundError,
    ConcurrentModificationError,
    CorruptCheckpointError,
    IncompatibleCheckpointError,
    InvalidArgumentError,
    JvmShimUnavailableError,
    StateNotFoundError,
    StateSourceError,
    TypeMismatchError,
    UnsupportedFormatVersionError,
)
from statesource.flink.operations.migrate import migrate
from statesource.flink.reader import FlinkCheckpoint
from statesource.format import ChangeFeed, Checkpoint, CheckpointInfo, StateSource, retain
from statesource.keygroups import KeyGroupRange
from statesource.model import DistributionMode, StateKind, StateVisibility, TtlConfig, UpdateType
from statesource.rescale import rescale_parallelism
from statesource.sources import open_source
from statesource.state import (
    AggregatingStateDescriptor,
    KeyedStateBackend,
    ListStateDescriptor,
    ManualClock,
    MapStateDescriptor,
    OperatorStateBackend,
    ReducingStateDescriptor,
    StateDescriptor,
    SystemClock,
    ValueStateDescriptor,
)
from statesource.types import Row, RowKind, key_type, parse_type

try:
    __version__ = version("statesource")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "AggregatingStateDescriptor",
    "ChangeFeed",
    "Checkpoint",
    "CheckpointExistsError",
    "CheckpointInfo",
    "CheckpointNotFoundError",
    "CheckpointWriter",
    "ConcurrentModificationError",
    "CorruptCheckpointError",
    "DistributionMode",
    "FlinkCheckpoint",
    "IncompatibleCheckpointError",
    "InvalidArgumentError",
    "JvmShimUnavailableError",
    "KeyGroupRange",
    "KeyedStateBackend",
    "ListStateDescriptor",
    "ManualClock",
    "MapStateDescriptor",
    "OperatorStateBackend",
    "PendingCheckpoint",
    "ReducingStateDescriptor",
    "Row",
    "RowKind",
    "StateDescriptor",
    "StateKind",
    "StateNotFoundError",
    "StateSource",
    "StateSourceError",
    "StateVisibility",
    "SubtaskBackends",
    "SystemClock",
    "TtlConfig",
    "TypeMismatchError",
    "UnsupportedFormatVersionError",
    "UpdateType",
    "ValueStateDescriptor",
    "__version__",
    "key_type",
    "migrate",
    "open_source",
    "parse_type",
    "rescale_parallelism",
    "restore_keyed_backend",
    "restore_operator_backend",
    "retain",
]

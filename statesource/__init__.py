"""statesource: Flink-style keyed state in Python, checkpointed as Arrow, read with Spark."""

from statesource.errors import (
    CheckpointNotFoundError,
    ConcurrentModificationError,
    CorruptCheckpointError,
    IncompatibleCheckpointError,
    InvalidArgumentError,
    StateNotFoundError,
    StateSourceError,
    TypeMismatchError,
    UnsupportedFormatVersionError,
)
from statesource.keygroups import KeyGroupRange
from statesource.types import Row, RowKind, key_type, parse_type

__version__ = "0.1.0"

__all__ = [
    "CheckpointNotFoundError",
    "ConcurrentModificationError",
    "CorruptCheckpointError",
    "IncompatibleCheckpointError",
    "InvalidArgumentError",
    "KeyGroupRange",
    "Row",
    "RowKind",
    "StateNotFoundError",
    "StateSourceError",
    "TypeMismatchError",
    "UnsupportedFormatVersionError",
    "key_type",
    "parse_type",
]

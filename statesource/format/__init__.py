"""Checkpoint format v1: key-group-partitioned Arrow IPC files plus JSON metadata.

See docs/FORMAT.md for the normative specification.
"""

from statesource.format.metadata import FORMAT_VERSION, CheckpointMeta
from statesource.format.reader import Checkpoint, StateSummary
from statesource.format.writer import (
    CheckpointInfo,
    CheckpointWriter,
    PendingCheckpoint,
    SubtaskBackends,
)

__all__ = [
    "FORMAT_VERSION",
    "Checkpoint",
    "CheckpointInfo",
    "CheckpointMeta",
    "CheckpointWriter",
    "PendingCheckpoint",
    "StateSummary",
    "SubtaskBackends",
]

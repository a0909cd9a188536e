"""The bridge between live backends and the checkpoint format.

The only package that knows both: it takes backend snapshots into the
format's data files and commit, and restores backends from checkpoints.
"""

from statesource.checkpointing.restore import restore_keyed_backend, restore_operator_backend
from statesource.checkpointing.writer import (
    CheckpointWriter,
    PendingCheckpoint,
    SubtaskBackends,
)

__all__ = [
    "CheckpointWriter",
    "PendingCheckpoint",
    "SubtaskBackends",
    "restore_keyed_backend",
    "restore_operator_backend",
]

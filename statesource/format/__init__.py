"""The checkpoint format: key-group-partitioned Arrow IPC files plus JSON metadata.

Every producer writes through this layer (:func:`write_keyed_file`,
:func:`write_operator_state_file`, :func:`commit_checkpoint`), and every
reader reads through :class:`Checkpoint`. It knows nothing of live backends.
See docs/FORMAT.md for the normative specification.
"""

from statesource.format.changefeed import ChangeFeed
from statesource.format.commit import (
    CheckpointInfo,
    NonExclusiveCommitWarning,
    commit_checkpoint,
)
from statesource.format.datafile import write_keyed_file, write_operator_state_file
from statesource.format.metadata import CheckpointMeta
from statesource.format.reader import Checkpoint
from statesource.format.retention import RetentionPlan, retain
from statesource.format.source import SourceRef, StateSource, StateSummary
from statesource.format.versions import FORMAT_VERSION

__all__ = [
    "FORMAT_VERSION",
    "ChangeFeed",
    "Checkpoint",
    "CheckpointInfo",
    "CheckpointMeta",
    "NonExclusiveCommitWarning",
    "RetentionPlan",
    "SourceRef",
    "StateSource",
    "StateSummary",
    "commit_checkpoint",
    "retain",
    "write_keyed_file",
    "write_operator_state_file",
]

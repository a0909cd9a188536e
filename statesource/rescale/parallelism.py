"""A new parallelism for a checkpoint, in time proportional to its metadata, not its state.

A subtask of any parallelism reads exactly the key groups Flink assigns it,
by byte range, from whatever files hold them (docs/FORMAT.md, section 8). So
keyed state needs no rewrite at all: the new checkpoint's keyed states list
the very files and byte ranges of the old one (format v2 shares files), and
only the recorded parallelism changes. Operator state has no key groups and
is redistributed by Flink's rules into new, small files
(:mod:`statesource.rescale.operator_states`). The commit is the format's
usual one: the metadata appears last and atomically, and only if every file
it references is still there, so a failure at any point leaves no visible
checkpoint and the source checkpoint is never touched.
"""

from __future__ import annotations

import dataclasses

import pyarrow.fs as pafs

from statesource.format.commit import CheckpointInfo
from statesource.format.metadata import OperatorMeta
from statesource.format.storage import Location
from statesource.model import Progress
from statesource.rescale.operator_states import rescale_operator_states
from statesource.rescale.publish import commit_rescaled
from statesource.rescale.report import describe_rescale
from statesource.rescale.target import check_parallelism_for, plan_target


def rescale_parallelism(source: str, parallelism: int, *, operator: str | None = None,
                        checkpoint_id: int | None = None, new_checkpoint_id: int | None = None,
                        filesystem: pafs.FileSystem | None = None,
                        progress: Progress | None = None) -> CheckpointInfo:
    """Write a new checkpoint that is the one at ``source`` run at ``parallelism``.

    ``source`` is a checkpoint or a directory of checkpoints (``checkpoint_id``
    picks one; default the newest). ``operator`` names the operator to rescale
    (default: all); the others are carried over unchanged. The new checkpoint
    gets ``new_checkpoint_id`` (default: one more than the newest under the
    root). ``progress`` receives the rows per subtask now and after, and the
    skew, before anything is written. Returns the committed checkpoint.
    """
    target = plan_target(source, operator=operator, checkpoint_id=checkpoint_id,
                         new_checkpoint_id=new_checkpoint_id, filesystem=filesystem)
    for op in target.operators:
        check_parallelism_for(op, parallelism)
    report = progress or (lambda _: None)
    for op in target.operators:
        for line in describe_rescale(op, parallelism):
            report(line)

    def rescale(op: OperatorMeta, written: list[Location]) -> OperatorMeta:
        """Keyed states as they are (same files, same byte ranges); operator states
        redistributed."""
        operator_states = rescale_operator_states(target.source, op, parallelism,
                                                  target.new_checkpoint_id, written)
        return dataclasses.replace(op, parallelism=parallelism, operator_states=operator_states)

    target = target.pinned()  # before any file of the source is read; the commit releases it
    info, files = commit_rescaled(target, rescale)
    report(f"committed checkpoint {info.checkpoint_id} at {info.location} (operator-state files"
           f" written: {files}; keyed state shared with checkpoint {target.source.checkpoint_id})")
    return info

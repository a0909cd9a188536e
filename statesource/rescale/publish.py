"""Writing and committing a rescaled checkpoint: all of it, or nothing visible.

Every kind of rescale ends here: it names how to rescale one operator, and
this module builds the new metadata around it, commits it through the
format's one commit, and on any failure removes the files the attempt wrote
before re-raising. The source's files were pinned when the target was opened
(:meth:`~statesource.rescale.target.RescaleTarget.pinned`), so a concurrent
``retain`` cannot delete what the rescale reads and carries over
(docs/FORMAT.md section 11); the commit releases that pin. A checkpoint
exists only once its metadata is published, so a failure (or a kill, which
skips the cleanup) leaves nothing a reader would see.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from statesource.errors import StateSourceError
from statesource.format.commit import CheckpointInfo, commit_checkpoint
from statesource.format.metadata import OperatorMeta
from statesource.format.storage import Location, remove_attempt
from statesource.format.versions import FORMAT_VERSION
from statesource.rescale.target import RescaleTarget

OperatorRescale = Callable[[OperatorMeta, list[Location]], OperatorMeta]
"""Rescales one operator, appending every data file it writes to the list (before writing it)."""


def commit_rescaled(target: RescaleTarget, rescale: OperatorRescale) -> tuple[CheckpointInfo, int]:
    """Commit ``target``'s new checkpoint: the chosen operators as ``rescale`` makes them,
    the others as they are. Returns the checkpoint and the number of files written."""
    written: list[Location] = []
    try:
        operators = tuple(rescale(op, written) if target.selects(op) else op
                          for op in target.source.metadata.operators)
        metadata = dataclasses.replace(target.source.metadata,
                                       checkpoint_id=target.new_checkpoint_id,
                                       operators=operators, format_version=FORMAT_VERSION)
        return commit_checkpoint(target.root, metadata, target.pin), len(written)
    except BaseException as error:
        remove_attempt(written)
        if isinstance(error, OSError) and not isinstance(error, StateSourceError):
            raise StateSourceError(
                f"rescaling checkpoint {target.source.checkpoint_id} failed and committed"
                f" nothing: cannot write checkpoint {target.new_checkpoint_id} under"
                f" {target.root}: {error}") from error
        raise
    finally:
        target.release()

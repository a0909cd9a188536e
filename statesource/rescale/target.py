"""What a rescale reads and writes, settled and checked before anything is written.

Every refusal happens here, while nothing is on disk yet: a checkpoint that
does not exist, an operator uid it does not hold, a parallelism the
operator's key groups cannot serve, a new checkpoint id that is taken.
Changing the max parallelism (which re-keys every row) starts from the same
target, so both kinds of rescale refuse the same things the same way.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pyarrow.fs as pafs

from statesource.checks import check_checkpoint_id, check_int
from statesource.errors import CheckpointExistsError
from statesource.format.metadata import OperatorMeta
from statesource.format.pins import Pin, pin_listed
from statesource.format.reader import Checkpoint
from statesource.format.storage import Location, complete_checkpoints


@dataclass(frozen=True)
class RescaleTarget:
    """The checkpoint a rescale starts from, the operators it changes, the id it writes."""

    source: Checkpoint
    operators: tuple[OperatorMeta, ...]
    """The operators to rescale, in metadata order; the others are carried over as they are."""
    new_checkpoint_id: int
    pin: Pin | None = None
    """The source's files, pinned (:meth:`pinned`) until the commit or the discard."""

    @property
    def root(self) -> Location:
        return self.source.root

    def selects(self, op: OperatorMeta) -> bool:
        return any(op.uid == chosen.uid for chosen in self.operators)

    def pinned(self) -> RescaleTarget:
        """This target with the source's files pinned (docs/FORMAT.md section 11.1), taken
        once every check passed and before anything reads them: a ``retain`` meanwhile
        deletes none of them, and refuses (``CheckpointRetiredError``) if one already went.

        The pin is a file, so it travels with a pickled copy: a rescale planned on Spark's
        driver is committed (or discarded) in another process, which releases it.
        """
        pin = pin_listed(self.root, self.new_checkpoint_id,
                         self.source.metadata.referenced_files())
        return dataclasses.replace(self, pin=pin)

    def release(self) -> None:
        """Let go of the source's files: the rescale committed or gave up."""
        if self.pin is not None:
            self.pin.release()


def plan_target(path: str, *, operator: str | None = None, checkpoint_id: int | None = None,
                new_checkpoint_id: int | None = None,
                filesystem: pafs.FileSystem | None = None) -> RescaleTarget:
    """Open the checkpoint at ``path`` (or checkpoint ``checkpoint_id`` under it, default
    the newest) and pick the operators and the new id.

    ``operator`` names the one operator to rescale (default: all of them). The new
    checkpoint id defaults to one more than the newest complete checkpoint of the root.
    """
    source = Checkpoint.open(path, checkpoint_id=checkpoint_id, filesystem=filesystem)
    operators = (source.metadata.operators if operator is None
                 else (source.metadata.operator(operator),))
    existing = complete_checkpoints(source.root)
    if new_checkpoint_id is None:
        new_checkpoint_id = max([*existing, source.checkpoint_id]) + 1
    check_checkpoint_id(new_checkpoint_id)
    if new_checkpoint_id in existing:
        raise CheckpointExistsError(
            f"checkpoint {new_checkpoint_id} already exists at {existing[new_checkpoint_id]};"
            " checkpoints are never overwritten: choose another new checkpoint id"
        )
    return RescaleTarget(source, tuple(operators), new_checkpoint_id)


def check_parallelism_for(op: OperatorMeta, parallelism: int) -> int:
    """``parallelism`` if operator ``op``'s key groups can serve it (1..max parallelism)."""
    return check_int(parallelism, "parallelism", 1, op.max_parallelism,
                     context=f" for operator {op.uid!r}, whose max parallelism is"
                     f" {op.max_parallelism}")

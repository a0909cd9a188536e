"""A new max parallelism: one Spark job per keyed state that re-keys every row, Flink-exactly.

Flink cannot change a job's max parallelism without rebuilding its state: the
number of key groups is what every key was hashed into. Here each keyed state
is read back as rows, every key's key group is computed afresh for the new
max parallelism (Flink's murmur of Java's ``hashCode``) and the rows are
written through the Spark writer's task into the new checkpoint. Operator
states have no key groups: they are carried over by reference, or
redistributed by Flink's rules when the parallelism changes too. The commit
is the one every rescale uses (:func:`~statesource.rescale.commit_rescaled`):
all of it, or nothing visible.

The plan (opening the checkpoint, choosing the new id) and the commit
(operator states, the metadata) run on the driver or the Spark Connect
server (:mod:`statesource.spark.driver`); the caller only runs the Spark
jobs, so it needs no access to the storage.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from statesource.checks import check_int
from statesource.errors import InvalidArgumentError
from statesource.flink.operations.rescale import RescaledSavepoint
from statesource.flink.operations.rescale import rescale_max_parallelism as rescale_savepoint
from statesource.flink.snapshot.compression import Compression
from statesource.format.columns import KEY_GROUP
from statesource.format.commit import CheckpointInfo
from statesource.format.keyed_state_meta import KeyedStateMeta
from statesource.format.locations import DataFile
from statesource.format.metadata import OperatorMeta
from statesource.format.source import FLINK
from statesource.format.storage import Location, resolve
from statesource.format.target import CheckpointStateSink, missing_files, remove_files
from statesource.keygroups import check_max_parallelism
from statesource.model import Progress
from statesource.rescale import (
    RescaleTarget,
    commit_rescaled,
    plan_target,
    rescale_operator_states,
)
from statesource.rescale import rescale_parallelism as rescale_statesource
from statesource.skew import Distribution, describe_per_subtask
from statesource.sources import kind_of
from statesource.spark.driver import call_on_driver, commit_on_driver
from statesource.spark.executor import check_written_visible
from statesource.spark.schema import OPERATOR_INDEX
from statesource.spark.write.plan import StateWrite
from statesource.spark.write.rewrite import state_meta
from statesource.spark.write.shuffle import write_state_files


def plan_max_parallelism(path: str, max_parallelism: int, *, parallelism: int | None = None,
                         operator: str | None = None, checkpoint_id: int | None = None,
                         new_checkpoint_id: int | None = None, pin: bool = False
                         ) -> RescaleTarget:
    """Every check of :func:`rescale_max_parallelism`, without Spark (so a command line
    can refuse a bad request before starting a session). ``pin``: the plan of the job
    itself, which pins the source's files before its Spark jobs read them (released by
    :func:`commit_re_keyed` or :func:`discard_re_keyed`)."""
    check_max_parallelism(max_parallelism)
    if kind_of(resolve(path), checkpoint_id) == FLINK:
        raise InvalidArgumentError(
            f"{path} is a Flink snapshot, which is never written in place: give output, the"
            " new savepoint directory to write")
    target = plan_target(path, operator=operator, checkpoint_id=checkpoint_id,
                         new_checkpoint_id=new_checkpoint_id)
    for op in target.operators:
        check_int(op.parallelism if parallelism is None else parallelism, "parallelism", 1,
                  max_parallelism, context=f" for operator {op.uid!r}: it must not exceed the"
                  f" new max parallelism {max_parallelism}")
    return target.pinned() if pin else target


def rescale_max_parallelism(spark: Any, source: str, output: str | None, max_parallelism: int,
                            *, parallelism: int | None = None, operator: str | None = None,
                            checkpoint_id: int | None = None,
                            new_checkpoint_id: int | None = None,
                            progress: Progress | None = None,
                            compression: Compression | None = None
                            ) -> CheckpointInfo | RescaledSavepoint:
    """The snapshot at ``source`` under ``max_parallelism`` key groups, written as ``output``.

    The arguments are those of
    :func:`statesource.flink.operations.rescale.rescale_max_parallelism`, after ``spark``:
    ``parallelism`` (default: each operator's own) must not exceed the new max
    parallelism, and ``checkpoint_id`` picks the checkpoint to read (default: the newest).
    Everything is checked before the first job runs.

    A Flink savepoint or checkpoint at ``source`` becomes the new savepoint directory
    ``output``, written by that function on the driver (keys decoded, values moved as
    bytes, in one pass, which outruns a Spark job on such data); ``compression``
    (``"snappy"``, ``"none"``; default: as the source's) is its keyed-state files'.

    A statesource checkpoint (or directory of them) at ``source`` gets a new checkpoint
    beside it: ``output`` is None, and each keyed state is re-keyed by a Spark job.
    ``operator`` picks one operator (default: all; the others are carried over unchanged)
    and ``new_checkpoint_id`` the new checkpoint's id (default: the newest + 1).
    """
    if output is not None:
        if operator is not None or new_checkpoint_id is not None:
            raise InvalidArgumentError(
                "a new max parallelism of a Flink snapshot is a new savepoint directory of"
                " every operator: give output, and neither operator nor new_checkpoint_id")
        report = progress or (lambda _: None)
        report(f"re-keying the Flink snapshot {source} into {output} on the driver")
        done = commit_on_driver(spark, functools.partial(
            rescale_savepoint, source, output, max_parallelism, parallelism=parallelism,
            checkpoint_id=checkpoint_id, compression=compression))
        report(f"wrote {done.output}: {done.entries:,} pairs in {done.seconds:.1f} s")
        return done
    if compression is not None:
        raise InvalidArgumentError(
            f"compression applies to a new Flink savepoint (an output), not to {source}: a"
            " statesource checkpoint's files are Arrow IPC")
    target = call_on_driver(spark, functools.partial(
        plan_max_parallelism, source, max_parallelism, parallelism=parallelism, operator=operator,
        checkpoint_id=checkpoint_id, new_checkpoint_id=new_checkpoint_id, pin=True))
    report = progress or (lambda _: None)
    base = target.source
    keyed: dict[str, tuple[KeyedStateMeta, ...]] = {}
    written: list[DataFile] = []
    try:
        for op in target.operators:
            new_parallelism = op.parallelism if parallelism is None else parallelism
            report(f"operator {op.uid}: max parallelism {op.max_parallelism} ->"
                   f" {max_parallelism}, parallelism {op.parallelism} -> {new_parallelism}")
            keyed_states = []
            for number, state in enumerate(op.keyed_states, 1):
                report(f"  [{number}/{len(op.keyed_states)}] re-keying state {state.name}"
                       f" ({state.rows:,} rows)")
                rows = (spark.read.format("flinkstate")
                        .options(operator=op.uid, state=state.name).load(base.location.uri)
                        .drop(KEY_GROUP, OPERATOR_INDEX))  # the old layout's: recomputed for M
                sink = CheckpointStateSink(base.root, target.new_checkpoint_id, op.uid,
                                           state.name)
                write = StateWrite(sink, op.uid, state.declaration, op.keyed_key_type,
                                   max_parallelism, new_parallelism,
                                   base.metadata.timestamp_ms, None)
                files = write_state_files(rows, write)
                written.extend(files)
                keyed_states.append(state_meta(write, files))
            keyed[op.uid] = tuple(keyed_states)
        info = commit_on_driver(spark, commit_re_keyed, target, keyed, max_parallelism,
                                parallelism, written)
    except BaseException:  # the commit cleaned up if it ran; a failed job leaves it to us
        commit_on_driver(spark, discard_re_keyed, target, written)
        raise
    for op in target.operators:
        rescaled = info.metadata.operator(op.uid)
        if rescaled.keyed_states:
            distribution = Distribution.of(rescaled)
            totals = distribution.per_subtask(distribution.rows, rescaled.parallelism)
            report(f"operator {op.uid}: rows per subtask after:"
                   f" {describe_per_subtask(totals)}")
    report(f"committed checkpoint {info.checkpoint_id} at {info.location}")
    return info


def commit_re_keyed(target: RescaleTarget, keyed: dict[str, tuple[KeyedStateMeta, ...]],
                    max_parallelism: int, parallelism: int | None, written: list[DataFile]
                    ) -> CheckpointInfo:
    """On the driver: the operators' re-keyed states (``keyed``, written by the jobs),
    their operator states redistributed, committed; on failure nothing of it stays."""
    def rescale(op: OperatorMeta, files: list[Location]) -> OperatorMeta:
        new_parallelism = op.parallelism if parallelism is None else parallelism
        operator_states = rescale_operator_states(target.source, op, new_parallelism,
                                                  target.new_checkpoint_id, files)
        return dataclasses.replace(
            op, parallelism=new_parallelism, keyed_states=keyed[op.uid],
            operator_states=operator_states, max_parallelism=max_parallelism)

    try:
        check_written_visible(functools.partial(missing_files, target.root), written)
        info, _ = commit_rescaled(target, rescale)
    except BaseException:
        discard_re_keyed(target, written)
        raise
    return info


def discard_re_keyed(target: RescaleTarget, written: list[DataFile]) -> None:
    """On the driver: remove the files the jobs wrote and let go of the source's files."""
    remove_files(target.root, written)
    target.release()


def rescale_parallelism(spark: Any, source: str, parallelism: int, *,
                        operator: str | None = None, checkpoint_id: int | None = None,
                        new_checkpoint_id: int | None = None) -> CheckpointInfo:
    """:func:`statesource.rescale_parallelism` run on ``spark``'s driver (or Spark Connect
    server), for a caller that cannot see the storage: the same arguments after ``spark``,
    but for ``progress``, which cannot come back from there."""
    return commit_on_driver(spark, functools.partial(
        rescale_statesource, source, parallelism, operator=operator,
        checkpoint_id=checkpoint_id, new_checkpoint_id=new_checkpoint_id))

"""``statesource rescale``: a new checkpoint of the same state at another parallelism, or a
Flink snapshot as a new savepoint under another max parallelism."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from statesource.cli.output import (
    add_compression_option,
    add_json_option,
    emit,
    progress,
    wrote_canonical,
)
from statesource.errors import InvalidArgumentError
from statesource.format.commit import CheckpointInfo
from statesource.format.source import FLINK
from statesource.format.storage import resolve
from statesource.rescale import rescale_parallelism
from statesource.skew import Distribution
from statesource.sources import kind_of

if TYPE_CHECKING:
    from statesource.flink.operations.rescale import RescaledSavepoint


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "rescale", help="write a checkpoint of the same state at another parallelism",
        description="Write a new checkpoint holding the state of the checkpoint at PATH for a"
        " job running at parallelism P. Keyed state is shared with the old checkpoint (no"
        " bytes are copied, so this takes about as long for 10 GB as for 10 MB); operator"
        " state is redistributed by Flink's rules. Prints rows per subtask now and after"
        " before it commits. The old checkpoint is not changed. With --max-parallelism M"
        " every key is re-keyed into M key groups by a local Spark job, written as a new"
        " checkpoint the same way. A Flink savepoint or checkpoint is written, with every key"
        " re-keyed into M key groups, as a new canonical savepoint directory --output DIR that"
        " a Flink job with pipeline.max-parallelism M restores (a new parallelism alone needs"
        " no rewrite: Flink re-splits key groups at restore).")
    parser.add_argument("path", help="a checkpoint, or a directory of checkpoints (newest used);"
                        " also a Flink savepoint or checkpoint")
    parser.add_argument("--parallelism", type=int, metavar="P",
                        help="the new parallelism, 1 to the (new) max parallelism")
    parser.add_argument("--max-parallelism", type=int, metavar="M",
                        help="a new max parallelism, 1 to 32768 and at least P: re-keys every"
                        " key with a local Spark job")
    parser.add_argument("--operator", metavar="UID",
                        help="rescale only this operator, by uid, hex id or unique name"
                        " (default: every operator)")
    parser.add_argument("--checkpoint-id", type=int, metavar="N",
                        help="rescale checkpoint N under PATH (default: the newest)")
    parser.add_argument("--new-checkpoint-id", type=int, metavar="N",
                        help="id of the new checkpoint (default: one more than the newest)")
    parser.add_argument("--output", metavar="DIR",
                        help="for a Flink snapshot: the new savepoint directory (must not"
                        " exist)")
    add_compression_option(parser)
    add_json_option(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if kind_of(resolve(args.path), args.checkpoint_id) == FLINK:
        return run_flink(args)
    if args.output is not None:
        raise InvalidArgumentError(
            f"--output {args.output}: a statesource checkpoint is rescaled into a new checkpoint"
            " under the same root (--new-checkpoint-id N); --output names the savepoint"
            " directory of a rescaled Flink snapshot")
    if args.compression is not None:
        raise InvalidArgumentError(
            f"--compression {args.compression}: a statesource checkpoint's files keep their"
            " format; --compression applies to a Flink savepoint written with --output")
    say = progress(args)
    if args.max_parallelism is None:
        if args.parallelism is None:
            raise InvalidArgumentError("give --parallelism P, --max-parallelism M, or both")
        info = rescale_parallelism(args.path, args.parallelism, operator=args.operator,
                                   checkpoint_id=args.checkpoint_id,
                                   new_checkpoint_id=args.new_checkpoint_id, progress=say)
    else:
        info = _rescale_max_parallelism(args, say)
    if args.json:
        emit(_checkpoint_document(info))
    return 0


def _rescale_max_parallelism(args: argparse.Namespace, say: Callable[[str], None]
                             ) -> CheckpointInfo:
    """A statesource checkpoint re-keyed for a new max parallelism, by a local Spark job."""
    from statesource.spark import session
    from statesource.spark.write.rescale import plan_max_parallelism, rescale_max_parallelism

    plan_max_parallelism(args.path, args.max_parallelism, parallelism=args.parallelism,
                         operator=args.operator, checkpoint_id=args.checkpoint_id,
                         new_checkpoint_id=args.new_checkpoint_id)
    say("starting local Spark (the first job takes a few seconds)...")
    spark = session("statesource-rescale")
    try:
        info = rescale_max_parallelism(spark, args.path, None, args.max_parallelism,
                                       parallelism=args.parallelism, operator=args.operator,
                                       checkpoint_id=args.checkpoint_id,
                                       new_checkpoint_id=args.new_checkpoint_id, progress=say)
    finally:
        spark.stop()
    assert isinstance(info, CheckpointInfo)  # no output given: a statesource checkpoint
    return info


def _checkpoint_document(info: CheckpointInfo) -> dict[str, Any]:
    """The ``--json`` document of a rescaled statesource checkpoint (docs/CLI.md)."""
    operators = []
    for op in info.metadata.operators:
        distribution = Distribution.of(op) if op.keyed_states else None
        operators.append({
            "uid": op.uid, "parallelism": op.parallelism, "max_parallelism": op.max_parallelism,
            "rows_per_subtask": None if distribution is None
            else distribution.per_subtask(distribution.rows, op.parallelism)})
    return {"kind": "statesource", "checkpoint_id": info.checkpoint_id,
            "location": str(info.location), "operators": operators}


def run_flink(args: argparse.Namespace) -> int:
    """A Flink snapshot under a new max parallelism, as a new canonical savepoint."""
    from statesource.flink.operations.rescale import rescale_max_parallelism as rescale_savepoint

    if args.max_parallelism is None:
        raise InvalidArgumentError(
            f"{args.path} is a Flink snapshot: Flink restores it at any parallelism by itself"
            " (it re-splits the key groups), so only a new max parallelism needs a rewrite:"
            " give --max-parallelism M --output DIR. To see how parallelism"
            f" {args.parallelism or 'P'} would split the state: statesource inspect"
            f" {args.path} --parallelism {args.parallelism or 'P'}")
    for given, option in ((args.operator, "--operator"),
                          (args.new_checkpoint_id, "--new-checkpoint-id")):
        if given is not None:
            raise InvalidArgumentError(
                f"{option} does not apply to a Flink snapshot: every operator of the savepoint"
                " gets the new max parallelism, written to --output DIR")
    if args.output is None:
        raise InvalidArgumentError(
            f"{args.path} is a Flink snapshot: give --output DIR, the new savepoint directory"
            " (the snapshot itself is never changed)")
    done = rescale_savepoint(args.path, args.output, args.max_parallelism,
                             parallelism=args.parallelism, checkpoint_id=args.checkpoint_id,
                             progress=progress(args), compression=args.compression)
    if args.json:
        emit(savepoint_document(done))
    else:
        print(wrote_canonical(done.output) + f": {done.entries:,} entries and timers re-keyed to"
              f" max parallelism {done.max_parallelism}"
              f"{', Snappy-compressed' if done.compressed else ''} in {done.seconds:.1f} s;"
              f" restore it in a job with pipeline.max-parallelism: {done.max_parallelism}")
    return 0


def savepoint_document(done: RescaledSavepoint) -> dict[str, Any]:
    """The ``--json`` document of a new savepoint re-keyed or edited from a Flink snapshot
    (docs/CLI.md)."""
    return {"kind": "flink", "checkpoint_id": done.checkpoint_id, "location": done.output,
            "source": done.source, "max_parallelism": done.max_parallelism,
            "entries": done.entries, "converted": done.converted,
            "compressed": done.compressed, "seconds": done.seconds,
            "operators": [{"uid": op.operator, "operator_id": op.operator_id or None,
                           "max_parallelism": op.new_max_parallelism,
                           "max_parallelism_before": op.max_parallelism,
                           "parallelism": op.new_parallelism,
                           "parallelism_before": op.parallelism,
                           "entries": op.entries, "timers": op.timers,
                           "key_groups": op.key_groups, "bytes": op.bytes}
                          for op in done.operators]}

"""``statesource rescale``: a new checkpoint of the same state at another parallelism."""

from __future__ import annotations

import argparse

from statesource.errors import InvalidArgumentError
from statesource.rescale import rescale_parallelism


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "rescale", help="write a checkpoint of the same state at another parallelism",
        description="Write a new checkpoint holding the state of the checkpoint at PATH for a"
        " job running at parallelism P. Keyed state is shared with the old checkpoint (no"
        " bytes are copied, so this takes about as long for 10 GB as for 10 MB); operator"
        " state is redistributed by Flink's rules. Prints entries per subtask now and after"
        " before it commits. The old checkpoint is not changed. With --max-parallelism M"
        " every key is re-keyed into M key groups by a local Spark job, written as a new"
        " checkpoint the same way.")
    parser.add_argument("path", help="a checkpoint, or a directory of checkpoints (newest used)")
    parser.add_argument("--parallelism", type=int, metavar="P",
                        help="the new parallelism, 1 to the (new) max parallelism")
    parser.add_argument("--max-parallelism", type=int, metavar="M",
                        help="a new max parallelism, 1 to 32768 and at least P: re-keys every"
                        " key with a local Spark job")
    parser.add_argument("--operator", metavar="UID",
                        help="rescale only this operator (default: every operator)")
    parser.add_argument("--checkpoint-id", type=int, metavar="N",
                        help="rescale checkpoint N under PATH (default: the newest)")
    parser.add_argument("--new-checkpoint-id", type=int, metavar="N",
                        help="id of the new checkpoint (default: one more than the newest)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.max_parallelism is None:
        if args.parallelism is None:
            raise InvalidArgumentError("give --parallelism P, --max-parallelism M, or both")
        rescale_parallelism(args.path, args.parallelism, operator=args.operator,
                            checkpoint_id=args.checkpoint_id,
                            new_checkpoint_id=args.new_checkpoint_id, progress=print)
        return 0
    from statesource.spark import session
    from statesource.spark.write.rescale import plan_max_parallelism, rescale_max_parallelism

    plan_max_parallelism(args.path, args.max_parallelism, parallelism=args.parallelism,
                         operator=args.operator, checkpoint_id=args.checkpoint_id,
                         new_checkpoint_id=args.new_checkpoint_id)
    print("starting local Spark (the first job takes a few seconds)...")
    spark = session("statesource-rescale")
    try:
        rescale_max_parallelism(spark, args.path, args.max_parallelism,
                                parallelism=args.parallelism, operator=args.operator,
                                checkpoint_id=args.checkpoint_id,
                                new_checkpoint_id=args.new_checkpoint_id, progress=print)
    finally:
        spark.stop()
    return 0

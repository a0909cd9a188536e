"""``statesource demo``: the whole product on one machine, in about a minute."""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from statesource.demo.clickstream import clicks
from statesource.demo.job import OPERATOR_UID, UserActivityJob


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "demo", help="run a stateful click-stream job, checkpoint it, query it with Spark",
        description="Process a generated click stream with keyed state (Value, List, Map,"
        " windowed Reducing, TTL) on parallel subtasks, take asynchronous checkpoints while"
        " processing continues, then query the newest checkpoint with Spark SQL.")
    parser.add_argument("--events", type=int, default=1_000_000,
                        help="clicks to process (default 1,000,000)")
    parser.add_argument("--output", default=None,
                        help="directory for checkpoints (default: a new temporary directory)")
    parser.add_argument("--parallelism", type=int, default=2, help="subtasks (default 2)")
    parser.add_argument("--checkpoint-every", type=int, default=250_000,
                        help="events between checkpoints (default 250,000)")
    parser.add_argument("--no-spark", action="store_true",
                        help="stop after writing checkpoints")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from statesource.errors import InvalidArgumentError

    if args.events < 1 or args.checkpoint_every < 1:
        raise InvalidArgumentError(
            f"--events ({args.events}) and --checkpoint-every ({args.checkpoint_every})"
            " must be positive")
    if not args.no_spark:
        from statesource.spark import check_java

        check_java()  # before a minute of processing, not after
    output = os.path.abspath(args.output or tempfile.mkdtemp(prefix="statesource-demo-"))
    print(f"statesource demo: {args.events:,} clicks, parallelism {args.parallelism},"
          f" checkpoints every {args.checkpoint_every:,} events into {output}")
    job = UserActivityJob(output, parallelism=args.parallelism)
    started = time.perf_counter()

    def progress(position: int, pending) -> None:
        rate = position / (time.perf_counter() - started)
        print(f"  {position:>10,} events  {rate:>9,.0f} events/s  checkpoint"
              f" {pending.checkpoint_id} writing in the background", flush=True)

    last = job.run(clicks(args.events), args.checkpoint_every, progress).result()
    job.writer.close()
    elapsed = time.perf_counter() - started
    states = last.metadata.operator(OPERATOR_UID).keyed_states
    print(f"processed {args.events:,} events in {elapsed:.1f} s; checkpoint"
          f" {last.checkpoint_id} holds " + ", ".join(f"{s.name} {s.entries:,}" for s in states))
    if not args.no_spark:
        from statesource.demo.report import run_report
        from statesource.spark import session

        print("starting local Spark (the first query takes a few seconds)...", flush=True)
        spark = session("statesource-demo")
        run_report(spark, output, "user-00000", print)
    print(f"\nThe newest checkpoint is {last.path}\nTry next:\n"
          f"  statesource inspect {output}\n"
          f"  statesource inspect {output} --parallelism 3 --plot state.png\n"
          f"  python examples/read_dataframes.py {output}\n"
          "  docs/SPARK.md (options and schemas), docs/FORMAT.md (the checkpoint format)")
    return 0

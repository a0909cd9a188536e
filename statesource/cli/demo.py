"""``statesource demo``: the whole product on one machine, in about two minutes."""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import shutil
import sys
import tempfile
import time

from statesource.checkpointing import PendingCheckpoint
from statesource.checks import check_int
from statesource.demo import job as job_module
from statesource.demo.clickstream import clicks
from statesource.demo.job import OPERATOR_UID, UserActivityJob
from statesource.errors import InvalidArgumentError
from statesource.format.storage import check_creatable, resolve

MAX_PARALLELISM = 128


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
    parser.add_argument("--parallelism", type=int, default=2,
                        help=f"subtasks, 1..{MAX_PARALLELISM} (default 2)")
    parser.add_argument("--checkpoint-every", type=int, default=250_000,
                        help="events between checkpoints (default 250,000)")
    parser.add_argument("--no-spark", action="store_true",
                        help="stop after writing checkpoints")
    parser.set_defaults(run=run)


QUIET_SPARK = {
    "spark.ui.showConsoleProgress": "false",  # no stage progress bars between the tables
    "spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile="
    + os.path.join(os.path.dirname(os.path.abspath(job_module.__file__)),
                   "log4j2-quiet.properties"),
}
"""Spark settings for the demo: its output is the point, Spark's start-up warnings are not."""


def check_arguments(args: argparse.Namespace) -> str:
    """Refuse bad arguments, and an output directory that already holds checkpoints, before
    a minute of processing; returns the output directory to use."""
    check_int(args.events, "--events", 1)
    check_int(args.checkpoint_every, "--checkpoint-every", 1)
    check_int(args.parallelism, "--parallelism", 1, MAX_PARALLELISM,
              context=f" (the demo's max parallelism is {MAX_PARALLELISM})")
    if args.output is None:
        return tempfile.mkdtemp(prefix="statesource-demo-")
    output = os.path.abspath(args.output)
    if os.path.exists(output) and not os.path.isdir(output):
        raise InvalidArgumentError(f"--output {output} is a file, not a directory")
    check_creatable(resolve(output), "--output")
    if os.path.isdir(output) and any(name.startswith("chk-") for name in os.listdir(output)):
        raise InvalidArgumentError(
            f"--output {output} already holds checkpoints (an earlier run?); checkpoints are"
            f" never overwritten. Remove it (rm -r {shlex.quote(output)}), choose another"
            " --output, or leave --output out for a fresh temporary directory")
    return output


def run(args: argparse.Namespace) -> int:
    output = check_arguments(args)
    if not args.no_spark:
        from statesource.spark import check_java

        check_java()  # before a minute of processing, not after
    print(f"statesource demo: {args.events:,} clicks, parallelism {args.parallelism},"
          f" checkpoints every {args.checkpoint_every:,} events into {output}")
    job = UserActivityJob(output, parallelism=args.parallelism, max_parallelism=MAX_PARALLELISM)
    started = time.perf_counter()

    def progress(position: int, pending: PendingCheckpoint) -> None:
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
        spark = session("statesource-demo", register_sources=True, key_group_functions=True,
                        **QUIET_SPARK)
        run_report(spark, output, "user-00000", print)
    print(f"\nThe newest checkpoint is {last.location}\nTry next:")
    for hint in try_next(output):
        print(f"  {hint}")
    return 0


def try_next(output: str) -> list[str]:
    """Commands that run as printed from where the demo was started, against its output."""
    command, python = _invocation()
    target = shlex.quote(output)
    hints = [f"{command} inspect {target} --verify"]
    if importlib.util.find_spec("matplotlib") is not None:
        hints.append(f"{command} inspect {target} --parallelism 3 --plot state.png")
    else:
        hints.append(f"{python} -m pip install 'statesource[plot]'   (then: {command} inspect"
                     f" {target} --parallelism 3 --plot state.png)")
    if os.path.isfile(os.path.join("examples", "read_dataframes.py")):
        hints.append(f"{python} examples/read_dataframes.py {target}")
    hints.append("docs/SPARK.md (options and schemas), docs/FORMAT.md (the checkpoint format)")
    return hints


def _invocation() -> tuple[str, str]:
    """How to type ``statesource`` and ``python`` here: bare when the shell finds this very
    installation, else by path (e.g. ``.venv/bin/statesource`` in an unactivated venv)."""
    script = os.path.realpath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    on_path = shutil.which("statesource")
    if os.path.basename(script) != "statesource" or (
            on_path and os.path.realpath(on_path) == script):
        command = "statesource"
    else:
        command = _typed(sys.argv[0])
    on_path_python = shutil.which("python")
    same = on_path_python and os.path.realpath(on_path_python) == os.path.realpath(
        sys.executable)
    return command, "python" if same else _typed(sys.executable)


def _typed(path: str) -> str:
    relative = os.path.relpath(os.path.abspath(path))
    return shlex.quote(relative if not relative.startswith("..") else os.path.abspath(path))

"""``statesource retain``: keep the newest checkpoints, delete the rest and their files."""

from __future__ import annotations

import argparse
import re
from datetime import timedelta

from statesource.errors import InvalidArgumentError
from statesource.format import retain
from statesource.format.retention import DEFAULT_OLDER_THAN, check_older_than

_DURATION = re.compile(r"([0-9]+)([smhd])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "retain", help="delete older checkpoints and the files no kept checkpoint references",
        description="Keep the newest N complete checkpoints under PATH and delete the others,"
        " with exactly the data files that no kept checkpoint references, and what crashed"
        " writers left. Safe to interrupt, and to run while writers and readers work:"
        " a rerun finishes the job.")
    parser.add_argument("path", help="a directory of checkpoints")
    parser.add_argument("--keep", type=int, required=True, metavar="N",
                        help="how many of the newest complete checkpoints to keep (>= 1)")
    add_cleanup_options(parser, "files of unpublished write attempts, temporary files and"
                        " writers' pins")
    parser.set_defaults(run=run)


def add_cleanup_options(parser: argparse.ArgumentParser, abandoned: str) -> None:
    """``--older-than`` (what counts as ``abandoned``, the age guard) and ``--dry-run``: the
    options of every command that deletes what killed writers left."""
    parser.add_argument("--older-than", type=older_than, default=DEFAULT_OLDER_THAN,
                        metavar="AGE",
                        help=f"{abandoned} count as abandoned once older than this: a number"
                        " and a unit s, m, h or d, at least 1h (default: 3d; no write may run"
                        " longer)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print what would be deleted, delete nothing")


def duration(text: str) -> timedelta:
    """``90s``, ``15m``, ``12h`` or ``3d`` as a timedelta."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is no duration: write a number and a unit s, m, h or d, e.g. 3d")
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def older_than(text: str) -> timedelta:
    """A :func:`duration` that ``retain`` accepts as its threshold (none under an hour)."""
    value = duration(text)
    try:
        check_older_than(value, f"--older-than {text}")
    except InvalidArgumentError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return value


def run(args: argparse.Namespace) -> int:
    plan = retain(args.path, args.keep, dry_run=args.dry_run, older_than=args.older_than,
                  progress=print)
    verb = "would delete" if args.dry_run else "deleted"
    print(f"kept checkpoints: {', '.join(map(str, plan.kept)) or 'none'}")
    print(f"{verb} checkpoints: {', '.join(map(str, plan.retired)) or 'none'}")
    print(f"{verb} {len(plan.deleted_files)} data files; {len(plan.shared_files)} files of"
          " deleted checkpoints stay, referenced by kept ones")
    if plan.pinned_files:
        print(f"{len(plan.pinned_files)} files of deleted checkpoints stay, pinned by running"
              " writers")
    print(f"{verb} {len(plan.orphans)} files of failed write attempts that no checkpoint lists")
    print(f"{verb} {len(plan.abandoned)} files of abandoned attempts, {len(plan.expired_pins)}"
          f" expired pins and {len(plan.empty_dirs)} empty directories")
    if args.dry_run:
        for path in [*plan.deleted_files, *plan.orphans, *plan.abandoned, *plan.expired_pins,
                     *(f"{d}/" for d in plan.empty_dirs)]:
            print(f"  {path}")
    return 0

"""``statesource retain``: keep the newest checkpoints, delete the rest and their files."""

from __future__ import annotations

import argparse

from statesource.format import retain


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "retain", help="delete older checkpoints and the files no kept checkpoint references",
        description="Keep the newest N complete checkpoints under PATH and delete the others,"
        " with exactly the data files that no kept checkpoint references. Safe to interrupt:"
        " a rerun finishes the job.")
    parser.add_argument("path", help="a directory of checkpoints")
    parser.add_argument("--keep", type=int, required=True, metavar="N",
                        help="how many of the newest complete checkpoints to keep (>= 1)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print what would be deleted, delete nothing")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    plan = retain(args.path, args.keep, dry_run=args.dry_run, progress=print)
    verb = "would delete" if args.dry_run else "deleted"
    print(f"kept checkpoints: {', '.join(map(str, plan.kept)) or 'none'}")
    print(f"{verb} checkpoints: {', '.join(map(str, plan.retired)) or 'none'}")
    print(f"{verb} {len(plan.deleted_files)} data files; {len(plan.shared_files)} files of"
          " deleted checkpoints stay, referenced by kept ones")
    print(f"{verb} {len(plan.orphans)} files of failed write attempts that no checkpoint lists")
    if args.dry_run:
        for path in [*plan.deleted_files, *plan.orphans]:
            print(f"  {path}")
    return 0

"""``statesource clean-savepoints``: remove what killed Flink savepoint writes left."""

from __future__ import annotations

import argparse
from typing import Any

from statesource.cli.output import add_json_option, emit
from statesource.cli.retain import add_cleanup_options
from statesource.flink.snapshot.leftovers import Leftovers, find_leftovers, remove_leftovers


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "clean-savepoints", help="remove what killed Flink savepoint writes left",
        description="Find, in PATH and the directories right under it, the temporary"
        " directories of savepoint writes that were killed, and the state files on object"
        " stores that no _metadata names, all older than --older-than, and delete them."
        " Published savepoints, and files a write still running may use, are left alone.")
    parser.add_argument("path", help="a directory of savepoints (Flink's"
                        " state.savepoints.dir), or one savepoint output")
    add_cleanup_options(parser, "temporary directories and state files no _metadata names")
    add_json_option(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    found = find_leftovers(args.path, args.older_than)
    if not args.dry_run:
        remove_leftovers(found)
    if args.json:
        emit(document(found, args.dry_run))
        return 0
    verb = "would delete" if args.dry_run else "deleted"
    print(f"{verb} {len(found.staging)} temporary directories of killed savepoint writes and"
          f" {len(found.orphans)} state files no _metadata names ({found.bytes:,} bytes) in"
          f" {found.root}")
    for location, size in [*found.staging, *found.orphans]:
        print(f"  {location} ({size:,} bytes)")
    return 0


def document(found: Leftovers, dry_run: bool) -> dict[str, Any]:
    return {"location": str(found.root), "dry_run": dry_run, "bytes": found.bytes,
            "staging_directories": [{"path": str(where), "bytes": size}
                                    for where, size in found.staging],
            "orphaned_files": [{"path": str(where), "bytes": size}
                               for where, size in found.orphans]}

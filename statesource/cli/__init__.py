"""The ``statesource`` command line: one sub-command per module in this package.

Every failure we anticipate is a :class:`StateSourceError`; ``main`` prints its
message and exits 1 instead of showing a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from statesource.cli import demo, diff, inspect, keygroup, retain
from statesource.errors import StateSourceError

_COMMANDS = (demo, inspect, keygroup, retain, diff)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="statesource",
        description="Flink-style keyed state in Python, checkpointed as Arrow, read with Spark.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in _COMMANDS:
        command.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args) or 0
    except StateSourceError as error:
        print(f"statesource {args.command}: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"statesource {args.command}: interrupted", file=sys.stderr)
        return 130

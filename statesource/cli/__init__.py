"""The ``statesource`` command line: one sub-command per module in this package.

Every failure we anticipate is a :class:`StateSourceError`; ``main`` prints its
message and exits 1 instead of showing a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from statesource.cli import (
    demo,
    diff,
    erase,
    export_flink,
    import_flink,
    inspect,
    jvm,
    keygroup,
    rescale,
    retain,
)
from statesource.errors import StateSourceError
from statesource.format.storage import redacted
from statesource.format.versions import FORMAT_VERSION
from statesource.format.versions import SUPPORTED_FORMAT_VERSIONS as SUPPORTED

_COMMANDS = (demo, export_flink, import_flink, inspect, jvm, keygroup, rescale, retain, diff,
             erase)


def _installed_version() -> str:
    try:
        return version("statesource")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="statesource",
        description="Flink-style keyed state in Python, checkpointed as Arrow, read with Spark.",
    )
    parser.add_argument("--version", action="version",
                        version=f"statesource {_installed_version()} (checkpoint format"
                        f" v{FORMAT_VERSION}, reads {', '.join(map(str, SUPPORTED))})")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in _COMMANDS:
        command.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args) or 0
    except StateSourceError as error:
        # Messages may quote what the user typed: a URI's credentials stay off the terminal.
        print(f"statesource {args.command}: error: {redacted(str(error))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"statesource {args.command}: interrupted", file=sys.stderr)
        return 130

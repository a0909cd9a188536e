"""The ``statesource`` command line: one sub-command per module in this package.

Every failure ends the command with one line on stderr, ``statesource <command>: error:
...``, and exit status 1 (``diff``: 2, as its 1 means "something changed"), never a
traceback: statesource's own errors, which name the offending value or path; the
operating system's (a full disk, a read-only file system, a permission), which name the
file; mistyped arguments; and anything unforeseen, told as an internal error
(``STATESOURCE_TRACEBACK=1`` shows its traceback). A URI's credentials never reach the
terminal, not even when argparse quotes what was typed. docs/CLI.md describes the exit
statuses and the ``--json`` documents.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import NoReturn

from statesource.cli import (
    clean_savepoints,
    demo,
    diff,
    erase,
    export_flink,
    import_flink,
    inspect,
    jvm,
    keygroup,
    migrate,
    rescale,
    retain,
)
from statesource.errors import StateSourceError, describe_os_error
from statesource.format.storage import redacted
from statesource.format.versions import FORMAT_VERSION, PLAIN_FORMAT_VERSION
from statesource.format.versions import SUPPORTED_FORMAT_VERSIONS as SUPPORTED

_COMMANDS = (demo, export_flink, import_flink, inspect, jvm, keygroup, rescale, retain, diff,
             erase, migrate, clean_savepoints)
FAILED = 1
"""The exit status of a failed command (``diff``'s is :data:`diff.FAILED`)."""
_FAILED_BY_COMMAND = {"diff": diff.FAILED}


def _installed_version() -> str:
    try:
        return version("statesource")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


class UsageError(Exception):
    """Arguments argparse refused, raised instead of its exit so that :func:`main` reports
    them like every other failure."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    """argparse's parser (its sub-commands' too, which argparse makes of the same class)
    with its errors raised as :class:`UsageError` rather than printed with a usage block."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self.prog, message)


class _Version(argparse.Action):
    """``--version``: one line as written (argparse's own action re-wraps it to the
    terminal's width)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        print(f"statesource {_installed_version()} (writes checkpoint format"
              f" v{PLAIN_FORMAT_VERSION}, an incremental checkpoint up to v{FORMAT_VERSION};"
              f" reads {', '.join(map(str, SUPPORTED))})")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="statesource",
        description="Flink-style keyed state in Python, checkpointed as Arrow, read with Spark.",
    )
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="print the version and the checkpoint formats, and exit")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in _COMMANDS:
        command.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except UsageError as error:
        command = error.prog.split()[-1]
        return _fail(error.prog, f"{error} (see {error.prog} --help)",
                     _FAILED_BY_COMMAND.get(command, FAILED))
    prog = f"statesource {args.command}"
    failed = _FAILED_BY_COMMAND.get(args.command, FAILED)
    try:
        return args.run(args) or 0
    except StateSourceError as error:
        return _fail(prog, str(error), failed)
    except BrokenPipeError:  # stdout's reader left (`| head`): nothing to say to it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return failed
    except OSError as error:
        return _fail(prog, describe_os_error(error), failed)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # a bug: one line all the same, the traceback on request
        if os.environ.get("STATESOURCE_TRACEBACK"):
            raise
        return _fail(prog, f"internal error, please report it: {type(error).__name__}: {error}"
                     " (STATESOURCE_TRACEBACK=1 shows where)", failed)


def _fail(prog: str, message: str, status: int) -> int:
    """One line on stderr: messages may quote what the user typed, so a URI's credentials
    are left out, and a message of several lines is joined."""
    one_line = " ".join(part.strip() for part in message.splitlines() if part.strip())
    print(f"{prog}: error: {redacted(one_line)}", file=sys.stderr)
    return status



"""What a command prints: its report for people, or with ``--json`` one JSON document for
scripts.

Under ``--json`` stdout holds the document alone, so a script can parse it whole:
progress lines go to stderr, and a failure prints nothing on stdout (its one line goes to
stderr, as without ``--json``). The shape of each command's document is in docs/CLI.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from statesource.format.storage import redacted


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true",
                        help="print one JSON document on stdout instead of the report (its"
                        " shape: docs/CLI.md); progress goes to stderr")


def add_compression_option(parser: argparse.ArgumentParser,
                           default: str = "as the input was") -> None:
    """``--compression``, for commands that write a Flink savepoint (the value is checked by
    the operation, before it reads anything: :mod:`statesource.flink.snapshot.compression`)."""
    parser.add_argument("--compression", metavar="snappy|none",
                        help="Snappy-compress the state written, as Flink's"
                        " execution.checkpointing.snapshot-compression does, or not (default:"
                        f" {default})")


def progress(args: argparse.Namespace) -> Callable[[str], None]:
    """Where lines of progress go: stdout with the report, stderr beside a JSON document."""
    if args.json:
        return lambda line: print(line, file=sys.stderr, flush=True)
    return print


def emit(document: dict[str, Any]) -> None:
    """Print ``document`` as the command's JSON (paths in it are shown as everywhere: a URI's
    credentials left out)."""
    print(redacted(json.dumps(document, indent=2, ensure_ascii=False)))


def wrote_canonical(output: str) -> str:
    """How a command that rewrote a Flink snapshot names its output: always a canonical
    savepoint, whatever the input's kind, so a RocksDB job learns it may restore it into
    either state backend."""
    return (f"wrote canonical savepoint {output} (Flink restores it into the heap or the"
            " RocksDB backend)")

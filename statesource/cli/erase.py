"""``statesource erase`` and ``statesource drop``: a Flink savepoint without some keys, or
without a state, written as a new savepoint directory."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from statesource.cli.output import add_compression_option, add_json_option, emit, wrote_canonical
from statesource.errors import InvalidArgumentError, StateSourceError
from statesource.keyjson import from_json, parse_key_text, to_json

if TYPE_CHECKING:
    from statesource.flink.operations.edit import EditedSavepoint


def register(commands: argparse._SubParsersAction) -> None:
    erase = commands.add_parser(
        "erase", help="write a Flink savepoint without some keys (a GDPR erasure request)",
        description="Write the Flink savepoint or checkpoint SNAPSHOT as a new canonical"
        " savepoint directory --output DIR without any entry of any keyed state, nor any"
        " timer, of operator UID whose key equals one of the keys (Java equality). Keys are"
        " values of the operator's key type: strings and chars verbatim, numbers as given,"
        " tuples and rows as JSON arrays (e.g. '[\"u0\", 3]'); a Flink SQL operator's key"
        " as a JSON array of its key fields (decimals, dates, times and timestamps as ISO"
        " strings, bytes as {\"bytes\": \"<hex>\"}). Everything else is carried over byte"
        " for byte; SNAPSHOT is never changed.")
    _common(erase)
    erase.add_argument("--key", action="append", default=[], metavar="K",
                       help="a key to erase (repeatable)")
    erase.add_argument("--keys-file", metavar="FILE",
                       help="more keys, one JSON value per line (strings quoted)")
    erase.set_defaults(run=run_erase)

    drop = commands.add_parser(
        "drop", help="write a Flink savepoint without one state of an operator",
        description="Write the Flink savepoint or checkpoint SNAPSHOT as a new canonical"
        " savepoint directory --output DIR without state NAME of operator UID: a keyed state,"
        " a timer state (_timer_state/event_<timers> or _timer_state/processing_<timers>) or"
        " an operator state. SNAPSHOT is never changed.")
    _common(drop)
    drop.add_argument("--state", required=True, metavar="NAME", help="the state to drop")
    drop.set_defaults(run=run_drop)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("snapshot", metavar="SNAPSHOT",
                        help="a Flink savepoint or checkpoint directory")
    parser.add_argument("--operator", required=True, metavar="UID",
                        help="the operator: its uid, hex id, or the name Flink gave it"
                        " (GroupAggregate[5]) where no other operator has that name")
    parser.add_argument("--output", required=True, metavar="DIR",
                        help="the new savepoint directory (must not exist)")
    parser.add_argument("--checkpoint-id", type=int, metavar="N",
                        help="checkpoint chk-N when SNAPSHOT holds several")
    add_compression_option(parser)
    add_json_option(parser)


def run_erase(args: argparse.Namespace) -> int:
    from statesource.flink.operations.edit import erase_keys, operator_key_type
    from statesource.flink.snapshot.compression import check_compression

    check_compression(args.compression)
    if not args.key and args.keys_file is None:
        raise InvalidArgumentError("give the keys to erase: --key K (repeatable), --keys-file"
                                   " FILE, or both")
    lines = None if args.keys_file is None else _read_keys_file(Path(args.keys_file))
    key_type = operator_key_type(args.snapshot, args.operator, checkpoint_id=args.checkpoint_id)
    keys: list[Any] = [parse_key_text(key_type, text) for text in args.key]
    if lines is not None:
        keys += _keys_file(Path(args.keys_file), lines, key_type)
    done = erase_keys(args.snapshot, args.output, args.operator, keys,
                      checkpoint_id=args.checkpoint_id, compression=args.compression)
    if args.json:
        emit({**_edit_document(done), "keys": len(keys),
              "missing": [to_json(key_type, key) for key in done.missing]})
        return 0
    for state, count in done.removed:
        print(f"{state}: {count:,} removed")
    for key in done.missing:
        print(f"not present: {key!r}")
    print(wrote_canonical(done.output) + f": {len(keys) - len(done.missing)} of {len(keys)} keys"
          f" found, {done.total:,} entries and timers removed from operator {done.operator}")
    return 0


def run_drop(args: argparse.Namespace) -> int:
    from statesource.flink.operations.edit import drop_state

    done = drop_state(args.snapshot, args.output, args.operator, args.state,
                      checkpoint_id=args.checkpoint_id, compression=args.compression)
    if args.json:
        emit({**_edit_document(done), "state": args.state})
    else:
        print(wrote_canonical(done.output) + f": state {args.state!r} of operator {done.operator}"
              f" dropped ({done.total:,} entries, timers or elements)")
    return 0


def _edit_document(done: EditedSavepoint) -> dict[str, Any]:
    """What the ``--json`` documents of ``erase`` and ``drop`` share (docs/CLI.md)."""
    return {"kind": "flink", "location": done.output, "source": done.source,
            "operator": done.operator, "removed": dict(done.removed),
            "total_removed": done.total, "compressed": done.compressed,
            "seconds": done.seconds}


def _read_keys_file(path: Path) -> list[str]:
    """The lines of ``--keys-file``, read before the snapshot is opened: a wrong path is
    refused first, naming it."""
    try:
        return path.read_text().splitlines()
    except UnicodeDecodeError as error:
        raise InvalidArgumentError(f"--keys-file {path}: not UTF-8 text ({error.reason} at"
                                   f" byte {error.start})") from None
    except OSError as error:
        raise InvalidArgumentError(f"--keys-file {path}: {error.strerror}") from None


def _keys_file(path: Path, lines: list[str], key_type: Any) -> list[Any]:
    keys = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            raise InvalidArgumentError(
                f"--keys-file {path}, line {number}: not a JSON value ({error.msg})") from None
        try:
            keys.append(from_json(key_type, value))
        except StateSourceError as error:
            raise InvalidArgumentError(f"--keys-file {path}, line {number}: {error}") from None
    return keys

"""``statesource keygroup``: the key group (and subtask) Flink assigns each key."""

from __future__ import annotations

import argparse

from statesource.keygroups import (
    assign_to_key_group,
    check_parallelism,
    default_max_parallelism,
    operator_index_for_key_group,
)
from statesource.keyjson import parse_key_text
from statesource.types import key_type


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "keygroup",
        help="print the Flink key group (and subtask) of keys",
        description="Print the key group Flink assigns each KEY to and, with --parallelism,"
        " the subtask that owns it. Strings and chars are taken verbatim; other types are"
        " JSON (e.g. 42, true, '[\"a\", 1]' for tuple<string,long>).",
    )
    parser.add_argument("--key-type", required=True, help="declared key type, e.g. string, long,"
                        " tuple<string,long>, row<string>")
    parser.add_argument("--max-parallelism", type=int, help="default: Flink's default for"
                        " --parallelism, or 128")
    parser.add_argument("--parallelism", type=int, help="also print each key's subtask")
    parser.add_argument("keys", nargs="+", metavar="KEY")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    declared = key_type(args.key_type)
    max_parallelism = args.max_parallelism
    if max_parallelism is None:
        max_parallelism = default_max_parallelism(args.parallelism) if args.parallelism else 128
    if args.parallelism is not None:
        check_parallelism(args.parallelism, max_parallelism)
    header = ["key", "key_group"] + (["subtask"] if args.parallelism else [])
    print("\t".join(header))
    for text in args.keys:
        key_group = assign_to_key_group(parse_key_text(declared, text), declared, max_parallelism)
        row = [text, str(key_group)]
        if args.parallelism:
            row.append(str(operator_index_for_key_group(max_parallelism, args.parallelism,
                                                          key_group)))
        print("\t".join(row))
    return 0

"""``statesource keygroup``: the key group (and subtask) Flink assigns each key."""

from __future__ import annotations

import argparse

from statesource.cli.output import add_json_option, emit
from statesource.keygroups import (
    assign_to_key_group,
    check_parallelism,
    default_max_parallelism,
    operator_index_for_key_group,
)
from statesource.keyjson import parse_key_text, to_json
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
    add_json_option(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    declared = key_type(args.key_type)
    max_parallelism = args.max_parallelism
    if max_parallelism is None:
        max_parallelism = default_max_parallelism(args.parallelism) if args.parallelism else 128
    if args.parallelism is not None:
        check_parallelism(args.parallelism, max_parallelism)
    rows = []
    for text in args.keys:
        key = parse_key_text(declared, text)
        key_group = assign_to_key_group(key, declared, max_parallelism)
        subtask = None if args.parallelism is None else operator_index_for_key_group(
            max_parallelism, args.parallelism, key_group)
        rows.append((text, to_json(declared, key), key_group, subtask))
    if args.json:
        emit({"key_type": declared.name, "max_parallelism": max_parallelism,
              "parallelism": args.parallelism,
              "keys": [{"key": key, "key_group": key_group, "subtask": subtask}
                       for _, key, key_group, subtask in rows]})
        return 0
    print("\t".join(["key", "key_group"] + (["subtask"] if args.parallelism else [])))
    for text, _, key_group, subtask in rows:
        print("\t".join([text, str(key_group)] + ([] if subtask is None else [str(subtask)])))
    return 0

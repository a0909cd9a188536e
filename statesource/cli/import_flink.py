"""``statesource import-flink``: a Flink savepoint or checkpoint as a statesource checkpoint."""

from __future__ import annotations

import argparse

from statesource.cli.output import add_json_option, emit
from statesource.flink.operations.importer import import_flink


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "import-flink", help="convert a Flink savepoint or checkpoint to a statesource checkpoint",
        description="Decode a Flink 2.x heap-backend savepoint (canonical or native) or"
        " checkpoint in pure Python and write it as a statesource checkpoint under DEST, so that"
        " rescale, retention, inspect and Spark SQL work on it (docs/FLINK.md).")
    parser.add_argument("source", metavar="SRC",
                        help="a Flink snapshot directory (holding _metadata), or a directory of"
                        " chk-<id> checkpoints (the newest is used)")
    parser.add_argument("destination", metavar="DEST", help="the statesource checkpoint root")
    parser.add_argument("--checkpoint-id", type=int, help="a Flink checkpoint under SRC")
    add_json_option(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    result = import_flink(args.source, args.destination, checkpoint_id=args.checkpoint_id)
    if args.json:
        info = result.checkpoint
        emit({"kind": "statesource", "checkpoint_id": info.checkpoint_id,
              "location": str(info.location),
              "operators": [{"uid": op.uid, "states": [s.name for s in op.keyed_states],
                             "operator_states": [s.name for s in op.operator_states]}
                            for op in info.metadata.operators],
              "skipped_timers": list(result.skipped_timers),
              "skipped_operators": [{"operator": operator, "reason": reason}
                                    for operator, reason in result.skipped_operators]})
        return 0
    print(f"imported Flink checkpoint {result.checkpoint.checkpoint_id} into"
          f" {result.checkpoint.location}")  # its URI without credentials
    for timers in result.skipped_timers:
        print(f"  skipped timer state {timers} (statesource checkpoints keep no timers)")
    for operator, reason in result.skipped_operators:
        print(f"  skipped operator {operator}, its keyed and operator state: {reason}")
    return 0

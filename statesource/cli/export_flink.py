"""``statesource export-flink``: a statesource checkpoint's state as a Flink savepoint."""

from __future__ import annotations

import argparse

from statesource.cli.output import add_compression_option, add_json_option, emit, progress
from statesource.flink.operations.export import export_flink
from statesource.flink.serializers.java_values import TIMESTAMP_CLASSES
from statesource.flink.serializers.mapping import pojo_classes
from statesource.flink.snapshot.versions import NEWEST_RELEASE, WRITTEN_RELEASES


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "export-flink", help="write a statesource checkpoint as a Flink savepoint",
        description="Write the keyed and operator state of the statesource checkpoint at"
        " CHECKPOINT as a new canonical Flink savepoint directory --output DIR, which a"
        " Flink job of --flink-version restores"
        " (execution.state-recovery.path, flink run -s) with states of the same names and"
        " types under operators of the same uids and max parallelism (docs/FLINK.md)."
        " Operator states (split, union, broadcast) are written too, unless --keyed-only"
        " leaves them out.")
    parser.add_argument("checkpoint", metavar="CHECKPOINT",
                        help="a checkpoint, or a directory of checkpoints (the newest is used)")
    parser.add_argument("--output", metavar="DIR", required=True,
                        help="the new savepoint directory (must not exist)")
    parser.add_argument("--checkpoint-id", type=int, metavar="N",
                        help="export checkpoint N under CHECKPOINT (default: the newest)")
    parser.add_argument("--keyed-only", action="store_true",
                        help="leave operator state out (listed) and write the keyed state alone")
    parser.add_argument("--pojo-classes", metavar="JSON",
                        help="the Java classes of records that are POJOs in the job, as a JSON"
                        ' object of record name -> class: \'{"Event": "com.example.Event"}\''
                        ' (or -> {"class": ..., "declaringClasses": {field: superclass}})')
    parser.add_argument("--flink-version", metavar="X.Y",
                        help="the Flink release that restores the savepoint: "
                        + ", ".join(WRITTEN_RELEASES) + f" (default {NEWEST_RELEASE})")
    parser.add_argument("--timestamp-class", metavar="CLASS",
                        help="the Java class of every timestamp (Avro timestamp-* and"
                        " local-timestamp-*) in the job: " + ", ".join(TIMESTAMP_CLASSES)
                        + " (java.sql.Timestamp); default Avro's: Instant for timestamp-*,"
                        " LocalDateTime for local-timestamp-*")
    add_compression_option(parser, default="none")
    add_json_option(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    pojos = (None if args.pojo_classes is None
             else pojo_classes(args.pojo_classes, "--pojo-classes"))
    done = export_flink(args.checkpoint, args.output, checkpoint_id=args.checkpoint_id,
                        pojos=pojos, keyed_only=args.keyed_only,
                        flink_version=args.flink_version,
                        timestamp_class=args.timestamp_class, progress=progress(args),
                        compression=args.compression)
    if args.json:
        emit({"kind": "flink", "checkpoint_id": done.checkpoint_id, "location": done.output,
              "source": done.source, "entries": done.entries, "compressed": done.compressed,
              "seconds": done.seconds,
              "operators": [{"uid": op.uid, "operator_id": op.operator_id,
                             "parallelism": op.parallelism,
                             "max_parallelism": op.max_parallelism, "states": list(op.states),
                             "entries": op.entries, "key_groups": op.key_groups,
                             "bytes": op.bytes, "operator_states": list(op.operator_states),
                             "operator_elements": op.operator_elements}
                            for op in done.operators],
              "skipped_operator_states": [{"operator": operator, "state": state}
                                          for operator, state in done.skipped_operator_states]})
        return 0
    for operator, state in done.skipped_operator_states:
        print(f"  left out operator state {state!r} of operator {operator!r}")
    print(f"wrote savepoint {done.output} of checkpoint {done.checkpoint_id}: {done.entries:,}"
          f" entries of {len(done.operators)} operators in {done.seconds:.1f} s")
    return 0

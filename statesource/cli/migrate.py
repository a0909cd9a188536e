"""``statesource migrate``: a Flink 1.x snapshot as a Flink 2.x savepoint."""

from __future__ import annotations

import argparse
import re

from statesource.cli.output import add_compression_option, add_json_option, emit, progress
from statesource.errors import InvalidArgumentError
from statesource.flink.handles import operator_id_of
from statesource.flink.operations.migrate import REENCODED, UNMIGRATABLE, Migration, migrate
from statesource.flink.snapshot.versions import NEWEST_RELEASE

_HEX_ID = re.compile(r"[0-9a-fA-F]{32}")


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "migrate", help="write a Flink 1.x snapshot as a Flink 2.x savepoint",
        description="Write the Flink 1.x savepoint or checkpoint SNAPSHOT as a new canonical"
        " savepoint directory --output DIR that the job's Flink 2.x version restores. States"
        " whose bytes Flink 2.x reads as 1.x wrote them move as they are; Kryo 2 values of"
        " JDK classes and a POJO's List, Set and Map fields are written as Flink 2.x writes"
        " them; a state that cannot migrate exactly (a user class under Kryo, a custom Kryo"
        " serializer) refuses the migration, and nothing is written, unless"
        " --skip-unmigratable leaves such states out. --dry-run prints the plan alone"
        " (docs/FLINK.md, \"From Flink 1.x to 2.x\").")
    parser.add_argument("snapshot", metavar="SNAPSHOT",
                        help="a Flink 1.x savepoint or checkpoint directory")
    parser.add_argument("--to", metavar="X.Y", default=NEWEST_RELEASE,
                        help=f"the Flink 2.x release that restores it (default {NEWEST_RELEASE})")
    parser.add_argument("--output", metavar="DIR",
                        help="the new savepoint directory (must not exist; not with --dry-run)")
    parser.add_argument("--uid", metavar="[HASH=]UID", action="append", default=[],
                        help="an operator's uid, recorded in the new _metadata (a 1.x one"
                        " records only its hash, the operator id); repeatable")
    parser.add_argument("--field-type", metavar="STATE.FIELD=CLASS[,CLASS]", action="append",
                        default=[],
                        help="the element classes of a POJO's List or Set field (a Map"
                        " field's key and value classes: String,Long) as the job's 2.x POJO"
                        " declares them, where its values do not tell (only empty or null"
                        " collections); repeatable")
    parser.add_argument("--skip-unmigratable", action="store_true",
                        help="leave out the states that cannot migrate (listed)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print what would migrate, and how, and write nothing")
    parser.add_argument("--checkpoint-id", type=int, metavar="N",
                        help="migrate checkpoint chk-N under SNAPSHOT (default: the newest)")
    add_compression_option(parser)
    add_json_option(parser)
    parser.set_defaults(run=run)


def uids_of(given: list[str]) -> dict[str, str]:
    """``{operator id: uid}`` of ``--uid`` values: ``UID`` (hashed) or ``HASH=UID``."""
    uids = {}
    for text in given:
        operator_id, separator, uid = text.partition("=")
        if not separator:
            operator_id, uid = operator_id_of(text), text
        elif not _HEX_ID.fullmatch(operator_id):
            raise InvalidArgumentError(
                f"--uid {text}: {operator_id!r} is not an operator id (32 hex digits)")
        if not uid:
            raise InvalidArgumentError(f"--uid {text}: the uid is empty")
        uids[operator_id.lower()] = uid
    return uids


def field_types_of(given: list[str]) -> dict[str, tuple[str, ...]]:
    """``{"STATE.FIELD": classes}`` of ``--field-type`` values."""
    found = {}
    for text in given:
        name, separator, classes = text.partition("=")
        if not separator or not name or not classes:
            raise InvalidArgumentError(
                f"--field-type {text}: expected STATE.FIELD=CLASS or, for a Map field,"
                " STATE.FIELD=KEY_CLASS,VALUE_CLASS")
        found[name] = tuple(c.strip() for c in classes.split(","))
    return found


def run(args: argparse.Namespace) -> int:
    if args.dry_run == (args.output is not None):
        raise InvalidArgumentError("migrate needs --output DIR, or --dry-run (not both)")
    done = migrate(args.snapshot, args.output, to=args.to, uids=uids_of(args.uid),
                   skip_unmigratable=args.skip_unmigratable, dry_run=args.dry_run,
                   checkpoint_id=args.checkpoint_id, progress=progress(args),
                   compression=args.compression, field_types=field_types_of(args.field_type))
    if args.json:
        emit(_document(done))
    else:
        _report(done)
    return 0


def _document(done: Migration) -> dict:
    return {"source": done.source, "output": done.output, "to": done.to,
            "states": [{"operator": s.operator, "state": s.state, "kind": s.kind,
                        "action": s.action, "reason": s.reason or None} for s in done.states],
            "compressed": done.compressed, "seconds": round(done.seconds, 3)}


def _report(done: Migration) -> None:
    operator = None
    for state in done.states:
        if state.operator != operator:
            operator = state.operator
            print(f"operator {operator}")
        what = "(the operator)" if state.state is None else f"{state.kind} {state.state}"
        if state.action == UNMIGRATABLE:
            left = "left out" if done.output is not None else "cannot migrate"
            print(f"  {what}: {left}: {state.reason}")
        elif state.action == REENCODED:
            print(f"  {what}: re-encoded: {state.reason}")
        else:
            print(f"  {what}: moves as its bytes")
    if done.output is None:
        print(f"dry run: nothing written; of {len(done.states)} states,"
              f" {len(done.unmigratable)} cannot migrate to Flink {done.to}")
    else:
        print(f"wrote Flink {done.to} savepoint {done.output}"
              f"{', Snappy-compressed' if done.compressed else ''} in {done.seconds:.1f} s"
              + (f"; left out {len(done.unmigratable)} of {len(done.states)} states"
                 if done.unmigratable else ""))

"""``statesource diff A B``: per keyed state, what changed from checkpoint A to checkpoint B.

A and B are two checkpoints of one statesource root, or two Flink snapshots of
one job (retained checkpoints or savepoints).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from statesource.errors import IncompatibleCheckpointError, StateSourceError
from statesource.flink.operations.changefeed import FlinkChangeFeed, open_flink_snapshot
from statesource.flink.reader import FlinkCheckpoint
from statesource.format import Checkpoint
from statesource.format.changefeed import ChangeFeed, KeyGroupChangeFeed
from statesource.format.metadata import OperatorMeta
from statesource.format.source import FLINK
from statesource.format.storage import resolve
from statesource.sources import kind_of


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "diff", help="count inserts, updates and deletes per state between two checkpoints",
        description="Compare two checkpoints of one root: per keyed state, the inserts,"
        " updates and deletes of the change feed (per entry; per element for list state,"
        " per user key for map state) and the key groups that changed. Key groups whose"
        " bytes both checkpoints share are not read.")
    parser.add_argument("start", help="the earlier checkpoint directory (chk-<id>), or Flink"
                        " snapshot (a directory holding _metadata)")
    parser.add_argument("end", help="the later checkpoint directory of the same root, or Flink"
                        " snapshot of the same job")
    parser.add_argument("--operator", help="only this operator (default: all)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    flink = [kind_of(resolve(path)) == FLINK for path in (args.start, args.end)]
    operators: list[OperatorMeta]
    feed_of: Callable[[str, str], KeyGroupChangeFeed]
    failures: list[str] = []
    if any(flink):
        if not all(flink):
            raise IncompatibleCheckpointError(
                f"{args.start if flink[0] else args.end} is a Flink snapshot but"
                f" {args.end if flink[0] else args.start} is not: compare two Flink snapshots,"
                " or import the Flink one first (statesource import-flink)")
        flink_start = FlinkCheckpoint(open_flink_snapshot(args.start))
        flink_end = FlinkCheckpoint(open_flink_snapshot(args.end))
        operators = [flink_end.operator(args.operator)] if args.operator else []
        for op in () if args.operator else flink_end.snapshot.operators:
            # an operator whose keyed state does not decode fails alone, reported at the end
            reason = flink_end.snapshot.undecodable(op)
            if reason is None:
                operators.append(flink_end.operator(op.operator_id))
            else:
                failures.append(f"operator {op.label!r} not compared: {reason}")
        feed_of = lambda uid, state: FlinkChangeFeed(  # noqa: E731
            flink_start, flink_end, operator=uid, state=state)
        print(f"changes from Flink checkpoint {flink_start.checkpoint_id} ({flink_start.location})"
              f" to Flink checkpoint {flink_end.checkpoint_id} ({flink_end.location})")
    else:
        start, end = Checkpoint.open(args.start), Checkpoint.open(args.end)
        operators = [end.operator(args.operator)] if args.operator else list(end.metadata.operators)
        feed_of = lambda uid, state: ChangeFeed(start, end, operator=uid, state=state)  # noqa: E731
        print(f"changes from checkpoint {start.checkpoint_id} to checkpoint {end.checkpoint_id}"
              f" under {end.root}")
    for meta in operators:
        if not meta.keyed_states:
            continue
        print(f"\noperator {meta.uid}")
        print(f"  {'state':<20} {'inserts':>9} {'updates':>9} {'deletes':>9}  key groups"
              " changed (of those read)")
        for state in meta.keyed_states:
            try:
                counts = feed_of(meta.uid, state.name).counts()
            except StateSourceError as error:
                # One unreadable state (a Flink native snapshot's Kryo values, an operator
                # that does not decode at the start) must not hide the others: it is reported
                # in its place, and the command fails at the end.
                print(f"  {state.name:<20} not compared (see the error below)")
                failures.append(f"state {state.name!r} of operator {meta.uid!r}: {error}")
                continue
            print(f"  {state.name:<20} {counts.inserts:>9,} {counts.updates:>9,}"
                  f" {counts.deletes:>9,}  {len(counts.key_groups)} (of"
                  f" {counts.read_key_groups}): {_spans(counts.key_groups) or '-'}")
    for failure in failures:
        print(f"statesource diff: error: {failure}", file=sys.stderr)
    return 1 if failures else 0


def _spans(key_groups: tuple[int, ...]) -> str:
    """``0-3, 7, 9-10``: ascending key groups as runs."""
    runs: list[list[int]] = []
    for key_group in key_groups:
        if runs and runs[-1][1] == key_group - 1:
            runs[-1][1] = key_group
        else:
            runs.append([key_group, key_group])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)

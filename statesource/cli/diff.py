"""``statesource diff A B``: per keyed state, what changed from checkpoint A to checkpoint B.

A and B are two checkpoints of one statesource root, or two Flink snapshots of
one job (retained checkpoints or savepoints).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from statesource.cli.output import add_json_option, emit
from statesource.errors import IncompatibleCheckpointError, StateSourceError
from statesource.flink.operations.changefeed import FlinkChangeFeed, open_flink_snapshot
from statesource.flink.reader import FlinkCheckpoint
from statesource.format import Checkpoint
from statesource.format.changefeed import ChangeFeed, KeyGroupChangeFeed
from statesource.format.metadata import OperatorMeta
from statesource.format.source import FLINK, StateSource
from statesource.format.storage import redacted, resolve
from statesource.sources import kind_of

FAILED = 2
"""The exit status of a diff that failed, in whole or for some state: 1 says that something
changed, as with diff(1)."""


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "diff", help="count inserts, updates and deletes per state between two checkpoints",
        description="Compare two checkpoints of one root: per keyed state, the inserts,"
        " updates and deletes of the change feed (per entry; per element for list state,"
        " per user key for map state) and the key groups that changed. Key groups whose"
        " bytes both checkpoints share are not read. Exit status: 0 when nothing changed,"
        f" 1 when something did, {FAILED} when a state could not be compared.")
    parser.add_argument("start", help="the earlier checkpoint directory (chk-<id>), or Flink"
                        " snapshot (a directory holding _metadata)")
    parser.add_argument("end", help="the later checkpoint directory of the same root, or Flink"
                        " snapshot of the same job")
    parser.add_argument("--operator", help="only this operator, by uid, hex id or unique name"
                        " (default: all)")
    add_json_option(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    compared = _compare(args.start, args.end, args.operator)
    changed = any(s.get("inserts") or s.get("updates") or s.get("deletes")
                  for op in compared.operators for s in op["states"])
    if args.json:
        emit({"kind": compared.kind, "start": compared.start, "end": compared.end,
              "changed": changed, "operators": compared.operators,
              "errors": compared.failures})
    else:
        _print(compared)
    if compared.failures:
        return FAILED
    return 1 if changed else 0


@dataclass(frozen=True)
class _Comparison:
    """What ``diff`` found, as its JSON document says it."""

    kind: str
    start: dict[str, Any]
    end: dict[str, Any]
    title: str
    operators: list[dict[str, Any]]
    failures: list[str]


def _compare(start_path: str, end_path: str, operator: str | None) -> _Comparison:
    flink = [kind_of(resolve(path)) == FLINK for path in (start_path, end_path)]
    operators: list[OperatorMeta]
    feed_of: Callable[[str, str], KeyGroupChangeFeed]
    failures: list[str] = []
    if any(flink):
        if not all(flink):
            raise IncompatibleCheckpointError(
                f"{start_path if flink[0] else end_path} is a Flink snapshot but"
                f" {end_path if flink[0] else start_path} is not: compare two Flink snapshots,"
                " or import the Flink one first (statesource import-flink)")
        flink_start = FlinkCheckpoint(open_flink_snapshot(start_path))
        flink_end = FlinkCheckpoint(open_flink_snapshot(end_path))
        operators = [flink_end.operator(operator)] if operator else []
        for op in () if operator else flink_end.snapshot.operators:
            # an operator whose keyed state does not decode fails alone, reported at the end
            reason = flink_end.snapshot.undecodable(op)
            if reason is None:
                operators.append(flink_end.operator(op.operator_id))
            else:
                failures.append(f"operator {op.label!r} not compared: {reason}")
        feed_of = lambda uid, state: FlinkChangeFeed(  # noqa: E731
            flink_start, flink_end, operator=uid, state=state)
        ends: tuple[StateSource, StateSource] = (flink_start, flink_end)
        title = (f"changes from Flink checkpoint {flink_start.checkpoint_id}"
                 f" ({flink_start.location}) to Flink checkpoint {flink_end.checkpoint_id}"
                 f" ({flink_end.location})")
    else:
        start, end = Checkpoint.open(start_path), Checkpoint.open(end_path)
        operators = [end.operator(operator)] if operator else list(end.metadata.operators)
        feed_of = lambda uid, state: ChangeFeed(start, end, operator=uid, state=state)  # noqa: E731
        ends = (start, end)
        title = (f"changes from checkpoint {start.checkpoint_id} to checkpoint"
                 f" {end.checkpoint_id} under {end.root}")
    compared = []
    for meta in operators:
        if meta.keyed_states:
            states = [_state(feed_of, meta.uid, state.name, failures)
                      for state in meta.keyed_states]
            compared.append({"uid": meta.uid, "states": states})
    start_end = [{"checkpoint_id": e.checkpoint_id, "location": str(e.location)} for e in ends]
    return _Comparison("flink" if any(flink) else "statesource", start_end[0], start_end[1],
                       title, compared, failures)


def _state(feed_of: Callable[[str, str], KeyGroupChangeFeed], uid: str, name: str,
           failures: list[str]) -> dict[str, Any]:
    try:
        counts = feed_of(uid, name).counts()
    except StateSourceError as error:
        # One unreadable state (a Flink native snapshot's Kryo values, an operator that does
        # not decode at the start) must not hide the others: it is reported in its place,
        # and the command fails at the end.
        failures.append(f"state {name!r} of operator {uid!r}: {error}")
        return {"name": name, "error": str(error)}
    return {"name": name, "inserts": counts.inserts, "updates": counts.updates,
            "deletes": counts.deletes, "key_groups_changed": list(counts.key_groups),
            "key_groups_read": counts.read_key_groups}


def _print(compared: _Comparison) -> None:
    print(compared.title)
    for op in compared.operators:
        print(f"\noperator {op['uid']}")
        print(f"  {'state':<20} {'inserts':>9} {'updates':>9} {'deletes':>9}  key groups"
              " changed (of those read)")
        for s in op["states"]:
            if "error" in s:
                print(f"  {s['name']:<20} not compared (see the error below)")
            else:
                print(f"  {s['name']:<20} {s['inserts']:>9,} {s['updates']:>9,}"
                      f" {s['deletes']:>9,}  {len(s['key_groups_changed'])} (of"
                      f" {s['key_groups_read']}): {_spans(s['key_groups_changed']) or '-'}")
    for failure in compared.failures:
        print(f"statesource diff: error: {redacted(failure)}", file=sys.stderr)


def _spans(key_groups: Sequence[int]) -> str:
    """``0-3, 7, 9-10``: ascending key groups as runs."""
    runs: list[list[int]] = []
    for key_group in key_groups:
        if runs and runs[-1][1] == key_group - 1:
            runs[-1][1] = key_group
        else:
            runs.append([key_group, key_group])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)

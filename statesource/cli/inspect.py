"""``statesource inspect``: what a checkpoint holds and how evenly, without Spark."""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from statesource.checks import check_int
from statesource.cli.output import add_json_option, emit, progress
from statesource.errors import InvalidArgumentError
from statesource.flink.operations.census import count_snapshot
from statesource.flink.reader import FlinkCheckpoint
from statesource.format import Checkpoint
from statesource.format.metadata import OperatorMeta
from statesource.format.source import FLINK
from statesource.format.storage import check_creatable, resolve
from statesource.plot import require_matplotlib
from statesource.rescale import check_parallelism_for
from statesource.skew import (
    Distribution,
    KeyGroupBalance,
    OperatorCounts,
    describe_per_subtask,
    format_bytes,
    imbalance,
)
from statesource.sources import kind_of


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "inspect", help="summarise a checkpoint: states, sizes, key-group skew",
        description="Summarise a checkpoint from its metadata: operators, states, entries,"
        " bytes, and how state spreads over key groups and subtasks. A Flink savepoint or"
        " checkpoint records none of these counts: its key groups are decoded to count them.")
    parser.add_argument("path", help="a checkpoint, or a directory of checkpoints (newest used);"
                        " also a Flink savepoint or checkpoint")
    parser.add_argument("--checkpoint-id", type=int, help="a checkpoint under PATH")
    parser.add_argument("--parallelism", type=int,
                        help="also show how a job with this parallelism would split the state,"
                        " and whether the max parallelism suits it")
    parser.add_argument("--plot", metavar="FILE.png",
                        help="draw state per key group and per subtask (needs matplotlib;"
                        f" formats: {', '.join(PLOT_FORMATS)})")
    parser.add_argument("--verify", action="store_true",
                        help="read every byte range of every data file and check it against"
                        " its checksum and the metadata (by default only the files' presence"
                        " and sizes are checked); a Flink snapshot's key groups are always"
                        " decoded whole, to count them, which checks their framing")
    add_json_option(parser)
    parser.set_defaults(run=run)


PLOT_FORMATS = ("png", "pdf", "svg", "jpg", "jpeg")


def check_arguments(args: argparse.Namespace) -> None:
    """Refuse bad arguments before reading a checkpoint, let alone drawing it."""
    if args.parallelism is not None:
        check_int(args.parallelism, "--parallelism", 1)
    if args.plot:
        extension = os.path.splitext(args.plot)[1].lstrip(".").lower()
        if extension not in PLOT_FORMATS:
            raise InvalidArgumentError(
                f"--plot {args.plot}: the file name must end in one of"
                f" {', '.join('.' + f for f in PLOT_FORMATS)}")
        directory = os.path.dirname(os.path.abspath(args.plot))
        if not os.path.isdir(directory):
            found = "is a file, not a directory" if os.path.exists(directory) else "does not exist"
            raise InvalidArgumentError(f"--plot {args.plot}: {directory} {found}")
        check_creatable(resolve(directory), "--plot directory")
        require_matplotlib()


def run(args: argparse.Namespace) -> int:
    check_arguments(args)
    if kind_of(resolve(args.path), args.checkpoint_id) == FLINK:
        report = flink_report(FlinkCheckpoint.open(args.path, checkpoint_id=args.checkpoint_id),
                              args.parallelism, args.verify)
    else:
        report = checkpoint_report(Checkpoint.open(args.path, checkpoint_id=args.checkpoint_id),
                                   args.parallelism, args.verify)
    if args.json:
        plots = _plot(report, args.parallelism, args.plot, progress(args)) if args.plot else []
        emit(report.document(args.parallelism, plots))
        return 0
    print(report.title)
    for op in report.operators:
        print_operator(op, args.parallelism)
    print()
    for line in report.checked:
        print(line)
    if args.plot:
        _plot(report, args.parallelism, args.plot, print)
    return 0


def _plot(report: Report, proposed: int | None, path: str, say: Callable[[str], None]
          ) -> list[str]:
    """Draw every operator with keyed state; the files written."""
    keyed = [op for op in report.operators if op.distribution is not None]
    if not keyed:
        say("nothing to plot: no operator has keyed state")
        return []
    from statesource.plot import plot_distribution

    written = []
    for op in keyed:
        target = path if len(keyed) == 1 else _suffixed(path, op.uid)
        plot_distribution(op, proposed, target)
        say(f"wrote {target}")
        written.append(target)
    return written


@dataclass(frozen=True)
class Report:
    """What ``inspect`` prints of a snapshot, whatever its kind."""

    title: str
    operators: tuple[OperatorCounts, ...]
    checked: tuple[str, ...]
    """What was checked of the snapshot's files, and how."""
    snapshot: dict[str, Any]
    """What the JSON document says of the snapshot itself: its kind, id, location (and a
    statesource checkpoint's format version and time)."""

    def document(self, proposed: int | None, plots: list[str]) -> dict[str, Any]:
        """The ``--json`` document (docs/CLI.md)."""
        return {**self.snapshot,
                "operators": [_operator_document(op, proposed) for op in self.operators],
                "checked": list(self.checked), "plots": plots}


def _operator_document(op: OperatorCounts, proposed: int | None) -> dict[str, Any]:
    skew = None
    if op.distribution is not None:
        amounts = op.skew_amounts
        subtasks = []
        for parallelism in dict.fromkeys(p for p in (op.parallelism, proposed) if p):
            balance = KeyGroupBalance(op.max_parallelism, parallelism)
            subtasks.append({"parallelism": parallelism, "now": parallelism == op.parallelism,
                             "per_subtask": op.distribution.per_subtask(amounts, parallelism),
                             "key_groups_per_subtask": [balance.fewest, balance.most]})
        skew = {"by": op.skew_by, "of": op.skew_of, "per_key_group": amounts,
                "subtasks": subtasks}
    unnamed = op.operator_id is not None and op.uid == op.operator_id  # no uid: a 1.x snapshot
    return {"uid": None if unnamed else op.uid, "name": op.name, "operator_id": op.operator_id,
            "parallelism": op.parallelism, "max_parallelism": op.max_parallelism,
            "key_type": op.key_type,
            "states": [{"name": s.name, "kind": s.kind, "entries": s.entries, "rows": s.rows,
                        "bytes": s.size_bytes, "types": dict(s.types),
                        "unreadable": s.unreadable} for s in op.states],
            "skew": skew, "notes": list(op.notes)}


def checkpoint_report(checkpoint: Checkpoint, proposed: int | None, verify: bool) -> Report:
    """A statesource checkpoint, counted by its metadata."""
    meta = checkpoint.metadata
    for op in meta.operators:
        if op.keyed_states and proposed is not None:
            check_parallelism_for(op, proposed)
    files = checkpoint.check_files()
    ranges = checkpoint.verify() if verify else None
    taken = datetime.fromtimestamp(meta.timestamp_ms / 1000, timezone.utc)
    title = (f"checkpoint {meta.checkpoint_id} at {checkpoint.location}"
             f" (format v{meta.format_version}, taken {taken:%Y-%m-%d %H:%M:%S} UTC)")
    if ranges is None:
        checked = (f"{files} data files present with their recorded sizes; their contents were"
                   " not read (--verify checks every byte range)")
    else:
        checked = (f"verified: {files} data files, {ranges:,} byte ranges match their checksums"
                   " and the metadata")
    return Report(title, tuple(OperatorCounts.of(op) for op in meta.operators), (checked,),
                  {"kind": "statesource", "checkpoint_id": meta.checkpoint_id,
                   "location": str(checkpoint.location), "format_version": meta.format_version,
                   "timestamp_ms": meta.timestamp_ms})


def flink_report(checkpoint: FlinkCheckpoint, proposed: int | None, verify: bool) -> Report:
    """A Flink snapshot, counted by decoding every key group once (progress on stderr)."""
    snapshot = checkpoint.snapshot
    if proposed is not None:
        for op in snapshot.operators:
            if snapshot.keyed_handles(op):
                check_parallelism_for(OperatorMeta(op.label, op.parallelism, op.max_parallelism,
                                                   None, (), ()), proposed)
    files = snapshot.check_files()
    counted = count_snapshot(checkpoint, DecodingProgress())
    decoded = (f"{counted.key_groups:,} key groups ({format_bytes(counted.key_group_bytes)})"
               " decoded")
    if verify:
        checked = [f"verified: {files} files present with their recorded sizes, {decoded}:"
                   " their framing holds (Flink's files carry no checksums to compare)"]
    else:
        checked = [f"{files} files present with their recorded sizes; {decoded} to count"
                   " them, which checks their framing (--verify checks nothing more in a Flink"
                   " snapshot)"]
    if counted.unchecked:
        checked.append("not decoded, so neither counted nor checked: "
                       + "; ".join(counted.unchecked))
    return Report(f"Flink snapshot {checkpoint.checkpoint_id} at {checkpoint.location}",
                  counted.operators, tuple(checked),
                  {"kind": "flink", "checkpoint_id": checkpoint.checkpoint_id,
                   "location": str(checkpoint.location), "format_version": None,
                   "timestamp_ms": None})


PROGRESS_AFTER_SECONDS = 2.0
PROGRESS_EVERY_SECONDS = 5.0


class DecodingProgress:
    """Reports decoding on stderr once it has taken a while, then every few seconds."""

    def __init__(self) -> None:
        self._next = time.monotonic() + PROGRESS_AFTER_SECONDS
        self._shown: str | None = None

    def __call__(self, label: str, done: int, total: int, done_bytes: int,
                 total_bytes: int) -> None:
        now = time.monotonic()
        if now < self._next and not (done == total and self._shown == label):
            return
        print(f"decoding operator {label}: {done:,} of {total:,} key groups"
              f" ({format_bytes(done_bytes)} of {format_bytes(total_bytes)})",
              file=sys.stderr, flush=True)
        self._next = now + PROGRESS_EVERY_SECONDS
        self._shown = None if done == total else label


def print_operator(op: OperatorCounts, proposed: int | None) -> None:
    print(f"\noperator {op.label}: parallelism {op.parallelism}, max parallelism"
          f" {op.max_parallelism}, key type {op.key_type or 'none'}")
    if op.states:
        width = max(20, *(len(s.name) for s in op.states))
        print(f"  {'state':<{width}} {'kind':<18} {'entries':>11} {'rows':>11} {'bytes':>10}"
              "  types")
    for s in op.states:
        print(f"  {s.name:<{width}} {s.kind:<18} {_count(s.entries):>11} {_count(s.rows):>11}"
              f" {'-' if s.size_bytes is None else format_bytes(s.size_bytes):>10}"
              f"  {_types(s.types)}")
        if s.unreadable is not None:
            print(f"  {'':<{width}} not counted: {s.unreadable}")
    if op.distribution is not None:
        _print_skew(op, op.distribution, proposed)
    for note in op.notes:
        print(f"  {note}")


def _print_skew(op: OperatorCounts, distribution: Distribution, proposed: int | None) -> None:
    per_group = op.skew_amounts
    heaviest = sorted(range(len(per_group)), key=lambda kg: -per_group[kg])[:3]
    print(f"  key-group skew ({op.skew_of}): min {min(per_group):,}, median"
          f" {statistics.median(per_group):,.0f}, max {max(per_group):,}"
          f" (max/mean {imbalance(per_group):.2f}); heaviest key groups: "
          + ", ".join(f"{kg} ({per_group[kg]:,})" for kg in heaviest))
    for parallelism in dict.fromkeys(p for p in (op.parallelism, proposed) if p):
        totals = distribution.per_subtask(per_group, parallelism)
        label = "now" if parallelism == op.parallelism else "proposed"
        print(f"  {op.skew_by} per subtask at parallelism {parallelism} ({label}):"
              f" {describe_per_subtask(totals)}")
        print(f"  key groups per subtask at parallelism {parallelism}:"
              f" {KeyGroupBalance(op.max_parallelism, parallelism).describe()}")


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _types(avro: Mapping[str, Any]) -> str:
    return ", ".join(f"{role}={json.dumps(schema)}" for role, schema in avro.items())


def _suffixed(path: str, uid: str) -> str:
    stem, dot, extension = path.rpartition(".")
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", uid)
    return f"{stem}-{safe}.{extension}" if dot else f"{path}-{safe}"

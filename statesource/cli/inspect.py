"""``statesource inspect``: what a checkpoint holds and how evenly, without Spark."""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections.abc import Mapping
from datetime import datetime, timezone

from statesource.checks import check_int
from statesource.errors import InvalidArgumentError
from statesource.flink.reader import FlinkCheckpoint
from statesource.format import Checkpoint
from statesource.format.metadata import OperatorMeta
from statesource.format.source import FLINK
from statesource.format.storage import resolve
from statesource.plot import require_matplotlib
from statesource.rescale import check_parallelism_for
from statesource.schema import ValueSchema
from statesource.skew import Distribution, KeyGroupBalance, describe_per_subtask, imbalance
from statesource.sources import kind_of


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "inspect", help="summarise a checkpoint: states, sizes, key-group skew",
        description="Summarise a checkpoint from its metadata: operators, states, entries,"
        " bytes, and how state spreads over key groups and subtasks.")
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
                        " and sizes are checked)")
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
            raise InvalidArgumentError(f"--plot {args.plot}: directory {directory} does not"
                                       " exist")
        require_matplotlib()


def run(args: argparse.Namespace) -> int:
    check_arguments(args)
    if kind_of(resolve(args.path), args.checkpoint_id) == FLINK:
        return inspect_flink(FlinkCheckpoint.open(args.path, checkpoint_id=args.checkpoint_id))
    checkpoint = Checkpoint.open(args.path, checkpoint_id=args.checkpoint_id)
    meta = checkpoint.metadata
    for op in meta.operators:
        if op.keyed_states and args.parallelism is not None:
            check_parallelism_for(op, args.parallelism)
    files = checkpoint.check_files()
    ranges = checkpoint.verify() if args.verify else None
    taken = datetime.fromtimestamp(meta.timestamp_ms / 1000, timezone.utc)
    print(f"checkpoint {meta.checkpoint_id} at {checkpoint.location.path}"
          f" (format v{meta.format_version}, taken {taken:%Y-%m-%d %H:%M:%S} UTC)")
    keyed = [op for op in meta.operators if op.keyed_states]
    for op in meta.operators:
        print_operator(op, args.parallelism)
    if ranges is None:
        print(f"\n{files} data files present with their recorded sizes; their contents were"
              " not read (--verify checks every byte range)")
    else:
        print(f"\nverified: {files} data files, {ranges:,} byte ranges match their checksums"
              " and the metadata")
    if args.plot:
        if not keyed:
            print("nothing to plot: no operator has keyed state")
            return 0
        from statesource.plot import plot_distribution

        for op in keyed:
            path = args.plot if len(keyed) == 1 else _suffixed(args.plot, op.uid)
            plot_distribution(op, args.parallelism, path)
            print(f"wrote {path}")
    return 0


def inspect_flink(snapshot: FlinkCheckpoint) -> int:
    """A Flink snapshot from its headers: operators, states and types (sizes need a full read)."""
    print(f"Flink snapshot {snapshot.checkpoint_id} at {snapshot.location.path}")
    by_operator: dict[str, list] = {}
    for summary in snapshot.summaries():
        by_operator.setdefault(summary.operator_uid, []).append(summary)
    for op in snapshot.snapshot.operators:
        label = op.label + (f" ({op.name})" if op.name and op.name != op.uid else "")
        rows = by_operator.get(op.label, [])
        key_type = next((r.key_type for r in rows if r.key_type), "none")
        print(f"\noperator {label}: parallelism {op.parallelism}, max parallelism"
              f" {op.max_parallelism}, key type {key_type}")
        unreadable = snapshot.unreadable_states(op.operator_id)
        for row in rows:
            print(f"  {row.state_name:<36} {row.kind:<18} {json.dumps(row.value_types)}")
            if row.state_name in unreadable and row.key_type is not None:
                print(f"  {'':<36} not readable here: {unreadable[row.state_name]}")
    return 0


def print_operator(op: OperatorMeta, proposed: int | None) -> None:
    key_type = op.key_type.name if op.key_type else "none"
    print(f"\noperator {op.uid}: parallelism {op.parallelism}, max parallelism"
          f" {op.max_parallelism}, key type {key_type}")
    rows = [(s.name, s.kind.value, s.entries, s.rows, s.size_bytes, _types(s.schemas))
            for s in op.keyed_states]
    rows += [(s.name, f"operator-{s.mode.value}", s.rows, s.rows, s.size_bytes,
              _types(s.schemas)) for s in op.operator_states]
    print(f"  {'state':<20} {'kind':<18} {'entries':>11} {'rows':>11} {'bytes':>10}  types")
    for name, kind, entries, count, size, types in rows:
        print(f"  {name:<20} {kind:<18} {entries:>11,} {count:>11,} {_bytes(size):>10}  {types}")
    if not op.keyed_states:
        return
    distribution = Distribution.of(op)
    per_group = distribution.rows
    heaviest = sorted(range(len(per_group)), key=lambda kg: -per_group[kg])[:3]
    print(f"  key-group skew (rows of all keyed states): min {min(per_group):,}, median"
          f" {statistics.median(per_group):,.0f}, max {max(per_group):,}"
          f" (max/mean {imbalance(per_group):.2f}); heaviest key groups: "
          + ", ".join(f"{kg} ({per_group[kg]:,})" for kg in heaviest))
    for parallelism in dict.fromkeys(p for p in (op.parallelism, proposed) if p):
        totals = distribution.per_subtask(per_group, parallelism)
        label = "now" if parallelism == op.parallelism else "proposed"
        print(f"  rows per subtask at parallelism {parallelism} ({label}):"
              f" {describe_per_subtask(totals)}")
        print(f"  key groups per subtask at parallelism {parallelism}:"
              f" {KeyGroupBalance(op.max_parallelism, parallelism).describe()}")


def _types(schemas: Mapping[str, ValueSchema]) -> str:
    return ", ".join(f"{role}={json.dumps(s.avro)}" for role, s in schemas.items())


def _bytes(size: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def _suffixed(path: str, uid: str) -> str:
    stem, dot, extension = path.rpartition(".")
    return f"{stem}-{uid}.{extension}" if dot else f"{path}-{uid}"

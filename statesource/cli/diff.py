"""``statesource diff A B``: per keyed state, what changed from checkpoint A to checkpoint B."""

from __future__ import annotations

import argparse

from statesource.format import Checkpoint
from statesource.format.changefeed import ChangeFeed


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "diff", help="count inserts, updates and deletes per state between two checkpoints",
        description="Compare two checkpoints of one root: per keyed state, the inserts,"
        " updates and deletes of the change feed (per entry; per element for list state,"
        " per user key for map state) and the key groups that changed. Key groups whose"
        " bytes both checkpoints share are not read.")
    parser.add_argument("start", help="the earlier checkpoint directory (chk-<id>)")
    parser.add_argument("end", help="the later checkpoint directory of the same root")
    parser.add_argument("--operator", help="only this operator (default: all)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    start = Checkpoint.open(args.start)
    end = Checkpoint.open(args.end)
    operators = [end.operator(args.operator)] if args.operator else end.metadata.operators
    feeds = {op.uid: [ChangeFeed(start, end, operator=op.uid, state=state.name)
                      for state in op.keyed_states] for op in operators if op.keyed_states}
    print(f"changes from checkpoint {start.checkpoint_id} to checkpoint {end.checkpoint_id}"
          f" under {end.root}")
    for uid, state_feeds in feeds.items():
        print(f"\noperator {uid}")
        print(f"  {'state':<20} {'inserts':>9} {'updates':>9} {'deletes':>9}  key groups"
              " changed (of those read)")
        for feed in state_feeds:
            counts, state = feed.counts(), feed.end_state
            print(f"  {state.name:<20} {counts.inserts:>9,} {counts.updates:>9,}"
                  f" {counts.deletes:>9,}  {len(counts.key_groups)} (of"
                  f" {counts.read_key_groups}): {_spans(counts.key_groups) or '-'}")
    return 0


def _spans(key_groups: tuple[int, ...]) -> str:
    """``0-3, 7, 9-10``: ascending key groups as runs."""
    runs: list[list[int]] = []
    for key_group in key_groups:
        if runs and runs[-1][1] == key_group - 1:
            runs[-1][1] = key_group
        else:
            runs.append([key_group, key_group])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)

"""Plant realistic bugs one at a time and see whether the tests catch each (not collected).

    python tests/mutation/run.py [--only SUBSTRING]

Each mutant replaces one exact snippet of one module (the snippet must occur
exactly once), runs only the test files that guard that module (``-x``: the
first failure kills the mutant), and restores the source, also on Ctrl-C.
It prints each result and the kill rate; survivors name missing tests.
The modules are those issue 25 changed or named: retention and pins, the
commit, the reader's retirement errors, the reaper, the retain command, the
Flink reader's framing checks, and the Spark writer's task checks.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_SECONDS = 600

RETENTION_TESTS = ("tests/format/test_retention.py", "tests/format/test_shared_files.py")
COMMIT_TESTS = ("tests/format/test_commit_failures.py", "tests/format/test_retention.py",
                "tests/checkpointing/test_incremental.py")
RACES = "tests/races/test_retain_races.py"
WRITER_TESTS = ("tests/test_write_task.py",)
FLINK_TESTS = ("tests/flink/test_reader_checks.py", "tests/flink/test_snappy.py")


@dataclass(frozen=True)
class Mutant:
    module: str
    original: str
    mutated: str
    tests: tuple[str, ...]
    k: str | None = None
    """A ``-k`` expression narrowing the tests (for the slow race tests)."""


MUTANTS = [
    # pins
    Mutant("statesource/format/pins.py",
           "frozenset(check_relative_path(path, source) for path in files))",
           "frozenset(files))", RETENTION_TESTS),
    Mutant("statesource/format/pins.py", "        pin.release()\n        raise",
           "        raise", (RACES,), "before_its_pin or BEFORE_PIN"),
    Mutant("statesource/format/pins.py", "    for candidate in sorted(complete, reverse=True):",
           "    for candidate in sorted(complete, reverse=True)[:0]:", COMMIT_TESTS),
    Mutant("statesource/format/pins.py", "    if missing:\n        path = min(missing)",
           "    if False:\n        path = min(missing)", COMMIT_TESTS),
    # commit
    Mutant("statesource/format/commit.py",
           "        check_still_listed(root, set(foreign) - covered, metadata.checkpoint_id)\n",
           "", COMMIT_TESTS),
    Mutant("statesource/format/commit.py", "            os.fsync(out.fileno())\n", "",
           COMMIT_TESTS),
    Mutant("statesource/format/commit.py", "    sync_directory(target.parent.path)\n", "",
           COMMIT_TESTS),
    Mutant("statesource/format/commit.py", "        except FileExistsError:",
           "        except OSError as _unused:", COMMIT_TESTS + (RACES,),
           "one_wins or one_id or failing_link"),
    Mutant("statesource/format/commit.py",
           "    commit_pin = pin_files(root, metadata.checkpoint_id, foreign) if foreign else None",
           "    commit_pin = None", COMMIT_TESTS + (RACES,),
           "paused_at_publish or rescale or commit_pins"),
    # retention
    Mutant("statesource/format/retention.py", "    protected = live | state.pinned",
           "    protected = live", RETENTION_TESTS),
    Mutant("statesource/format/retention.py", "        if pinned:\n",
           "        if False:\n", RETENTION_TESTS),
    Mutant("statesource/format/retention.py",
           "    expired = [f for f in pin_files if f.mtime < cutoff]",
           "    expired = []", RETENTION_TESTS),
    Mutant("statesource/format/retention.py", "                  if _seconds(info) < cutoff",
           "                  if _seconds(info) > cutoff", RETENTION_TESTS),
    Mutant("statesource/format/retention.py",
           "        _remove_empty_dirs(root.child(owner), unless=busy)\n        report(",
           "        report(", RETENTION_TESTS),
    Mutant("statesource/format/retention.py",
           "if info.base_name.startswith(_TEMPORARY_METADATA)]",
           "if info.base_name.startswith(_TEMPORARY_METADATA) and False]", RETENTION_TESTS),
    Mutant("statesource/format/retention.py",
           "        if checkpoint_id not in pinned_ids:",
           "        if True:", RETENTION_TESTS),
    Mutant("statesource/format/retention.py",
           "                  and (relative := f\"{parent}/{info.base_name}\") not in listed]",
           "                  and (relative := f\"{parent}/{info.base_name}\")]", RETENTION_TESTS),
    Mutant("statesource/format/retention.py", "    for pin_file in expired:\n        _remove(",
           "    for pin_file in expired[:0]:\n        _remove(", RETENTION_TESTS),
    Mutant("statesource/format/retention.py",
           "_orphans(directory, METADATA_FILE, state.listed()))",
           "_orphans(directory, METADATA_FILE, set()))",
           RETENTION_TESTS),
    # the reader's retirement errors
    Mutant("statesource/format/reader.py",
           "        directory.child(RETIRED_FILE).exists() or not directory.exists())",
           "        True)", ("tests/format/test_untrusted_input.py",
                            "tests/format/test_fuzz_untrusted.py") + RETENTION_TESTS),
    Mutant("statesource/format/reader.py",
           "        if file_name == METADATA_FILE and was_retired(directory):",
           "        if False:", (RACES,), "reader"),
    Mutant("statesource/format/reader.py",
           "            if was_retired(self.location):\n                raise retired",
           "            if False:\n                raise retired", (RACES,), "reader"),
    # the reaper and the retain command
    Mutant("statesource/spark/reaper.py", "    _held.append(write_end)",
           "    os.close(write_end)", ("tests/spark/test_reaper.py",), "ignores"),
    Mutant("statesource/spark/reaper.py", "    survivors.update(seen)\n", "",
           ("tests/spark/test_reaper.py",), "ignores"),
    Mutant("statesource/cli/retain.py", '_UNITS = {"s": "seconds", "m": "minutes", "h": "hours",'
           ' "d": "days"}', '_UNITS = {"s": "seconds", "m": "minutes", "h": "hours",'
           ' "d": "hours"}', RETENTION_TESTS),
    # the Flink reader's framing checks
    Mutant("statesource/flink/keyed.py", "            if len(key) < prefix_bytes:",
           "            if len(key) < prefix_bytes - 1:", FLINK_TESTS),
    Mutant("statesource/flink/keyed.py",
           "    if not r.at_end():\n        raise r.error(\"bytes after the end of the key",
           "    if False:\n        raise r.error(\"bytes after the end of the key",
           FLINK_TESTS),
    Mutant("statesource/flink/keyed.py", "    if found != key_group:\n        raise reader.error",
           "    if False:\n        raise reader.error", FLINK_TESTS),
    Mutant("statesource/flink/snappy.py", "    if expected > MAX_CHUNK:",
           "    if expected >= MAX_CHUNK:", FLINK_TESTS),
    # the Spark writer's task
    Mutant("statesource/spark/write/rewrite.py",
           "        if after.key_group_range.start <= before.key_group_range.end:",
           "        if after.key_group_range.start < before.key_group_range.end:", WRITER_TESTS),
    Mutant("statesource/spark/write/task.py", "    if kind is StateKind.LIST or rows.num_rows < 2:",
           "    if kind in (StateKind.LIST, StateKind.MAP) or rows.num_rows < 2:", WRITER_TESTS),
    Mutant("statesource/spark/write/task.py",
           "    if kind not in (StateKind.LIST, StateKind.MAP):",
           "    if kind is not StateKind.LIST:", WRITER_TESTS),
    Mutant("statesource/format/entries.py",
           "    same = pc.or_(pc.fill_null(pc.equal(left, right), False),\n"
           "                  pc.and_(pc.is_null(left), pc.is_null(right)))",
           "    same = pc.fill_null(pc.equal(left, right), False)", WRITER_TESTS),
    Mutant("statesource/spark/write/task.py",
           "    subtasks = operator_indexes(target.max_parallelism, target.parallelism, groups)",
           "    subtasks = groups % target.parallelism", WRITER_TESTS),
]


def run(mutant: Mutant) -> tuple[bool, float]:
    """Plant ``mutant``, run its tests, restore; returns (killed, seconds)."""
    path = REPO / mutant.module
    source = path.read_text()
    if source.count(mutant.original) != 1:
        raise SystemExit(f"{mutant.module}: the snippet occurs {source.count(mutant.original)}"
                         f" times, not once:\n{mutant.original}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO), str(REPO / "statesource" / "spark" / "autoload")])}
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
               *mutant.tests]
    if mutant.k:
        command += ["-k", mutant.k]
    started = time.monotonic()
    try:
        path.write_text(source.replace(mutant.original, mutant.mutated))
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=TIMEOUT_SECONDS, check=False)
        killed = done.returncode != 0
    except subprocess.TimeoutExpired:
        killed = True
    finally:
        path.write_text(source)
    return killed, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run the mutants whose module contains this")
    args = parser.parse_args()
    mutants = [m for m in MUTANTS if args.only is None or args.only in m.module]
    survivors = []
    for index, mutant in enumerate(mutants, 1):
        killed, seconds = run(mutant)
        shown = mutant.mutated.strip().splitlines()
        first_line = shown[0] if shown else "(removed)"
        print(f"[{index}/{len(mutants)}] {'killed ' if killed else 'SURVIVED'} {seconds:5.0f}s"
              f" {mutant.module}: {first_line[:70]}", flush=True)
        if not killed:
            survivors.append(mutant)
    killed_count = len(mutants) - len(survivors)
    print(f"killed {killed_count} of {len(mutants)} ({100 * killed_count / len(mutants):.0f}%)")
    for mutant in survivors:
        print(f"survivor: {mutant.module}: {mutant.original.strip()!r}"
              f" -> {mutant.mutated.strip()!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

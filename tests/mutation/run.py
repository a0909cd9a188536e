"""Plant realistic bugs one at a time and see whether the tests catch each (not collected).

    python tests/mutation/run.py [--only SUBSTRING] [--writers] [--deselect-failing]
                                 [--start POSITION]

Each mutant replaces one exact snippet of one module (the snippet must occur
exactly once), runs only the test files that guard that module (``-x``: the
first failure kills the mutant), and restores the source, also on Ctrl-C.
It prints each result and the kill rate; survivors name missing tests.
The modules are those issue 25 changed or named (retention and pins, the
commit, the reader's retirement errors, the reaper, the retain command, the
Flink reader's framing checks, the Spark writer's task checks, pushdown and the
JVM plan) and the rest of wave 3: the Flink savepoint target (target, staged
sections, section framing, the rewrite's edit plan), delta runs (their metadata
and validation, the incremental writer's choice of base) and the driver-side
steps; and the savepoint writers of issue 39 (``--writers``: ``WRITER_MODULES``). A mutant
whose snippet no longer occurs exactly once (the code moved on)
is reported as stale, not run, and left out of the rate. The last full run's
result is in tests/mutation/README.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_SECONDS = 600
_NOT_RUN = (4, 5)
"""pytest's exit codes for a usage error and for no test collected."""

RETENTION_TESTS = ("tests/format/test_retention.py", "tests/format/test_shared_files.py")
COMMIT_TESTS = ("tests/format/test_commit_failures.py", "tests/format/test_retention.py",
                "tests/checkpointing/test_incremental.py")
RACES = "tests/races/test_retain_races.py"
SPARK_RACES = "tests/races/test_spark_write_races.py"
WRITER_TESTS = ("tests/test_write_task.py",)
STAGED = "statesource/flink/operations/staged.py"
SAVEPOINT_TARGET = "statesource/flink/operations/savepoint_target.py"
FLINK_RESCALE = "statesource/flink/operations/rescale.py"
SAVEPOINT_PLAN = "statesource/flink/operations/savepoint_plan.py"
NATIVE_LAYOUT = "statesource/flink/layouts/native.py"
CANONICAL_WRITER = "statesource/flink/layouts/canonical_writer.py"
KEYED = "statesource/flink/layouts/keyed.py"
FLINK_TESTS = ("tests/flink/layouts/test_reader_checks.py", "tests/flink/binary/test_snappy.py")
TARGET_TESTS = ("tests/flink/operations/test_flink_target.py",)
FRAMING_TESTS = TARGET_TESTS + ("tests/flink/operations/test_flink_savepoint_writes.py",)
DELTA_TESTS = ("tests/checkpointing/test_deltas.py",)
V4_TESTS = DELTA_TESTS + ("tests/format/test_v4_checkpoints.py",)
RECORDER_TESTS = ("tests/state/test_statemap.py", "tests/state/test_statemap_stateful.py")
DELTA_K = "malformed or version or metadata or chain"
BASE_TESTS = ("tests/checkpointing/test_incremental_base.py",
              "tests/checkpointing/test_ttl_cutoff.py")
DRIVER_TESTS = ("tests/test_driver_steps.py",)
EDIT = "statesource/flink/operations/edit.py"
WRITING = "statesource/flink/operations/savepoint_writing.py"
EXPORT = "statesource/flink/operations/export.py"
MIGRATE = "statesource/flink/operations/migrate.py"
PUBLISH = "statesource/flink/snapshot/publish.py"
WRITER_MODULES = (FLINK_RESCALE, EDIT, SAVEPOINT_PLAN, SAVEPOINT_TARGET, WRITING, STAGED, EXPORT,
                  MIGRATE, PUBLISH)
"""The savepoint writers (``--writers``): the eight modules of a rewrite, an edit, a Spark
write into a savepoint, an export and a migration, and the publish protocol they share."""
WRITES = "tests/flink/operations/test_flink_savepoint_writes.py"
COPIED = "tests/flink/operations/test_copied_inputs.py"
GUARDS = "tests/flink/operations/test_writer_guards.py"
LEGACY_TIMERS = "statesource/flink/layouts/legacy_timers.py"
HEAP_TIMERS = ("tests/flink/rocksdb/test_legacy_timers.py",
               "tests/flink/test_rocksdb_incremental_checkpoints.py")
OS_FAILURES = "tests/flink/operations/test_os_failures.py"
COMPRESSED = "tests/flink/operations/test_compressed_output.py"
ISOLATION = "tests/flink/operations/test_operator_isolation.py"
MIGRATE_TESTS = ("tests/flink/operations/test_migrate.py",
                 "tests/flink/operations/test_migrate_kryo.py")
ONE_X = "tests/flink/operations/test_flink_1x_writes.py"
EDITS_IN_FLINK = "tests/flink/operations/test_flink_savepoint_edits.py"
EXPORT_IN_FLINK = "tests/flink/operations/test_flink_export.py"
PUSHDOWN_TESTS = ("tests/spark/test_scan_key_equality.py",)


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
    Mutant("statesource/format/retention.py",  # references not re-collected after retiring
           "    state = _read_state(root, lambda: pin_directory_files(root))\n"
           "    _finish_retired(root, state, report)",
           "    fresh = _read_state(root, lambda: pin_directory_files(root))\n"
           "    state = _State({i: c for i, c in state.complete.items() if i not in doomed},\n"
           "                   fresh.retired, fresh.pins, fresh.unpublished, fresh.late_retired)\n"
           "    _finish_retired(root, state, report)", RETENTION_TESTS + (RACES,),
           "spares or recollects"),
    Mutant("statesource/format/retention.py",
           "_orphans(directory, METADATA_FILE, state.listed()))",
           "_orphans(directory, METADATA_FILE, set()))",
           RETENTION_TESTS),
    # the reader's retirement errors
    Mutant("statesource/format/metadata_file.py",
           "        directory.child(RETIRED_FILE).exists() or not directory.exists())",
           "        True)", ("tests/format/test_untrusted_input.py",
                            "tests/format/test_fuzz_untrusted.py") + RETENTION_TESTS),
    Mutant("statesource/format/metadata_file.py",
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
    Mutant(KEYED, "            if len(key) < prefix_bytes:",
           "            if len(key) < prefix_bytes - 1:", FLINK_TESTS),
    Mutant(KEYED,
           "    if not r.at_end():\n        raise r.error(\"bytes after the end of the key",
           "    if False:\n        raise r.error(\"bytes after the end of the key",
           FLINK_TESTS),
    Mutant(KEYED, "    if found != key_group:\n        raise reader.error",
           "    if False:\n        raise reader.error", FLINK_TESTS),
    Mutant("statesource/flink/binary/snappy.py", "    if expected > MAX_CHUNK:",
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
    # the other survivors: key/namespace lengths, key-group ranges, v3, TTL, bases
    Mutant(KEYED, "        value >>= 8\n        if not value:",
           "        value >>= 8\n        if value < 1 << 8:",  # a two-byte length cut to one
           ("tests/flink/serializers/test_flink_encoders.py",), "varying_size or encoding_fixture"),
    Mutant("statesource/flink/layouts/columnar.py",
           "            width = 1 + (length >= 1 << 8)",
           "            width = 1 + (length > 1 << 8)", ("tests/flink/layouts/test_columnar.py",),
           "lengths_after"),
    Mutant(NATIVE_LAYOUT, "body = key + variable_int_bytes(len(key))",
           "body = key + variable_int_bytes(len(key))[:1]",
           ("tests/flink/operations/test_flink_savepoint_writes.py",), "convert or null_map"),
    Mutant(NATIVE_LAYOUT,
           "                        null_bytes = _null_value(value.value)",
           "                        null_bytes = b\"\"",
           ("tests/flink/operations/test_flink_savepoint_writes.py",),
           "convert or null_map"),
    Mutant("statesource/flink/snapshot/metadata.py", "        if handle.end >= max_parallelism",
           "        if handle.end > max_parallelism", ("tests/flink/snapshot/test_errors.py",)),
    Mutant("statesource/format/keyed_state_meta.py",
           "        return any(after.key_group_range.start <= before.key_group_range.end",
           "        return any(after.key_group_range.start < before.key_group_range.end",
           ("tests/format/test_checkpoint.py",), "version_written"),
    Mutant("statesource/checkpointing/incremental.py",
           "                                          <= cutoff for path in paths):",
           "                                          < cutoff for path in paths):", BASE_TESTS),
    Mutant("statesource/model.py", "        return now_ms - self.ttl_ms",
           "        return now_ms - self.ttl_ms - 1", BASE_TESTS),
    Mutant("statesource/format/edit.py",
           "        elif (op.key_type, op.max_parallelism) != (key_type, max_parallelism):",
           "        elif op.key_type != key_type:", ("tests/format/test_edit.py",)),
    Mutant("statesource/format/edit.py",
           "        elif not op.keyed_states:\n"
           "            op = dataclasses.replace(op, max_parallelism=max_parallelism)\n",
           "", ("tests/format/test_edit.py",)),
    # pushdown and the JVM plan
    Mutant("statesource/spark/read/pushdown.py",
           "    if key_type not in EXACT_KEY_TYPES:\n        return False", "", PUSHDOWN_TESTS),
    Mutant("statesource/spark/read/pushdown.py",
           "    if attribute is None or len(attribute) != 1:", "    if attribute is None:",
           PUSHDOWN_TESTS),
    Mutant("statesource/spark/jvm/plan.py",
           "        return arrow_type.unit == \"us\" or (top_level and arrow_type.unit == \"ms\")",
           "        return arrow_type.unit in (\"us\", \"ms\")",
           ("tests/jvm/test_plan_contract.py",), "millisecond"),
    # the Flink savepoint target
    Mutant(SAVEPOINT_TARGET, "            if keys != key_type:",
           "            if False:", TARGET_TESTS),
    Mutant(SAVEPOINT_TARGET,
           "            if info is not None:\n"
           "                _check_replaceable(where, info, state)",
           "            if False:\n                _check_replaceable(where, info, state)",
           TARGET_TESTS),
    Mutant(SAVEPOINT_TARGET, "    if existing != state:", "    if False:",
           TARGET_TESTS),
    Mutant(SAVEPOINT_TARGET,
           "    if info.is_timer:\n        raise IncompatibleCheckpointError(f\"{where} is a timer",
           "    if False:\n        raise IncompatibleCheckpointError(f\"{where} is a timer",
           TARGET_TESTS),
    Mutant(SAVEPOINT_TARGET,
           "        self.remove([f for op in self._edit.operators for s in op.keyed_states\n"
           "                     for f in s.files])\n", "", TARGET_TESTS),
    Mutant(SAVEPOINT_TARGET,
           "        dropped = [uid for uid in self._base_operators if self._edit.operator(uid) is"
           " None]", "        dropped: list[str] = []", TARGET_TESTS),
    Mutant(SAVEPOINT_TARGET,
           "            drops = tuple(name for name in before.state_names() if name not in kept)",
           "            drops = ()", TARGET_TESTS),
    Mutant(SAVEPOINT_TARGET,
           "                metadata = dataclasses.replace(rewrite.metadata(operators),\n"
           "                                               checkpoint_id=self.checkpoint_id)",
           "                metadata = rewrite.metadata(operators)", TARGET_TESTS),
    Mutant(SAVEPOINT_TARGET,
           "    infos = tuple(dataclasses.replace(s.info, state_id=i) for i, s in"
           " enumerate(states))", "    infos = tuple(s.info for s in states)", TARGET_TESTS),
    Mutant(SAVEPOINT_TARGET,
           "    handles = writer.write_keyed_files(header, framers, op.max_parallelism,"
           " op.parallelism)", "    handles = writer.write_keyed_files(header, framers,"
           " op.max_parallelism, op.max_parallelism)", TARGET_TESTS),
    Mutant(SAVEPOINT_TARGET, "        skip = prefix_bytes(self.max_parallelism)",
           "        skip = 1", TARGET_TESTS),
    Mutant(SAVEPOINT_TARGET, "                if pairs:  # null values",
           "                if True:  # null values", TARGET_TESTS),
    # staged sections and their framing
    Mutant(STAGED, "        out.flush()\n        os.fsync(out.fileno())",
           "        out.flush()", TARGET_TESTS),
    Mutant(STAGED, "            if len(data) != written.size_bytes:",
           "            if False:", TARGET_TESTS),
    Mutant(STAGED, "                if zlib.crc32(body) != loc.crc32:",
           "                if False:", TARGET_TESTS),
    Mutant(STAGED,
           "    if \"/\" in written.path or \"\\\\\" in written.path or written.path in"
           " (\"\", \".\", \"..\"):", "    if written.path in (\"\", \".\", \"..\"):",
           TARGET_TESTS),
    Mutant(STAGED,
           "        with contextlib.suppress(FileNotFoundError):\n"
           "            os.remove(_inside(directory, written).path)",
           "        with contextlib.suppress(FileNotFoundError):\n"
           "            _inside(directory, written)", TARGET_TESTS),
    Mutant(STAGED,
           "            locations.append(KeyGroupLocation(key_group, 0, 1, size, len(body),",
           "            locations.append(KeyGroupLocation(key_group, 0, 1, size, len(body) - 1,",
           TARGET_TESTS),
    Mutant(CANONICAL_WRITER,
           "    return framer.getvalue()[_SHORT.size:-len(_END)]",
           "    return framer.getvalue()[_SHORT.size:]", FRAMING_TESTS),
    Mutant(CANONICAL_WRITER,
           "        if self._done or state_id in self._sections or not 0 <= state_id <="
           " _MAX_STATE_ID:", "        if self._done or not 0 <= state_id <= _MAX_STATE_ID:",
           FRAMING_TESTS),
    Mutant(CANONICAL_WRITER,
           "        self._last[state_id] = len(section) + 4",
           "        self._last[state_id] = len(section)", FRAMING_TESTS),
    Mutant(CANONICAL_WRITER,
           "        if not body:\n            raise InvalidArgumentError(",
           "        if False:\n            raise InvalidArgumentError(", FRAMING_TESTS),
    # the rewrite's edit plan
    Mutant(FLINK_RESCALE,
           "            if op.label in gone:\n                continue",
           "            if False:\n                continue", TARGET_TESTS),
    Mutant(SAVEPOINT_PLAN,
           "                REPLACED if s == state_id else s for s in i.state_ids)) for i in"
           " inputs)", "                s for s in i.state_ids)) for i in inputs)", TARGET_TESTS),
    Mutant(SAVEPOINT_PLAN, "            state_id = len(names)\n",
           "            state_id = len(names) - 1\n", TARGET_TESTS),
    Mutant(SAVEPOINT_PLAN,
           "    if header is None or not (edit.erase or edit.staged or len(dropped_operator_states)"
           "\n                              < len(edit.drops)):",
           "    if header is None or not (edit.erase or edit.staged):", TARGET_TESTS),
    # the savepoint writers (issue 39): a rewrite's plan, its pass, what it copies, reports
    Mutant(FLINK_RESCALE, "    check_output(output)  # refused before the source is even read\n"
           "    snapshot = FlinkSnapshot.open(", "    snapshot = FlinkSnapshot.open(",
           (OS_FAILURES,), "under_a_file"),
    Mutant(FLINK_RESCALE, "    snapshot.check_output_outside(output)\n    rewrite =",
           "    rewrite =", (COPIED,)),
    Mutant(FLINK_RESCALE, "        check_parallelism(parallelism, max_parallelism)\n", "",
           (WRITES,)),
    Mutant(FLINK_RESCALE, "            kind = (InvalidArgumentError if all(",
           "            kind = (InvalidArgumentError if any(", (WRITES, GUARDS)),
    Mutant(FLINK_RESCALE, "        return any(not h.savepoint for plan in self.plans",
           "        return any(h.savepoint for plan in self.plans", (WRITES,)),
    Mutant(FLINK_RESCALE, "        if self.converted or not is_canonical_savepoint(properties):",
           "        if self.converted:", (WRITES, GUARDS)),
    Mutant(FLINK_RESCALE, "        if not LAYOUTS[self.snapshot.metadata.version].properties:",
           "        if False:", (ONE_X,)),
    Mutant(SAVEPOINT_PLAN, "    handles = snapshot.keyed_handles(op)\n"
           "    if any(s.raw_keyed and not snapshot.heap_timers(s) for s in op.subtasks):",
           "    handles = snapshot.keyed_handles(op)\n    if False:", (GUARDS,)),
    Mutant(SAVEPOINT_PLAN,
           "        if any(s.raw_keyed and not snapshot.heap_timers(s) for s in op.subtasks):",
           "        if False:", (GUARDS,)),
    Mutant(WRITING, "        converted = (self.snapshot.heap_timers(old)",
           "        converted = (False", HEAP_TIMERS),
    Mutant(LEGACY_TIMERS, "        if not r.at_end():", "        if False:", HEAP_TIMERS),
    Mutant(LEGACY_TIMERS, "        elif names != signature:", "        elif False:",
           HEAP_TIMERS),
    Mutant(LEGACY_TIMERS,
           "                held[timer_state_name(name, False)] = sorted(processing)\n"
           "                held[timer_state_name(name, True)] = sorted(event)",
           "                held[timer_state_name(name, True)] = sorted(processing)\n"
           "                held[timer_state_name(name, False)] = sorted(event)", HEAP_TIMERS),
    Mutant(SAVEPOINT_PLAN, "    if new_parallelism > max_parallelism:",
           "    if new_parallelism >= max_parallelism:", (WRITES,)),
    Mutant(SAVEPOINT_PLAN, "if (s.operator or s.raw_operator) and s.index >= new_parallelism)",
           "if (s.operator or s.raw_operator) and s.index > new_parallelism)", (WRITES,)),
    Mutant(SAVEPOINT_PLAN, "    _check_native(where, header, handles)\n    return OperatorPlan(",
           "    return OperatorPlan(", (WRITES,)),
    Mutant(SAVEPOINT_PLAN, "        _check_native(where, header, handles)\n    elif",
           "        pass\n    elif", (GUARDS, WRITES)),
    Mutant(SAVEPOINT_PLAN, "    renumber = [i - (i > dropped) if i != dropped else -1",
           "    renumber = [i if i != dropped else -1", (GUARDS, TARGET_TESTS[0])),
    Mutant(SAVEPOINT_PLAN, "    key_type, erase = _checked_key_type(header.key), ()",
           "    key_type, erase = None, ()", (COPIED,)),
    Mutant(SAVEPOINT_PLAN, "        inputs.append(_KeyedInput(handle, own, tuple(range(len("
           "own.states)))\n                                  if ids is None else ids))",
           "        inputs.append(_KeyedInput(handle, own, tuple(range(len(own.states)))))",
           (GUARDS,)),
    Mutant(FLINK_RESCALE, "        compressed = output_compressed(compression,"
           " snapshot_compressed(snapshot))",
           "        compressed = output_compressed(compression, False)", (COMPRESSED,)),
    Mutant(CANONICAL_WRITER,
           "        key_groups.append(frame(plain) if compress and plain else plain)",
           "        key_groups.append(plain)", (COMPRESSED,)),
    Mutant(SAVEPOINT_PLAN, "        if header is None and (edit.erase or edit.staged):",
           "        if False:", (GUARDS, ISOLATION)),
    Mutant(WRITING, "            for _ in decoded_states(data, source, handle):\n"
           "                pass\n", "", (COPIED,)),
    Mutant(WRITING, "                if not 0 <= offset < len(data):",
           "                if offset > len(data):", (COPIED, GUARDS)),
    Mutant(WRITING, "            if len(head) < 4 or version not in HEADER_VERSIONS:",
           "            if len(head) < 4:", (COPIED,)),
    Mutant(WRITING, "                            tuple(dataclasses.replace(h, stream=self._file("
           "h.stream))\n                                  for h in old.raw_keyed),",
           "                            (),", (GUARDS,)),
    Mutant(WRITING, "                            self.operator_handles(old.raw_operator,"
           " raw=True))", "                            self.operator_handles(old.raw_operator))",
           (COPIED, GUARDS)),
    Mutant(WRITING, "copies.keyed_handles(op, s.keyed), s, drop)",
           "copies.keyed_handles(op, s.keyed), s, ())", (GUARDS, COPIED)),
    Mutant(WRITING, "                if states[part.state_id].is_timer:\n"
           "                    timers += part.count", "                if False:\n"
           "                    timers += part.count", (GUARDS,)),
    Mutant(WRITING, "                if info.is_timer:\n                    timers += kept",
           "                if False:\n                    timers += kept", (GUARDS,)),
    Mutant(WRITING, "                entries += kept", "                entries += len(pairs)",
           (GUARDS, ISOLATION)),
    Mutant(WRITING, "                    removed[name_of] = removed.get(name_of, 0) + part.count",
           "                    removed[name_of] = removed.get(name_of, 0) + 1",
           (GUARDS, ISOLATION, TARGET_TESTS[0])),
    Mutant(WRITING, "                    for body, value in pairs:\n"
           "                        framer.add(target, body, value)\n",
           "", (GUARDS, COPIED, ISOLATION)),
    Mutant(WRITING, "    if plan.key_type is None or plan.erase:",
           "    if plan.key_type is None:", (ISOLATION, EDITS_IN_FLINK)),
    Mutant(WRITING, "        return hashed % self.new_max", "        return hashed % self.old_max",
           (WRITES, GUARDS)),
    Mutant(EDIT, "    missing = tuple(key for i, key in enumerate(keys) if i not in found)",
           "    missing = tuple(key for i, key in enumerate(keys) if i in found)",
           (ISOLATION, EDITS_IN_FLINK)),
    Mutant(EDIT, "data, snapshot.describe(handle.stream), handle) if found.name == state)",
           "data, snapshot.describe(handle.stream), handle))", (GUARDS,)),
    Mutant(EDIT, "                count += sum(len(value) for",
           "                count += sum(1 for", (GUARDS,)),
    Mutant(EDIT, "        if edited.operator_id == op.operator_id:",
           "        if edited.operator == operator:", (GUARDS, ISOLATION)),
    Mutant(EDIT, "    if not handles:\n        raise InvalidArgumentError(f\"operator {op.label!r}"
           " has no keyed state: no keys to erase\")", "", (GUARDS,)),
    Mutant(STAGED, "        raise storage_error(f\"cannot write {directory.child(name)}\", error)"
           " from error", "        raise", (OS_FAILURES,), "sections"),
    Mutant(STAGED, "            if info.type != pafs.FileType.File]", "            if False]",
           TARGET_TESTS + ("tests/spark/test_executor_errors.py",)),
    Mutant(SAVEPOINT_TARGET, "            base.check_output_outside(checked)\n", "",
           (ISOLATION, COPIED, TARGET_TESTS[0])),
    Mutant(SAVEPOINT_TARGET, "        check_checkpoint_id(checkpoint_id)\n", "",
           TARGET_TESTS + (GUARDS,)),
    Mutant(SAVEPOINT_TARGET, "    if flink_version is not None and release_layout(flink_version)"
           ".version != layout.version:", "    if False:", (GUARDS,) + TARGET_TESTS),
    Mutant(EXPORT, "                    entries += 1\n", "", (GUARDS, COMPRESSED)),
    Mutant(EXPORT, "            elements += len(share)\n", "", (GUARDS, COMPRESSED)),
    Mutant(EXPORT, "        if op.keyed_states or (op.operator_states and not keyed_only):",
           "        if op.keyed_states:", (GUARDS, COMPRESSED)),
    Mutant(EXPORT, "            recorded = layout.recorded_uid(plan.op.uid)",
           "            recorded = plan.op.uid", (ONE_X,)),
    Mutant(EXPORT, "    check_output(output)  # refused before the checkpoint is even read\n",
           "", (GUARDS, OS_FAILURES)),
    Mutant(MIGRATE, "    if layout.flink_major < 2:", "    if False:", MIGRATE_TESTS),
    Mutant(MIGRATE, "    if written_by.flink_major >= 2:", "    if written_by.flink_major > 2:",
           MIGRATE_TESTS),
    Mutant(MIGRATE, "        if hashed != operator_id.lower():", "        if False:",
           MIGRATE_TESTS),
    Mutant(MIGRATE, "        if hashed not in ids:", "        if False:", MIGRATE_TESTS),
    Mutant(MIGRATE, "        if not metadata.properties:", "        if False:", MIGRATE_TESTS),
    Mutant(MIGRATE, "        stuck = [p.state for p in planned if p.action != BYTES and p.state"
           " in walls]", "        stuck: list[str] = []", MIGRATE_TESTS),
    Mutant(MIGRATE, "        snapshot.check_output_outside(output)\n", "",
           MIGRATE_TESTS + (COPIED,)),
    Mutant(PUBLISH, "    if os.path.lexists(output):", "    if os.path.exists(output):",
           (GUARDS,)),
    Mutant(PUBLISH, "            if self._written[stream.path] != stream.size:",
           "            if False:", (GUARDS, WRITES)),
    Mutant(PUBLISH, "            if not stream.relative or stream.path not in self._written:",
           "            if False:", (WRITES,)),
    Mutant(PUBLISH, "        if isinstance(error, OSError) and not isinstance(error,"
           " StateSourceError):", "        if False:", (OS_FAILURES,)),
    Mutant(PUBLISH, "        shutil.rmtree(self.staging, ignore_errors=True)\n", "",
           (OS_FAILURES, WRITES)),
    # delta runs: metadata and validation
    Mutant("statesource/format/keyed_state_meta.py", "        if sequence < 0:",
           "        if sequence < -1:", DELTA_TESTS, DELTA_K),
    Mutant("statesource/format/keyed_state_meta.py", "            if delta.sequence < previous:",
           "            if False:", DELTA_TESTS, DELTA_K),
    Mutant("statesource/format/keyed_state_meta.py", "            if delta.path in base_paths:",
           "            if False:", DELTA_TESTS, DELTA_K),
    Mutant("statesource/format/keyed_state_meta.py",
           "                if last_sequence.get(location.key_group) == delta.sequence:",
           "                if False:", DELTA_TESTS, DELTA_K),
    Mutant("statesource/format/keyed_state_meta.py",
           "            if version >= DELTA_FILES_VERSION else []",
           "            if version > DELTA_FILES_VERSION else []", V4_TESTS, DELTA_K),
    Mutant("statesource/format/metadata.py",
           "        if any(state.delta_files for state in states):\n"
           "            return DELTA_FILES_VERSION", "        if False:\n"
           "            return DELTA_FILES_VERSION", V4_TESTS, DELTA_K),
    Mutant("statesource/format/metadata.py",
           "            return ROW_ADDRESSED_RUNS_VERSION",
           "            return DELTA_FILES_VERSION", DELTA_TESTS, DELTA_K),
    Mutant("statesource/format/keyed_state_meta.py",
           "        document = {\"sequence\": self.sequence, **self.file.to_json()}",
           "        document = {\"sequence\": 0, **self.file.to_json()}", DELTA_TESTS, DELTA_K),
    # row-addressed runs (format version 5)
    Mutant("statesource/format/keyed_state_meta.py",
           "            if location.key_group not in runs:", "            if False:",
           DELTA_TESTS, DELTA_K),
    Mutant("statesource/format/delta_reads.py",
           "        if location.row_offset + location.rows > table.num_rows:",
           "        if False:", DELTA_TESTS, "misdescribe"),
    Mutant("statesource/format/delta_reads.py",
           "    if state is not None and (np.any(kinds == PRIOR) if state else"
           " not np.all(kinds == PRIOR)):",
           "    if False:", DELTA_TESTS, "misdescribe"),
    Mutant("statesource/format/keyorder.py",
           "            and np.array_equal(base_keys[hints], wanted):",
           "            and True:", ("tests/format/test_keyorder.py",), "hints"),
    Mutant("statesource/format/keyorder.py",
           "            newest[positions[ranks == rank]] = rank",
           "            newest[positions[ranks == rank]] = 0", ("tests/format/test_keyorder.py",)),
    Mutant("statesource/format/keyorder.py",
           "    ascending[joints] = True", "    ascending[joints[:0]] = True",
           ("tests/format/test_inplace.py",)),
    Mutant("statesource/format/keyorder.py",
           "    joints = run_starts[(run_starts > 0) & (run_starts < len(keys))] - 1",
           "    joints = run_starts[(run_starts > 0) & (run_starts < len(keys))]",
           ("tests/format/test_keyorder.py",)),
    Mutant("statesource/format/runblocks.py",
           "np.searchsorted(self.key_groups, [first, last + 1])",
           "np.searchsorted(self.key_groups, [first, last])", DELTA_TESTS, "chunks"),
    Mutant("statesource/format/runblocks.py",
           "    if not np.array_equal(groups, np.repeat(key_groups, counts)):",
           "    if False:", DELTA_TESTS + ("tests/format/test_keyorder.py",),
           "another_key_group"),
    # upserts written into the bases' read buffers
    Mutant("statesource/format/inplace.py",
           "    held &= kinds == UPSERT", "    held |= True",
           ("tests/format/test_inplace.py",)),
    Mutant("statesource/format/inplace.py",
           "    if not _apart(written, base):", "    if False:",
           ("tests/format/test_inplace.py",), "overlaps"),
    Mutant("statesource/format/inplace.py",
           "        for start, end in spans:",
           "        for start, end in reversed(spans):", ("tests/format/test_inplace.py",)),
    # the incremental writer's base
    Mutant("statesource/checkpointing/incremental.py",
           "        if not isinstance(token, BaseCheckpoint) or token.root != self.root \\\n"
           "                or token.operator != uid:",
           "        if not isinstance(token, BaseCheckpoint) or token.root != self.root:",
           BASE_TESTS),
    Mutant("statesource/checkpointing/incremental.py",
           "        if (op.key_type, op.max_parallelism) != (backend.key_type,"
           " backend.max_parallelism):", "        if op.key_type != backend.key_type:",
           BASE_TESTS),
    Mutant("statesource/checkpointing/incremental.py",
           "                if not state.declaration.same_types(declaration):",
           "                if False:", BASE_TESTS),
    # the base pinned from the plan of a Spark write to its commit (races with retain)
    Mutant("statesource/format/target.py",
           "            self.pin = pin_listed(root, checkpoint_id, base.referenced_files())",
           "            pin_listed(root, checkpoint_id, base.referenced_files()).release()",
           (SPARK_RACES,), "job_runs and write_state"),
    Mutant("statesource/spark/write/rescale.py", "    return target.pinned() if pin else target",
           "    return target", (SPARK_RACES,), "job_runs and max"),
    # the audit of issue 25: pins released by the discards, thresholds, retired checkpoints
    Mutant("statesource/spark/write/rewrite.py",
           "            target.remove([])  # a refused write lets go of its base",
           "            pass  #", ("tests/spark/test_writer.py",), "more_bad_columns"),
    Mutant("statesource/spark/write/rewrite.py",
           "        self._on_driver(remove_staged, self.target, files)",
           "        if files:\n            self._on_driver(remove_staged, self.target, files)",
           ("tests/spark/test_writer.py",), "bad_input"),
    Mutant("statesource/spark/write/rescale.py",
           "    remove_files(target.root, written)\n    target.release()",
           "    remove_files(target.root, written)",
           ("tests/spark/test_rescale_max_parallelism.py",), "failing_job"),
    Mutant("statesource/format/retention.py", "    if older_than < MIN_OLDER_THAN:",
           "    if older_than < timedelta(0):", RETENTION_TESTS),
    Mutant("statesource/cli/retain.py", "type=older_than, default=DEFAULT_OLDER_THAN",
           "type=duration, default=DEFAULT_OLDER_THAN", RETENTION_TESTS),
    Mutant("statesource/format/retention.py",
           "    removed = {i: c for i, c in {**state.retired, **doomed}.items() if i not in"
           " kept_ids}", "    removed = {**state.retired, **doomed}", RETENTION_TESTS),
    Mutant("statesource/format/retention.py",
           "        if checkpoint_id in state.complete:  # a retirement killed",
           "        if False:  # a retirement killed", RETENTION_TESTS),
    Mutant("statesource/format/storage.py",
           "    if checkpoint_id is not None and directory.child(RETIRED_FILE).exists():",
           "    if False:", RETENTION_TESTS),
    # the driver-side steps
    Mutant("statesource/spark/driver.py", "    if not token.isalnum():", "    if not token:",
           DRIVER_TESTS),
    Mutant("statesource/spark/driver.py", "    os.unlink(path)\n", "", DRIVER_TESTS),
    Mutant("statesource/spark/driver.py", "        return pickle.dumps((False, error))",
           "        return pickle.dumps((True, error))", DRIVER_TESTS),
    Mutant("statesource/spark/driver.py",
           "    if isinstance(result, _ResultBytes):\n        return bytes(result)\n", "",
           DRIVER_TESTS),
    Mutant("statesource/spark/driver.py",
           "    os.makedirs(directory, mode=0o700, exist_ok=True)",
           "    os.makedirs(directory, exist_ok=True)", DRIVER_TESTS),
    Mutant("statesource/spark/driver.py", "    if not text:\n", "    if text is None:\n",
           DRIVER_TESTS),
    Mutant("statesource/spark/driver.py", "    if not succeeded:\n        raise value",
           "    if False:\n        raise value", DRIVER_TESTS),
    # the states a tracked key group's writes leave, recorded for incremental checkpoints
    Mutant("statesource/state/statemap.py",
           "            state = self._records[offset + STATE] = fn(old, value)\n"
           "            self._records[offset + STATE_VERSION] = self._version\n"
           "        if self._written is not None:",
           "            state = self._records[offset + STATE] = fn(old, value)\n"
           "            self._records[offset + STATE_VERSION] = self._version\n"
           "        if False:", RECORDER_TESTS),
    Mutant("statesource/state/statemap.py",
           "            self._drop(slot)\n            if self._written is not None:",
           "            self._drop(slot)\n            if False:", RECORDER_TESTS),
    Mutant("statesource/state/statemap.py",
           "        if len(written) == len(tracked) and list(written) == list(entries):",
           "        if len(written) == len(tracked):", RECORDER_TESTS),
    Mutant("statesource/state/changes.py",
           "            self._recording.pop(index)[0].stop_recording()",
           "            self._recording[index][0].stop_recording()", DELTA_TESTS, "half"),
    Mutant("statesource/format/deltas.py",
           "        if None not in nows and None not in befores:",
           "        if None not in nows:", DELTA_TESTS),
    Mutant("statesource/format/json_fields.py", "    if not set(map(type, values)) <= {int}:",
           "    if not set(map(type, values)) <= {int, bool}:",
           ("tests/format/test_untrusted_input.py", "tests/format/test_checkpoint.py")),
    Mutant("statesource/format/inplace.py",
           "                        np.searchsorted(self.groups, searched + 1).tolist()))",
           "                        np.searchsorted(self.groups, searched).tolist()))",
           DELTA_TESTS),
]


def _environment() -> dict[str, str]:
    """This checkout's modules first, whatever the environment's editable install points at
    (a private copy of the repository tests its own sources)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO), str(REPO / "statesource" / "spark" / "autoload")])}


def _failing_unmutated(mutants: list[Mutant]) -> list[str]:
    """The test ids among ``mutants``' tests that fail with no mutant planted."""
    files = sorted({test for mutant in mutants for test in mutant.tests})
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfE", "-n", "0", "-p",
                           "no:cacheprovider", *files], cwd=REPO, env=_environment(),
                          capture_output=True, text=True, check=False)
    failing = sorted({line.split()[1] for line in done.stdout.splitlines()
                      if line.startswith(("FAILED ", "ERROR "))})
    for test in failing:
        print(f"failing unmutated, left out: {test}", flush=True)
    return failing


def run(mutant: Mutant, failing: Sequence[str] = ()) -> tuple[bool | None, float]:
    """Plant ``mutant``, run its tests (but the ``failing`` ones), restore; returns (killed,
    seconds), killed None for a stale mutant (its snippet does not occur exactly once)."""
    path = REPO / mutant.module
    source = path.read_text()
    if source.count(mutant.original) != 1:
        return None, 0.0
    env = _environment()
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-n", "0", "-p",
               "no:cacheprovider", *mutant.tests]
    for test in failing:
        if test.split("::")[0] in mutant.tests:
            command += ["--deselect", test]
    if mutant.k:
        command += ["-k", mutant.k]
    missing = [test for test in mutant.tests if not (REPO / test).exists()]
    if missing:
        raise SystemExit(f"{mutant.module}: no test file {', '.join(missing)}")
    started = time.monotonic()
    try:
        path.write_text(source.replace(mutant.original, mutant.mutated))
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=TIMEOUT_SECONDS, check=False)
        if done.returncode in _NOT_RUN:  # a usage error or no test selected: no verdict
            raise SystemExit(f"{mutant.module}: pytest exited {done.returncode}, running no"
                             f" test:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        killed = done.returncode != 0
    except subprocess.TimeoutExpired:
        killed = True
    finally:
        path.write_text(source)
    return killed, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run the mutants whose module contains this")
    parser.add_argument("--writers", action="store_true",
                        help="run the mutants of the savepoint writers (WRITER_MODULES)")
    parser.add_argument("--deselect-failing", action="store_true",
                        help="first run the mutants' tests unmutated, and leave out (naming"
                             " them) those that fail already: in a worktree where other work"
                             " is under way, they would kill every mutant")
    parser.add_argument("--start", type=int, default=1,
                        help="run the mutants from this position of the list (1-based)")
    args = parser.parse_args()
    mutants = [m for m in MUTANTS[args.start - 1:]
               if (args.only is None or args.only in m.module)
               and (not args.writers or m.module in WRITER_MODULES)]
    failing = _failing_unmutated(mutants) if args.deselect_failing else []
    survivors, stale = [], []
    for index, mutant in enumerate(mutants, 1):
        killed, seconds = run(mutant, failing)
        shown = mutant.mutated.strip().splitlines()
        first_line = shown[0] if shown else "(removed)"
        verdict = "stale   " if killed is None else "killed  " if killed else "SURVIVED"
        print(f"[{index}/{len(mutants)}] {verdict} {seconds:5.0f}s"
              f" {mutant.module}: {first_line[:70]}", flush=True)
        if killed is None:
            stale.append(mutant)
        elif not killed:
            survivors.append(mutant)
    ran = len(mutants) - len(stale)
    killed_count = ran - len(survivors)
    print(f"killed {killed_count} of {ran} ({100 * killed_count / max(ran, 1):.0f}%)"
          + (f"; {len(stale)} stale" if stale else ""))
    for mutant in survivors:
        print(f"survivor: {mutant.module}: {mutant.original.strip()!r}"
              f" -> {mutant.mutated.strip()!r}")
    for mutant in stale:
        print(f"stale: {mutant.module}: {mutant.original.strip()!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

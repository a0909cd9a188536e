"""The JVM reader of RocksDB databases through Spark: each key group's entries of the state's
column family (RocksColumnFamily.java), framed as a canonical key group
(RocksKeyGroupSource.java) and decoded as a savepoint's.

Every state of every fixture reads the same rows on both readers
(test_jvm_flink.py's test_every_state_reads_the_same_on_both_paths, which fails where the
JVM reader does not read a state its plan serves; which states those are:
tests/flink/rocksdb/test_rocksdb_jvm_plan.py); the 1.20 and lazy fixtures read as their jobs'
models on the JVM reader (test_flink_snapshots.py, test_flink_lazy_states.py). Here: the
incremental checkpoints sharing tables, and the same job's non-incremental ones, against their
job's model, databases of two-byte
key-group prefixes rebuilt by a rescaled restore (their tables holding keys of other
subtasks' key groups under range deletions) against their model and Flink's canonical
savepoints, pushdown, and tables damaged or removed.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from conftest import jvm_reader_loaded

from flink_fixture_checks import (
    FULL_CHECKPOINT,
    INCREMENTAL_STATES,
    RESCALED,
    found_keyed,
    incremental_keyed,
)
from statesource.flink.handles import RocksDBHandle
from statesource.flink.jvm_layout import jvm_layout
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.snapshot.metadata import parse_metadata
from statesource.flink.snapshot.metadata_writer import write_metadata
from statesource.keygroups import assign_to_key_group
from statesource.spark.jvm.plan import FlinkStatePythonSource
from statesource.types import LONG

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "flink"
INCREMENTAL = FIXTURES / "incremental"
TRUTH = json.loads((INCREMENTAL / "expected.json").read_text())
JVM_SCAN = "Flink key groups"
EVENT_TIMERS = "_timer_state/event_user-timers"
NATIVE_1X = FIXTURES / "flink-1.20" / "rocksdb-native"


@pytest.fixture
def jvm(spark):
    spark.dataSource.register(FlinkStatePythonSource)
    jvm_reader_loaded(spark)
    return spark


def _load(spark, path: Path, operator: str, state: str, fmt: str = "flinkstate"):
    return (spark.read.format(fmt).option("operator", operator).option("state", state)
            .load(str(path)))


def _executed(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def _model(phase: str, state: str) -> dict:
    """The job's model of ``state`` after ``phase``, a list's elements sorted (a map state
    holds no empty map)."""
    field = "timers" if state == EVENT_TIMERS else state
    held = {key: s[field] for key, s in TRUTH[phase].items()
            if field in s and (s[field] or state != "tags")}
    return {key: sorted(v) if isinstance(v, list) else v for key, v in held.items()}


def _by_key(state: str, rows) -> dict:
    found: dict = {}
    for row in rows:
        if state == "tags":
            found.setdefault(row["key"], {})[row["user_key"]] = row["user_value"]
        elif state in ("seen", EVENT_TIMERS):
            found.setdefault(row["key"], []).append(
                row["timestamp" if state == EVENT_TIMERS else "list_element"])
        else:
            found[row["key"]] = row["value"]
    return {key: sorted(v) if isinstance(v, list) else v for key, v in found.items()}


@pytest.mark.parametrize("run", ["rocksdb-timers", "heap-timers", FULL_CHECKPOINT])
@pytest.mark.parametrize("phase", ["first", "second"])
def test_checkpoints_incremental_or_not_read_as_the_model(jvm, run, phase):
    """Shared tables named by the absolute paths of the machine that wrote them (a full
    checkpoint's tables: by paths relative to it); heap timers (raw keyed state) are left to
    the Python source, and read right there too."""
    path = INCREMENTAL / run / TRUTH["checkpoints"][run][0 if phase == "first" else 1]
    for state in ("count", "seen", "tags", EVENT_TIMERS):
        df = _load(jvm, path, "incr", state)
        on_jvm = state != EVENT_TIMERS or run != "heap-timers"
        assert (JVM_SCAN in _executed(df)) == on_jvm, (state, _executed(df))
        assert _by_key(state, (r.asDict() for r in df.collect())) == _model(phase, state), state


@pytest.mark.parametrize("version", list(RESCALED))
def test_rescaled_databases_read_as_the_model(jvm, version):
    """tests/flink/test_rocksdb_rescaled_checkpoints.py's fixtures (max parallelism 1000 and
    256), both checkpoints, every state on the JVM; the model is what the Python reader reads
    of Flink's canonical savepoints of their state (there), which read the same on both
    readers (test_jvm_flink.py)."""
    truth = json.loads((RESCALED[version] / "expected.json").read_text())
    for phase in ("first", "second"):
        shape = {"max_parallelism": truth["max_parallelism"],
                 "parallelism": truth["parallelism"][phase]}
        expected = incremental_keyed(truth[phase])
        for state in INCREMENTAL_STATES:
            df = _load(jvm, RESCALED[version] / phase / truth["checkpoints"][phase], "incr",
                       state)
            assert JVM_SCAN in _executed(df), (phase, state, _executed(df))
            rows = [r.asDict(recursive=True) for r in df.collect()]
            assert found_keyed(rows, "incr", state, shape) == expected[state], (phase, state)


def test_keys_outside_a_handles_key_groups_are_no_state_on_either_reader(jvm, tmp_path):
    """As Flink reads a rescaled restore's database (its old tables hold keys of the key groups
    it gave away): a handle narrowed to key groups 0..15 of its 0..63 reads those alone."""
    copy = tmp_path / "copy"
    shutil.copytree(NATIVE_1X, copy)
    metadata = parse_metadata((copy / "_metadata").read_bytes(), "x")
    narrowed = dataclasses.replace(metadata, operators=tuple(
        dataclasses.replace(op, subtasks=tuple(dataclasses.replace(s, keyed=tuple(
            dataclasses.replace(h, count=16) if isinstance(h, RocksDBHandle) and h.start == 0
            else h for h in s.keyed)) for s in op.subtasks)) for op in metadata.operators))
    (copy / "_metadata").write_bytes(write_metadata(narrowed))
    whole, jvm_rows, python_rows = (
        sorted(json.dumps(r.asDict(), default=repr) for r in
               _load(jvm, path, "stateful", "per_user", fmt).collect())
        for path, fmt in ((NATIVE_1X, "flinkstate"), (copy, "flinkstate"),
                          (copy, "flinkstate-python")))
    assert jvm_rows == python_rows == [
        r for r in whole if not 16 <= json.loads(r)["key_group"] < 64]
    assert jvm_rows != whole
    assert JVM_SCAN in _executed(_load(jvm, copy, "stateful", "per_user"))


def test_key_and_key_group_filters_read_what_the_python_source_reads(jvm):
    checkpoint = FlinkCheckpoint.open(str(NATIVE_1X))
    keys = sorted(next(checkpoint.read_keyed_state("per_user", operator="stateful"))
                  .column("key").unique().to_pylist())
    group = assign_to_key_group(keys[0], LONG, 128)
    for where, local in ((f"key = {keys[0]}", True), (f"key IN ({keys[0]}, {keys[-1]}, -1)", True),
                         (f"key_group = {group}", False),
                         (f"key = {keys[0]} AND user_value > -1", False)):
        frames = [_load(jvm, NATIVE_1X, "stateful", "per_user", fmt).filter(where)
                  for fmt in ("flinkstate", "flinkstate-python")]
        rows = [sorted(json.dumps(r.asDict(), default=repr) for r in df.collect())
                for df in frames]
        assert rows[0] == rows[1] and rows[0], where
        executed = _executed(frames[0])
        assert executed.startswith("LocalTableScan") if local else JVM_SCAN in executed, where
        if not local:
            assert frames[0].rdd.getNumPartitions() == 1, where  # one key group: one task


def _victim(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the 1.20 native savepoint, and the first table of its state 'total'."""
    copy = tmp_path / "copy"
    shutil.copytree(NATIVE_1X, copy)
    layout = jvm_layout(FlinkCheckpoint.open(str(copy)), "stateful", "total")
    assert not isinstance(layout, str), layout
    return copy, Path(layout.files[0][0])


def _truncated(table: Path) -> None:
    data = table.read_bytes()
    table.write_bytes(data[:-3])


def _flipped(table: Path) -> None:
    data = bytearray(table.read_bytes())
    data[40] ^= 0x10  # in the first data block, under its checksum
    table.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [_truncated, _flipped])
def test_a_damaged_table_is_refused_naming_it(jvm, tmp_path, damage):
    copy, table = _victim(tmp_path)
    damage(table)
    for fmt in ("flinkstate-python", "flinkstate"):
        with pytest.raises(Exception) as refused:
            _load(jvm, copy, "stateful", "total", fmt).collect()
        message = str(refused.value).split("\n\tat ")[0]
        assert "CorruptCheckpointError" in message and table.name in message, (fmt, message)


def test_a_table_removed_after_planning_is_named(jvm, tmp_path):
    copy, table = _victim(tmp_path)
    assert _load(jvm, copy, "stateful", "total").count() > 0  # planned, the plan kept
    table.unlink()
    with pytest.raises(Exception) as refused:
        _load(jvm, copy, "stateful", "total").collect()
    assert table.name in str(refused.value).split("\n\tat ")[0]

"""The Flink savepoint target without Spark: the Spark writer's task (``write_partition``)
stages rows into it as the Spark write does, and the driver's side publishes.

The truth is the rows given (a plain dict), the base savepoint's own entries for every
state the write leaves alone, and Flink's layout (subtask key-group ranges); whether a
real Flink restores such savepoints is decided in test_flink_savepoint_rewrite.py.
"""

from __future__ import annotations

import os
import pickle
import zlib
from pathlib import Path

import pyarrow as pa
import pytest
from flink_entries import entries_by_state, key_stateful_by_its_event_pojo

from statesource.errors import (
    CheckpointExistsError,
    CorruptCheckpointError,
    IncompatibleCheckpointError,
    InvalidArgumentError,
    StorageAccessError,
)
from statesource.flink.declarations import declaration as declared
from statesource.flink.layouts.canonical_writer import KeyGroupFramer, frame_key_group, section_body
from statesource.flink.layouts.keyed import CanonicalSection
from statesource.flink.operations.savepoint_target import FlinkSavepointTarget
from statesource.flink.operations.staged import StagedState
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.flink.snapshot.publish import is_staging_name
from statesource.format.locations import DataFile
from statesource.keygroups import assign_to_key_group
from statesource.model import StateDeclaration, StateKind
from statesource.schema import ValueSchema
from statesource.spark.write.plan import StateWrite
from statesource.spark.write.rewrite import publish_staged, state_meta
from statesource.spark.write.task import write_partition
from statesource.types import LONG, STRING, VOID, DataType

BASE = Path(__file__).resolve().parents[2] / "fixtures" / "flink" / "mp256" / "canonical"
COUNT = StateDeclaration("count", StateKind.VALUE, VOID, {"value": ValueSchema.parse("long")})


def stage(target: FlinkSavepointTarget, operator: str, declaration: StateDeclaration,
          key_type: DataType, rows: pa.RecordBatch, max_parallelism: int,
          parallelism: int) -> list[DataFile]:
    """What a Spark write does: plan the sink, run the task over the rows, stage the files."""
    sink = target.sink(operator, declaration, key_type, max_parallelism)
    write = StateWrite(sink, operator, declaration, key_type, max_parallelism, parallelism,
                       target.timestamp_ms, None)
    files = write_partition(write, [rows])
    target.edit.put_keyed_state(operator, state_meta(write, files), key_type=key_type,
                                max_parallelism=max_parallelism, parallelism=parallelism)
    return files


def values(path: Path, operator: str, state: str) -> dict:
    return {row["key"]: row["value"]
            for table in FlinkCheckpoint.open(str(path)).read_keyed_state(state,
                                                                          operator=operator)
            for row in table.to_pylist()}


def declaration_of(operator: str, state: str) -> StateDeclaration:
    snapshot = FlinkSnapshot.open(str(BASE))
    header = snapshot.header(snapshot.operator(operator))
    return declared(next(i for i in header.states if i.name == state))


def test_a_savepoint_from_nothing_holds_the_rows_in_flinks_subtask_ranges(tmp_path):
    output = tmp_path / "out"
    target = FlinkSavepointTarget.open(None, str(output))
    keys = [f"user-{i}" for i in range(300)]
    files = stage(target, "counter", COUNT, STRING,
                  pa.record_batch({"key": keys, "value": list(range(300))}), 128, 3)
    publish_staged(target, files, [])
    assert values(output, "counter", "count") == dict(zip(keys, range(300)))
    snapshot = FlinkSnapshot.open(str(output))
    assert snapshot.checkpoint_id == 1
    op = snapshot.operator("counter")
    assert (op.parallelism, op.max_parallelism) == (3, 128)
    # Flink's KeyGroupRangeAssignment: subtask i of p holds ceil(i*128/p) .. ceil((i+1)*128/p)-1
    assert [(h.start, h.end) for h in snapshot.keyed_handles(op)] == [(0, 42), (43, 85),
                                                                     (86, 127)]
    for handle in snapshot.keyed_handles(op):
        for piece in snapshot.key_group_bytes(op):
            if piece.handle == handle:
                assert handle.start <= piece.key_group <= handle.end
    assert {assign_to_key_group(k, STRING, 128) for k in keys} == {
        p.key_group for p in snapshot.key_group_bytes(op)}
    assert not [n for n in os.listdir(tmp_path) if is_staging_name(n)]
    assert os.listdir(tmp_path) == ["out"]


def test_a_replaced_state_holds_the_new_rows_and_every_other_state_is_kept(tmp_path):
    output = tmp_path / "out"
    target = FlinkSavepointTarget.open(str(BASE), str(output))
    rows = {key: key / 4 for key in range(0, 200, 3)}
    files = stage(target, "stateful", declaration_of("stateful", "total"), LONG,
                  pa.record_batch({"key": list(rows), "value": list(rows.values())}), 256, 2)
    publish_staged(target, files, [])
    assert values(output, "stateful", "total") == rows
    before, after = entries_by_state(BASE), entries_by_state(output)
    assert before.keys() == after.keys()
    changed = [name for name in before if before[name] != after[name]]
    assert changed == [("stateful", "total")]
    assert FlinkSnapshot.open(str(output)).checkpoint_id == FlinkSnapshot.open(
        str(BASE)).checkpoint_id


def test_a_copy_plans_its_sinks_without_opening_the_base(tmp_path, monkeypatch):
    """The target travels pickled from the driver that opened it to the caller, which may
    be a Spark Connect client that cannot see the storage: sinks (and their refusals) come
    from what the driver read; only the publish, back on a driver, opens the base."""
    output = tmp_path / "out"
    total = declaration_of("stateful", "total")
    copy = pickle.loads(pickle.dumps(FlinkSavepointTarget.open(str(BASE), str(output))))

    def unreachable(*arguments: object, **options: object) -> None:
        raise AssertionError("the caller opened the base savepoint")

    monkeypatch.setattr(FlinkSnapshot, "open", unreachable)
    rows = {key: key / 8 for key in range(0, 100, 7)}
    files = stage(copy, "stateful", total, LONG,
                  pa.record_batch({"key": list(rows), "value": list(rows.values())}), 256, 2)
    with pytest.raises(IncompatibleCheckpointError, match="keyed by long, the rows by string"):
        copy.sink("stateful", COUNT, STRING, 256)
    monkeypatch.undo()
    publish_staged(pickle.loads(pickle.dumps(copy)), files, [])
    assert values(output, "stateful", "total") == rows
    before, after = entries_by_state(BASE), entries_by_state(output)
    assert [name for name in before if before[name] != after[name]] == [("stateful", "total")]


def test_a_dropped_state_is_gone_and_the_rest_is_kept(tmp_path):
    output = tmp_path / "out"
    target = FlinkSavepointTarget.open(str(BASE), str(output), checkpoint_id=9)
    target.edit.drop_state("stateful", "last")
    publish_staged(target, [], [])
    before, after = entries_by_state(BASE), entries_by_state(output)
    assert set(before) - set(after) == {("stateful", "last")}
    assert all(after[name] == before[name] for name in after)
    assert FlinkSnapshot.open(str(output)).checkpoint_id == 9


NAME = StateDeclaration("name", StateKind.VALUE, VOID,
                        {"value": ValueSchema.parse(["null", "string"])})


def test_a_new_operator_of_two_states_beside_the_base_ones(tmp_path):
    """Each state of the new operator gets its own id in the header; a null value has no
    entry (Flink keeps none)."""
    output = tmp_path / "out"
    target = FlinkSavepointTarget.open(str(BASE), str(output))
    files = stage(target, "added", COUNT, LONG,
                  pa.record_batch({"key": [1, 2, 3], "value": [10, 20, 30]}), 64, 2)
    files += stage(target, "added", NAME, LONG,
                   pa.record_batch({"key": [1, 2, 4], "value": ["one", None, "four"]}), 64, 2)
    publish_staged(target, files, [])
    assert values(output, "added", "count") == {1: 10, 2: 20, 3: 30}
    assert values(output, "added", "name") == {1: "one", 4: "four"}
    before, after = entries_by_state(BASE), entries_by_state(output)
    assert {name: after[name] for name in before} == before


def test_a_new_state_of_a_base_operator_is_added_to_its_header(tmp_path):
    output = tmp_path / "out"
    target = FlinkSavepointTarget.open(str(BASE), str(output))
    files = stage(target, "stateful", COUNT, LONG,
                  pa.record_batch({"key": [5, 6], "value": [50, 60]}), 256, 2)
    publish_staged(target, files, [])
    assert values(output, "stateful", "count") == {5: 50, 6: 60}
    before, after = entries_by_state(BASE), entries_by_state(output)
    assert set(after) - set(before) == {("stateful", "count")}
    assert {name: after[name] for name in before} == before


def test_a_dropped_operator_is_gone_and_the_rest_is_kept(tmp_path):
    output = tmp_path / "out"
    target = FlinkSavepointTarget.open(str(BASE), str(output))
    target.edit.drop_operator("opaque")
    publish_staged(target, [], [])
    labels = [op.label for op in FlinkSnapshot.open(str(output)).operators]
    assert "opaque" not in labels
    assert labels == [op.label for op in FlinkSnapshot.open(str(BASE)).operators
                      if op.label != "opaque"]
    before, after = entries_by_state(BASE), entries_by_state(output)
    assert after == {name: counts for name, counts in before.items() if name[0] != "opaque"}


@pytest.mark.parametrize("operator, state, key_type, words", [
    ("stateful", "_timer_state/event_user-timers", LONG, "is a timer state"),
    ("stateful", "count", STRING, "the operator is keyed by long, the rows by string"),
    ("stateful", "total", LONG, "is value state 'total' .* in the savepoint, the write declares"
                                " value state 'total' .*\"long\""),
])
def test_a_sink_flink_could_not_restore_is_refused(tmp_path, operator, state, key_type, words):
    declaration = StateDeclaration(state, StateKind.VALUE, VOID,
                                   {"value": ValueSchema.parse("long")})
    target = FlinkSavepointTarget.open(str(BASE), str(tmp_path / "out"))
    with pytest.raises(IncompatibleCheckpointError, match=words):
        target.sink(operator, declaration, key_type, 256)


def test_a_sink_of_an_operator_keyed_by_a_pojo_is_refused_naming_the_class(tmp_path,
                                                                         monkeypatch):
    """As if the job keyed ``stateful`` by its Event POJO, whose Java hashCode statesource
    cannot reproduce. The target reads the base's headers where it opens (the driver, in a
    Spark write), so this runs the target in this process, where the header is patched."""
    key_stateful_by_its_event_pojo(monkeypatch, BASE)
    target = FlinkSavepointTarget.open(str(BASE), str(tmp_path / "out"))
    total = StateDeclaration("total", StateKind.VALUE, VOID,
                             {"value": ValueSchema.parse("double")})
    with pytest.raises(IncompatibleCheckpointError,
                       match="operator 'stateful', state 'total': the operator is keyed by POJO"
                             " FixtureJob\\$Event .*hashCode"):
        target.sink("stateful", total, LONG, 256)
    assert [p.name for p in tmp_path.iterdir() if not is_staging_name(p.name)] == []


def test_an_existing_output_is_refused(tmp_path):
    (tmp_path / "out").mkdir()
    with pytest.raises(CheckpointExistsError, match="already exists"):
        FlinkSavepointTarget.open(str(BASE), str(tmp_path / "out"))


def test_an_unreachable_object_store_output_fails_first_naming_it_without_its_keys():
    """An object-store output (tests/cluster/test_s3_savepoints.py writes to one) is checked
    before any work: an endpoint nothing listens on fails in one line naming the output,
    its credentials redacted."""
    output = ("s3://AKIDEXAMPLE:s3cr3t@bucket/savepoints/out?endpoint_override=127.0.0.1:9"
              "&scheme=http&region=us-east-1")
    with pytest.raises(StorageAccessError) as refused:
        FlinkSavepointTarget.open(str(BASE), output)
    message = str(refused.value)
    assert message.startswith("cannot reach savepoint output s3://***@bucket/savepoints/out")
    assert "s3cr3t" not in message and "AKIDEXAMPLE" not in message


def _staged(tmp_path: Path) -> tuple[FlinkSavepointTarget, list[DataFile]]:
    target = FlinkSavepointTarget.open(None, str(tmp_path / "out"))
    files = stage(target, "counter", COUNT, STRING,
                  pa.record_batch({"key": ["a", "b", "c"], "value": [1, 2, 3]}), 128, 1)
    return target, files


def test_a_section_file_changed_after_its_task_is_refused(tmp_path):
    target, files = _staged(tmp_path)
    (written,) = files
    path = Path(target.work) / written.path
    data = bytearray(path.read_bytes())
    data[written.locations[0].offset] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptCheckpointError, match="does not match the CRC-32 its task"):
        publish_staged(target, files, [])
    assert os.listdir(tmp_path) == []


def test_a_section_file_of_another_size_is_refused(tmp_path):
    target, files = _staged(tmp_path)
    (written,) = files
    path = Path(target.work) / written.path
    path.write_bytes(path.read_bytes() + b"\0")
    with pytest.raises(CorruptCheckpointError, match=f"has {written.size_bytes + 1} bytes,"
                                                     f" its task wrote {written.size_bytes}"):
        publish_staged(target, files, [])


@pytest.mark.parametrize("name", ["../x.sections", "sub/x.sections", "..", ""])
def test_a_section_file_outside_the_work_directory_is_refused(tmp_path, name):
    target, files = _staged(tmp_path)
    (written,) = files
    moved = DataFile(name, written.key_group_range, written.size_bytes, written.locations)
    state = StagedState(target._staged[("counter", "count")].info, target.work, (moved,))
    with pytest.raises(CorruptCheckpointError, match="not a bare file name"):
        list(state.sections())


def test_each_section_body_is_what_its_task_recorded(tmp_path):
    target, files = _staged(tmp_path)
    (written,) = files
    data = (Path(target.work) / written.path).read_bytes()
    assert written.size_bytes == len(data)
    assert [loc.crc32 for loc in written.locations] == [
        zlib.crc32(data[loc.offset:loc.offset + loc.length]) for loc in written.locations]
    assert sum(loc.rows for loc in written.locations) == 3


def test_a_section_file_is_synced_before_its_task_reports_it(tmp_path, monkeypatch):
    """The driver reads the tasks' files after they finished, perhaps after a crash of
    their host: each is fsynced before the task returns its DataFile."""
    synced = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    target, files = _staged(tmp_path)
    (written,) = files
    assert os.path.join(target.work, written.path) in synced


def test_a_state_gets_one_section_per_key_group():
    """A key group holds one section per state: a second one, or pairs added to a state that
    has a whole section, and an empty section are refused, never framed."""
    body = section_body(3, 128, [(b"\x01k", b"v")])
    framer = KeyGroupFramer(3, 128)
    framer.add_section(0, body)
    with pytest.raises(InvalidArgumentError, match="state id 0 in key group 3: .*one section"):
        framer.add_section(0, body)
    with pytest.raises(InvalidArgumentError, match="state 1 has an empty section in key group 3"):
        framer.add_section(1, b"")
    framer.add(2, b"\x01k", b"w")
    with pytest.raises(InvalidArgumentError, match="state id 2 in key group 3: .*one section"):
        framer.add_section(2, body)
    assert framer.getvalue() == frame_key_group(3, 128, [
        CanonicalSection(0, [(b"\x03\x01k", b"v")]), CanonicalSection(2, [(b"\x03\x01k", b"w")])])

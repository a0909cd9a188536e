"""Checkpoint format v1: round trips, asynchronous writes, failures, corruption, restore."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sample_state import ACCUMULATOR, KEYS, TTL, Average, dump, merged, populate
from statesource.checkpointing import (
    CheckpointWriter,
    SubtaskBackends,
    restore_keyed_backend,
    restore_operator_backend,
)
from statesource.checkpointing import writer as writer_module
from statesource.errors import (
    CheckpointNotFoundError,
    CorruptCheckpointError,
    IncompatibleCheckpointError,
    InvalidArgumentError,
    StateNotFoundError,
    UnsupportedFormatVersionError,
)
from statesource.format import Checkpoint, ipc
from statesource.format.columns import data_schema
from statesource.format.keyed_state_meta import KeyedStateMeta
from statesource.format.locations import DataFile, KeyGroupLocation
from statesource.format.metadata import CheckpointMeta, OperatorMeta
from statesource.keygroups import KeyGroupRange, key_group_range_for_operator
from statesource.model import TtlConfig
from statesource.state.clock import ManualClock
from statesource.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)
from statesource.state.keyed_backend import KeyedStateBackend
from statesource.state.operator_backend import OperatorStateBackend
from statesource.types import LONG


@pytest.fixture
def clock():
    return ManualClock(5_000)


@pytest.fixture
def backend(clock):
    backend = KeyedStateBackend("string", 128, clock=clock)
    populate(backend, KEYS)
    return backend


def test_round_trip_of_every_state_kind(tmp_path, backend, clock):
    with CheckpointWriter(str(tmp_path)) as writer:
        info = writer.write(1, {"op": [backend]})
    checkpoint = Checkpoint.open(str(tmp_path))
    assert checkpoint.checkpoint_id == 1 and info.path == checkpoint.location.path
    restored = restore_keyed_backend(checkpoint, 0, 1, clock=clock)
    assert dump(restored) == dump(backend)
    assert restored.descriptor("ttl_list").ttl == TTL


def test_restored_states_work_with_their_functions(tmp_path, backend, clock):
    CheckpointWriter(str(tmp_path)).write(1, {"op": [backend]})
    restored = restore_keyed_backend(Checkpoint.open(str(tmp_path)), 0, 1, clock=clock)
    agg = restored.get_state(AggregatingStateDescriptor("agg", Average(), ACCUMULATOR))
    restored.set_current_key("user-3")
    agg.add(9)
    assert agg.get() == 6.0


def test_data_files_are_plain_arrow_files_matching_the_metadata(tmp_path, backend):
    CheckpointWriter(str(tmp_path)).write(1, {"op": [backend]})
    checkpoint = Checkpoint.open(str(tmp_path))
    op = checkpoint.operator()
    for state in op.keyed_states:
        (data_file,) = state.files
        reader = pa.ipc.open_file(checkpoint.data_file(data_file.path).path)
        assert reader.schema == data_schema(op.key_type, state.declaration)
        table = reader.read_all()
        assert table.num_rows == state.rows
        assert reader.num_record_batches == sum(loc.batch_count for loc in data_file.locations)
        groups = table.column("key_group").to_pylist()
        assert groups == sorted(groups)


def test_operator_state_round_trip_and_redistribution(tmp_path):
    subtasks = []
    for index in range(2):
        backend = OperatorStateBackend()
        backend.get_list_state("offsets", "long").update([index * 10 + j for j in range(3)])
        backend.get_union_list_state("config", "string").update([f"c{index}"])
        backend.get_broadcast_state("rules", "string", "long").put_all({"r": 1, "s": 2})
        keyed = KeyedStateBackend("long", 128, key_group_range_for_operator(128, 2, index))
        subtasks.append(SubtaskBackends(keyed=keyed, operator=backend))
    CheckpointWriter(str(tmp_path)).write(1, {"src": subtasks})
    checkpoint = Checkpoint.open(str(tmp_path))
    assert checkpoint.read_operator_state("offsets") == [[0, 1, 2], [10, 11, 12]]
    restored = [restore_operator_backend(checkpoint, i, 3) for i in range(3)]
    assert [b.get_list_state("offsets", "long").get() for b in restored] == [
        [0, 1], [2, 10], [11, 12]]
    assert all(b.get_union_list_state("config", "string").get() == ["c0", "c1"]
               for b in restored)
    assert all(b.get_broadcast_state("rules", "string", "long").items() == [("r", 1), ("s", 2)]
               for b in restored)


@pytest.mark.parametrize("parallelism", [1, 2, 3, 7])
def test_restore_at_new_parallelism_splits_key_groups_exactly(tmp_path, backend, clock,
                                                             parallelism):
    CheckpointWriter(str(tmp_path)).write(1, {"op": [backend]})
    checkpoint = Checkpoint.open(str(tmp_path))
    restored = [restore_keyed_backend(checkpoint, i, parallelism, clock=clock)
                for i in range(parallelism)]
    for index, subtask in enumerate(restored):
        owned = key_group_range_for_operator(128, parallelism, index)
        assert subtask.key_group_range == owned
        for entries in dump(subtask).values():
            for key, _ in entries:
                subtask.set_current_key(key)  # raises if the key is not in its range
    assert merged([dump(s) for s in restored]) == dump(backend)


def test_checkpoint_written_by_several_subtasks_restores_at_another_parallelism(tmp_path,
                                                                               clock):
    model = KeyedStateBackend("string", 128, clock=clock)
    populate(model, KEYS)
    subtasks = []
    for index in range(3):
        subtask = KeyedStateBackend("string", 128, key_group_range_for_operator(128, 3, index),
                                    clock=clock)
        populate(subtask, [k for k in KEYS
                           if model._key_group_of(k) in subtask.key_group_range])
        subtasks.append(subtask)
    CheckpointWriter(str(tmp_path)).write(1, {"op": subtasks})
    checkpoint = Checkpoint.open(str(tmp_path))
    assert checkpoint.operator().parallelism == 3
    restored = [restore_keyed_backend(checkpoint, i, 2, clock=clock) for i in range(2)]
    assert merged([dump(s) for s in restored]) == merged([dump(s) for s in subtasks])


def test_reading_one_key_group_reads_only_its_bytes(tmp_path, backend):
    CheckpointWriter(str(tmp_path)).write(1, {"op": [backend]})
    checkpoint = Checkpoint.open(str(tmp_path))
    state = checkpoint.operator().keyed_state("value")
    location = state.files[0].locations[5]
    reads = []
    tables = list(checkpoint.read_keyed_state(
        "value", key_groups=KeyGroupRange(location.key_group, location.key_group),
        listener=lambda path, offset, length: reads.append((offset, length))))
    assert reads == [(location.offset, location.length)]
    assert sum(t.num_rows for t in tables) == location.rows
    assert set(tables[0].column("key_group").to_pylist()) == {location.key_group}


@pytest.mark.parametrize("largest_alone", [False, True])
def test_adjacent_ranges_are_read_in_requests_of_bounded_size(tmp_path, backend, monkeypatch,
                                                              largest_alone):
    """A request's buffer lives as long as the tables decoded from it: a read of a large
    file takes it a bounded span at a time, and a range larger than the bound whole."""
    CheckpointWriter(str(tmp_path)).write(1, {"op": [backend]})
    checkpoint = Checkpoint.open(str(tmp_path))
    lengths = sorted(loc.length for loc in checkpoint.operator().keyed_state("value")
                     .files[0].locations)
    expected = [table.to_pylist() for table in checkpoint.read_keyed_state("value")]
    bound = lengths[-1] - 1 if largest_alone else 3 * lengths[-1]
    monkeypatch.setattr(ipc, "MAX_REQUEST_BYTES", bound)
    reads: list[tuple[int, int]] = []
    tables = [table.to_pylist() for table in checkpoint.read_keyed_state(
        "value", listener=lambda path, offset, length: reads.append((offset, length)))]
    assert tables == expected
    assert len(reads) > 1
    assert all(length <= bound or length in lengths for _, length in reads)
    assert sum(length for _, length in reads) == sum(lengths)
    assert all(end == start for (start, _), end in
               zip(reads[1:], [offset + length for offset, length in reads]))


def test_asynchronous_write_never_sees_later_mutations(tmp_path, backend, monkeypatch):
    release = threading.Event()
    original = writer_module.write_keyed_file

    def held_encode(*args, **kwargs):
        assert release.wait(10)
        return original(*args, **kwargs)

    monkeypatch.setattr(writer_module, "write_keyed_file", held_encode)
    expected = dump(backend)
    with CheckpointWriter(str(tmp_path)) as writer:
        pending = writer.write_async(1, {"op": [backend]})
        value = backend.get_state(ValueStateDescriptor("value", "long"))
        items = backend.get_state(ListStateDescriptor("list", "string"))
        for key in KEYS[:100]:
            backend.set_current_key(key)
            value.update(-1)
            items.add("late")
        backend.set_current_key("brand-new")
        value.update(7)
        assert not pending.done()
        release.set()
        pending.result(10)
    restored = restore_keyed_backend(Checkpoint.open(str(tmp_path)), 0, 1, clock=backend.clock)
    assert dump(restored) == expected
    assert dump(backend) != expected


def test_an_incremental_asynchronous_write_never_sees_later_mutations(tmp_path, backend,
                                                                     monkeypatch):
    """The changed entries a snapshot hands over (views of the change tracking's dicts)
    must not move when the program goes on writing the same entries."""
    release = threading.Event()
    original = writer_module.write_delta_file

    def held_write(*args, **kwargs):
        assert release.wait(10)
        return original(*args, **kwargs)

    value = backend.get_state(ValueStateDescriptor("value", "long"))
    items = backend.get_state(ListStateDescriptor("list", "string"))
    with CheckpointWriter(str(tmp_path), incremental=True) as writer:
        writer.write(1, {"op": [backend]})
        for key in KEYS[:40]:
            backend.set_current_key(key)
            value.update(5)
            items.add("changed")
        expected = dump(backend)
        monkeypatch.setattr(writer_module, "write_delta_file", held_write)
        pending = writer.write_async(2, {"op": [backend]})
        for key in KEYS[:80]:
            backend.set_current_key(key)
            value.clear() if len(key) % 2 else value.update(-1)
            items.add("late")
        assert not pending.done()
        release.set()
        pending.result(10)
    checkpoint = Checkpoint.open(str(tmp_path), checkpoint_id=2)
    assert checkpoint.operator().keyed_state("value").delta_files
    restored = restore_keyed_backend(checkpoint, 0, 1, clock=backend.clock)
    assert dump(restored) == expected


def test_failure_mid_write_keeps_earlier_checkpoints_and_leaves_nothing(tmp_path, backend,
                                                                      monkeypatch):
    writer = CheckpointWriter(str(tmp_path))
    writer.write(1, {"op": [backend]})
    calls = {"n": 0}
    original = writer_module.write_keyed_file

    def failing_write(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError("disk full (injected)")
        return original(*args, **kwargs)

    monkeypatch.setattr(writer_module, "write_keyed_file", failing_write)
    with pytest.raises(OSError, match="injected"):
        writer.write(2, {"op": [backend]})
    writer.close()
    assert not (tmp_path / "chk-2").exists()  # its files, then its emptied directories
    assert Checkpoint.open(str(tmp_path)).checkpoint_id == 1
    with pytest.raises(CheckpointNotFoundError, match="no complete checkpoint 2"):
        Checkpoint.open(str(tmp_path), checkpoint_id=2)
    for table in backend._tables.values():
        for state_map in table.maps:
            assert state_map.highest_required_snapshot_version == 0


def test_snapshot_versions_are_released_after_a_successful_write(tmp_path, backend):
    CheckpointWriter(str(tmp_path)).write(1, {"op": [backend]})
    for table in backend._tables.values():
        assert all(m.highest_required_snapshot_version == 0 for m in table.maps)


def data_file(tmp_path: Path, state: str = "value") -> Path:
    return next((tmp_path / "chk-1" / "data").glob(f"op.{state}.*"))


@pytest.fixture
def written(tmp_path, backend):
    CheckpointWriter(str(tmp_path)).write(1, {"op": [backend]})
    return tmp_path


def test_truncated_data_file_is_detected(written):
    path = data_file(written)
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(CorruptCheckpointError, match=f"{path.name}.*truncated"):
        Checkpoint.open(str(written)).verify()


def test_flipped_bit_is_detected(written):
    checkpoint = Checkpoint.open(str(written))
    location = checkpoint.operator().keyed_state("value").files[0].locations[3]
    path = data_file(written)
    payload = bytearray(path.read_bytes())
    payload[location.offset + location.length - 3] ^= 0x10
    path.write_bytes(bytes(payload))
    with pytest.raises(CorruptCheckpointError, match=f"{path.name}: checksum mismatch"):
        list(checkpoint.read_keyed_state("value"))


def test_missing_data_file_is_detected(written):
    path = data_file(written, "list")
    path.unlink()
    with pytest.raises(CorruptCheckpointError, match=f"{path.name} is missing"):
        restore_keyed_backend(Checkpoint.open(str(written)), 0, 1)


def test_corrupt_and_unknown_version_metadata(written):
    metadata = written / "chk-1" / "_metadata.json"
    document = json.loads(metadata.read_text())
    metadata.write_text(json.dumps({**document, "formatVersion": 99}))
    with pytest.raises(UnsupportedFormatVersionError, match="format version 99"):
        Checkpoint.open(str(written))
    metadata.write_text("{not json")
    with pytest.raises(CorruptCheckpointError, match="_metadata.json is not valid JSON"):
        Checkpoint.open(str(written))
    del document["operators"][0]["keyedStates"][0]["kind"]
    metadata.write_text(json.dumps(document))
    with pytest.raises(CorruptCheckpointError, match="invalid: KeyError: 'kind'"):
        Checkpoint.open(str(written))


def test_unknown_names_and_paths_are_reported(written, tmp_path):
    checkpoint = Checkpoint.open(str(written))
    with pytest.raises(StateNotFoundError, match="no keyed state .* named 'nope'; available:"
                       " 'agg', 'list'"):
        list(checkpoint.read_keyed_state("nope"))
    with pytest.raises(StateNotFoundError, match="no operator named 'x'; available: 'op'"):
        checkpoint.operator("x")
    with pytest.raises(IncompatibleCheckpointError, match=r"key groups \[0, 200\] are outside"):
        list(checkpoint.read_keyed_state("value", key_groups=KeyGroupRange(0, 200)))
    with pytest.raises(CheckpointNotFoundError, match="does not exist"):
        Checkpoint.open(str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointNotFoundError, match="no complete checkpoint under"):
        Checkpoint.open(str(tmp_path / "empty"))


def test_newest_complete_checkpoint_is_chosen(tmp_path, backend):
    writer = CheckpointWriter(str(tmp_path))
    writer.write(1, {"op": [backend]})
    writer.write(12, {"op": [backend]})
    (tmp_path / "chk-13" / "data").mkdir(parents=True)  # an attempt that never committed
    assert Checkpoint.open(str(tmp_path)).checkpoint_id == 12
    assert Checkpoint.open(str(tmp_path), checkpoint_id=1).checkpoint_id == 1
    assert Checkpoint.open(str(tmp_path / "chk-1")).checkpoint_id == 1


def test_full_snapshot_cleanup_drops_expired_values(tmp_path):
    clock = ManualClock(0)
    backend = KeyedStateBackend("long", 128, clock=clock)
    cleanup = TtlConfig(timedelta(seconds=10), cleanup_full_snapshot=True)
    kept = backend.get_state(ValueStateDescriptor("kept", "long", ttl=TTL))
    cleaned = backend.get_state(ListStateDescriptor("cleaned", "long", ttl=cleanup))
    for key in range(20):
        backend.set_current_key(key)
        kept.update(key)
        cleaned.add(key)
        if key == 10:
            clock.advance(5_000)
    clock.set(12_000)  # entries of keys 0..10 (written at 0) are expired, 11..19 are not
    CheckpointWriter(str(tmp_path)).write(1, {"op": [backend]})
    restored = dump(restore_keyed_backend(Checkpoint.open(str(tmp_path)), 0, 1, clock=clock))
    assert sorted(k for k, _ in restored["cleaned"]) == list(range(11, 20))
    assert len(restored["kept"]) == 20


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(-50, 50), st.sampled_from(["v", "l", "m"]),
                          st.integers(0, 3), st.integers(-(2**63), 2**63 - 1)), max_size=60),
       st.integers(1, 5))
def test_random_backends_round_trip(tmp_path_factory, operations, parallelism):
    backend = KeyedStateBackend("int", 16)
    value = backend.get_state(ValueStateDescriptor("v", "long", namespace_type="int"))
    items = backend.get_state(ListStateDescriptor("l", "long", namespace_type="int"))
    entries = backend.get_state(MapStateDescriptor("m", "int", "long", namespace_type="int"))
    for key, kind, namespace, number in operations:
        backend.set_current_key(key)
        backend.set_current_namespace(namespace)
        if kind == "v":
            value.update(number)
        elif kind == "l":
            items.add(number)
        else:
            entries.put(namespace, number)
    root = tmp_path_factory.mktemp("random")
    CheckpointWriter(str(root)).write(3, {"op": [backend]})
    checkpoint = Checkpoint.open(str(root))
    restored = [restore_keyed_backend(checkpoint, i, parallelism) for i in range(parallelism)]
    assert merged([dump(s) for s in restored]) == dump(backend)


def test_a_list_longer_than_a_record_batch_round_trips(tmp_path):
    from statesource.format.ipc import MAX_ROWS_PER_BATCH

    backend = KeyedStateBackend("string", 128)
    items = backend.get_state(ListStateDescriptor("items", "long"))
    backend.set_current_key("big")
    items.add_all(range(MAX_ROWS_PER_BATCH + 10))
    backend.set_current_key("small")
    items.add(1)
    CheckpointWriter(str(tmp_path)).write(1, {"op": [backend]})
    checkpoint = Checkpoint.open(str(tmp_path))
    locations = checkpoint.operator().keyed_state("items").files[0].locations
    assert max(loc.batch_count for loc in locations) == 2
    assert dump(restore_keyed_backend(checkpoint, 0, 1)) == dump(backend)


def test_many_tiny_key_groups_are_encoded_in_chunks(tmp_path):
    backend = KeyedStateBackend("long", 32768)
    value = backend.get_state(ValueStateDescriptor("v", "long"))
    for key in range(20_000):
        backend.set_current_key(key)
        value.update(-key)
    CheckpointWriter(str(tmp_path)).write(1, {"op": [backend]})
    checkpoint = Checkpoint.open(str(tmp_path))
    locations = checkpoint.operator().keyed_state("v").files[0].locations
    assert len(locations) > 10_000 and all(loc.batch_count == 1 for loc in locations)
    restored = restore_keyed_backend(checkpoint, 5, 7)
    assert dump(restored)["v"] == {k: v for k, v in dump(backend)["v"].items()
                                   if restored._key_group_of(k[0]) in restored.key_group_range}


def test_relative_paths_resolve_against_the_working_directory(tmp_path, backend, monkeypatch):
    monkeypatch.chdir(tmp_path)
    CheckpointWriter("relative/checkpoints").write(1, {"op": [backend]})
    checkpoint = Checkpoint.open("relative/checkpoints")
    assert checkpoint.location.path == str(tmp_path / "relative" / "checkpoints" / "chk-1")


def test_a_failing_snapshot_releases_the_ones_already_taken(tmp_path, backend, monkeypatch):
    broken = OperatorStateBackend()
    monkeypatch.setattr(broken, "snapshot", lambda checkpoint_id: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        CheckpointWriter(str(tmp_path)).write_async(
            1, {"op": [SubtaskBackends(keyed=backend, operator=broken)]})
    for table in backend._tables.values():
        assert all(m.highest_required_snapshot_version == 0 for m in table.maps)


def test_bad_write_requests_are_refused_up_front(tmp_path, backend, monkeypatch):
    writer = CheckpointWriter(str(tmp_path))
    with pytest.raises(InvalidArgumentError, match="checkpoint id -1"):
        writer.write_async(-1, {"op": [backend]})
    with pytest.raises(InvalidArgumentError, match="no operators"):
        writer.write_async(1, {})
    release = threading.Event()
    original = writer_module.write_keyed_file
    monkeypatch.setattr(writer_module, "write_keyed_file",
                        lambda *a, **k: (release.wait(10), original(*a, **k))[1])
    pending = writer.write_async(1, {"op": [backend]})
    with pytest.raises(InvalidArgumentError, match="checkpoint 1 already exists"):
        writer.write_async(1, {"op": [backend]})  # still being written
    release.set()
    pending.result(10)
    with pytest.raises(InvalidArgumentError, match="checkpoint 1 already exists"):
        writer.write_async(1, {"op": [backend]})
    writer.close()


def test_restoring_keyed_state_of_an_operator_without_any_is_reported(tmp_path):
    source = OperatorStateBackend()
    source.get_list_state("offsets", "long").update([1])
    CheckpointWriter(str(tmp_path)).write(1, {"src": [source]})
    with pytest.raises(StateNotFoundError, match="operator 'src' has no keyed state"):
        restore_keyed_backend(Checkpoint.open(str(tmp_path)), 0, 1)


def test_file_uris_go_through_pyarrow_fs(tmp_path, backend):
    uri = (tmp_path / "by-uri").as_uri()
    CheckpointWriter(uri).write(1, {"op": [backend]})
    assert (tmp_path / "by-uri" / "chk-1" / "_metadata.json").is_file()
    assert dump(restore_keyed_backend(Checkpoint.open(uri), 0, 1)) == dump(backend)


def test_subtasks_that_registered_different_states_are_written_by_name(tmp_path):
    subtasks = [KeyedStateBackend("long", 128, key_group_range_for_operator(128, 2, i))
                for i in range(2)]
    model = {}
    for index, backend in enumerate(subtasks):
        names = ["only_first", "both"] if index == 0 else ["both"]
        for name in names:
            state = backend.get_state(ValueStateDescriptor(name, "long"))
            key = next(k for k in range(1000) if backend._key_group_of(k)
                       in backend.key_group_range)
            backend.set_current_key(key)
            state.update(index)
            model.setdefault(name, {})[(key, None)] = index
    CheckpointWriter(str(tmp_path)).write(1, {"op": subtasks})
    checkpoint = Checkpoint.open(str(tmp_path))
    assert len(checkpoint.operator().keyed_state("only_first").files) == 1
    assert merged([dump(restore_keyed_backend(checkpoint, 0, 1))]) == model


def test_subtasks_declaring_a_state_differently_are_refused(tmp_path):
    subtasks = [KeyedStateBackend("long", 128, key_group_range_for_operator(128, 2, i))
                for i in range(2)]
    subtasks[0].get_state(ValueStateDescriptor("v", "long"))
    subtasks[1].get_state(ValueStateDescriptor("v", "string"))
    with pytest.raises(InvalidArgumentError, match="subtasks declare state 'v' differently"):
        CheckpointWriter(str(tmp_path)).write(1, {"op": subtasks})
    assert not (tmp_path / "chk-1" / "_metadata.json").exists()


def test_partly_expired_sample_state_round_trips_and_reads_like_flink(tmp_path, backend, clock):
    """The sample's TTL state is partly expired when written: stored rows keep every
    element and entry, and reads through a restored backend see only the fresh ones."""
    CheckpointWriter(str(tmp_path)).write(1, {"op": [backend]})
    restored = restore_keyed_backend(Checkpoint.open(str(tmp_path)), 0, 1, clock=clock)
    stored = dump(restored)
    assert stored == dump(backend)
    fresh_key, stale_key = KEYS[0], KEYS[1]
    assert [e for e, _ in stored["ttl_list"][(fresh_key, None)]] == [0, 100]
    assert set(stored["ttl_map"][(fresh_key, None)]) == {"a", "fresh"}
    events = restored.get_state(ListStateDescriptor("ttl_list", "long", ttl=TTL))
    pages = restored.get_state(MapStateDescriptor("ttl_map", "string", "long", ttl=TTL))
    restored.set_current_key(fresh_key)
    assert events.get() == [100] and pages.items() == [("fresh", 0)]
    restored.set_current_key(stale_key)
    assert events.get() == [] and pages.items() == []


@pytest.mark.parametrize("second_start, version", [(5, 3), (6, 2)])
def test_the_version_written_is_the_lowest_that_records_the_files(second_start, version):
    """FORMAT.md section 10: version 3 exactly when a state's files cover overlapping
    key-group ranges. Files of 0..5 and 5..9 share key group 5 (its rows are in one of
    them): they overlap, and a version-2 reader would refuse them; 0..5 and 6..9 do not."""
    def rows_at(key_group: int) -> KeyGroupLocation:
        return KeyGroupLocation(key_group, 0, 1, 16, 100, 1, 1, 0)

    files = (DataFile("chk-1/data/a.arrow", KeyGroupRange(0, 5), 200, (rows_at(1),)),
             DataFile("chk-2/data/b.arrow", KeyGroupRange(second_start, 9), 200, (rows_at(7),)))
    state = KeyedStateMeta.of(ValueStateDescriptor("v", "long").declaration, files)
    operator = OperatorMeta("op", 1, 10, LONG, (state,), ())
    payload = CheckpointMeta(2, 0, (operator,)).to_json_bytes()
    assert json.loads(payload)["formatVersion"] == version
    read = CheckpointMeta.from_json_bytes(payload, "chk-2/_metadata.json", "chk-2")
    assert read.format_version == version
    assert read.operator().keyed_state("v").files == files


def test_a_key_group_index_round_trips_field_by_field():
    """Every field distinct, so that a column read into another field cannot pass (the index
    is written and read column-wise, in the dataclass's field order)."""
    locations = (KeyGroupLocation(3, 2, 4, 16, 1000, 9, 7, 12345),
                 KeyGroupLocation(5, 6, 1, 1016, 40, 3, 2, 678))
    data_file = DataFile("chk-1/data/a.arrow", KeyGroupRange(0, 9), 2000, locations)
    written = data_file.to_json()
    assert written["keyGroups"] == {
        "keyGroup": [3, 5], "batchStart": [2, 6], "batchCount": [4, 1], "offset": [16, 1016],
        "length": [1000, 40], "rows": [9, 3], "entries": [7, 2], "crc32": [12345, 678]}
    assert DataFile.from_json(json.loads(json.dumps(written)), str) == data_file

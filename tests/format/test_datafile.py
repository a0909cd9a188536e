"""The one data-file writer: ranges and CRCs checked independently; producer mistakes refused."""

from __future__ import annotations

import zlib

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statesource.errors import CorruptCheckpointError, InvalidArgumentError
from statesource.format import write_keyed_file
from statesource.format.datafile import write_delta_file
from statesource.format.deltas import EncodedRun
from statesource.format.locations import DataFile
from statesource.format.storage import resolve
from statesource.keygroups import KeyGroupRange

SCHEMA = pa.schema([("key_group", pa.int32()), ("key", pa.string()), ("value", pa.int64())])


def batch(key_group: int, rows: int, start: int = 0) -> pa.RecordBatch:
    return pa.record_batch([
        pa.array([key_group] * rows, pa.int32()),
        pa.array([f"k{start + i}" for i in range(rows)]),
        pa.array(range(start, start + rows), pa.int64()),
    ], schema=SCHEMA)


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.integers(0, 31), st.lists(st.integers(1, 300), min_size=1,
                                                      max_size=3), max_size=12))
def test_every_range_is_exactly_its_key_groups_batches(tmp_path_factory, groups):
    path = tmp_path_factory.mktemp("datafile") / "f.arrow"
    target = resolve(str(path))
    key_groups = [(kg, [batch(kg, rows, i * 1000) for i, rows in enumerate(sizes)], len(sizes))
                  for kg, sizes in sorted(groups.items())]
    data_file = write_keyed_file(target, "f.arrow", SCHEMA, KeyGroupRange(0, 31), key_groups)
    payload = path.read_bytes()
    assert data_file.size_bytes == len(payload)
    whole = pa.ipc.open_file(str(path)).read_all()  # a plain Arrow IPC file
    assert whole.num_rows == sum(sum(sizes) for sizes in groups.values())
    expected_batch = 0
    for location, (kg, batches, entries) in zip(data_file.locations, key_groups):
        piece = payload[location.offset:location.offset + location.length]
        assert zlib.crc32(piece) == location.crc32
        assert (location.key_group, location.entries, location.batch_start) == (
            kg, entries, expected_batch)
        stream = pa.BufferReader(piece)
        decoded = [pa.ipc.read_record_batch(pa.ipc.read_message(stream), SCHEMA)
                   for _ in range(location.batch_count)]
        assert pa.Table.from_batches(decoded).equals(pa.Table.from_batches(batches))
        assert location.rows == sum(b.num_rows for b in batches)
        expected_batch += len(batches)
    for before, after in zip(data_file.locations, data_file.locations[1:]):
        assert after.offset == before.offset + before.length  # adjacent: one read per range


@pytest.mark.parametrize(("key_groups", "message"), [
    ([(3, [batch(3, 2)], 2), (2, [batch(2, 2)], 2)], "key groups must ascend"),
    ([(40, [batch(40, 2)], 2)], r"outside the file's key groups \[0, 31\]"),
    ([(3, [batch(4, 2)], 2)], "holds rows of key groups 4..4"),
    ([(3, [], 0)], "non-empty batches"),
    ([(3, [batch(3, 0)], 0)], "non-empty batches"),
    ([(3, [pa.record_batch([pa.array([3], pa.int32())], names=["key_group"])], 1)],
     "expected"),
])
def test_producer_mistakes_are_refused_and_leave_no_file(tmp_path, key_groups, message):
    path = tmp_path / "f.arrow"
    with pytest.raises(InvalidArgumentError, match=message):
        write_keyed_file(resolve(str(path)), "f.arrow", SCHEMA, KeyGroupRange(0, 31),
                         key_groups)
    assert not path.exists()


def run(key_group: int, rows: int, priors: int = 0, start: int = 0) -> EncodedRun:
    return EncodedRun(key_group, pa.Table.from_batches([batch(key_group, rows, start)]),
                      pa.Table.from_batches([batch(key_group, priors, start)]), rows, priors)


@settings(max_examples=30, deadline=None)
@given(st.dictionaries(st.integers(0, 31), st.tuples(st.integers(1, 9000), st.integers(0, 9000)),
                       min_size=1, max_size=8))
def test_every_run_is_its_rows_of_its_shared_range(tmp_path_factory, sizes):
    path = tmp_path_factory.mktemp("deltafile") / "d.arrow"
    runs = [run(kg, rows, priors) for kg, (rows, priors) in sorted(sizes.items())]
    delta = write_delta_file(resolve(str(path)), "d.arrow", SCHEMA, KeyGroupRange(0, 31), 7,
                             runs)
    payload = path.read_bytes()
    assert delta.sequence == 7 and delta.row_addressed
    assert pa.ipc.open_file(str(path)).read_all().num_rows == sum(map(sum, sizes.values()))
    listed = [(loc, r.rows) for loc, r in zip(delta.file.locations, runs)]
    priors = {loc.key_group: loc for loc in delta.priors}
    listed += [(priors[r.key_group], r.priors) for r in runs if r.priors.num_rows]
    assert len(priors) == sum(1 for r in runs if r.priors.num_rows)
    for location, rows in listed:
        piece = payload[location.offset:location.offset + location.length]
        assert zlib.crc32(piece) == location.crc32
        stream = pa.BufferReader(piece)
        decoded = pa.Table.from_batches(
            [pa.ipc.read_record_batch(pa.ipc.read_message(stream), SCHEMA)
             for _ in range(location.batch_count)])
        assert stream.tell() == location.length
        assert decoded.slice(location.row_offset, location.rows).equals(rows)
    delta.file.check(delta.priors)


@pytest.mark.parametrize(("runs", "message"), [
    ([run(3, 2), run(2, 2)], "after key group 3"),
    ([run(40, 2)], r"outside \[0, 31\]"),
    ([run(3, 0, 2)], "has no rows"),
    ([EncodedRun(3, pa.Table.from_batches([batch(4, 2)]), pa.Table.from_batches([batch(3, 0)]),
                 2, 0)], "given as key group 3 holds rows of key group 4"),
    ([EncodedRun(3, pa.Table.from_batches([batch(3, 1)]), pa.Table.from_batches([batch(5, 1)]),
                 1, 1)], "given as key group 3 holds rows of key group 5"),
])
def test_delta_file_producer_mistakes_are_refused_and_leave_no_file(tmp_path, runs, message):
    path = tmp_path / "d.arrow"
    with pytest.raises(InvalidArgumentError, match=message):
        write_delta_file(resolve(str(path)), "d.arrow", SCHEMA, KeyGroupRange(0, 31), 1, runs)
    assert not path.exists()


def test_a_task_report_reads_back_as_the_data_file(tmp_path):
    data_file = write_keyed_file(resolve(str(tmp_path / "f.arrow")), "data/f.arrow", SCHEMA,
                                 KeyGroupRange(0, 31), [(3, [batch(3, 2)], 2)])
    assert DataFile.from_json_text(data_file.to_json_text()) == data_file


@pytest.mark.parametrize(("text", "words"), [
    ("not json", "Expecting value"),
    ("[]", "expected an object, got []"),
    ('{"path": "f.arrow"}', "missing field 'keyGroups'"),
    ('{"path": "f.arrow", "keyGroups": {"keyGroup": []}}', "missing field 'batchStart'"),
])
def test_a_malformed_task_report_is_refused(text, words):
    with pytest.raises(CorruptCheckpointError, match="a task reported an invalid data file") \
            as info:
        DataFile.from_json_text(text)
    assert words in str(info.value)

"""The column-wise decoder of canonical key groups against the per-value decoder: the same
tables (every column, every row, in order) or the same error, for every state of every
snapshot there is.

The truth is the per-value decoder (:mod:`statesource.flink.layouts.keyed`), checked against
Flink's own expected state by the other tests of tests/flink; here a reader with the
column decoders switched off reads the same snapshot.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from generated_savepoints import (
    ENTRIES,
    corrupted_copy,
    export_savepoint,
    wrong_length_after_a_key,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flink_snapshots import SAVEPOINTS, only
from statesource.errors import (
    CorruptCheckpointError,
    IncompatibleCheckpointError,
    StateSourceError,
)
from statesource.flink.declarations import declaration
from statesource.flink.layouts.canonical_entries import StateEntries
from statesource.flink.layouts.canonical_writer import frame_key_group
from statesource.flink.layouts.columnar import state_decoder
from statesource.flink.layouts.framing import canonical_sections
from statesource.flink.layouts.keyed import CanonicalSection
from statesource.flink.layouts.regroup import Regrouper
from statesource.flink.operations.census import count_snapshot
from statesource.flink.operations.rescale import rescale_max_parallelism
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.serializers.encoding import encode
from statesource.flink.serializers.primitives import STRING_SERIALIZER
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.flink.statefiles.keyed_header import KeyedHeader
from statesource.flink.statefiles.state_meta_writer import keyed_state_info
from statesource.format.columns import KEY, NAMESPACE, data_schema
from statesource.keygroups import assign_to_key_group
from statesource.model import StateKind
from statesource.types import STRING

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "flink"


def _snapshot_dirs() -> list[Path]:
    found = {p.parent for root in (SAVEPOINTS, FIXTURES) for p in root.rglob("_metadata")}
    return sorted(found)


class _PerValue(FlinkCheckpoint):
    """The reader with no column decoders: every key group decoded value by value."""

    def _columns(self, op, info):  # type: ignore[no-untyped-def]
        return None


def _read(checkpoint: FlinkCheckpoint, operator: str, state: str
          ) -> list[pa.Table] | tuple[type, str]:
    try:
        return list(checkpoint.read_keyed_state(state, operator=operator))
    except StateSourceError as error:
        return (type(error), str(error))


def _same(fast: list[pa.Table] | tuple, slow: list[pa.Table] | tuple, where: str) -> None:
    if isinstance(slow, tuple) or isinstance(fast, tuple):
        assert fast == slow, where
        return
    assert len(fast) == len(slow), where
    for a, b in zip(fast, slow):
        assert a.schema == b.schema, where
        assert a.equals(b), (where, a.slice(0, 3).to_pylist(), b.slice(0, 3).to_pylist())


def _compare_all(path: Path) -> int:
    """Compare every keyed and timer state of the snapshot; how many read column-wise."""
    fast, slow = FlinkCheckpoint.open(str(path)), _PerValue.open(str(path))
    columnar = 0
    for op in fast.snapshot.operators:
        if fast.snapshot.undecodable(op) is not None:  # refused alike: test_operator_isolation
            continue
        header = fast.snapshot.header(op)
        for info in header.states if header else ():
            where = f"{path} {op.label} {info.name}"
            _same(_read(fast, op.operator_id, info.name), _read(slow, op.operator_id, info.name),
                  where)
            if any(h.savepoint for h in fast.snapshot.keyed_handles(op)) and \
                    fast._columns(op, info) is not None:
                columnar += 1
    return columnar


@pytest.mark.parametrize("path", _snapshot_dirs(), ids=lambda p: str(p).split("flink")[-1])
def test_every_state_of_every_snapshot_reads_the_same(path):
    _compare_all(path)


def test_the_common_serializers_are_read_column_wise():
    """Not vacuous: the fixtures' canonical savepoints have states of Long, String, Double,
    Tuple2 and POJO values, TTL, lists, maps, TimeWindow namespaces and timers."""
    names = {}
    for variant in ("mp256", "mp128-snappy", "types", "encoding"):
        checkpoint = FlinkCheckpoint.open(str(FIXTURES / variant / "canonical"))
        for op in checkpoint.snapshot.operators:
            header = checkpoint.snapshot.header(op)
            for info in header.states if header else ():
                if checkpoint._columns(op, info) is not None:
                    names.setdefault(variant, set()).add(info.name)
    assert all(names.get(v) for v in ("mp256", "mp128-snappy", "types", "encoding")), names
    assert sum(len(n) for n in names.values()) >= 15, names


# -- hostile bytes: whatever is broken, both decoders answer the same -----------------------

@pytest.fixture(scope="module")
def small_savepoint(tmp_path_factory) -> Path:
    return export_savepoint(tmp_path_factory.mktemp("columnar"), {
        f"k{i}": (i, [i, -i], {"a": str(i), "b": None}) for i in range(40)})


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(at=st.floats(0, 1, exclude_max=True), data=st.binary(min_size=1, max_size=6))
def test_corrupt_key_groups_fail_or_read_the_same(small_savepoint, tmp_path_factory, at, data):
    broken = corrupted_copy(small_savepoint, tmp_path_factory.mktemp("broken") / "sp", at, data)
    _compare_all(broken)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(at=st.floats(0, 1, exclude_max=True), data=st.binary(min_size=1, max_size=6))
def test_corrupt_snappy_key_groups_fail_or_read_the_same(tmp_path_factory, at, data):
    """Compressed: a damaged chunk header, checksum or Snappy block is refused with the file
    and the offset (the same error either way), whatever it hits."""
    broken = corrupted_copy(FIXTURES / "mp128-snappy" / "canonical",
                        tmp_path_factory.mktemp("broken") / "sp", at, data)
    _compare_all(broken)


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(variant=st.sampled_from(["mp256", "mp128-snappy"]), at=st.floats(0, 1, exclude_max=True),
       data=st.binary(min_size=1, max_size=6))
def test_corrupt_native_key_groups_fail_or_read_the_same(tmp_path_factory, variant, at, data):
    """Native key groups, read many at once (:mod:`statesource.flink.layouts.native_columns`): a
    damaged one declines the batch, and the per-value decoder reads or refuses each."""
    broken = corrupted_copy(FIXTURES / variant / "native",
                            tmp_path_factory.mktemp("broken") / "sp", at, data)
    _compare_all(broken)


# -- generated states --------------------------------------------------------------------------

@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=ENTRIES)
def test_generated_states_read_the_same(tmp_path_factory, entries):
    savepoint = export_savepoint(tmp_path_factory.mktemp("generated"), entries)
    assert _compare_all(savepoint) == 5
    rows = sum(t.num_rows for t in FlinkCheckpoint.open(str(savepoint)).read_keyed_state(
        "value", operator="op"))
    assert rows == len(entries)


# -- the rescale moves whole key groups column-wise: the savepoint the per-pair path writes ---

def _files(savepoint: Path) -> list[bytes]:
    """The keyed-state files of every operator, in the order _metadata names them."""
    snapshot = FlinkSnapshot.open(str(savepoint))
    return [snapshot.read_bytes(h.stream, 0, h.stream.size)
            for op in snapshot.operators for h in snapshot.keyed_handles(op)]


@pytest.mark.parametrize("source, new", [
    (FIXTURES / "mp256" / "canonical", 1024), (FIXTURES / "mp256" / "canonical", 128),
    (FIXTURES / "mp128-snappy" / "canonical", 256), (FIXTURES / "types" / "canonical", 4096),
    (FIXTURES / "encoding" / "canonical", 200)], ids=lambda v: str(v).split("flink/")[-1])
def test_the_rescale_writes_what_the_per_pair_path_writes(tmp_path, monkeypatch, source, new):
    moved = []
    original = Regrouper.regroup

    def counted(self, *args):  # type: ignore[no-untyped-def]
        found = original(self, *args)
        moved.append(found is not None)
        return found

    monkeypatch.setattr(Regrouper, "regroup", counted)
    fast = rescale_max_parallelism(source, tmp_path / "fast", new)
    monkeypatch.setattr(Regrouper, "regroup", lambda self, *args: None)
    slow = rescale_max_parallelism(source, tmp_path / "slow", new)
    assert any(moved)
    assert fast.operators == slow.operators
    assert _files(tmp_path / "fast") == _files(tmp_path / "slow")


def test_a_key_in_the_wrong_key_group_is_named_by_the_per_pair_path(tmp_path, small_savepoint):
    """A key whose hash is not its key group's (its last character changed; the framing stays
    sound): the column-wise mover declines it and the rescale names the key, as before."""
    snapshot = FlinkSnapshot.open(str(small_savepoint))
    op = snapshot.operator("op")
    piece = snapshot.key_group_bytes(op)[0]
    broken = tmp_path / "changed"
    shutil.copytree(small_savepoint, broken)
    target = broken / Path(snapshot.file_location(piece.handle.stream).path).name
    raw = bytearray(target.read_bytes())
    sections = canonical_sections(bytes(raw[piece.begin:piece.end]), piece.key_group, 1,
                                  len(snapshot.header(op).states))
    assert sections is not None
    # The first pair's composite key: prefix, the String key, VoidNamespace's one byte.
    at = piece.begin + int(sections[0].key_end[0]) - 2
    key = bytes(raw[piece.begin + int(sections[0].key_start[0]) + 2:at + 1]).decode()
    letter = next(c for c in "abcdefghij"
                  if assign_to_key_group(key[:-1] + c, STRING, 128) != piece.key_group)
    raw[at] = ord(letter)
    target.write_bytes(bytes(raw))
    with pytest.raises(CorruptCheckpointError, match="is stored in key group"):
        rescale_max_parallelism(broken, tmp_path / "out", 256)


def test_a_map_repeating_a_user_key_is_refused_as_by_the_per_value_decoder(tmp_path,
                                                                          small_savepoint):
    """Two pairs of one map with the same user key (one renamed; the framing stays sound):
    the per-value decoder refuses the map, and so does the reader, whichever path."""
    snapshot = FlinkSnapshot.open(str(small_savepoint))
    op = snapshot.operator("op")
    header = snapshot.header(op)
    state = next(info for info in header.states if info.name == "map")
    piece = snapshot.key_group_bytes(op)[0]
    broken = tmp_path / "repeated"
    shutil.copytree(small_savepoint, broken)
    target = broken / Path(snapshot.file_location(piece.handle.stream).path).name
    raw = bytearray(target.read_bytes())
    (section,) = canonical_sections(bytes(raw[piece.begin:piece.end]), piece.key_group, 1,
                                    len(header.states), (state.state_id,))
    # Every map holds user keys "a" and "b", each the last byte of its composite key.
    ends = section.key_end.tolist()
    last_bytes = [raw[piece.begin + end - 1] for end in ends]
    assert sorted(set(last_bytes)) == [ord("a"), ord("b")]
    raw[piece.begin + ends[last_bytes.index(ord("b"))] - 1] = ord("a")
    target.write_bytes(bytes(raw))
    for reader in (FlinkCheckpoint, _PerValue):
        with pytest.raises(IncompatibleCheckpointError, match="holds the user key 'a' twice"):
            list(reader.open(str(broken)).read_keyed_state("map", operator="op"))


@pytest.mark.parametrize("path", _snapshot_dirs(), ids=lambda p: str(p).split("flink")[-1])
def test_inspect_counts_the_same_column_wise(monkeypatch, path):
    """``inspect`` (and its what-if parallelism) counts entries, rows and bytes per key group
    column-wise where it can: the same counts as value by value."""
    fast = count_snapshot(FlinkCheckpoint.open(str(path)))
    monkeypatch.setattr(FlinkCheckpoint, "columnar_sections", lambda self, *args: None)
    assert count_snapshot(FlinkCheckpoint.open(str(path))) == fast


def test_inspect_of_a_canonical_savepoint_decodes_column_wise():
    """Not vacuous: every key group of the shared canonical savepoint is counted column-wise."""
    checkpoint = FlinkCheckpoint.open(str(only("java/canonical/savepoint-*")))
    op = checkpoint.snapshot.operator("stateful")
    pieces = checkpoint.snapshot.key_group_bytes(op)
    assert pieces and all(
        checkpoint.columnar_sections(op, p, checkpoint.snapshot.piece_bytes(p)) is not None
        for p in pieces)


# -- a String key with a String namespace: each followed by its length, in one or two bytes ----

def test_a_wrong_length_after_a_key_is_refused(tmp_path):
    """Flink writes the key's length after it: other bytes would make equal entries differ
    in bytes, so both decoders refuse them, naming the file."""
    savepoint, victim = wrong_length_after_a_key(tmp_path)
    for reader in (FlinkCheckpoint, _PerValue):
        with pytest.raises(CorruptCheckpointError, match=f"{victim}.*the length after the key"):
            list(reader.open(str(savepoint)).read_keyed_state("named", operator="op"))


@pytest.mark.parametrize("size", [1, 255, 256, 300, 511, 512, 60000])
def test_lengths_after_key_and_namespace_are_read_column_wise(size):
    """Flink writes the length after the key (and the namespace) in as many bytes as it
    needs: one below 256, two from 256 (three from 65,536: such keys are past the
    framing scan's 64 KiB). A key group of such keys and namespaces (ASCII, which the
    column decoders take) decodes column-wise, not declined to the per-value decoder,
    into the entries written."""
    info = keyed_state_info("named", StateKind.VALUE, "string", {"value": STRING_SERIALIZER},
                            ttl=False)
    header = KeyedHeader(6, False, info.namespace, (info,), 0)
    # A StringValue of n ASCII characters is its length + 1 as a varint, then the n bytes.
    key = "k" * (size - 1 - (size > 127) - (size > 16383))
    entries = {(key, "n" * n): f"v{n}" for n in (0, 200, 300, 1000)}
    assert len(encode(header.key, key)) == size
    state = StateEntries(header.key, info, 128)
    key_group = state.keys.key_group_of(key)
    pairs = sorted(p for (k, namespace), value in entries.items()
                   for p in state.pairs(k, namespace, value, key_group))
    data = frame_key_group(key_group, 128, [CanonicalSection(0, pairs)])
    schema = data_schema(STRING, declaration(info))
    columns = state_decoder(header, info, schema, 1)
    assert columns is not None
    sections = canonical_sections(data, key_group, 1, 1)
    assert sections is not None
    table = columns.table(np.frombuffer(data, np.uint8), key_group, sections[0])
    assert table is not None
    found = table.to_pydict()
    assert dict(zip(zip(found[KEY], found[NAMESPACE]), found[table.column_names[3]])) == entries

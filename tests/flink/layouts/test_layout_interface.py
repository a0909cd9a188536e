"""Both key-group layouts through :class:`KeyGroupLayout` against the snapshot reader.

For every keyed state of real snapshots (the fixtures' canonical and native savepoints of
one run each, and the shared Java and PyFlink ones): each handle gets the layout its
``_metadata`` class says; the layout decodes value by value and column-wise the rows
:class:`FlinkCheckpoint` reads; its pairs are those of the canonical savepoint of the
same run; and what it cannot deliver is what the reader reports.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable
from pathlib import Path

import pyarrow as pa
import pytest

from flink_snapshots import JAVA_SNAPSHOTS, only
from statesource.errors import StateSourceError
from statesource.flink.handles import OperatorSnapshot
from statesource.flink.layouts.base import KeyGroupData, KeyGroupLayout
from statesource.flink.layouts.canonical import CANONICAL
from statesource.flink.layouts.canonical_writer import prefix_bytes
from statesource.flink.layouts.dispatch import blockers, layout_of
from statesource.flink.layouts.keyed import canonical_sections
from statesource.flink.layouts.native import NATIVE
from statesource.flink.layouts.regroup import Regrouper
from statesource.flink.operations.savepoint_writing import TIMER_KEY_OFFSET
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.serializers.columns import decoder_for
from statesource.flink.statefiles.keyed_header import StateInfo

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "flink"
VARIANTS = ("mp256", "mp128-snappy", "types", "encoding")


def _snapshots() -> list[tuple[str, Path]]:
    found = [(f"{variant}/{kind}", FIXTURES / variant / kind)
             for variant in VARIANTS for kind in ("canonical", "native")]
    found += [(f"java/{name}", only(pattern)) for name, pattern in JAVA_SNAPSHOTS.items()]
    return [*found, ("pyflink", only("pyflink/savepoint-*"))]


SNAPSHOTS = _snapshots()
IDS = [name for name, _ in SNAPSHOTS]


def _pieces(checkpoint: FlinkCheckpoint, op: OperatorSnapshot
            ) -> list[tuple[KeyGroupLayout, KeyGroupData]]:
    snapshot = checkpoint.snapshot
    return [(layout_of(piece.handle),
             snapshot.key_group_data(piece, snapshot.piece_bytes(piece)))
            for piece in snapshot.key_group_bytes(op)]


def _readable(checkpoint: FlinkCheckpoint, op: OperatorSnapshot) -> list[StateInfo]:
    """The operator's keyed states, where its layout delivers them all (a native key group's
    states come in no fixed order, so one it cannot deliver may hide any other)."""
    header = checkpoint.snapshot.header(op)
    if header is None or checkpoint.unreadable_states(op.operator_id):
        return []
    return [info for info in header.states if not info.is_timer]


def _rows(tables: list[pa.Table]) -> list[dict]:
    return [row for table in tables for row in table.to_pylist()]


def _outcome(read: Callable[[], Iterable[pa.Table]]) -> list[dict] | tuple[type, str]:
    """The rows read, or the error (a value no Arrow column takes is refused alike)."""
    try:
        return _rows(list(read()))
    except StateSourceError as error:
        return type(error), str(error)


@pytest.mark.parametrize("name, path", SNAPSHOTS, ids=IDS)
def test_each_handle_gets_the_layout_its_metadata_names(name, path):
    checkpoint = FlinkCheckpoint.open(str(path))
    chosen = collections.Counter()
    for op in checkpoint.snapshot.operators:
        for handle in checkpoint.snapshot.keyed_handles(op):
            layout = layout_of(handle)
            assert layout is (CANONICAL if handle.savepoint else NATIVE)
            chosen[layout.name] += 1
    assert len(chosen) == 1, chosen  # one layout per snapshot
    if "canonical" in name or "native" in name or "checkpoint" in name:
        assert set(chosen) == {"canonical" if "canonical" in name else "native"}, chosen


@pytest.mark.parametrize("name, path", SNAPSHOTS, ids=IDS)
def test_a_layout_decodes_the_rows_the_reader_reads(name, path):
    """Value by value (:meth:`KeyGroupLayout.decode`) and column-wise
    (:meth:`KeyGroupLayout.tables`, all of a state's key groups at once) alike."""
    checkpoint = FlinkCheckpoint.open(str(path))
    snapshot = checkpoint.snapshot
    compared = columnar = 0
    for op in snapshot.operators:
        header = snapshot.header(op)
        pieces = _pieces(checkpoint, op)
        prefix = prefix_bytes(op.max_parallelism)
        for info in _readable(checkpoint, op):
            read = _outcome(lambda op=op, info=info: checkpoint.read_keyed_state(
                info.name, operator=op.operator_id))
            decoded = [(data.key_group, layout.decode(data, header, prefix, (info.state_id,)))
                       for layout, data in pieces]
            assert _outcome(lambda op=op, info=info, decoded=decoded: (
                table for one in decoded  # encoded key group by key group, as the reader does
                for table in checkpoint.keyed_tables(op, info, [one]))) == read, info.name
            layout = pieces[0][0]
            tables = layout.tables([data for _, data in pieces], header, info,
                                   lambda state, op=op: checkpoint.column_decoder(op, state))
            if tables is not None:
                assert len(tables) == len(pieces)
                assert _rows(tables) == read, info.name
                columnar += 1
            compared += len(read)
    assert compared
    if not name.startswith(("encoding/", "types/native")):  # those: text other than ASCII,
        assert columnar, "no state was read column-wise"  # Avro and Kryo values


@pytest.mark.parametrize("name, path", SNAPSHOTS, ids=IDS)
def test_a_canonical_key_group_decodes_whole_and_a_native_one_declines(name, path):
    """:meth:`KeyGroupLayout.sections` (what the census counts): every state's rows of one
    canonical key group, those the reader reads of it."""
    checkpoint = FlinkCheckpoint.open(str(path))
    snapshot = checkpoint.snapshot
    for op in snapshot.operators:
        header = snapshot.header(op)
        for layout, data in _pieces(checkpoint, op)[:8]:
            sections = layout.sections(data, header, prefix_bytes(op.max_parallelism),
                                       lambda state, op=op: checkpoint.column_decoder(op, state))
            if layout is NATIVE:
                assert sections is None
                continue
            for section in sections or ():
                info = header.states[section.state_id]
                read = checkpoint.read_keyed_state(info.name, operator=op.operator_id,
                                                   key_groups=[data.key_group])
                assert section.table.to_pylist() == _rows(list(read)), info.name


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_native_layouts_pairs_are_the_canonical_savepoints(variant):
    """:meth:`KeyGroupLayout.pairs`: the same state saved natively and canonically (two
    savepoints of one run) gives the same pairs per key group and state, as a canonical
    savepoint frames them (:func:`keyed.canonical_sections`, prefixes stripped)."""
    by_layout, blocked = {}, set()
    for kind in ("native", "canonical"):
        checkpoint = FlinkCheckpoint.open(str(FIXTURES / variant / kind))
        pairs = {}
        for op in checkpoint.snapshot.operators:
            header = checkpoint.snapshot.header(op)
            prefix = prefix_bytes(op.max_parallelism)
            if checkpoint.unreadable_states(op.operator_id):
                blocked.add(op.label)  # Kryo values: its native key groups cannot be walked
            if op.label in blocked:
                continue
            for layout, data in _pieces(checkpoint, op):
                sections = layout.pairs(data, header, prefix)
                if layout is CANONICAL:
                    assert sections == [
                        (s.state_id, [(k[prefix:], v) for k, v in s.pairs])
                        for s in canonical_sections(data.data, data.source, data.base,
                                                    data.key_group, prefix, header.compressed)]
                for state_id, found in sections:
                    if found:  # a native key group lists every state, empty ones too
                        name = header.states[state_id].name
                        pairs[(op.label, data.key_group, name)] = sorted(found)
        by_layout[kind] = pairs
    assert by_layout["native"] == by_layout["canonical"]
    assert sum(map(len, by_layout["canonical"].values())) > 100


def test_only_the_native_layout_cannot_deliver_kryo_values():
    """:meth:`KeyGroupLayout.blockers`, per handle's layout: what the reader reports."""
    for kind, layout in (("canonical", CANONICAL), ("native", NATIVE)):
        checkpoint = FlinkCheckpoint.open(str(FIXTURES / "mp256" / kind))
        reported = {}
        for op in checkpoint.snapshot.operators:
            header = checkpoint.snapshot.header(op)
            if header is None:
                continue
            handles = checkpoint.snapshot.keyed_handles(op)
            assert blockers(header, handles) == layout.blockers(header)
            assert blockers(header, handles) == checkpoint.unreadable_states(op.operator_id)
            reported.update(layout.blockers(header))
        assert bool(reported) == (layout is NATIVE), reported
        assert all("Kryo" in reason for reason in reported.values())


def test_whole_key_groups_are_regrouped_in_the_canonical_layout_alone():
    """:meth:`KeyGroupLayout.regroup` moves each canonical key group's pairs, all of them,
    and declines a native one (moved pair by pair)."""
    for kind in ("canonical", "native"):
        checkpoint = FlinkCheckpoint.open(str(FIXTURES / "mp256" / kind))
        op = checkpoint.snapshot.operator("stateful")
        header = checkpoint.snapshot.header(op)
        key_type = header.key.data_type()
        regrouper = Regrouper(decoder_for(header.key, key_type.arrow_type), key_type,
                              op.max_parallelism, 1024, TIMER_KEY_OFFSET)
        for layout, data in _pieces(checkpoint, op):
            moved = layout.regroup(data, header, regrouper)
            if layout is NATIVE:
                assert moved is None
                continue
            assert moved is not None
            pairs = layout.pairs(data, header, prefix_bytes(op.max_parallelism))
            assert sum(part.count for part in moved) == sum(len(p) for _, p in pairs)

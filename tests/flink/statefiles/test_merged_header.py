"""An operator's states numbered once across files that list them differently.

The files of real Flink operators (the mp256 fixture's header) with their states dropped
and reordered as subtasks that obtain states lazily write them: the merge keeps every
state once, by name, in the order first seen, and maps each file's ids to it; two files
that declare a name differently are refused naming both.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statesource.errors import IncompatibleCheckpointError
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.statefiles.keyed_header import KeyedHeader, same_state
from statesource.flink.statefiles.merged_header import merge_headers

MP256 = Path(__file__).resolve().parents[2] / "fixtures" / "flink" / "mp256" / "canonical"


def _real_header() -> KeyedHeader:
    snapshot = FlinkCheckpoint.open(str(MP256)).snapshot
    header = snapshot.header(snapshot.operator("stateful"))
    assert header is not None and len(header.states) >= 5
    return header


HEADER = _real_header()


def _file(order: list[int]) -> KeyedHeader:
    """A file listing the real header's states ``order`` (its own ids: their positions)."""
    return dataclasses.replace(HEADER, states=tuple(
        dataclasses.replace(HEADER.states[i], state_id=own) for own, i in enumerate(order)))


orders = st.lists(st.permutations(range(len(HEADER.states))).flatmap(
    lambda p: st.integers(0, len(p)).map(lambda n: list(p[:n]))), min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(orders)
def test_every_state_once_by_name_and_each_file_mapped_to_it(files):
    merged = merge_headers([(f"file-{i}", _file(order)) for i, order in enumerate(files)], "op")
    first_seen = list(dict.fromkeys(HEADER.states[i].name for order in files for i in order))
    assert [info.name for info in merged.header.states] == first_seen
    assert [info.state_id for info in merged.header.states] == list(range(len(first_seen)))
    for order, ids in zip(files, merged.state_ids):
        assert len(ids) == len(order)
        for own, merged_id in enumerate(ids):
            assert merged.header.states[merged_id].name == HEADER.states[order[own]].name
            assert same_state(merged.header.states[merged_id], HEADER.states[order[own]])
    assert [merged.renumbers(i) for i in range(len(files))] == [
        ids != tuple(range(len(ids))) for ids in merged.state_ids]
    assert merged.header.key is HEADER.key and merged.header.data_start == HEADER.data_start


def test_a_name_declared_differently_is_refused_naming_both_files():
    a, b = HEADER.states[0], next(s for s in HEADER.states if not same_state(s, HEADER.states[0]))
    impostor = dataclasses.replace(b, name=a.name, state_id=0)
    with pytest.raises(IncompatibleCheckpointError,
                       match=f"op: state '{a.name}' is declared differently in one and in two"):
        merge_headers([("one", _file([0])), ("two", dataclasses.replace(
            HEADER, states=(impostor,)))], "op")


def test_another_key_serializer_is_refused_naming_both_files():
    other = dataclasses.replace(HEADER, key=HEADER.states[0].value)
    with pytest.raises(IncompatibleCheckpointError,
                       match="op: the keyed-state files one and two have different key"):
        merge_headers([("one", HEADER), ("two", other)], "op")

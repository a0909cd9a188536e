"""Fuzzing the reader with corrupted metadata and data files.

Each example breaks a real checkpoint in one place: a value anywhere in the
metadata replaced (by an integer near or far from it, a boolean, a float, a
string, null, an array, an object) or deleted, the metadata's text cut or
spliced, or bytes of a data file flipped, cut off or appended. Reading the
whole checkpoint must then either be refused with a :class:`StateSourceError`
or return exactly the rows of the intact checkpoint: never other rows, another
exception or a hang (tests/conftest.py bounds every test's time).

One change at a time, and no element of an array removed (nor an array
emptied), because those edits can describe a different but valid checkpoint
(an operator, a state, a file or a share left out; two subtasks' shares
swapped), which no reader could tell from the real thing.
"""

from __future__ import annotations

import json
import pathlib
import shutil
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sample_state import KEYS, populate
from statesource.checkpointing import CheckpointWriter, SubtaskBackends
from statesource.errors import StateSourceError
from statesource.format import Checkpoint
from statesource.keygroups import assign_to_key_group, key_group_range_for_operator
from statesource.state.clock import ManualClock
from statesource.state.keyed_backend import KeyedStateBackend
from statesource.state.operator_backend import OperatorStateBackend
from statesource.types import STRING


def fuzz(examples: int) -> settings:
    """Deterministic and bounded: the same examples on every run, in CI as here."""
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])
DELETE = object()


def answer(root: pathlib.Path) -> list:
    """Every row the checkpoint holds, by position: keyed rows per state, then each operator
    state's non-empty shares by subtask (names are left out: renaming a state or an
    operator describes a different but valid checkpoint)."""
    checkpoint = Checkpoint.open(str(root))
    rows: list[Any] = []
    for op in checkpoint.metadata.operators:
        for state in op.keyed_states:
            rows.append([table.to_pylist()
                         for table in checkpoint.read_keyed_state(state.name, operator=op.uid)])
        for op_state in op.operator_states:
            shares = checkpoint.read_operator_state(op_state.name, operator=op.uid)
            rows.append({i: share for i, share in enumerate(shares) if share})
    return rows


@pytest.fixture(scope="module")
def checkpoint_root(tmp_path_factory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("fuzz")
    clock = ManualClock(5_000)
    subtasks = []
    for index in range(2):
        owned = key_group_range_for_operator(128, 2, index)
        keyed = KeyedStateBackend("string", 128, owned, clock=clock)
        populate(keyed, [k for k in KEYS[:60] if assign_to_key_group(k, STRING, 128) in owned])
        operator = OperatorStateBackend()
        operator.get_list_state("offsets", "long").update([index, 10 + index])
        operator.get_broadcast_state("rules", "string", "long").put(f"r{index}", index)
        subtasks.append(SubtaskBackends(keyed=keyed, operator=operator))
    CheckpointWriter(str(root)).write(1, {"op": subtasks})
    return root


@pytest.fixture(scope="module")
def intact(checkpoint_root) -> list:
    return answer(checkpoint_root)


def read_or_refuse(root: pathlib.Path, intact: list) -> None:
    try:
        rows = answer(root)
    except StateSourceError:
        return
    assert rows == intact, "a corrupted checkpoint was read as different rows"


def paths_in(document: Any, prefix: tuple = ()) -> list[tuple]:
    """Every position in a JSON document, as the keys and indices leading to it."""
    found = [prefix] if prefix else []
    if isinstance(document, dict):
        for key, value in document.items():
            found += paths_in(value, (*prefix, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found += paths_in(value, (*prefix, index))
    return found


def replaced(document: Any, path: tuple, value: Any) -> Any:
    copy = json.loads(json.dumps(document))
    parent = copy
    for step in path[:-1]:
        parent = parent[step]
    if value is DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return copy


def replacements(original: Any, in_array: bool) -> st.SearchStrategy:
    near = (st.integers(-3, 3).map(lambda delta: original + delta)
            if type(original) is int else st.nothing())
    return st.one_of(
        near,
        st.integers(-(1 << 70), 1 << 70),
        st.sampled_from([0, 1, -1, 2, 127, 128, 32768, 1 << 31, 1 << 32, 1 << 63]),
        st.booleans(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=6),
        st.sampled_from(["chk-1/data/x.arrow", "/etc/passwd", "../x", "string", "long", "void",
                         "value", "list", "split", "broadcast"]),
        st.none(),
        st.lists(st.integers(-2, 200), min_size=1, max_size=4),
        st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
        st.nothing() if in_array else st.just(DELETE),
    )


@pytest.fixture
def scratch(checkpoint_root, tmp_path) -> pathlib.Path:
    """A copy to damage; hypothesis reuses it across examples, so each restores it."""
    copied = tmp_path / "root"
    shutil.copytree(checkpoint_root, copied)
    return copied


def damage(scratch: pathlib.Path, relative: pathlib.Path, payload: bytes, intact: list) -> None:
    """Write ``payload`` over one file, check the reader, and put the file back."""
    path = scratch / relative
    original = path.read_bytes()
    path.write_bytes(payload)
    try:
        read_or_refuse(scratch, intact)
    finally:
        path.write_bytes(original)


METADATA = pathlib.Path("chk-1", "_metadata.json")


@fuzz(1500)
@given(data=st.data())
def test_any_one_changed_metadata_value_is_refused_or_harmless(scratch, intact, data):
    document = json.loads((scratch / METADATA).read_text())
    path = data.draw(st.sampled_from(paths_in(document)), label="path")
    value = data.draw(replacements(_at(document, path), isinstance(path[-1], int)),
                      label="value")
    damage(scratch, METADATA, json.dumps(replaced(document, path, value)).encode(), intact)


@fuzz(500)
@given(data=st.data())
def test_cut_or_spliced_metadata_text_is_refused_or_harmless(scratch, intact, data):
    text = (scratch / METADATA).read_text()
    start = data.draw(st.integers(0, len(text)), label="start")
    end = data.draw(st.integers(start, min(len(text), start + 8)), label="end")
    inserted = data.draw(st.text(alphabet='0123456789-.,:[]{}"etrufalsn ', max_size=4),
                         label="inserted")
    damage(scratch, METADATA, (text[:start] + inserted + text[end:]).encode(), intact)


@fuzz(1000)
@given(data=st.data())
def test_corrupted_data_file_bytes_are_refused_or_harmless(scratch, intact, data):
    files = sorted(p.relative_to(scratch) for p in (scratch / "chk-1" / "data").iterdir())
    relative = data.draw(st.sampled_from(files), label="file")
    payload = bytearray((scratch / relative).read_bytes())
    how = data.draw(st.sampled_from(["flip", "truncate", "append", "zero"]), label="how")
    if how == "flip":
        for _ in range(data.draw(st.integers(1, 4), label="flips")):
            position = data.draw(st.integers(0, len(payload) - 1), label="position")
            payload[position] ^= 1 << data.draw(st.integers(0, 7), label="bit")
    elif how == "truncate":
        del payload[data.draw(st.integers(0, len(payload) - 1), label="keep"):]
    elif how == "append":
        payload += data.draw(st.binary(min_size=1, max_size=64), label="tail")
    else:
        start = data.draw(st.integers(0, len(payload) - 1), label="start")
        payload[start:start + 64] = bytes(len(payload[start:start + 64]))
    damage(scratch, relative, bytes(payload), intact)


def _at(document: Any, path: tuple) -> Any:
    for step in path:
        document = document[step]
    return document

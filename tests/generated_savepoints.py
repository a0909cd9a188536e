"""Small canonical savepoints made for tests: generated states (via statesource's own Flink
export), and copies with bytes overwritten; shared by the Python and JVM decoders' tests."""

from __future__ import annotations

import shutil
from pathlib import Path

from hypothesis import strategies as st

from statesource.checkpointing import CheckpointWriter
from statesource.flink.layouts.framing import canonical_sections
from statesource.flink.operations.export import export_flink
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.keygroups import assign_to_key_group, key_group_range_for_operator
from statesource.state.clock import ManualClock
from statesource.state.descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)
from statesource.state.keyed_backend import KeyedStateBackend
from statesource.types import STRING

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
ENTRIES = st.dictionaries(
    TEXT, st.tuples(st.integers(-2**63, 2**63 - 1),
                    st.lists(st.integers(-2**63, 2**63 - 1), max_size=4),
                    st.dictionaries(TEXT, st.none() | TEXT, max_size=3)),
    min_size=1, max_size=30)
"""States for :func:`export_savepoint`: ``key -> (value, list, map)``, any text."""


def export_savepoint(root: Path, entries: dict[str, tuple]) -> Path:
    """A canonical savepoint (via export_flink) of String keys with a value, a list and a
    map state, from ``key -> (value, list, map)``; and two states made from the key: its
    reverse (``text``) and its length under a String namespace (``named``, whose composite
    keys hold the length after key and namespace)."""
    clock = ManualClock(1_700_000_000_000)
    states = [ValueStateDescriptor("value", "long"), ListStateDescriptor("list", "long"),
              MapStateDescriptor("map", "string", ["null", "string"]),
              ValueStateDescriptor("text", "string"),
              ValueStateDescriptor("named", "long", namespace_type="string")]
    backends = []
    for index in range(2):
        owned = key_group_range_for_operator(128, 2, index)
        backend = KeyedStateBackend("string", 128, owned, clock=clock)
        handles = [backend.get_state(d) for d in states]
        for key, (value, items, mapping) in entries.items():
            if assign_to_key_group(key, STRING, 128) not in owned:
                continue
            backend.set_current_key(key)
            handles[0].update(value)
            if items:
                handles[1].add_all(items)
            for user_key, user_value in mapping.items():
                handles[2].put(user_key, user_value)
            handles[3].update(key[::-1])
            backend.set_current_namespace(f"n{key}")
            handles[4].update(len(key))
        backends.append(backend)
    with CheckpointWriter(str(root / "checkpoints")) as writer:
        writer.write(1, {"op": backends})
    export_flink(root / "checkpoints", root / "savepoint")
    return root / "savepoint"


def wrong_length_after_a_key(root: Path) -> tuple[Path, str]:
    """A savepoint (:func:`export_savepoint`) whose first composite key of state ``named``
    has a wrong length after its key (sound framing otherwise), and that file's name."""
    savepoint = export_savepoint(root, {f"key{i}": (i, [], {}) for i in range(20)})
    snapshot = FlinkSnapshot.open(str(savepoint))
    op = snapshot.operator("op")
    info = snapshot.keyed_state_info(op, "named")
    piece = snapshot.key_group_bytes(op)[0]
    data = snapshot.piece_bytes(piece)
    (section,) = canonical_sections(data, piece.key_group, 1, len(snapshot.header(op).states),
                                    (info.state_id,))
    # The key group's one-byte prefix; the key: a varint of its n characters + 1, then their
    # n bytes (n + 1 bytes in all, the varint's value); then that length in one byte.
    start = int(section.key_start[0])
    length = data[start + 1]
    assert data[start + 1 + length] == length
    victim = Path(snapshot.file_location(piece.handle.stream).path)
    raw = bytearray(victim.read_bytes())
    raw[piece.begin + start + 1 + length] = length + 1
    victim.write_bytes(bytes(raw))
    return savepoint, victim.name


def corrupted_copy(source: Path, target: Path, at: float, data: bytes) -> Path:
    """A copy of ``source`` with ``data`` written over the key groups of one keyed-state
    file (past its header, which both decoders share), at a place ``at`` picks; the ids of the
    operators whose state that file holds are listed beside the copy (:func:`damaged`)."""
    snapshot = FlinkSnapshot.open(str(source))
    handles = sorted({snapshot.file_location(h.stream).path: h for op in snapshot.operators
                      for h in snapshot.keyed_handles(op) if h.stream.inline is None}.items())
    path, handle = handles[int(at * len(handles)) % len(handles)]
    start = snapshot.read_header(handle).data_start
    shutil.copytree(source, target)
    victim = target / Path(path).name
    raw = bytearray(victim.read_bytes())
    offset = start + int(at * 99991) % (len(raw) - start)
    raw[offset:offset + len(data)] = data
    victim.write_bytes(bytes(raw[:len(victim.read_bytes())]))
    _damaged_list(target).write_text("\n".join(
        op.operator_id for op in snapshot.operators for h in snapshot.keyed_handles(op)
        if h.stream.inline is None and snapshot.file_location(h.stream).path == path))
    return target


def _damaged_list(copy: Path) -> Path:
    return copy.with_name(copy.name + ".damaged")


def damaged(copy: Path) -> set[str]:
    """The operators whose state :func:`corrupted_copy` damaged in ``copy``."""
    return set(_damaged_list(copy).read_text().split())

"""An operator's keyed pairs as columns of their bytes, as ``migrate``'s scan reads them.

Each key group of each of the operator's files is read, and its pairs of the states asked
for are handed on as :class:`~statesource.flink.serializers.kryo_columns.Values`: ranges of
the key group's bytes, no bytes object per key or value. A scan in worker processes
(:mod:`.reencode_workers`) reads runs of the key groups, numbered in the order they are
read here: each reads only its run's bytes.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

from statesource.flink.binary.snappy import unframe
from statesource.flink.handles import KeyedHandle, OperatorSnapshot
from statesource.flink.layouts.base import KeyGroupData, KeyGroupLayout
from statesource.flink.layouts.canonical import CanonicalLayout
from statesource.flink.layouts.canonical_writer import prefix_bytes
from statesource.flink.layouts.dispatch import layout_of
from statesource.flink.layouts.framing import canonical_sections
from statesource.flink.layouts.keyed import check_key_group_range
from statesource.flink.operations.reencode_workers import Run
from statesource.flink.serializers.kryo_columns import Values
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.flink.statefiles.keyed_header import KeyedHeader


def key_group_sizes(snapshot: FlinkSnapshot, op: OperatorSnapshot) -> list[int]:
    """The bytes of each key group of ``op``'s files, in the order :func:`state_pairs`
    reads them."""
    return [end - begin for handle in snapshot.keyed_handles(op)
            for _, begin, end in _key_groups(snapshot, op, handle)]


def _key_groups(snapshot: FlinkSnapshot, op: OperatorSnapshot, handle: KeyedHandle
                ) -> list[tuple[int, int, int]]:
    header = snapshot.handle_header(op, handle)
    return list(check_key_group_range(handle.offsets, handle.start, handle.stream.size,
                                      header.data_start, snapshot.describe(handle.stream)))


def state_pairs(snapshot: FlinkSnapshot, op: OperatorSnapshot, names: set[str],
                run: Run | None = None) -> Iterator[tuple[str, int, str, Values, Values]]:
    """``(state, key group, source, keys, values)`` of the keyed states ``names`` of ``op``
    (keys without the key group's prefix), by key group within each file, as the rewrite
    walks them; only those of the key groups ``run`` (numbered in that order) where given."""
    old_prefix = prefix_bytes(op.max_parallelism)
    first, end_of_run = run or (0, sys.maxsize)
    before = 0  # key groups in the files before this one
    for handle in snapshot.keyed_handles(op):
        groups = _key_groups(snapshot, op, handle)
        chosen = groups[max(first - before, 0):max(end_of_run - before, 0)]
        before += len(groups)
        if not chosen:
            continue
        header = snapshot.handle_header(op, handle)
        name = snapshot.describe(handle.stream)
        low = min(begin for _, begin, _ in chosen)  # only the bytes of the run's key groups
        data = snapshot.read_bytes(handle.stream, low, max(end for *_, end in chosen) - low)
        layout = layout_of(handle)
        wanted = {info.state_id for info in header.states if info.name in names}
        for key_group, begin, end in chosen:
            piece = KeyGroupData(key_group, data[begin - low:end - low], name, begin)
            for state_id, keys, values in _pairs(layout, piece, header, old_prefix, wanted):
                if state_id in wanted and len(keys):
                    yield (header.states[state_id].name, key_group,
                           f"{name} (key group {key_group})", keys, values)


def _pairs(layout: KeyGroupLayout, piece: KeyGroupData, header: KeyedHeader, old_prefix: int,
           wanted: set[int]) -> list[tuple[int, Values, Values]]:
    """A key group's keys and values per state id, at least those of the ``wanted`` states.
    In a canonical savepoint's heap file they are framed by numpy
    (:func:`~statesource.flink.layouts.framing.canonical_sections`, which checks what the
    layout checks), up to the last wanted state's section: the states after it are not
    walked pair by pair here (the rewrite reads and checks them). Where every state is
    wanted, the whole key group is walked, its end checked: the rewrite does not read a
    file all of whose states it replaces. Else, or where that framing declines, by the
    layout, which names a fault."""
    if type(layout) is CanonicalLayout and wanted:
        data = unframe(piece.data, piece.source, piece.base) if header.compressed else piece.data
        sections = canonical_sections(data, piece.key_group, old_prefix, len(header.states),
                                      wanted if len(wanted) < len(header.states) else None)
        if sections is not None:
            return [(s.state_id, Values(data, s.key_start + old_prefix, s.key_end,
                                        s.key_start - 4),
                     Values(data, s.value_start, s.value_end))
                    for s in sections if s.state_id in wanted]
    return [(state_id, Values.of([body for body, _ in pairs]),
             Values.of([value for _, value in pairs]))
            for state_id, pairs in layout.pairs(piece, header, old_prefix)]

"""One numbering of an operator's keyed states across the files of its subtasks.

A state exists in a subtask's backend once the job first asks for it, so a job that
obtains states lazily writes files whose headers differ: on the heap backend some lack
states, on RocksDB the same state has another id in each file (ids follow registration
order). A state's id is its position in its own file's header, so each file decodes with
its own header; the operator's states are the union of the files' states by name, in the
order first seen, and each file maps its ids to that numbering.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from statesource.errors import IncompatibleCheckpointError
from statesource.flink.statefiles.keyed_header import KeyedHeader, StateInfo, same_state


@dataclass(frozen=True)
class MergedHeader:
    """The operator's states by name (``header``: the first file's framing and key
    serializer), and per file, in the order given, its state ids in that numbering."""

    header: KeyedHeader
    state_ids: tuple[tuple[int, ...], ...]

    def renumbers(self, index: int) -> bool:
        """Whether file ``index`` numbers its states otherwise than ``header`` does."""
        ids = self.state_ids[index]
        return ids != tuple(range(len(ids)))


def merge_headers(files: Sequence[tuple[str, KeyedHeader]], where: str) -> MergedHeader:
    """The merge of ``files`` (``(name, its own header)``, the first file first); two files
    that disagree on the key serializer, or on a state's kind or serializers, are refused
    naming both, since either numbering would misread the other's bytes."""
    if not files:
        raise ValueError("no keyed-state files to merge")
    first_source, first = files[0]
    states: list[StateInfo] = []
    seen_in: list[str] = []
    by_name: dict[str, int] = {}
    state_ids = []
    for source, header in files:
        if header.key.snapshot != first.key.snapshot:
            raise IncompatibleCheckpointError(
                f"{where}: the keyed-state files {first_source} and {source} have different"
                f" key serializers ({first.key.describe()}, {header.key.describe()})")
        ids = []
        for info in header.states:
            at = by_name.get(info.name)
            if at is None:
                at = by_name[info.name] = len(states)
                states.append(dataclasses.replace(info, state_id=at))
                seen_in.append(source)
            elif not same_state(states[at], info):
                raise IncompatibleCheckpointError(
                    f"{where}: state {info.name!r} is declared differently in {seen_in[at]}"
                    f" and in {source} (another kind or other serializers), so neither"
                    " declaration reads the other's bytes")
            ids.append(at)
        state_ids.append(tuple(ids))
    return MergedHeader(dataclasses.replace(first, states=tuple(states)), tuple(state_ids))

"""Which layout a keyed-state handle's key groups are in: the one place that knows.

``_metadata`` tells the layouts apart by the handle's class: a savepoint's key groups
(``KeyGroupsSavepointStateHandle``) are canonical, a checkpoint's and a native
savepoint's written by the heap backend are native.
"""

from __future__ import annotations

from collections.abc import Iterable

from statesource.flink.handles import KeyedHandle
from statesource.flink.layouts.base import KeyGroupLayout
from statesource.flink.layouts.canonical import CANONICAL
from statesource.flink.layouts.native import NATIVE
from statesource.flink.statefiles.keyed_header import KeyedHeader


def layout_of(handle: KeyedHandle) -> KeyGroupLayout:
    """The layout of the key groups of ``handle``'s file."""
    return CANONICAL if handle.savepoint else NATIVE


def blockers(header: KeyedHeader, handles: Iterable[KeyedHandle]) -> dict[str, str]:
    """The states of ``header`` that the layout of some of ``handles`` cannot deliver, with
    the reason, by name."""
    reasons: dict[str, str] = {}
    for layout in dict.fromkeys(layout_of(handle) for handle in handles):
        reasons.update(layout.blockers(header))
    return reasons

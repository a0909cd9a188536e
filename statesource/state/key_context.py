"""The key and namespace that state handles act on, shared by a backend and its handles.

A backend owns one ``KeyContext`` and writes it when the program sets the current key
or namespace; every handle of that backend reads it on each access. Handles thereby
depend on this small record rather than on the backend, so the backend can create
them without the two modules importing each other, and the hot path stays one
attribute read per field.
"""

from __future__ import annotations

from typing import Any


class KeyContext:
    """The current key, its key group and the current namespace of one backend.

    Only the owning backend writes it: it validates a key and computes its key group
    before making it current. ``key_group_index`` counts from the start of the
    backend's key-group range, so it indexes a state table's maps directly (None
    until a key is set). ``namespace_version`` changes with every namespace set, so
    that a handle checks a namespace against its declared type once, not per access.
    """

    __slots__ = ("key", "key_group_index", "namespace", "namespace_version")

    def __init__(self) -> None:
        self.key: Any = None
        self.key_group_index: int | None = None
        self.namespace: Any = None
        self.namespace_version = 0

"""The format versions: which this implementation reads and writes, and what each added.

Kept apart from the metadata model because each of its parts (a keyed state's
files, its delta files, the checkpoint's recorded version) checks against them.

Version 3 lets the data files of one state cover overlapping key-group ranges,
as an incremental checkpoint's new file and the older files it references do;
what stays strict is that each key group's rows lie in at most one of them. A
writer records the lowest version that expresses its checkpoint, so that
readers of version 2 keep reading every checkpoint that is not incremental.

Version 4 adds per-entry deltas: a state may list *delta files*, each holding
runs of changed entries (upserts, tombstones, and the entries' prior rows) per
key group, which readers apply in ``sequence`` order over the key group's base
rows (:mod:`statesource.format.deltas`).

Version 5 adds *row-addressed* delta files: runs of several key groups share
record batches and are found by row, the prior rows lie apart from the state
rows, and each state row may say where its entry lies in the base.
"""

from __future__ import annotations

FORMAT_VERSION = 5
"""The newest version this implementation writes (only when a checkpoint needs it)."""
PLAIN_FORMAT_VERSION = 2
"""The version a checkpoint that is not incremental is written in (any other writes one of
the later versions, the lowest that records it)."""
SUPPORTED_FORMAT_VERSIONS = (1, 2, 3, 4, 5)
OVERLAPPING_FILES_VERSION = 3
"""The first version whose states' data files may cover overlapping key-group ranges."""
DELTA_FILES_VERSION = 4
"""The first version whose states may list delta files (per-entry changes)."""
ROW_ADDRESSED_RUNS_VERSION = 5
"""The first version whose delta files may be row-addressed."""

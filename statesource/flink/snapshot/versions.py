"""What each ``_metadata`` version writes, told as its differences from the others.

Flink's metadata serializer changed a few fields at a time: version 4 ended the file with
the Java-serialized ``CheckpointProperties``, version 5 put each operator's name and uid
before its id, version 6 merged the channel-state handles of unaligned checkpoints. The
parser (:mod:`metadata`) and the writer (:mod:`metadata_writer`) read the same
:class:`MetadataLayout`, chosen here by the version number alone, and each difference is
read and written in one place, behind its flag: a version is one entry of
:data:`LAYOUTS`, not a branch in every function.
"""

from __future__ import annotations

from dataclasses import dataclass

from statesource.errors import UnsupportedFormatVersionError


@dataclass(frozen=True)
class MetadataLayout:
    """One ``_metadata`` version: which of the fields that came and went it holds."""

    version: int
    written_by: str
    operator_names: bool
    """An operator's name and uid (``writeUTF`` each, empty for none) precede its id."""
    properties: bool
    """The file ends with the snapshot's Java-serialized ``CheckpointProperties``."""


LAYOUTS: dict[int, MetadataLayout] = {
    3: MetadataLayout(3, "Flink 1.11 to 1.15", operator_names=False, properties=False),
    4: MetadataLayout(4, "Flink 1.16 to 1.20", operator_names=False, properties=True),
    6: MetadataLayout(6, "Flink 2.0 to 2.3", operator_names=True,
                      properties=True),
}

WRITTEN_VERSION = max(LAYOUTS)
"""The version new savepoints get: the one every Flink 2.x restores."""


def metadata_layout(version: int, source: str) -> MetadataLayout:
    """The layout of ``version``; an error naming ``source``, the versions read, and what to do."""
    layout = LAYOUTS.get(version)
    if layout is None:
        written_by = (" (written by Flink 1.10 or older)" if version < min(LAYOUTS)
                      else " (written by a Flink release newer than 2.3)"
                      if version > max(LAYOUTS) else "")
        raise UnsupportedFormatVersionError(
            f"{source} has Flink metadata version {version}{written_by}; statesource reads "
            + ", ".join(f"version {known.version} ({known.written_by})"
                        for known in LAYOUTS.values())
            + ": take a savepoint with one of those Flink releases")
    return layout


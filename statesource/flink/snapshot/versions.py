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

from statesource.errors import InvalidArgumentError, UnsupportedFormatVersionError


@dataclass(frozen=True)
class MetadataLayout:
    """One ``_metadata`` version: which of the fields that came and went it holds."""

    version: int
    written_by: str
    operator_names: bool
    """An operator's name and uid (``writeUTF`` each, empty for none) precede its id."""
    properties: bool
    """The file ends with the snapshot's Java-serialized ``CheckpointProperties``."""

    @property
    def flink_major(self) -> int:
        """The Flink major release that writes this version: which serializers a state new
        to such a savepoint gets (Flink 1.x has fewer)."""
        return 2 if self.operator_names else 1

    def recorded_uid(self, uid: str) -> str | None:
        """What a new operator of ``uid`` records as its uid and name: the uid, or None where
        the version records the operator id alone (Flink hashes the uid to find it)."""
        return uid if self.operator_names else None


LAYOUTS: dict[int, MetadataLayout] = {
    3: MetadataLayout(3, "Flink 1.11 to 1.15", operator_names=False, properties=False),
    4: MetadataLayout(4, "Flink 1.16 to 1.20", operator_names=False, properties=True),
    6: MetadataLayout(6, "Flink 2.0 to 2.3", operator_names=True,
                      properties=True),
}

WRITTEN_VERSION = max(LAYOUTS)
"""The version new savepoints get: the one every Flink 2.x restores."""

WRITTEN_RELEASES: dict[str, int] = {
    **{f"1.{minor}": 4 for minor in range(17, 21)},
    **{f"2.{minor}": 6 for minor in range(4)}}
"""The Flink releases a savepoint made from nothing is written for (export, bootstrap), and
the ``_metadata`` version each restores: from 1.17 on, whose operator-state files are of
the version statesource writes (6, with the compression flag 1.17 added; 1.15 and 1.16
write version 5). A savepoint derived from another keeps that one's version."""
NEWEST_RELEASE = max(WRITTEN_RELEASES, key=lambda release: tuple(map(int, release.split("."))))


def release_layout(release: str | None) -> MetadataLayout:
    """The layout a new savepoint for Flink ``release`` (``"1.20"``; None: the newest) has."""
    if release is None:
        return LAYOUTS[WRITTEN_VERSION]
    version = WRITTEN_RELEASES.get(str(release).strip())
    if version is None:
        raise InvalidArgumentError(
            f"Flink version {release!r} is not one statesource writes savepoints for: give one"
            f" of {', '.join(WRITTEN_RELEASES)}")
    return LAYOUTS[version]


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


"""Reading a checkpoint directory's metadata file, and telling retirement from corruption.

The metadata file is untrusted input: only a regular file inside the
directory is read, and only up to a size limit checked before anything is
allocated. Retention, pins, targets and the incremental writer read metadata
without opening a :class:`~statesource.format.reader.Checkpoint`, and a
reader whose checkpoint ``retain`` removed meanwhile must be told so, not that
the checkpoint is corrupt.
"""

from __future__ import annotations

from statesource.errors import CheckpointRetiredError, CorruptCheckpointError
from statesource.format.metadata import MAX_METADATA_BYTES, CheckpointMeta
from statesource.format.storage import (
    METADATA_FILE,
    RETIRED_FILE,
    Location,
    checkpoint_id_of,
    open_regular_file,
)


def read_metadata(directory: Location, file_name: str = METADATA_FILE) -> CheckpointMeta:
    """Parse the metadata file ``file_name`` of checkpoint directory ``directory``.

    Only a regular file inside the directory is read, and only up to
    ``MAX_METADATA_BYTES``: its size is checked before anything is allocated.
    """
    metadata_file = directory.child(file_name)
    try:
        handle = open_regular_file(metadata_file, "metadata", confine_to=directory)
    except CorruptCheckpointError as error:
        if file_name == METADATA_FILE and was_retired(directory):
            raise retired(directory) from error
        raise
    with handle:
        size = handle.size()
        if size > MAX_METADATA_BYTES:
            raise CorruptCheckpointError(
                f"metadata {metadata_file} is {size:,} bytes, more than the"
                f" {MAX_METADATA_BYTES:,} a checkpoint's metadata may hold")
        try:
            payload = handle.read(size)
        except OSError as error:
            raise CorruptCheckpointError(
                f"cannot read metadata {metadata_file}: {error}") from None
    if len(payload) != size:
        raise CorruptCheckpointError(f"metadata {metadata_file} changed while it was read")
    return CheckpointMeta.from_json_bytes(payload, str(metadata_file), directory.name,
                                          checkpoint_id_of(directory))


def was_retired(directory: Location) -> bool:
    """Whether checkpoint ``directory``, seen complete a moment ago, was since retired.

    ``retain`` renames the metadata before it deletes a single file, so a
    checkpoint whose metadata is gone (its ``_retired.json`` in its place, or
    the directory removed) was retired, not corrupted.
    """
    return not directory.child(METADATA_FILE).exists() and (
        directory.child(RETIRED_FILE).exists() or not directory.exists())


def retired(directory: Location) -> CheckpointRetiredError:
    checkpoint_id = checkpoint_id_of(directory)
    return CheckpointRetiredError(
        f"checkpoint {checkpoint_id if checkpoint_id is not None else directory} was removed by"
        f" retention while it was being read ({directory}); read a checkpoint that is kept")

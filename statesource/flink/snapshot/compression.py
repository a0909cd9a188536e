"""Whether a new savepoint's keyed-state files are Snappy-compressed: as its input's were, or
as asked.

A job with ``execution.checkpointing.snapshot-compression: true`` writes each key group
of its keyed-state files as a Snappy framed stream, and says so in each file's header
(the flag after its version, in Flink 1.x as in 2.x); a restoring Flink reads every file
as its own header says, whatever its own setting. So what statesource writes keeps what
the user had: a new savepoint is compressed where its input was, unless ``compression``
asks for ``"snappy"`` or ``"none"``. Files carried over (operator state, the operators an
edit leaves alone) keep their own by default, and are written again with the compression
asked for, where it is (``FileCopies`` in :mod:`statesource.flink.operations.savepoint_writing`).
"""

from __future__ import annotations

from typing import Literal

from statesource.errors import InvalidArgumentError
from statesource.flink.handles import RocksDBHandle, StreamHandle
from statesource.flink.snapshot.directory import FlinkSnapshot

Compression = Literal["snappy", "none"]
COMPRESSIONS: tuple[Compression, ...] = ("snappy", "none")
_FLAG = 4
"""Where a keyed-state file's (or RocksDB meta data stream's) compression flag is: after its
int version."""


def check_compression(compression: str | None) -> Compression | None:
    """``compression`` as one of :data:`COMPRESSIONS`, or None (keep the input's); any other
    value refused, naming it."""
    if compression is None:
        return None
    for known in COMPRESSIONS:
        if compression == known:
            return known
    raise InvalidArgumentError(
        f"compression {compression!r}: a savepoint is written with"
        f" {' or '.join(repr(c) for c in COMPRESSIONS)} compression (default: as its"
        " input was)")


def output_compressed(compression: str | None, input_compressed: bool) -> bool:
    """Whether written keyed-state files are compressed: as asked, else as the input was."""
    check_compression(compression)
    return input_compressed if compression is None else compression == "snappy"


def snapshot_compressed(snapshot: FlinkSnapshot) -> bool:
    """Whether the job that wrote ``snapshot`` compressed its snapshots: the flag in the header
    of each operator's first keyed-state file (a job-wide setting: every file of a
    snapshot has it alike); for RocksDB's files, in their meta data stream."""
    for op in snapshot.operators:
        first = next((h for subtask in op.subtasks for h in subtask.keyed), None)
        if first is not None and header_compressed(
                snapshot, first.meta if isinstance(first, RocksDBHandle) else first.stream):
            return True
    return False


def header_compressed(snapshot: FlinkSnapshot, stream: StreamHandle) -> bool:
    """Whether the keyed-state header at the start of ``stream`` (a keyed-state file, or a
    RocksDB state's meta data stream) has its compression flag set."""
    head = snapshot.read_bytes(stream, 0, min(_FLAG + 1, stream.size))
    return len(head) > _FLAG and head[_FLAG] == 1

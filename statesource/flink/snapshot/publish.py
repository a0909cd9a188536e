"""Publishing a new Flink savepoint directory whole: its files, ``_metadata`` last, one rename.

A Flink savepoint is a directory holding ``_metadata`` and the state files it
names. :class:`SavepointWriter` builds one in a hidden temporary sibling of the
output (``.<name>.tmp-<32 hex digits>``): each state file is written and
synced as it comes, ``_metadata`` last, then the directory itself is synced
and renamed to the output's name in one step, which fails rather than
replaces when the output appeared meanwhile. On any failure the temporary
directory is removed; a killed run leaves only that temporary directory,
which no one reads as a savepoint (its name is not the output's,
:func:`is_staging_name` tells it apart, and :class:`FlinkSnapshot` refuses to
open it).

State files are recorded in ``_metadata`` by their bare file names, relative
to the directory of ``_metadata``, as Flink itself writes them: the savepoint
can be moved or copied as a whole.

Only local file systems are written for now: object stores have no rename of
a directory, so publishing there needs another protocol (``_metadata``
written last, as the marker).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import functools
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType

from statesource.errors import (
    CheckpointExistsError,
    CorruptCheckpointError,
    InvalidArgumentError,
    StateSourceError,
)
from statesource.flink.handles import KeyedHandle, SnapshotMetadata, StreamHandle
from statesource.flink.layouts.canonical_writer import KeyGroupFramer, assemble_keyed_file
from statesource.flink.snapshot.metadata_writer import write_metadata
from statesource.format.commit import sync_directory
from statesource.format.storage import check_creatable, resolve
from statesource.keygroups import key_group_range_for_operator

METADATA = "_metadata"
_STAGING = re.compile(r"\.(?P<name>.+)\.tmp-[0-9a-f]{32}")
_RENAME_NOREPLACE = 1
_AT_FDCWD = -100


def staging_name(output: str) -> str:
    """The name of the temporary sibling a savepoint named ``output`` is built in."""
    return f".{output}.tmp-{uuid.uuid4().hex}"


def is_staging_name(name: str) -> bool:
    """Whether a directory name is that of an unfinished (or killed) savepoint write."""
    return _STAGING.fullmatch(name) is not None


class SavepointWriter:
    """One new savepoint directory at ``output``, written in a temporary sibling and published
    by :meth:`publish`; used as a context manager, it removes the temporary directory on any
    way out but a successful publish.

    ``output`` must not exist (:class:`CheckpointExistsError`, naming it); its parent is
    created if needed.
    """

    def __init__(self, output: str | os.PathLike[str]) -> None:
        self.output = check_output(output)
        self.output.parent.mkdir(parents=True, exist_ok=True)
        self.staging = self.output.parent / staging_name(self.output.name)
        self.staging.mkdir()
        self._written: dict[str, int] = {}
        self._published = False

    def __enter__(self) -> SavepointWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if not self._published:
            self.discard()

    def write_file(self, chunks: bytes | Iterable[bytes], name: str | None = None
                   ) -> StreamHandle:
        """Write and sync one state file (default name: a random UUID, as Flink names them)
        and return its handle: a path relative to ``_metadata``'s directory."""
        self._check_open()
        name = name or str(uuid.uuid4())
        if name in self._written or name == METADATA or "/" in name or name in (".", ".."):
            raise InvalidArgumentError(
                f"state file name {name!r} is taken or not a bare file name")
        size = 0
        with open(self.staging / name, "xb") as out:
            for chunk in [chunks] if isinstance(chunks, (bytes, bytearray)) else chunks:
                out.write(chunk)
                size += len(chunk)
            out.flush()
            os.fsync(out.fileno())
        self._written[name] = size
        return StreamHandle(name, True, size)

    def write_keyed_files(self, header: bytes, framers: dict[int, KeyGroupFramer],
                          max_parallelism: int, parallelism: int) -> list[KeyedHandle]:
        """One canonical keyed-state file per subtask of an operator: ``header``, then the key
        groups Flink assigns the subtask at ``parallelism``, framed by ``framers`` (by key
        group; each one used is removed from it, an absent one is empty)."""
        handles = []
        for index in range(parallelism):
            key_groups = key_group_range_for_operator(max_parallelism, parallelism, index)
            framed = []
            for key_group in key_groups:
                framer = framers.pop(key_group, None)
                framed.append(b"" if framer is None else framer.getvalue())
            whole, offsets = assemble_keyed_file(header, framed)
            handles.append(KeyedHandle(key_groups.start, tuple(offsets), self.write_file(whole),
                                       savepoint=True))
        return handles

    def publish(self, metadata: SnapshotMetadata) -> Path:
        """Write ``_metadata`` (after checking that every file it names was written here, at
        its recorded size), sync, and rename the directory to the output's name."""
        self._check_open()
        self._check_files(metadata)
        payload = write_metadata(metadata)
        with open(self.staging / METADATA, "xb") as out:
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        sync_directory(str(self.staging))
        rename_no_replace(self.staging, self.output)
        self._published = True
        sync_directory(str(self.output.parent))
        return self.output

    def discard(self) -> None:
        """Remove the temporary directory and everything written into it."""
        if not self._published:
            shutil.rmtree(self.staging, ignore_errors=True)

    def _check_open(self) -> None:
        if self._published:
            raise StateSourceError(f"savepoint {self.output} is already published")

    def _check_files(self, metadata: SnapshotMetadata) -> None:
        for stream in referenced_streams(metadata):
            if stream.inline is not None:
                continue
            if not stream.relative or stream.path not in self._written:
                raise CorruptCheckpointError(
                    f"_metadata of {self.output} would name {stream.path!r}, which is not a"
                    " file written into the savepoint: not publishing")
            if self._written[stream.path] != stream.size:
                raise CorruptCheckpointError(
                    f"_metadata of {self.output} records {stream.size} bytes for"
                    f" {stream.path!r}, which has {self._written[stream.path]}: not publishing")


def referenced_streams(metadata: SnapshotMetadata) -> list[StreamHandle]:
    """Every stream handle ``_metadata`` records: coordinator state and every handle of every
    subtask (keyed and operator, managed and raw)."""
    found = []
    for op in metadata.operators:
        if op.coordinator is not None:
            found.append(op.coordinator)
        for subtask in op.subtasks:
            found += [stream for handle in (*subtask.keyed, *subtask.raw_keyed)
                      for stream in handle.streams]
            found += [handle.stream for handle in (*subtask.operator, *subtask.raw_operator)]
    return found


def check_output(output: str | os.PathLike[str]) -> Path:
    """The local directory a new savepoint ``output`` names, refused if it exists or cannot be
    created (its missing parents are created when it is written)."""
    location = resolve(output)
    if not location.is_local:
        raise InvalidArgumentError(
            f"cannot write a Flink savepoint to {location.filesystem.type_name!r} storage"
            f" ({location}): a new savepoint is written to a local or shared file system path"
            " only (on a cluster, one that the driver and every executor see at the same"
            " path), not to object storage")
    path = Path(location.path)
    if path.name in ("", ".", ".."):
        raise InvalidArgumentError(f"{output} does not name a new directory")
    check_output_free(path)
    check_creatable(location, "savepoint output")
    return path


def check_output_free(output: str | os.PathLike[str]) -> None:
    if os.path.lexists(output):
        raise CheckpointExistsError(
            f"{output} already exists; a savepoint is never written over an existing path:"
            " choose another output directory")


def rename_no_replace(source: Path, target: Path) -> None:
    """Rename ``source`` to ``target``, failing with :class:`CheckpointExistsError` if
    ``target`` exists (a plain rename would replace an empty directory).

    Linux's ``renameat2(RENAME_NOREPLACE)`` makes the check and the rename one step;
    where it is missing, the check runs just before the rename.
    """
    result = _renameat2(source, target)
    if result == 0:
        return
    if result not in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, -1):
        if result == errno.EEXIST:
            check_output_free(target)
        raise OSError(result, os.strerror(result), str(target))
    check_output_free(target)
    try:
        os.rename(source, target)
    except OSError as error:
        if error.errno in (errno.EEXIST, errno.ENOTEMPTY):
            check_output_free(target)
        raise


def _renameat2(source: Path, target: Path) -> int:
    """0 on success, the errno on failure, -1 when the call does not exist here."""
    function = _libc_renameat2()
    if function is None:
        return -1
    if function(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target),
                _RENAME_NOREPLACE) == 0:
        return 0
    return ctypes.get_errno()


@functools.cache
def _libc_renameat2() -> Callable[..., int] | None:
    with contextlib.suppress(OSError, AttributeError, TypeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        function = libc.renameat2
        function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                             ctypes.c_uint]
        function.restype = ctypes.c_int
        return function
    return None

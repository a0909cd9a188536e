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

Object stores (``s3://`` and the other ``pyarrow.fs`` stores) have no rename of a
directory, so there the marker is Flink's own: a savepoint is complete when its
``_metadata`` exists. The state files are uploaded straight into the output
under random names (UUIDs, as Flink names them) that no other writer uses, and
``_metadata`` last, created only if absent (S3's ``If-None-Match: *``,
:func:`~statesource.format.exclusive.put_if_absent`, the statesource format's own
exclusive commit): of two writers of one output exactly one publishes, and an
existing savepoint is never replaced. A failure deletes the files written; a
killed run leaves state files and no ``_metadata``, which no reader takes for a
savepoint, and which ``statesource clean-savepoints`` removes
(:mod:`statesource.flink.snapshot.leftovers`).
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
    storage_error,
)
from statesource.flink.binary.snappy import frame
from statesource.flink.handles import KeyedHandle, SnapshotMetadata, StreamHandle
from statesource.flink.layouts.canonical_writer import KeyGroupFramer, assemble_keyed_file
from statesource.flink.snapshot.metadata_writer import write_metadata
from statesource.flink.snapshot.remote_output import (
    Uploads,
    check_remote_output,
    delete_quietly,
    put_metadata,
)
from statesource.flink.statefiles.keyed_header import KeyedHeader
from statesource.flink.statefiles.keyed_header_writer import write_keyed_header
from statesource.format.commit import sync_directory
from statesource.format.storage import Location, PathOrLocation, check_creatable, resolve
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
    by :meth:`publish`; used as a context manager, it removes what it wrote on any way out
    but a successful publish (on a local file system, with the parent directories it
    created). On an object store the files go into ``output`` itself and ``_metadata`` is
    the commit (see the module's docstring).

    ``output`` must not exist (:class:`CheckpointExistsError`, naming it); its parent is
    created if needed.
    """

    def __init__(self, output: PathOrLocation) -> None:
        self._written: dict[str, int] = {}
        self._published = False
        self.location = check_output(output)
        self.output = Path(self.location.path)
        self.staging: Path | None = None
        self._created: list[Path] = []
        self._uploads = None if self.location.is_local else Uploads(self.location.filesystem)
        if self.location.is_local:
            try:
                self._created = _make_parents(self.output.parent)
                self.staging = self.output.parent / staging_name(self.output.name)
                self.staging.mkdir()
            except OSError as error:
                self.discard()
                raise storage_error(f"cannot write savepoint {self.location}", error) from error

    def __enter__(self) -> SavepointWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        """Discard what was written unless published; an operating system's or a store's
        refusal (a full or read-only disk, a permission) is restated as one
        :class:`~statesource.errors.StorageError` naming the output, the cause and the file:
        every writer of savepoints writes through here, so none prints a bare ``OSError``."""
        if not self._published:
            self.discard()
        if isinstance(error, OSError) and not isinstance(error, StateSourceError):
            raise storage_error(f"cannot write savepoint {self.location}", error) from error

    def write_file(self, chunks: bytes | Iterable[bytes], name: str | None = None
                   ) -> StreamHandle:
        """Write and sync one state file (default name: a random UUID, as Flink names them)
        and return its handle: a path relative to ``_metadata``'s directory."""
        self._check_open()
        name = name or str(uuid.uuid4())
        if name in self._written or name == METADATA or "/" in name or name in (".", ".."):
            raise InvalidArgumentError(
                f"state file name {name!r} is taken or not a bare file name")
        pieces = [chunks] if isinstance(chunks, (bytes, bytearray)) else chunks
        if self._uploads is not None:
            self._written[name] = 0  # deleted on failure, even if partly uploaded
            self._written[name] = self._uploads.write(self.location.child(name), pieces)
            return StreamHandle(name, True, self._written[name])
        size = 0
        with open(self._staged(name), "xb") as out:
            for chunk in pieces:
                out.write(chunk)
                size += len(chunk)
            out.flush()
            os.fsync(out.fileno())
        self._written[name] = size
        return StreamHandle(name, True, size)

    def write_keyed_files(self, header: KeyedHeader, framers: dict[int, KeyGroupFramer],
                          max_parallelism: int, parallelism: int) -> list[KeyedHandle]:
        """One canonical keyed-state file per subtask of an operator: ``header``, then the key
        groups Flink assigns the subtask at ``parallelism``, framed by ``framers`` (by key
        group; each one used is removed from it, an absent one is empty). Where the header
        says compressed, each key group is one Snappy framed stream, as Flink writes it."""
        header_bytes = write_keyed_header(header)
        handles = []
        for index in range(parallelism):
            key_groups = key_group_range_for_operator(max_parallelism, parallelism, index)
            framed = []
            for key_group in key_groups:
                framer = framers.pop(key_group, None)
                data = b"" if framer is None else framer.getvalue()
                framed.append(frame(data) if data and header.compressed else data)
            whole, offsets = assemble_keyed_file(header_bytes, framed)
            handles.append(KeyedHandle(key_groups.start, tuple(offsets), self.write_file(whole),
                                       savepoint=True))
        return handles

    def publish(self, metadata: SnapshotMetadata) -> Location:
        """Write ``_metadata`` (after checking that every file it names was written here, at
        its recorded size), sync, and rename the directory to the output's name; on an object
        store, create ``_metadata`` in the output if it is absent."""
        self._check_open()
        self._check_files(metadata)
        payload = write_metadata(metadata)
        if self._uploads is not None:
            self._uploads.wait()  # every state file whole before the _metadata naming them
            put_metadata(self.location.child(METADATA), payload)
            self._published = True
            return self.location
        staged = self._staged(METADATA)
        with open(staged, "xb") as out:
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        sync_directory(str(staged.parent))
        rename_no_replace(staged.parent, self.output)
        self._published = True
        sync_directory(str(self.output.parent))
        return self.location

    def discard(self) -> None:
        """Remove the temporary directory and everything written into it, and the parent
        directories this writer created (where nothing else was put in them meanwhile); on
        an object store, every file written."""
        if self._published:
            return
        if self._uploads is not None:
            self._uploads.stop()
            delete_quietly(self.location.child(name) for name in self._written)
            return
        if self.staging is not None:
            shutil.rmtree(self.staging, ignore_errors=True)
        for created in reversed(self._created):
            with contextlib.suppress(OSError):
                created.rmdir()

    def _staged(self, name: str) -> Path:
        """Where a writer to a file system puts ``name`` until it publishes."""
        if self.staging is None:
            raise StateSourceError(f"savepoint {self.location} is written in place, on its"
                                   " object store")
        return self.staging / name

    def _check_open(self) -> None:
        if self._published:
            raise StateSourceError(f"savepoint {self.location} is already published")

    def _check_files(self, metadata: SnapshotMetadata) -> None:
        for stream in referenced_streams(metadata):
            if stream.inline is not None:
                continue
            if not stream.relative or stream.path not in self._written:
                raise CorruptCheckpointError(
                    f"_metadata of {self.location} would name {stream.path!r}, which is not a"
                    " file written into the savepoint: not publishing")
            if self._written[stream.path] != stream.size:
                raise CorruptCheckpointError(
                    f"_metadata of {self.location} records {stream.size} bytes for"
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


def check_output(output: PathOrLocation) -> Location:
    """Where a new savepoint ``output`` goes, refused if it exists or cannot be created (its
    missing parents are created when it is written). On an object store, refused where
    ``_metadata`` exists, or where anything but state files of a killed write is; an
    unreachable store is refused here, before any work."""
    location = resolve(output)
    if location.name in ("", ".", ".."):
        raise InvalidArgumentError(f"{location} does not name a new directory")
    if not location.is_local:
        check_remote_output(location)
        return location
    path = Path(location.path)
    check_output_free(path)
    check_creatable(location, "savepoint output")
    return location


def _make_parents(directory: Path) -> list[Path]:
    """Create ``directory`` and its missing parents; the ones created, outermost first."""
    missing = []
    while not os.path.lexists(directory):
        missing.append(directory)
        directory = directory.parent
    created = []
    for path in reversed(missing):
        try:
            path.mkdir()
        except FileExistsError:
            continue  # another process made it: not ours to remove
        created.append(path)
    return created


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

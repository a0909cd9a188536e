"""A new Flink savepoint on an object store: the checks before it is written, and its commit.

An object store has no directories to rename, so a savepoint there is complete
when its ``_metadata`` exists, as Flink itself decides. Before anything is
written the output is checked from the process that publishes (the driver):
the store answers (an unreachable endpoint or refused credentials fail here,
naming the output and the cause, not after minutes of work), the bucket
exists, and the output holds no ``_metadata`` and nothing else but state files
a killed write left (named by UUIDs: a rerun after a kill writes next to them,
and ``statesource clean-savepoints`` removes them).

The commit is the statesource format's exclusive create
(:func:`~statesource.format.exclusive.put_if_absent`, S3's ``If-None-Match: *``):
of two writers of one output one publishes, the other is refused and deletes its
files. Where no conditional create is available (another store, or no boto3),
``_metadata`` is written after a check that it is absent, with a warning that a
racing writer could then replace it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

import pyarrow.fs as pafs

from statesource.errors import CheckpointExistsError, InvalidArgumentError, StorageAccessError
from statesource.format.commit import create_exclusively
from statesource.format.exclusive import s3_client
from statesource.format.storage import Location, redacted

METADATA = "_metadata"
STATE_FILE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
"""How the savepoint writers name state files (``uuid.uuid4()``, as Flink does): the only
names a new output on an object store may already hold (those of a killed write)."""
_DELETE_BATCH = 1000
"""The most keys one S3 ``DeleteObjects`` request takes."""


def check_remote_output(location: Location) -> None:
    """Refuse an object-store ``output`` that holds a savepoint or anything else but leftover
    state files, whose bucket is missing, or whose store cannot be reached."""
    filesystem = location.filesystem
    bucket = location.path.split("/", 1)[0]
    try:
        missing = filesystem.get_file_info(bucket).type == pafs.FileType.NotFound
        info = filesystem.get_file_info(location.path)
        entries = [] if info.type != pafs.FileType.Directory else filesystem.get_file_info(
            pafs.FileSelector(location.path, allow_not_found=True))
    except OSError as error:
        raise unreachable(location, error) from None
    if missing:
        raise InvalidArgumentError(f"savepoint output {location}: bucket {bucket!r} does not"
                                   " exist")
    if info.type == pafs.FileType.File:
        raise CheckpointExistsError(
            f"{location} already exists (a file); a savepoint is never written over an"
            " existing path: choose another output directory")
    for entry in entries:
        name = entry.base_name
        if name == METADATA:
            raise CheckpointExistsError(
                f"{location} already holds a savepoint ({METADATA}); a savepoint is never"
                " written over an existing one: choose another output directory")
        if entry.type != pafs.FileType.File or not STATE_FILE.fullmatch(name):
            raise CheckpointExistsError(
                f"{location} already exists and holds {name!r}, which is not a state file of"
                " an unfinished savepoint write: choose another output directory")


def unreachable(location: Location, error: OSError) -> StorageAccessError:
    """One line naming the output and why its store did not answer, without credentials."""
    cause = " ".join(redacted(str(error)).split())
    return StorageAccessError(f"cannot reach savepoint output {location}: {cause}")


def put_metadata(target: Location, payload: bytes) -> None:
    """Create ``target`` (a ``_metadata``) only if absent: the commit of an object-store
    savepoint. :class:`CheckpointExistsError` when another writer published first."""
    if target.exists():  # where no conditional create guards the upload
        raise _published_meanwhile(target)
    create_exclusively(target, payload, lambda: _published_meanwhile(target),
                       f"publishing savepoint {target.parent}",
                       "the same output could replace it: give each writer its own output")


def _published_meanwhile(target: Location) -> CheckpointExistsError:
    return CheckpointExistsError(
        f"{target.parent} was published by another writer meanwhile; a savepoint is never"
        " written over an existing one: choose another output directory")


def delete_quietly(locations: Iterable[Location]) -> None:
    """Delete objects, those that are there: cleanup after a failure must not hide the
    failure. On S3 through boto3 where it can act as the file system does: pyarrow's delete
    leaves an empty marker of the parent behind, which would then look like a directory."""
    groups: dict[tuple[int, str], list[Location]] = {}
    for location in locations:
        groups.setdefault((id(location.filesystem), location.path.partition("/")[0]), []
                          ).append(location)
    for group in groups.values():
        client = s3_client(group[0].filesystem)
        with contextlib.suppress(OSError, ImportError):
            if client is None:
                for location in group:
                    with contextlib.suppress(FileNotFoundError):
                        location.filesystem.delete_file(location.path)
                continue
            from botocore.exceptions import BotoCoreError, ClientError

            with contextlib.suppress(BotoCoreError, ClientError):
                for start in range(0, len(group), _DELETE_BATCH):
                    keys = [location.path.partition("/") for location in
                            group[start:start + _DELETE_BATCH]]
                    client.delete_objects(Bucket=keys[0][0], Delete={
                        "Objects": [{"Key": key} for _, _, key in keys], "Quiet": True})


class Uploads:
    """The state files of one object-store savepoint, uploaded a few at a time while the
    writer computes the next: an upload waits on the network, not on the interpreter.
    :meth:`wait` before the commit; :meth:`stop` before deleting what was written."""

    def __init__(self, filesystem: pafs.FileSystem) -> None:
        self._pool = ThreadPoolExecutor(_PARALLEL_UPLOADS, thread_name_prefix="savepoint-upload")
        self._pending: list[Future[int]] = []
        self._pool.submit(s3_client, filesystem)  # made meanwhile, for the commit

    def write(self, target: Location, pieces: Iterable[bytes]) -> int:
        """Upload ``pieces`` as ``target``; its size. A whole file in memory (one piece) is
        uploaded in the background, at most a few at once; a stream of pieces here."""
        if isinstance(pieces, list) and len(pieces) == 1:
            while sum(not f.done() for f in self._pending) >= _PARALLEL_UPLOADS:
                wait(self._pending, return_when=FIRST_COMPLETED)
            self._pending.append(self._pool.submit(_upload, target, pieces))
            return len(pieces[0])
        return _upload(target, pieces)

    def wait(self) -> None:
        """Every upload done; the first failure raised."""
        for future in self._pending:
            future.result()
        self._pool.shutdown()

    def stop(self) -> None:
        """No upload running any more (those not started are cancelled), failures ignored."""
        self._pool.shutdown(wait=True, cancel_futures=True)


_PARALLEL_UPLOADS = 4


def _upload(target: Location, pieces: Iterable[bytes]) -> int:
    size = 0
    with target.filesystem.open_output_stream(target.path) as stream:
        for piece in pieces:
            stream.write(piece)
            size += len(piece)
    return size

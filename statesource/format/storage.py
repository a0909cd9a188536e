"""Where checkpoints live: filesystem resolution, directory layout, confined paths.

All I/O goes through ``pyarrow.fs``, so local paths, ``file://``, ``s3://`` and
``hdfs://`` URIs work alike (``s3a://`` and ``s3n://``, what Spark users type,
are read as ``s3://``). A :class:`Location` keeps the URI it came from, scheme
and endpoint query included, so every path handed on (to Spark, to a user)
reaches the same storage again. The layout (see docs/FORMAT.md)::

    <root>/chk-<id>/_metadata.json     written last; its presence makes the checkpoint
    <root>/chk-<id>/data/<file>.arrow  data files, uniquely named per write attempt

Metadata names data files by paths relative to the root, and may name files
another checkpoint wrote. Those paths come from disk, so they are untrusted:
:func:`confined` is the only way from a recorded path to a location.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from statesource.checks import check_checkpoint_id
from statesource.errors import (
    CheckpointNotFoundError,
    CheckpointRetiredError,
    CorruptCheckpointError,
    InvalidArgumentError,
    StorageAccessError,
)

METADATA_FILE = "_metadata.json"
FLINK_METADATA_FILE = "_metadata"
"""What an Apache Flink snapshot directory holds (read by :mod:`statesource.flink`): named
here too so that a statesource opener can tell a user who gave one what to use instead."""
RETIRED_FILE = "_retired.json"
"""A checkpoint's metadata after ``retain`` retired it: no longer a checkpoint, but
still the list of files the interrupted deletion must finish with."""
DATA_DIR = "data"
_CHECKPOINT_DIR = re.compile(r"chk-(0|[1-9][0-9]*)", re.ASCII)
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")
"""A scheme of two or more characters (one letter followed by ``:`` is a drive letter)."""
_S3_ALIASES = re.compile(r"s3[an]://", re.IGNORECASE)
"""Hadoop's names for S3 (``s3a://``, ``s3n://``): the same objects as ``s3://``."""
_USER_INFO = re.compile(r"(?<=://)[^\s'\"]*@")
"""User info, up to the last ``@`` (secrets may hold ``/`` and ``@``)."""
_SECRET_PARAMETER = re.compile(
    r"(?i)([?&](?:[^=&#\s'\"]*(?:key|secret|token|password|credential|signature)"
    r"[^=&#\s'\"]*|sig)=)[^&#\s'\"]*")
"""A query parameter whose value may be a credential (pyarrow's S3 URIs take
``access_key``, ``secret_key`` and ``session_token``; signed URLs carry ``sig`` or
``X-Amz-Signature``)."""


def redacted(text: str) -> str:
    """``text`` (a message) with the credentials any URI in it may carry left out: its user
    info (``s3://key:secret@bucket``) and the values of query parameters whose names hold
    key, secret, token, password, credential or signature, or are ``sig``. For display
    only: it may also hide a harmless part of a path that looks like them."""
    return _SECRET_PARAMETER.sub(r"\1***", _USER_INFO.sub("***@", text))


@dataclass(frozen=True)
class Location:
    """A filesystem and a path on it, the pair every pyarrow.fs call takes, and the URI
    it came from.

    pyarrow's path drops a URI's scheme and query (``s3://bucket/x?endpoint_override=...``
    becomes ``bucket/x``), which then reads as a local path wherever it is handed on:
    ``origin`` (what preceded the path, e.g. ``s3://``) and ``query`` keep the rest, and
    :attr:`uri` puts them back.
    """

    filesystem: pafs.FileSystem
    path: str
    origin: str = ""
    query: str = ""

    def child(self, *names: str) -> Location:
        return dataclasses.replace(self, path="/".join([self.path.rstrip("/"), *names]))

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    @property
    def parent(self) -> Location:
        return dataclasses.replace(self, path=self.path.rstrip("/").rsplit("/", 1)[0] or "/")

    @property
    def uri(self) -> str:
        """The full URI (a plain path on the local file system): what reaches this
        location again from any process, as ``resolve(location.uri)``."""
        return self.origin + self.path + (f"?{self.query}" if self.query else "")

    @property
    def is_local(self) -> bool:
        return isinstance(self.filesystem, pafs.LocalFileSystem)

    def exists(self) -> bool:
        return self.filesystem.get_file_info(self.path).type != pafs.FileType.NotFound

    def __str__(self) -> str:
        """The URI without the credentials its origin or query may carry (:func:`redacted`);
        the path is shown as it is, so that distinct files never print the same."""
        shown = redacted(self.origin) + self.path
        return shown + (f"?{redacted(f'?{self.query}')[1:]}" if self.query else "")


PathOrLocation = str | os.PathLike[str] | Location
"""What every opener takes: a path or URI as a user gives it, or a :class:`Location`
already resolved (a Spark task's, whose file system came pickled)."""


def resolve(path: PathOrLocation, filesystem: pafs.FileSystem | None = None) -> Location:
    """Turn a path, ``os.PathLike`` or URI (and an optional filesystem) into a :class:`Location`.

    Something that looks like a URI (``scheme:...``) is only ever a URI: when
    pyarrow cannot use it the error is about the URI, instead of the text
    being taken as a local file name and reported as some mangled path.
    """
    if isinstance(path, Location):
        return path if filesystem is None else dataclasses.replace(path, filesystem=filesystem)
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str) or not path:
        raise InvalidArgumentError(
            f"a checkpoint path must be a non-empty string or os.PathLike, got {path!r}")
    if not _URI.match(path):
        if filesystem is not None:
            return Location(filesystem, path)
        return Location(pafs.LocalFileSystem(), os.path.abspath(path))
    uri = _S3_ALIASES.sub("s3://", path, count=1) if _S3_ALIASES.match(path) else path
    try:
        parsed, resolved = pafs.FileSystem.from_uri(uri)
    except (ValueError, TypeError, OSError) as error:
        if filesystem is not None:  # a path the given file system understands as it is
            return Location(filesystem, path)
        if isinstance(error, OSError) and "resolving region" in str(error):
            raise StorageAccessError(  # pyarrow asks the store first where no region is given
                f"cannot reach the S3 store of {redacted(path)!r} to find the bucket's region:"
                f" {redacted(str(error))} (give region= in the URI to skip that request)"
            ) from None
        raise InvalidArgumentError(
            f"cannot use URI {redacted(path)!r}: {redacted(str(error))} (a file URI is"
            " file:///absolute/path; write a local path holding ':' as ./name:...)") from None
    origin, query = _origin_and_query(uri, resolved)
    return Location(filesystem or parsed, resolved, origin, query)


def _origin_and_query(uri: str, resolved: str) -> tuple[str, str]:
    """What precedes pyarrow's path in ``uri`` (``s3://``, ``hdfs://host:port``) and its query.

    pyarrow's path is the URI's tail (bucket and key on object stores, the
    path after the authority elsewhere); where it is not, the origin is
    rebuilt from the URI's parts.
    """
    parts = urlsplit(uri)
    without_query = uri.split("?", 1)[0].split("#", 1)[0].rstrip("/")
    if resolved and without_query.endswith(resolved.rstrip("/")):
        return without_query[:len(without_query) - len(resolved.rstrip("/"))], parts.query
    authority = parts.netloc if resolved.startswith("/") else ""
    return f"{parts.scheme}://{authority}", parts.query


def checkpoint_dir_name(checkpoint_id: int) -> str:
    return f"chk-{checkpoint_id}"


def complete_checkpoints(root: Location) -> dict[int, Location]:
    """The checkpoints under ``root`` whose metadata exists, by id."""
    return checkpoint_dirs(root, METADATA_FILE)


def checkpoint_dirs(root: Location, marker: str) -> dict[int, Location]:
    """The ``chk-<id>`` directories under ``root`` holding a file named ``marker``, by id."""
    selector = pafs.FileSelector(root.path, allow_not_found=True)
    try:
        infos = root.filesystem.get_file_info(selector)
    except NotADirectoryError:  # a file holds no checkpoints
        return {}
    found = {}
    for info in infos:
        directory = dataclasses.replace(root, path=info.path)
        checkpoint_id = checkpoint_id_of(directory)
        if checkpoint_id is not None and info.type == pafs.FileType.Directory \
                and directory.child(marker).exists():
            found[checkpoint_id] = directory
    return found


def _check_not_retired(directory: Location, checkpoint_id: int | None) -> None:
    """A checkpoint ``retain`` removed (or is removing) is no missing checkpoint: say so."""
    if checkpoint_id is not None and directory.child(RETIRED_FILE).exists():
        raise CheckpointRetiredError(
            f"checkpoint {checkpoint_id} was removed by retention ({directory} holds"
            f" {RETIRED_FILE}, not {METADATA_FILE}); read a checkpoint that is kept")


def checkpoint_id_of(directory: Location) -> int | None:
    """The id a ``chk-<id>`` directory's name gives, or None for any other name."""
    match = _CHECKPOINT_DIR.fullmatch(directory.name)
    return int(match.group(1)) if match else None


def snapshot_directory(location: Location, *markers: str) -> Location:
    """``location``, or its directory when it names a file that marks a snapshot directory
    (``markers``: a checkpoint's ``_metadata.json``, a Flink savepoint's ``_metadata``). Flink
    takes ``<savepoint>/_metadata`` for its savepoint, and so does every opener here."""
    if location.name in markers and (
            location.filesystem.get_file_info(location.path).type == pafs.FileType.File):
        return location.parent
    return location


def find_checkpoint(location: Location, checkpoint_id: int | None = None) -> Location:
    """The checkpoint directory at ``location`` (or of its ``_metadata.json``), or the newest
    complete one under it."""
    if checkpoint_id is not None:
        check_checkpoint_id(checkpoint_id)
    location = snapshot_directory(location, METADATA_FILE, FLINK_METADATA_FILE)
    kind = location.filesystem.get_file_info(location.path).type
    if kind == pafs.FileType.NotFound:
        raise CheckpointNotFoundError(f"checkpoint path {location} does not exist")
    if kind != pafs.FileType.Directory:
        raise CheckpointNotFoundError(
            f"checkpoint path {location} is a file, not a directory: give a checkpoint"
            " directory (chk-<id>), a directory of checkpoints, or a Flink snapshot directory")
    if location.child(METADATA_FILE).exists():
        return location
    _check_not_retired(location, checkpoint_id_of(location))
    found = complete_checkpoints(location)
    if checkpoint_id is not None:
        if checkpoint_id not in found:
            _check_not_retired(location.child(checkpoint_dir_name(checkpoint_id)), checkpoint_id)
            raise CheckpointNotFoundError(
                f"no complete checkpoint {checkpoint_id} under {location};"
                f" complete checkpoints: {sorted(found) or 'none'}"
            )
        return found[checkpoint_id]
    if not found:
        _check_not_flink(location)
        raise CheckpointNotFoundError(
            f"no complete checkpoint under {location} (a checkpoint is a chk-<id> directory"
            f" holding {METADATA_FILE})"
        )
    return found[max(found)]


def _check_not_flink(location: Location) -> None:
    """A Flink snapshot handed to the opener of statesource checkpoints: name the opener that
    reads it, rather than call it an empty directory."""
    if location.child(FLINK_METADATA_FILE).exists() or checkpoint_dirs(location,
                                                                      FLINK_METADATA_FILE):
        raise CheckpointNotFoundError(
            f"{location} is an Apache Flink snapshot, not a statesource checkpoint: open it"
            " with statesource.open_source(path), which opens either kind, or"
            " statesource.FlinkCheckpoint.open(path)")


def unique_data_file_name(stem: str) -> str:
    """A data file name no other write attempt can produce, so retries never collide."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", stem)
    return f"{safe}-{uuid.uuid4().hex[:16]}.arrow"


def new_data_file(root: Location, checkpoint_id: int, stem: str) -> tuple[Location, str]:
    """A fresh data file of checkpoint ``checkpoint_id``: where to write it and the
    root-relative path the metadata records."""
    relative = "/".join([checkpoint_dir_name(checkpoint_id), DATA_DIR,
                         unique_data_file_name(stem)])
    target = root.child(*relative.split("/"))
    check_writable_root(root)
    target.filesystem.create_dir(target.parent.path, recursive=True)
    return target, relative


def remove_attempt(files: Iterable[Location]) -> None:
    """Delete the data files of a failed write attempt, as far as possible.

    A file that cannot be deleted is harmless: no metadata lists it, so no
    reader ever opens it, and no later attempt reuses its name. On a local file
    system the directories that held them (a checkpoint's ``data`` directory and
    the checkpoint's own) go too where that leaves them empty, so that a failed
    first write leaves no empty checkpoint behind; a directory holding anything
    else, another writer's files included, stays.
    """
    parents: set[str] = set()
    for location in files:
        with contextlib.suppress(OSError):
            location.filesystem.delete_file(location.path)
        if location.is_local:
            parents.add(os.path.dirname(location.path))
    for data_dir in sorted(parents):
        for directory in (data_dir, os.path.dirname(data_dir)):
            try:
                os.rmdir(directory)
            except OSError:
                break


def check_writable_root(root: Location) -> None:
    """A root to write checkpoints into must be a directory, or not exist yet and be
    creatable (:func:`check_creatable`)."""
    if root.filesystem.get_file_info(root.path).type not in (pafs.FileType.Directory,
                                                            pafs.FileType.NotFound):
        raise InvalidArgumentError(f"checkpoint root {root} is a file, not a directory")
    check_creatable(root, "checkpoint root")


def check_creatable(location: Location, what: str) -> None:
    """Refuse, before any work, a local directory ``location`` that cannot be written into or
    created: where the nearest part of it that exists is a file, or is not writable. Missing
    parents are fine (they are created, as ``mkdir -p`` does). Object stores have no
    directories to check: their writes say what is wrong."""
    if not location.is_local:
        return
    existing = location.path
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    where = "it" if existing == location.path else existing
    if not os.path.isdir(existing):
        raise InvalidArgumentError(f"{what} {location} cannot be created: {where} is a file,"
                                   " not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        read_only = os.statvfs(existing).f_flag & os.ST_RDONLY
        raise InvalidArgumentError(
            f"{what} {location} cannot be written: {where} is on a read-only file system"
            if read_only else f"{what} {location} cannot be written: {where} is not writable"
            " by this user (permission denied)")


def sync_directory(path: str) -> None:
    """Make a local directory's entries (new or removed names) durable."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def check_relative_path(path: object, source: str) -> str:
    """A recorded data-file path, refused unless it is plainly inside the root.

    Refused: anything but a non-empty string; absolute paths; URIs and drive
    letters; backslashes; empty, ``.`` and ``..`` components; control characters.
    """
    if (not isinstance(path, str) or not path or path.startswith("/") or "\\" in path
            or ":" in path or any(ord(c) < 32 for c in path)
            or any(part in ("", ".", "..") for part in path.split("/"))):
        raise CorruptCheckpointError(
            f"metadata {source} names data file {path!r}, which is not a relative path inside"
            " the checkpoint root"
        )
    return path


def confined(root: Location, path: str) -> Location:
    """The location of recorded ``path`` under ``root``, refusing symlink escapes.

    On a local filesystem a recorded path could pass every syntactic check and
    still lead out of the root through a symlink, so the resolved path must
    stay inside the resolved root.
    """
    check_relative_path(path, str(root))
    location = root.child(*path.split("/"))
    if location.is_local and not is_within(root.path, location.path):
        # Where it leads is not named: the message must not describe the world outside.
        raise CorruptCheckpointError(
            f"data file {path!r} leads outside the checkpoint root {root} (through a symlink)"
        )
    return location


def is_within(directory: str, path: str) -> bool:
    """Whether local ``path``, symlinks resolved, is ``directory`` or inside it."""
    real_directory = os.path.realpath(directory)
    return os.path.commonpath([real_directory, os.path.realpath(path)]) == real_directory


def check_files(root: Location, files: dict[str, int]) -> None:
    """Every root-relative path in ``files`` names a regular file of exactly its size.

    One metadata request for all of them, and no byte read: what a reader
    needs before it trusts byte ranges, and what a commit needs before it
    publishes references.
    """
    paths = list(files)
    infos = root.filesystem.get_file_info([confined(root, path).path for path in paths])
    for path, info in zip(paths, infos):
        if info.type == pafs.FileType.NotFound:
            found = "missing"
        elif info.type != pafs.FileType.File:
            found = "not a regular file"
        elif info.size != files[path]:
            found = f"{info.size} bytes, the metadata says {files[path]}"
        else:
            continue
        raise CorruptCheckpointError(f"data file {path} under {root} is {found}")


def open_regular_file(location: Location, what: str, confine_to: Location | None = None
                      ) -> pa.NativeFile:
    """Open a file for random access, refusing anything that is not a regular file.

    A FIFO would block the reader forever and a device could feed it without
    end, so the type is checked before opening. With ``confine_to`` (local
    file systems) a symlink leading out of that directory is refused too, and
    the error says no more about the outside than that.
    """
    if (confine_to is not None and location.is_local
            and not is_within(confine_to.path, location.path)):
        raise CorruptCheckpointError(f"{what} {location} leads outside {confine_to} (a symlink)")
    kind = location.filesystem.get_file_info(location.path).type
    if kind == pafs.FileType.NotFound:
        raise CorruptCheckpointError(f"{what} {location} is missing")
    if kind != pafs.FileType.File:
        raise CorruptCheckpointError(f"{what} {location} is not a regular file")
    try:
        return location.filesystem.open_input_file(location.path)
    except FileNotFoundError:
        raise CorruptCheckpointError(f"{what} {location} is missing") from None
    except OSError as error:
        raise CorruptCheckpointError(f"cannot open {what} {location}: {error}") from None

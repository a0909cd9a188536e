"""What a Spark task's storage failure means, said on the executor where it happened.

The driver resolved a path and found the checkpoint; a task on another
machine opens it again with the file system pickled into the task. Two
failures look like something else there: a local path that only the driver
sees reads like a typo ("does not exist"), and an S3 client without
credentials reports an opaque ``AWS Error ... during HeadObject``, because the
pickled file system carries the endpoint but never the credentials (each
executor finds its own, through the AWS default chain). Both are restated
here with the host, the location and the cure; any other refusal of the operating
system (a full or read-only disk, a permission) as one line naming the host, the cause
and the file. A write to a local path has the
same cause seen from the driver: the tasks wrote files onto their own disks,
which the commit cannot see (:func:`check_written_visible`).
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

from statesource import errors
from statesource.errors import (
    CheckpointNotFoundError,
    CorruptCheckpointError,
    StateSourceError,
    StorageAccessError,
)
from statesource.errors import storage_error as os_failure
from statesource.format.locations import DataFile
from statesource.format.storage import Location

T = TypeVar("T")
SHARED_STORAGE = ("a checkpoint read or written by a cluster must be on storage every"
                  " executor shares (a shared mount at the same path, or an object store URI)")

CREDENTIALS_HINT = (
    "executors do not receive the driver's credentials: each finds its own through the"
    " AWS default chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY in the executor's"
    " environment, e.g. spark.executorEnv.AWS_ACCESS_KEY_ID and"
    " spark.executorEnv.AWS_SECRET_ACCESS_KEY, ~/.aws on every worker, or an instance"
    " role); the endpoint travels in the path's query (docs/DEPLOY.md)")


def guarded(location: Location | None, rows: Iterator[T]) -> Iterator[T]:
    """``rows`` (a task's lazily opened and read output), with storage failures restated."""
    with restated(location):
        yield from rows


@contextmanager
def restated(location: Location | None) -> Iterator[None]:
    """Storage failures inside the block restated with the host and the cure.

    ``location`` is what the task reads; a write task gives None (its sink
    knows where it writes, and pyarrow's message names the object).
    """
    try:
        yield
    except (CheckpointNotFoundError, CorruptCheckpointError) as error:
        if location is not None and location.is_local and not location.exists():
            raise StorageAccessError(
                f"executor on host {socket.gethostname()} cannot see local path {location}"
                f" ({error}): {SHARED_STORAGE}") from None
        raise
    except OSError as error:
        if isinstance(error, StateSourceError):
            raise
        if not _from_remote_store(location, error):  # a full or read-only disk, a permission
            doing = "writing" if location is None else f"reading {location}"
            raise os_failure(f"Spark task on host {socket.gethostname()}, {doing}",
                             error) from error
        raise storage_error(location, error) from None


_OURS = re.compile(r"^statesource\.errors\.([A-Za-z]+): (.+)$", re.MULTILINE)
"""The last line of a task's traceback when it raised one of statesource's errors."""


@contextmanager
def raised_by_tasks() -> Iterator[None]:
    """A failed Spark job re-raised, in the caller, as the statesource error its task raised.

    Spark hands the caller its own exception (a ``PythonException`` whose text holds the
    worker's traceback, then the JVM's): the one line that says what went wrong is deep
    inside it. Here it comes first, of its class (the errno of a :class:`StorageError` is
    not carried), with Spark's exception as its cause.
    """
    try:
        yield
    except StateSourceError:
        raise
    except Exception as error:
        found = _OURS.findall(str(error))
        kind = getattr(errors, found[-1][0], None) if found else None
        if not (isinstance(kind, type) and issubclass(kind, StateSourceError)):
            raise
        raise kind(found[-1][1]) from error


def _from_remote_store(location: Location | None, error: OSError) -> bool:
    """Whether ``error`` is a remote store's: the location is remote, or (a write task's,
    whose location is its sink's) pyarrow's S3 client says so."""
    if location is not None:
        return not location.is_local
    return "AWS Error" in str(error)


def storage_error(location: Location | None, error: OSError) -> StorageAccessError:
    """A remote store's failure on this host, naming the host, the location and the cure."""
    where = "the storage" if location is None else f"the storage of {location}"
    return StorageAccessError(
        f"executor on host {socket.gethostname()} cannot reach or authenticate to {where}:"
        f" {error}; {CREDENTIALS_HINT}")


def check_written_visible(missing: Callable[[Sequence[DataFile]], list[str]],
                          written: Sequence[DataFile]) -> None:
    """Refuse to publish when files the tasks wrote are not where this driver looks
    (``missing`` names those it cannot see): the commit would otherwise fail on a "missing"
    file as if something had deleted it."""
    unseen = missing(written)
    if unseen:
        raise StorageAccessError(
            f"{len(unseen)} of the {len(written)} files the Spark tasks wrote are not visible"
            f" on the driver (host {socket.gethostname()}), e.g. {unseen[0]!r}: executors on"
            f" other machines wrote them to their own disks; {SHARED_STORAGE}. Nothing was"
            " committed")

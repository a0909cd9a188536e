"""The exceptions statesource raises.

Every failure a user can cause surfaces as a :class:`StateSourceError`, so a
caller can catch one type and print its message: messages always name the
offending value, path or name. The specific classes also derive from the
builtin exception a Python programmer would expect (``ValueError`` for a bad
argument, ``LookupError`` for an unknown name), so generic handlers keep working.
"""

from __future__ import annotations

import os


class StateSourceError(Exception):
    """Base class of every error statesource raises on purpose."""


class InvalidArgumentError(StateSourceError, ValueError):
    """An argument or option has a value outside its domain."""


class TypeMismatchError(StateSourceError, TypeError):
    """A value does not match its declared type, or a type cannot be used where it was declared."""


class StateNotFoundError(StateSourceError, LookupError):
    """An operator or state name that the checkpoint or backend does not hold."""


class CheckpointNotFoundError(StateSourceError, FileNotFoundError):
    """A path that holds no complete checkpoint."""


class CheckpointRetiredError(CheckpointNotFoundError):
    """A checkpoint that ``retain`` removed while it was being read or referenced.

    Not corruption: the checkpoint was complete and was deleted on purpose;
    reading a kept (newer) checkpoint, or rerunning a write, succeeds.
    """


class CorruptCheckpointError(StateSourceError):
    """A checkpoint file is truncated, unreadable or fails its checksum."""


class UnsupportedFormatVersionError(StateSourceError):
    """A checkpoint written in a format version this reader does not understand."""


class IncompatibleCheckpointError(StateSourceError):
    """A checkpoint that cannot serve the request, e.g. a key-group range it does not cover."""


class ConcurrentModificationError(StateSourceError, RuntimeError):
    """A fail-fast iterator saw its map change structurally underneath it."""


class CheckpointExistsError(InvalidArgumentError, FileExistsError):
    """A checkpoint id that is already committed: checkpoints are never overwritten."""


class JvmShimUnavailableError(StateSourceError):
    """The Java shim cannot be built or loaded here (no javac, no pyspark jars, a failed build)."""


class StorageError(StateSourceError, OSError):
    """The operating system or a store refused a read or write (a read-only or full file
    system, a permission, a path that is a file): one line naming what was being done, the
    cause and the path, with the refusal's ``errno`` kept (:func:`storage_error`)."""


class StorageAccessError(StorageError):
    """A process (typically a Spark executor) cannot reach, authenticate to, or see the storage
    a checkpoint lives on."""


def describe_os_error(error: OSError) -> str:
    """What the operating system refused, and the file where it says: ``No space left on
    device: /data/chk-3/data/x.arrow`` (Python's own text where it gives no cause)."""
    names = [os.fsdecode(n) for n in (error.filename, error.filename2) if n is not None]
    if error.strerror:
        return f"{error.strerror}: {' -> '.join(names)}" if names else error.strerror
    return str(error)


def storage_error(doing: str, error: OSError) -> StorageError:
    """``error`` restated as one line, ``<doing>: <cause>: <path>``; ``errno`` is kept, so a
    caller can still tell a full disk from a read-only one."""
    restated = StorageError(f"{doing}: {describe_os_error(error)}")
    restated.errno = error.errno
    return restated

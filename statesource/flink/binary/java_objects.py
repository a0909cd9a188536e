"""Java serialization streams inside Flink's files, read with ``javaobj-py3``.

Flink writes some objects with Java's own ``ObjectOutputStream`` and no length before them:
a SQL snapshot's ``LogicalType``s, the ``CheckpointProperties`` that end a ``_metadata``.
Where such an object ends is only known by parsing it, which a maintained reader of the
stream format does here; :func:`read_java_object` reads exactly one object (its own stream
header first) and leaves the reader just past it, so that what follows is read from the
right place and bytes after it are noticed.
"""

from __future__ import annotations

import io
from typing import Any

from javaobj.v1.unmarshaller import JavaObjectUnmarshaller

from statesource.flink.binary.reader import BinaryReader


def read_java_object(r: BinaryReader, what: str) -> Any:
    """One Java-serialized object at ``r`` (its own stream header first); ``r`` moves just past
    it. ``what`` names it in errors."""
    at = r.pos
    stream = io.BytesIO(r.data[r.pos:r.end])
    try:
        found = JavaObjectUnmarshaller(stream).readObject(ignore_remaining_data=True)
    # javaobj reports a bad stream with whatever its parsing hit (EOFError, KeyError,
    # RuntimeError, ...): every one means these bytes are not the object Flink wrote.
    except Exception as error:
        raise r.error(f"{what} is not a Java serialization stream that parses"
                      f" ({type(error).__name__}: {error})", at) from None
    r.skip(stream.tell())
    return found

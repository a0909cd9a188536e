"""Running a step where Spark commits: on the driver, or on the Spark Connect server.

Planning a write (opening its base snapshot, choosing the new id) and
committing it read and write the storage, so they must run where Spark's own
data source writes plan and commit, not in the calling process: a Spark
Connect client often cannot see the storage at all, and a client that plans
from its own view can pick an id that the storage already holds. Both steps
go through a Python data source, which Spark runs in a Python worker of the
driver:

- :func:`call_on_driver` plans: a read whose reader calls the function while
  the query is planned (on the driver) and carries the pickled result to the
  one task that returns it. The function must change nothing but what expires
  by itself, as Spark may plan a read more than once: a write's plan pins its
  base (docs/FORMAT.md section 11.1), and a duplicate's pin expires.
- :func:`commit_on_driver` commits: a ``df.write`` of one row whose
  ``commit()`` runs the function on the driver, once, after the task
  succeeded. Its result (or its exception) is left in a file on the driver's
  local disk and taken back by a read, so the caller gets the function's own
  return value and exception type on every kind of session.

Functions and arguments travel pickled (by reference to their module for
functions): statesource must be importable on the driver, as for every
``flinkstate`` query. A Connect client can already run Python on the
driver by registering a data source, so this opens nothing new.
"""

from __future__ import annotations

import base64
import os
import pickle
import tempfile
import uuid
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from statesource.errors import InvalidArgumentError

NAME = "statesource-driver"
_CALL = "call"
_RESULT_DIR = "statesource-driver-results"
_registered: weakref.WeakSet[Any] = weakref.WeakSet()
T = TypeVar("T")


def call_on_driver(spark: Any, function: Callable[..., T], *arguments: Any) -> T:
    """``function(*arguments)`` run on ``spark``'s driver while a read is planned; its
    result, or its exception raised here."""
    return cast(T, _call(spark, function, arguments))


def _call(spark: Any, function: Callable[..., Any], arguments: tuple[Any, ...]) -> Any:
    _register(spark)
    rows = spark.read.format(NAME).option(_CALL, _encode((function, arguments))).load().collect()
    return _outcome(rows[0][0])


def commit_on_driver(spark: Any, function: Callable[..., T], *arguments: Any) -> T:
    """``function(*arguments)`` run once on ``spark``'s driver as the commit of a write;
    its result, or its exception raised here."""
    _register(spark)
    token = uuid.uuid4().hex
    (spark.createDataFrame([(token,)], "token string").write.format(NAME)
     .option(_CALL, _encode((function, arguments))).option("token", token)
     .mode("append").save())
    return cast(T, _call(spark, take_result, (token,)))


def _register(spark: Any) -> None:
    """The source on ``spark``, registered once per session (again, Spark warns)."""
    if spark not in _registered:
        spark.dataSource.register(DriverCallSource)
        _registered.add(spark)


def take_result(token: str) -> bytes:
    """The pickled outcome a commit left for ``token`` (removed as it is taken)."""
    path = _result_path(token)
    try:
        with open(path, "rb") as stored:
            outcome = stored.read()
    except FileNotFoundError:
        raise InvalidArgumentError(
            f"no commit outcome {token} on the driver: the write's commit did not run here")\
            from None
    os.unlink(path)
    return _ResultBytes(outcome)


class _ResultBytes(bytes):
    """An outcome already pickled: passed through as it is, not pickled again."""


def _result_path(token: str) -> str:
    if not token.isalnum():
        raise InvalidArgumentError(f"invalid commit token {token!r}")
    directory = os.path.join(tempfile.gettempdir(), _RESULT_DIR)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    return os.path.join(directory, token)


def _encode(value: Any) -> str:
    return base64.b64encode(pickle.dumps(value)).decode("ascii")


def _decode(text: str | None) -> Any:
    if not text:
        raise InvalidArgumentError(f"{NAME} needs option {_CALL}: it is statesource's own")
    return pickle.loads(base64.b64decode(text))


def _run(call: tuple[Callable[..., Any], tuple[Any, ...]]) -> bytes:
    """The pickled outcome of ``call``: ``(True, result)`` or ``(False, exception)``."""
    function, arguments = call
    try:
        result = function(*arguments)
    except Exception as error:  # noqa: BLE001 - handed to the caller, who raises it
        return pickle.dumps((False, error))
    if isinstance(result, _ResultBytes):
        return bytes(result)
    return pickle.dumps((True, result))


def _outcome(payload: bytes) -> Any:
    succeeded, value = pickle.loads(payload)
    if not succeeded:
        raise value
    return value


class DriverCallSource(DataSource):
    """``statesource-driver``: statesource's own steps on the driver (not for queries)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return "outcome binary"

    def reader(self, schema: StructType) -> DataSourceReader:
        return _CallReader(_run(_decode(self.options.get(_CALL))))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return _CommitWriter(self.options.get(_CALL) or "", self.options.get("token") or "")


class _CallReader(DataSourceReader):
    def __init__(self, outcome: bytes) -> None:
        self.outcome = outcome

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[tuple[bytes]]:
        yield (self.outcome,)


@dataclass
class _Done(WriterCommitMessage):
    rows: int = field(default=0)


class _CommitWriter(DataSourceWriter):
    def __init__(self, call: str, token: str) -> None:
        self.call = call
        self.token = token

    def write(self, iterator: Iterator[Any]) -> _Done:
        return _Done(sum(1 for _ in iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        outcome = _run(_decode(self.call))
        with open(_result_path(self.token), "wb") as out:
            out.write(outcome)

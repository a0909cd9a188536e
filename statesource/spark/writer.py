"""Rewriting checkpoints from Spark: ``df.write.format("flinkstate")``, ``write_state``, rewrites.

Every path runs the same task (:func:`~.write_task.write_partition`)
and the same driver-side commit: the written files of a state, checked not to
overlap, replace that state in the base checkpoint; everything else is
carried over by reference; one new checkpoint is published atomically, or
nothing is and the written files are removed.

``df.write`` runs on the DataFrame's own partitioning; when two tasks hold
rows of one Flink subtask the commit fails and names :func:`write_state`,
which shuffles the rows by Flink subtask first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from statesource.errors import InvalidArgumentError
from statesource.format.columns import KEY
from statesource.format.commit import CheckpointInfo, commit_checkpoint
from statesource.format.edit import CheckpointEdit
from statesource.format.metadata import DataFile, KeyedStateMeta
from statesource.keygroups import key_groups, operator_indexes
from statesource.model import StateDeclaration, StateKind
from statesource.spark.jvm_session import (
    KEY_GROUP_FUNCTION,
    OPERATOR_INDEX_FUNCTION,
    register_java_functions,
    shim_loaded,
)
from statesource.spark.schema import spark_output
from statesource.spark.write_plan import (
    NewCheckpoint,
    WriteTarget,
    new_checkpoint,
    optional_int,
    parse_write_options,
    plan_state,
)
from statesource.spark.write_task import delete_files, key_column, write_partition
from statesource.types import DataType

_ORDER = "__statesource_order"
_SUBTASK = "__statesource_subtask"
"""The shuffle's column: a user's own ``key_group`` / ``operator_index`` stay, to be checked."""


@dataclass
class StateFiles(WriterCommitMessage):
    """What one task wrote: its data files (root-relative paths)."""

    files: list[DataFile] = field(default_factory=list)


def state_meta(target: WriteTarget, files: list[DataFile]) -> KeyedStateMeta:
    """The written state's metadata, once the tasks' files are shown to be disjoint.

    Two files for one key-group range mean two tasks held rows of one Flink
    subtask: a DataFrame partitioning problem with a named cure.
    """
    ordered = sorted(files, key=lambda f: f.key_group_range.start)
    for before, after in zip(ordered, ordered[1:]):
        if after.key_group_range.start <= before.key_group_range.end:
            raise InvalidArgumentError(
                f"rows of key groups {after.key_group_range} of state"
                f" {target.declaration.name!r} came from more than one Spark task: partition"
                " the DataFrame by Flink subtask first, e.g. with"
                " statesource.spark.write_state(df, path, operator=..., state=...), which does")
    return KeyedStateMeta.of(target.declaration, tuple(ordered))


def _messages_files(messages: list[WriterCommitMessage | None]) -> list[DataFile]:
    return [f for m in messages if isinstance(m, StateFiles) for f in m.files]


class FlinkStateWriter(DataSourceArrowWriter):
    """The ``df.write.format("flinkstate")`` writer: Arrow batches in, one checkpoint out."""

    def __init__(self, checkpoint: NewCheckpoint, target: WriteTarget) -> None:
        self.target = target
        self.checkpoint = checkpoint  # Spark pickles the writer for commit() too

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StateFiles:
        return StateFiles(write_partition(self.target, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        staged = Rewrite(self.checkpoint)
        staged.stage(self.target, _messages_files(messages))
        staged.commit()

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        delete_files(self.target.root, _messages_files(messages))


class Rewrite:
    """Staged replacements and removals of states, committed as one checkpoint or not at all.

    ``with rewrite(spark, path) as rw: rw.replace(df, "op", "state"); rw.drop("op", "old")``.
    Each :meth:`replace` runs its Spark job at once (files are written, nothing
    is visible); leaving the block without an exception commits one new
    checkpoint, and an exception anywhere removes every staged file instead.
    """

    def __init__(self, checkpoint: NewCheckpoint, spark: Any = None) -> None:
        self.spark = spark
        self.checkpoint = checkpoint
        self._edit = CheckpointEdit(checkpoint.base)
        self._written: list[DataFile] = []
        self._staged: dict[tuple[str, str], list[DataFile]] = {}
        self.info: CheckpointInfo | None = None

    def replace(self, df: Any, operator: str, state: str, *,
                declaration: StateDeclaration | None = None, **options: str) -> None:
        """Replace (or create, given ``kind`` and types) keyed state ``state`` with ``df``'s rows.

        ``options`` are the write options of docs/SPARK.md (``kind``, ``keyType``,
        ``namespaceType``, ``maxParallelism``, ``parallelism``, ``valueSchemas``,
        ``orderColumn``), or ``declaration`` declares a new state whole. Rows are
        shuffled by Flink subtask, so any partitioning works.
        """
        self.replace_with(df, operator, state, options, declaration)

    def replace_with(self, df: Any, operator: str, state: str, options: Mapping[str, str],
                     declaration: StateDeclaration | None = None) -> None:
        """:meth:`replace` with the options as a mapping."""
        given = parse_write_options(options)
        misplaced = sorted({"path", "baseCheckpointId", "checkpointId"} & set(given))
        if misplaced:
            raise InvalidArgumentError(
                f"{', '.join(misplaced)} belong to the whole rewrite: give them to rewrite(...)")
        target = plan_state(self.checkpoint, self._edit,
                            {**given, "operator": operator, "state": state}, df.schema,
                            declaration)
        self.stage(target, write_state_files(df, target))

    def stage(self, target: WriteTarget, files: list[DataFile]) -> None:
        """Add files the tasks of one write produced as ``target``'s new content; files
        staged earlier for the same state are superseded and removed."""
        superseded = self._staged.pop((target.operator, target.declaration.name), [])
        delete_files(self.checkpoint.root, superseded)
        self._written = [f for f in self._written if f not in superseded] + files
        self._staged[(target.operator, target.declaration.name)] = files
        self._edit.put_keyed_state(target.operator, state_meta(target, files),
                                   key_type=target.key_type,
                                   max_parallelism=target.max_parallelism,
                                   parallelism=target.parallelism)

    @property
    def edit(self) -> CheckpointEdit:
        """The staged checkpoint, for changes beyond replacing and dropping states."""
        return self._edit

    def drop(self, operator: str, state: str | None = None) -> None:
        """Remove one state of ``operator``, or the whole operator."""
        if state is None:
            self._edit.drop_operator(operator)
        else:
            self._edit.drop_state(operator, state)
        for (uid, name) in list(self._staged):
            if uid == operator and state in (None, name):
                superseded = self._staged.pop((uid, name))
                delete_files(self.checkpoint.root, superseded)
                self._written = [f for f in self._written if f not in superseded]

    def commit(self) -> CheckpointInfo:
        """Publish the new checkpoint; on failure remove every staged file."""
        try:
            self.info = commit_checkpoint(
                self.checkpoint.root,
                self._edit.build(self.checkpoint.checkpoint_id, self.checkpoint.timestamp_ms))
        except BaseException:
            self.discard()
            raise
        self._written = []
        return self.info

    def discard(self) -> None:
        delete_files(self.checkpoint.root, self._written)
        self._written = []

    def __enter__(self) -> Rewrite:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if kind is None:
            self.commit()
        else:
            self.discard()


def rewrite(spark: Any, path: str, *, base_checkpoint_id: int | None = None,
            checkpoint_id: int | None = None) -> Rewrite:
    """Stage changes to the newest checkpoint under ``path`` (or ``base_checkpoint_id``)
    for one new checkpoint (default id: newest + 1). See :class:`Rewrite`."""
    return Rewrite(new_checkpoint(path, base_checkpoint_id, checkpoint_id), spark)


def write_state(df: Any, path: str, operator: str, state: str, *,
                base_checkpoint_id: int | None = None, checkpoint_id: int | None = None,
                **options: str) -> CheckpointInfo:
    """Write ``df`` as keyed state ``state`` of ``operator`` into a new checkpoint under ``path``.

    The documented path for any DataFrame: it computes Flink key groups,
    shuffles the rows so that each Spark task holds whole Flink subtasks, and
    commits one checkpoint in which everything else of the base is carried
    over. ``options`` as for ``df.write.format("flinkstate")``.
    """
    ids = parse_write_options(options)
    base_checkpoint_id = _id_option(ids, "baseCheckpointId", base_checkpoint_id)
    checkpoint_id = _id_option(ids, "checkpointId", checkpoint_id)
    options = {k: v for k, v in options.items()
               if k.lower() not in ("basecheckpointid", "checkpointid")}
    with rewrite(df.sparkSession, path, base_checkpoint_id=base_checkpoint_id,
                 checkpoint_id=checkpoint_id) as staged:
        staged.replace_with(df, operator, state, options)
    assert staged.info is not None
    return staged.info


def write_state_files(df: Any, target: WriteTarget) -> list[DataFile]:
    """Run the Spark job that writes ``df`` as ``target``'s data files (nothing committed).

    A failing task removes its own files; files of tasks that finished before
    a job failed stay unreferenced (readers never see them; ``retain`` does not
    list them either).
    """
    shuffled, target = _by_subtask(df, target)
    rows = shuffled.mapInArrow(_task(target), "file string").collect()
    return [DataFile.from_json_text(row.file) for row in rows]


def _id_option(given: dict[str, str], option: str, value: int | None) -> int | None:
    """A checkpoint id given as a keyword or as its camelCase write option (not both)."""
    if option not in given:
        return value
    if value is not None:
        raise InvalidArgumentError(f"{option} is given twice: {value} and {given[option]!r}")
    return optional_int(given, option)


def _by_subtask(df: Any, target: WriteTarget) -> tuple[Any, WriteTarget]:
    """``df`` with one Spark partition per Flink subtask (hashing the subtask index), computed
    by the shim's Java functions where they apply, else in a Python pass.

    List elements keep the DataFrame's order unless an order column is given:
    their position is recorded before the shuffle and sorted by in the task.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, StructType

    if target.order_column is None and target.declaration.kind is StateKind.LIST:
        df = df.withColumn(_ORDER, F.monotonically_increasing_id())
        target = dataclasses.replace(target, order_column=_ORDER)
    subtask = jvm_subtask_column(df, KEY, target.key_type, target.max_parallelism,
                                 target.parallelism)
    if subtask is not None:
        with_subtask = df.withColumn(_SUBTASK, subtask)
    else:
        schema = StructType([*df.schema.fields]).add(_SUBTASK, IntegerType())
        with_subtask = df.mapInArrow(_subtask_column(target), schema)
    return with_subtask.repartition(target.parallelism, _SUBTASK), target


def jvm_subtask_column(df: Any, key: str, key_type: DataType, max_parallelism: int,
                       parallelism: int) -> Any | None:
    """The Flink subtask of each row's ``key``, computed in the JVM; None where it cannot be.

    With the shim loaded on the session the shuffle costs no Python pass. The
    Java functions read the key type off the column's Spark type, so they are
    used only when that type is exactly the one ``flinkstate`` reads for
    ``key_type`` (an ``int`` column holding the keys of a ``long`` state hashes
    differently). The write tasks recompute every key group anyway, so a
    shuffle is never trusted, only made cheap.
    """
    expected = spark_output([pa.field(key, key_type.arrow_type)]).spark[key].dataType
    spark = df.sparkSession
    if (df.schema[key].dataType.simpleString() != expected.simpleString()
            or not shim_loaded(spark)):
        return None
    from pyspark.sql import functions as F

    register_java_functions(spark)
    key_group = F.call_function(KEY_GROUP_FUNCTION, F.col(key), F.lit(max_parallelism))
    return F.call_function(OPERATOR_INDEX_FUNCTION, key_group, F.lit(max_parallelism),
                           F.lit(parallelism))


def _subtask_column(target: WriteTarget) -> Callable[[Iterator[pa.RecordBatch]],
                                                     Iterator[pa.RecordBatch]]:
    def add(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            keys = key_column(target.key_type, pa.chunked_array([batch.column("key")]))
            groups = key_groups(keys, target.key_type, target.max_parallelism)
            subtasks = operator_indexes(target.max_parallelism, target.parallelism, groups)
            yield batch.append_column(_SUBTASK, pa.array(subtasks))
    return add


def _task(target: WriteTarget) -> Callable[[Iterator[pa.RecordBatch]],
                                           Iterator[pa.RecordBatch]]:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        files = write_partition(target, batches)
        yield pa.record_batch([pa.array([f.to_json_text() for f in files], pa.string())],
                              names=["file"])
    return run

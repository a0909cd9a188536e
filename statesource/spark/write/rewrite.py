"""Rewriting snapshots from Spark: ``df.write.format("flinkstate")``, ``write_state``, rewrites.

Every path runs the same task (:func:`~statesource.spark.write.task.write_partition`)
and the same driver-side commit through a
:class:`~statesource.format.target.SnapshotTarget`: the written files of a
state, checked not to overlap, replace that state in the base snapshot;
everything else is carried over; one new snapshot is published atomically,
or nothing is and the written files are removed.

The target is opened and published on the driver (or the Spark Connect
server), never in the calling process: ``df.write`` plans and commits there
by itself, and ``write_state`` and :class:`Rewrite` go through
:mod:`statesource.spark.driver`. The caller only stages: the edit and the
tasks' file lists travel with the target, and planning a state's sink reads
nothing, since the target carries what its opening read of the base (a Flink
savepoint's operators and serializers).

``df.write`` runs on the DataFrame's own partitioning; when two tasks hold
rows of one Flink subtask the commit fails and names :func:`write_state`,
which shuffles the rows by Flink subtask first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from statesource.errors import InvalidArgumentError
from statesource.flink.serializers.mapping import PojoClass
from statesource.flink.snapshot.compression import Compression
from statesource.format.commit import CheckpointInfo
from statesource.format.edit import CheckpointEdit
from statesource.format.keyed_state_meta import KeyedStateMeta
from statesource.format.locations import DataFile
from statesource.format.target import SnapshotTarget
from statesource.model import StateDeclaration, StateKind
from statesource.sources import open_target as target_of
from statesource.spark.driver import call_on_driver, commit_on_driver
from statesource.spark.executor import check_written_visible, restated
from statesource.spark.options import (
    CHECKPOINT_OPTIONS,
    WriteOptions,
    parse_write_options,
    state_write_options,
)
from statesource.spark.write.plan import StateWrite, plan_state
from statesource.spark.write.shuffle import write_state_files
from statesource.spark.write.task import write_partition
from statesource.types import DataType

T = TypeVar("T")


@dataclass
class StateFiles(WriterCommitMessage):
    """What one task wrote: its data files (root-relative paths)."""

    files: list[DataFile] = field(default_factory=list)


def state_meta(write: StateWrite, files: list[DataFile]) -> KeyedStateMeta:
    """The written state's metadata, once the tasks' files are shown to be disjoint.

    Two files for one key-group range mean two tasks held rows of one Flink
    subtask: a DataFrame partitioning problem with a named cure.
    """
    ordered = sorted(files, key=lambda f: f.key_group_range.start)
    for before, after in zip(ordered, ordered[1:]):
        if after.key_group_range.start <= before.key_group_range.end:
            raise InvalidArgumentError(
                f"rows of key groups {after.key_group_range} of state"
                f" {write.declaration.name!r} came from more than one Spark task: partition"
                " the DataFrame by Flink subtask first, e.g. with"
                " statesource.spark.write_state(df, path, operator=..., state=...), which does")
    return KeyedStateMeta.of(write.declaration, tuple(ordered))


def open_target(options: WriteOptions) -> SnapshotTarget:
    """Where a write's new snapshot goes, from its ``path``, ``output`` and checkpoint-id
    options."""
    if not options.path and not options.output:
        raise InvalidArgumentError(
            "write option path is required: the directory of checkpoints (or, with output,"
            " the Flink snapshot the new savepoint derives from)")
    return target_of(options.path, options.output,
                     base_checkpoint_id=options.base_checkpoint_id,
                     checkpoint_id=options.checkpoint_id, pojos=options.pojos,
                     flink_version=options.flink_version, compression=options.compression)


def _messages_files(messages: list[WriterCommitMessage | None]) -> list[DataFile]:
    return [f for m in messages if isinstance(m, StateFiles) for f in m.files]


class FlinkStateWriter(DataSourceArrowWriter):
    """The ``df.write.format("flinkstate")`` writer: Arrow batches in, one snapshot out."""

    def __init__(self, target: SnapshotTarget, write: StateWrite) -> None:
        self.write_plan = write
        self.target = target  # Spark pickles the writer for commit() too

    @classmethod
    def plan(cls, options: Mapping[str, str], schema: StructType) -> FlinkStateWriter:
        """Plan one state replaced in a new snapshot, every check done before a task runs."""
        parsed = parse_write_options(options)
        target = open_target(parsed)
        try:
            return cls(target, plan_state(target, parsed, schema))
        except BaseException:
            target.remove([])  # a refused write lets go of its base (its pin) at once
            raise

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StateFiles:
        with restated(None):
            return StateFiles(write_partition(self.write_plan, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        staged = Rewrite(self.target)
        staged.stage(self.write_plan, _messages_files(messages))
        staged.commit()

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self.target.remove(_messages_files(messages))


class Rewrite:
    """Staged replacements and removals of states, committed as one snapshot or not at all.

    ``with rewrite(spark, path) as rw: rw.replace(df, "op", "state"); rw.drop("op", "old")``.
    Each :meth:`replace` runs its Spark job at once (files are written, nothing
    is visible); leaving the block without an exception commits one new
    snapshot, and an exception anywhere removes every staged file instead.
    """

    def __init__(self, target: SnapshotTarget, spark: Any = None) -> None:
        self.spark = spark
        """The session whose driver publishes; None when this already runs there."""
        self.target = target
        self._written: list[DataFile] = []
        self._unused: list[DataFile] = []
        """Written, then superseded: removed by the publish (or the discard)."""
        self._staged: dict[tuple[str, str], list[DataFile]] = {}
        self.info: CheckpointInfo | None = None

    def replace(self, df: Any, operator: str, state: str, *,
                declaration: StateDeclaration | None = None, kind: StateKind | str | None = None,
                key_type: DataType | str | None = None,
                namespace_type: DataType | str | None = None,
                max_parallelism: int | None = None, parallelism: int | None = None,
                value_schemas: Mapping[str, Any] | str | None = None,
                order_column: str | None = None) -> None:
        """Replace (or create) keyed state ``state`` of ``operator`` with ``df``'s rows.

        The keywords are the state's write options of docs/SPARK.md in snake_case
        (``key_type`` is ``.option("keyType", ...)``), checked as those are: an existing
        state needs none (given, they must agree with it); a new one needs ``kind`` (and,
        for a new operator, ``key_type``, else the key column's type), or ``declaration``
        declares it whole. ``value_schemas`` maps a value role to its Avro schema;
        ``order_column`` orders a list's elements. Rows are shuffled by Flink subtask, so
        any partitioning works.
        """
        options = state_write_options(
            kind=kind, key_type=key_type, namespace_type=namespace_type,
            max_parallelism=max_parallelism, parallelism=parallelism,
            value_schemas=value_schemas, order_column=order_column)
        self.replace_with(df, operator, state, options, declaration)

    def replace_with(self, df: Any, operator: str, state: str, options: WriteOptions,
                     declaration: StateDeclaration | None = None) -> None:
        """:meth:`replace` with the options parsed."""
        misplaced = [name for name in CHECKPOINT_OPTIONS if name in options.given]
        if misplaced:
            raise InvalidArgumentError(
                f"{', '.join(misplaced)} belong to the whole rewrite: give them to rewrite(...)")
        write = plan_state(self.target, options.with_state(operator, state), df.schema,
                           declaration)
        self.stage(write, write_state_files(df, write))

    def stage(self, write: StateWrite, files: list[DataFile]) -> None:
        """Add files the tasks of one write produced as the state's new content; files
        staged earlier for the same state are superseded (removed on the driver when the
        rewrite is published or discarded)."""
        superseded = self._staged.pop((write.operator, write.declaration.name), [])
        self._supersede(superseded)
        self._written += files
        self._staged[(write.operator, write.declaration.name)] = files
        self.target.edit.put_keyed_state(write.operator, state_meta(write, files),
                                         key_type=write.key_type,
                                         max_parallelism=write.max_parallelism,
                                         parallelism=write.parallelism)

    @property
    def edit(self) -> CheckpointEdit:
        """The staged snapshot, for changes beyond replacing and dropping states."""
        return self.target.edit

    def drop(self, operator: str, state: str | None = None) -> None:
        """Remove one state of ``operator``, or the whole operator."""
        if state is None:
            self.target.edit.drop_operator(operator)
        else:
            self.target.edit.drop_state(operator, state)
        for (uid, name) in list(self._staged):
            if uid == operator and state in (None, name):
                self._supersede(self._staged.pop((uid, name)))

    def _supersede(self, files: list[DataFile]) -> None:
        self._written = [f for f in self._written if f not in files]
        self._unused += files

    def commit(self) -> CheckpointInfo:
        """Publish the new snapshot on the driver; on failure every file written for it is
        removed there too."""
        written, unused = self._written, self._unused
        self._written, self._unused = [], []
        self.info = self._on_driver(publish_staged, self.target, written, unused)
        return self.info

    def discard(self) -> None:
        """Remove every file written for the rewrite, on the driver; also when none was
        written, since discarding the target lets go of its base (its pin)."""
        files, self._written, self._unused = self._written + self._unused, [], []
        self._on_driver(remove_staged, self.target, files)

    def _on_driver(self, step: Callable[..., T], *arguments: Any) -> T:
        return step(*arguments) if self.spark is None else commit_on_driver(
            self.spark, step, *arguments)

    def __enter__(self) -> Rewrite:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if kind is None:
            self.commit()
        else:
            self.discard()


def publish_staged(target: SnapshotTarget, written: list[DataFile], unused: list[DataFile]
                   ) -> CheckpointInfo:
    """On the driver: publish, then remove superseded files; on failure remove both.

    Superseded files go after the publish because removing files discards a
    target, and with it the pin that keeps the base's files until the commit
    (docs/FORMAT.md section 11.1). No snapshot lists them: one that stays is
    what a failed attempt leaves (in a statesource checkpoint, an orphan that
    ``retain`` removes).
    """
    try:
        check_written_visible(target.missing, written)
        info = target.publish()
    except BaseException:
        target.remove([*written, *unused])
        raise
    target.remove(unused)
    return info


def remove_staged(target: SnapshotTarget, files: list[DataFile]) -> None:
    """On the driver: remove the files of a discarded rewrite."""
    target.remove(files)


def rewrite(spark: Any, path: str | None, *, output: str | None = None,
            base_checkpoint_id: int | None = None, checkpoint_id: int | None = None,
            pojos: Mapping[str, PojoClass] | None = None,
            flink_version: str | None = None,
            compression: Compression | None = None) -> Rewrite:
    """Stage changes to the newest checkpoint under ``path`` (or ``base_checkpoint_id``)
    for one new checkpoint (default id: newest + 1); or, given ``output``, to the Flink
    snapshot at ``path`` (None: none, a bootstrap) for the new savepoint directory
    ``output``, whose new states' records named in ``pojos`` are those POJOs; a bootstrap
    is for Flink ``flink_version`` (``"1.20"``; default the newest). ``compression``
    (``"snappy"``, ``"none"``) is the savepoint's Snappy compression (default: as the
    snapshot's; none for a bootstrap). See :class:`Rewrite`.

    The base is opened and the id chosen on ``spark``'s driver, which sees the
    storage as the commit will."""
    target = call_on_driver(spark, open_target, WriteOptions(
        path=path, output=output, base_checkpoint_id=base_checkpoint_id,
        checkpoint_id=checkpoint_id, pojos=pojos or {}, flink_version=flink_version,
        compression=compression))
    return Rewrite(target, spark)


def write_state(df: Any, path: str | None, operator: str, state: str, *,
                output: str | None = None, base_checkpoint_id: int | None = None,
                checkpoint_id: int | None = None, pojos: Mapping[str, PojoClass] | None = None,
                flink_version: str | None = None, compression: Compression | None = None,
                declaration: StateDeclaration | None = None,
                kind: StateKind | str | None = None, key_type: DataType | str | None = None,
                namespace_type: DataType | str | None = None,
                max_parallelism: int | None = None, parallelism: int | None = None,
                value_schemas: Mapping[str, Any] | str | None = None,
                order_column: str | None = None) -> CheckpointInfo:
    """Write ``df`` as keyed state ``state`` of ``operator`` into a new checkpoint under ``path``.

    The documented path for any DataFrame: it computes Flink key groups,
    shuffles the rows so that each Spark task holds whole Flink subtasks, and
    commits one checkpoint in which everything else of the base is carried
    over. ``output``, ``base_checkpoint_id``, ``checkpoint_id``, ``pojos``,
    ``flink_version`` and ``compression`` are the new snapshot's, as for :func:`rewrite`
    (given ``output``, ``path`` is a Flink snapshot, or None, and the result the new
    savepoint directory ``output``); the others are the state's, as for
    :meth:`Rewrite.replace`.
    """
    options = state_write_options(
        kind=kind, key_type=key_type, namespace_type=namespace_type,
        max_parallelism=max_parallelism, parallelism=parallelism,
        value_schemas=value_schemas, order_column=order_column)
    with rewrite(df.sparkSession, path, output=output, base_checkpoint_id=base_checkpoint_id,
                 checkpoint_id=checkpoint_id, pojos=pojos,
                 flink_version=flink_version, compression=compression) as staged:
        staged.replace_with(df, operator, state, options, declaration)
    assert staged.info is not None
    return staged.info

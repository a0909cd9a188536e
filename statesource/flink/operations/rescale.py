"""A Flink savepoint under a new max parallelism: every key and timer re-keyed as Flink does.

Flink cannot change a job's max parallelism: it restores state only into a job
with the max parallelism the state was written with, because every key's key
group (murmur hash of the key's Java ``hashCode``, modulo the max parallelism)
is part of how the state is stored. :func:`rescale_max_parallelism` writes a
new canonical savepoint in which every entry of every keyed state, and every
timer, lies in the key group of its key under the new max parallelism, so a job
configured with ``pipeline.max-parallelism`` = the new value restores it.

Only keys are decoded. Each pair of a canonical key group is a composite key
(key-group prefix, key, namespace, map user key) and a value: the key is read
with the key serializer of the file's header (for timers, after the 8-byte
timestamp the timer's key starts with), its new key group computed with
:mod:`statesource.keygroups`, and the pair moved there with the new prefix (one
byte up to max parallelism 128, else two); the rest of the composite key and the
value are moved as bytes, so state with Kryo, Avro or unknown value serializers
rescales too. Every key is also checked against the key group it was read
from: a key whose hash does not give it back (statesource's hash of its type
would disagree with the job's) is refused rather than written where the job
would never find it.

Native savepoints and checkpoints of the heap backend are converted on the way:
their entries are delimited with the serializers of the header (values decoded
only to find where they end) and laid out as a canonical savepoint lays them
out; states with Kryo values cannot be delimited there, and are refused. RocksDB's
files (native savepoints and checkpoints of the RocksDB backend) are read as the
canonical file they amount to (:mod:`statesource.flink.layouts.rocksdb_canonical`).

What is carried over: the serializer snapshots (each file's header is written
back byte for byte), Snappy compression (key groups are compressed where the
source's were, or as asked: :mod:`statesource.flink.snapshot.compression`), operator
state, raw operator state and coordinator state (their files copied, Flink redistributes
operator state at restore), stateless operators, master states, the checkpoint id and, for a
canonical savepoint, its checkpoint properties. Each operator with keyed state
gets one keyed-state file per subtask, with the key-group ranges Flink assigns
at its (new) parallelism. Every refusal happens before anything is written, and
the output is published whole (:mod:`statesource.flink.snapshot.publish`).
"""

from __future__ import annotations

import base64
import dataclasses
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass

from statesource.errors import IncompatibleCheckpointError, InvalidArgumentError
from statesource.flink.handles import OperatorSnapshot, RocksDBHandle, SnapshotMetadata
from statesource.flink.operations.savepoint_plan import (
    Edit,
    OperatorPlan,
    find_operator,
    plan_operator,
)
from statesource.flink.operations.savepoint_writing import (
    FileCopies,
    RescaledOperator,
    carried,
    write_rescaled,
)
from statesource.flink.snapshot.compression import (
    Compression,
    check_compression,
    output_compressed,
    snapshot_compressed,
)
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.flink.snapshot.publish import SavepointWriter, check_output
from statesource.flink.snapshot.versions import LAYOUTS
from statesource.keygroups import check_max_parallelism, check_parallelism
from statesource.model import Progress

CANONICAL_SAVEPOINT_PROPERTIES = base64.b64decode(
    "rO0ABXNyADhvcmcuYXBhY2hlLmZsaW5rLnJ1bnRpbWUuY2hlY2twb2ludC5DaGVja3BvaW50UHJvcGVydGllcwAA"
    "AAAAAAACAgAIWgAQZGlzY2FyZENhbmNlbGxlZFoADWRpc2NhcmRGYWlsZWRaAA9kaXNjYXJkRmluaXNoZWRaAA9k"
    "aXNjYXJkU3Vic3VtZWRaABBkaXNjYXJkU3VzcGVuZGVkWgAGZm9yY2VkWgAJdW5jbGFpbWVkTAAOY2hlY2twb2lu"
    "dFR5cGV0ADJMb3JnL2FwYWNoZS9mbGluay9ydW50aW1lL2NoZWNrcG9pbnQvU25hcHNob3RUeXBlO3hwAAAAAAAB"
    "AHNyADFvcmcuYXBhY2hlLmZsaW5rLnJ1bnRpbWUuY2hlY2twb2ludC5TYXZlcG9pbnRUeXBloIfTCKRYFLgCAANM"
    "AApmb3JtYXRUeXBldAA1TG9yZy9hcGFjaGUvZmxpbmsvY29yZS9leGVjdXRpb24vU2F2ZXBvaW50Rm9ybWF0VHlw"
    "ZTtMAARuYW1ldAASTGphdmEvbGFuZy9TdHJpbmc7TAAUcG9zdENoZWNrcG9pbnRBY3Rpb250AEhMb3JnL2FwYWNo"
    "ZS9mbGluay9ydW50aW1lL2NoZWNrcG9pbnQvU2F2ZXBvaW50VHlwZSRQb3N0Q2hlY2twb2ludEFjdGlvbjt4cH5y"
    "ADNvcmcuYXBhY2hlLmZsaW5rLmNvcmUuZXhlY3V0aW9uLlNhdmVwb2ludEZvcm1hdFR5cGUAAAAAAAAAABIAAHhy"
    "AA5qYXZhLmxhbmcuRW51bQAAAAAAAAAAEgAAeHB0AAlDQU5PTklDQUx0AAlTYXZlcG9pbnR+cgBGb3JnLmFwYWNo"
    "ZS5mbGluay5ydW50aW1lLmNoZWNrcG9pbnQuU2F2ZXBvaW50VHlwZSRQb3N0Q2hlY2twb2ludEFjdGlvbgAAAAAA"
    "AAAAEgAAeHEAfgAJdAAETk9ORQ=="
)
"""Flink 2.x's ``CheckpointProperties`` of a canonical savepoint (Java serialization), as a
savepoint taken with ``flink savepoint`` records them: what a snapshot converted from the
native format says it is."""


def is_canonical_savepoint(properties: bytes) -> bool:
    """Whether serialized ``CheckpointProperties`` say: a savepoint, in the canonical format."""
    return (b"org.apache.flink.runtime.checkpoint.SavepointType" in properties
            and b"t\x00\tCANONICAL" in properties)


@dataclass(frozen=True)
class RescaledSavepoint:
    """The new savepoint: where it is, and what was re-keyed."""

    source: str
    output: str
    checkpoint_id: int
    max_parallelism: int | None
    """The new max parallelism; None for an edit (every operator keeps its own)."""
    operators: tuple[RescaledOperator, ...]
    """The operators with keyed state, in ``_metadata`` order."""
    converted: bool
    """Whether keyed state was converted from the native format."""
    seconds: float
    compressed: bool = False
    """Whether the keyed-state files written are Snappy-compressed
    (:mod:`~statesource.flink.snapshot.compression`)."""

    @property
    def entries(self) -> int:
        return sum(op.entries for op in self.operators)


def rescale_max_parallelism(source: str | os.PathLike[str], output: str | os.PathLike[str],
                            max_parallelism: int, *, parallelism: int | None = None,
                            checkpoint_id: int | None = None,
                            progress: Progress | None = None,
                            compression: Compression | None = None) -> RescaledSavepoint:
    """Write the Flink savepoint or checkpoint at ``source`` as a new canonical savepoint
    directory ``output`` with every operator's max parallelism ``max_parallelism``.

    ``parallelism`` (default: each operator's own) is the parallelism recorded for the
    operators with keyed state, whose key groups are split into that many files; Flink
    re-splits them for whatever parallelism the restoring job has. ``checkpoint_id`` picks
    a ``chk-<id>`` directory when ``source`` holds several.

    The output's checkpoint properties are the source's when it is a canonical savepoint,
    else those of one (a native savepoint or a checkpoint is converted). Its keyed-state
    files are Snappy-compressed as the source's were, or as ``compression`` (``"snappy"``,
    ``"none"``) asks.

    Refused, with nothing written: an ``output`` that exists
    (:class:`~statesource.errors.CheckpointExistsError`), a max parallelism outside
    1..32768 or below an operator's parallelism, a key type statesource cannot hash as
    Flink does, raw keyed state, Kryo values in a native snapshot, keyed state whose
    serializers statesource does not support. Every operator is checked first, and one
    error names each operator refused and why.
    """
    check_max_parallelism(max_parallelism)
    if parallelism is not None:
        check_parallelism(parallelism, max_parallelism)
    return rewrite_savepoint(source, output, max_parallelism, parallelism=parallelism,
                             checkpoint_id=checkpoint_id, progress=progress,
                             compression=compression)


def rewrite_savepoint(source: str | os.PathLike[str], output: str | os.PathLike[str],
                      max_parallelism: int | None, *, parallelism: int | None = None,
                      checkpoint_id: int | None = None, progress: Progress | None = None,
                      edit: Edit | None = None, compression: Compression | None = None
                      ) -> RescaledSavepoint:
    """The one pass behind a new max parallelism and an edit: every keyed operator's pairs
    walked into new canonical keyed-state files, published whole as ``output``.

    ``max_parallelism`` None keeps each operator's own; with an ``edit`` only its operator
    is walked (converted when native), the others' files copied byte for byte.
    ``compression``: see :func:`~statesource.flink.snapshot.compression.output_compressed`.
    """
    started = time.perf_counter()
    check_compression(compression)
    check_output(output)  # refused before the source is even read
    snapshot = FlinkSnapshot.open(os.fspath(source), checkpoint_id=checkpoint_id)
    snapshot.check_output_outside(output)
    rewrite = SavepointRewrite.plan(snapshot, max_parallelism, parallelism,
                                    () if edit is None else (edit,), compression=compression)
    with SavepointWriter(output) as writer:
        operators, rescaled = rewrite.write(writer, progress)
        published = writer.publish(rewrite.metadata(operators))
    return RescaledSavepoint(str(snapshot.location), str(published), snapshot.checkpoint_id,
                             max_parallelism, tuple(rescaled), rewrite.converted,
                             time.perf_counter() - started, rewrite.compressed)


@dataclass(frozen=True)
class SavepointRewrite:
    """Every operator of a snapshot planned for a rewrite (all checks done), then written."""

    snapshot: FlinkSnapshot
    plans: tuple[OperatorPlan, ...]
    compressed: bool = False
    """Whether the keyed-state files written are Snappy-compressed."""
    compression: Compression | None = None
    """The compression asked for (None: as the snapshot's; files carried over keep their
    own)."""

    @classmethod
    def plan(cls, snapshot: FlinkSnapshot, max_parallelism: int | None,
             parallelism: int | None = None, edits: Sequence[Edit] = (),
             dropped: Sequence[str] = (), compression: Compression | None = None
             ) -> SavepointRewrite:
        """Plan each operator but the ``dropped`` ones (uids or hex ids); ``edits`` name
        operators of the snapshot, at most one edit each. Every keyed-state file written is
        compressed as ``compression`` asks, else as the snapshot's were
        (:func:`~statesource.flink.snapshot.compression.output_compressed`)."""
        compressed = output_compressed(compression, snapshot_compressed(snapshot))
        by_label: dict[str, Edit] = {}
        for edit in edits:
            by_label[find_operator(snapshot, edit.operator).label] = edit
        gone = {find_operator(snapshot, label).label for label in dropped}
        plans: list[OperatorPlan] = []
        refusals: list[IncompatibleCheckpointError | InvalidArgumentError] = []
        for op in snapshot.operators:
            if op.label in gone:
                continue
            try:
                plans.append(plan_operator(snapshot, op, max_parallelism, parallelism,
                                   by_label.get(op.label)))
            except (IncompatibleCheckpointError, InvalidArgumentError) as error:
                undecodable = snapshot.undecodable(op)
                refusals.append(error if undecodable is None else IncompatibleCheckpointError(
                    f"operator {op.label!r}: {undecodable}"))
        if refusals:  # every operator is checked: the user learns all of them at once
            if len(refusals) == 1:
                raise refusals[0]
            kind = (InvalidArgumentError if all(isinstance(r, InvalidArgumentError)
                                                for r in refusals)
                    else IncompatibleCheckpointError)
            raise kind(f"{len(refusals)} operators cannot be rewritten: "
                       + "; ".join(map(str, refusals)))
        return cls(snapshot, tuple(
            plan if plan.header is None else dataclasses.replace(
                plan, header=dataclasses.replace(plan.header, compressed=compressed))
            for plan in plans), compressed, check_compression(compression))

    @property
    def converted(self) -> bool:
        """Whether keyed state is converted: from the native format, or from RocksDB's files
        (every operator's are, whether rewritten or carried over)."""
        return any(not h.savepoint for plan in self.plans for h in plan.handles) or any(
            isinstance(h, RocksDBHandle) for plan in self.plans for s in plan.op.subtasks
            for h in s.keyed)

    def write(self, writer: SavepointWriter, progress: Progress | None = None
              ) -> tuple[list[OperatorSnapshot], list[RescaledOperator]]:
        """Each operator's files into ``writer``: the new operators, and what was rewritten."""
        report = progress or (lambda _: None)
        copies = FileCopies(self.snapshot, writer,
                            None if self.compression is None else self.compressed)
        operators, rescaled = [], []
        for plan in self.plans:
            if plan.header is None:
                operators.append(carried(plan, copies))
                continue
            report(f"operator {plan.op.label}: max parallelism {plan.op.max_parallelism} ->"
                   f" {plan.max_parallelism}, parallelism {plan.op.parallelism} ->"
                   f" {plan.parallelism}")
            op, done = write_rescaled(self.snapshot, writer, plan, copies)
            operators.append(op)
            rescaled.append(done)
        return operators, rescaled

    def metadata(self, operators: Sequence[OperatorSnapshot]) -> SnapshotMetadata:
        """The new ``_metadata``: the snapshot's, of its version, with ``operators``; the
        properties of a canonical savepoint unless the source is one and nothing was
        converted (none where the version holds none: Flink 1.15 and older)."""
        properties = self.snapshot.metadata.properties
        if self.converted or not is_canonical_savepoint(properties):
            properties = CANONICAL_SAVEPOINT_PROPERTIES
        if not LAYOUTS[self.snapshot.metadata.version].properties:
            properties = b""
        return dataclasses.replace(self.snapshot.metadata, operators=tuple(operators),
                                   properties=properties)

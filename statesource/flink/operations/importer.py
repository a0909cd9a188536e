"""``import_flink``: a Flink snapshot rewritten as a statesource checkpoint, through the format.

Every keyed state becomes one data file per subtask's key-group range and
every operator state one file, written by the format layer's one writer and
published by its atomic commit, exactly as a checkpoint of the Python
backend is. Values keep every decoded type (the declarations come from the
Flink serializers); TTL'd values keep their last-access timestamps. Timers
are not part of statesource's format and are reported as skipped, and so is an
operator whose keyed state does not decode (a serializer statesource does not
support), or is keyed by Flink SQL rows (a key type the format's metadata cannot
name): the others are imported. On any failure the files written so far are
removed and nothing is committed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from statesource.errors import IncompatibleCheckpointError
from statesource.flink.declarations import operator_meta
from statesource.flink.handles import OperatorSnapshot
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.serializers.sql_rows import SqlRowFlinkType
from statesource.flink.statefiles.operator_state import read_operator_states
from statesource.format.columns import RowEncoder
from statesource.format.commit import CheckpointInfo, commit_checkpoint
from statesource.format.datafile import write_keyed_file, write_operator_state_file
from statesource.format.keyed_state_meta import KeyedStateMeta
from statesource.format.metadata import CheckpointMeta, OperatorMeta
from statesource.format.operator_columns import operator_state_schema, operator_state_table
from statesource.format.operator_state_meta import OperatorStateMeta
from statesource.format.storage import (
    Location,
    check_writable_root,
    new_data_file,
    remove_attempt,
    resolve,
)
from statesource.keygroups import KeyGroupRange
from statesource.types import SqlRowType


@dataclass(frozen=True)
class ImportResult:
    checkpoint: CheckpointInfo
    skipped_timers: tuple[str, ...]
    """``operator/state`` of every timer state left out."""
    skipped_operators: tuple[tuple[str, str], ...] = ()
    """``(operator, reason)`` of every operator left out whole: its keyed state does not
    decode (:meth:`FlinkSnapshot.undecodable`) or its keys are SQL rows, so none of it is
    imported, rather than a part of it or nothing of the other operators."""


def import_flink(source: str, destination: str, *, checkpoint_id: int | None = None
                 ) -> ImportResult:
    """Convert the Flink snapshot at ``source`` into checkpoint root ``destination``.

    The new checkpoint has the Flink snapshot's checkpoint id.
    """
    root = resolve(destination)
    check_writable_root(root)  # before a minute of decoding
    flink = FlinkCheckpoint.open(source, checkpoint_id=checkpoint_id)
    written: list[Location] = []
    skipped: list[str] = []
    undecodable = {op.operator_id: flink.snapshot.undecodable(op) or _sql_keys(flink, op)
                   for op in flink.snapshot.operators}
    try:
        operators = tuple(_operator(flink, op.operator_id, root, written, skipped)
                          for op in flink.snapshot.operators
                          if undecodable[op.operator_id] is None)
        info = commit_checkpoint(root, CheckpointMeta(flink.checkpoint_id,
                                                      int(time.time() * 1000), operators))
    except BaseException:
        remove_attempt(written)
        raise
    return ImportResult(info, tuple(skipped), tuple(
        (op.label, reason) for op in flink.snapshot.operators
        if (reason := undecodable[op.operator_id]) is not None))


def _sql_keys(flink: FlinkCheckpoint, op: OperatorSnapshot) -> str | None:
    """Why an operator keyed by Flink SQL rows is left out, or None: a checkpoint's metadata
    declares key types by name, and no name of statesource's type vocabulary says a SQL row
    (its fields' SQL types and Flink's hash of its bytes)."""
    header = flink.snapshot.header(op)
    if header is None or not isinstance(header.key, SqlRowFlinkType):
        return None
    try:
        key: SqlRowType = header.key.data_type()
    except IncompatibleCheckpointError as error:  # a row of no fields: a query without a key
        return f"its keys are Flink SQL rows statesource does not read: {error}"
    return (f"its keys are Flink SQL rows ({key.name}), which statesource checkpoints do not"
            " declare; read them from the Flink snapshot itself")


def _operator(flink: FlinkCheckpoint, operator: str, root: Location, written: list[Location],
              skipped: list[str]) -> OperatorMeta:
    snapshot = flink.snapshot
    op = snapshot.operator(operator)
    header = snapshot.header(op)
    meta = operator_meta(op.label, op.parallelism, op.max_parallelism, header)
    skipped.extend(f"{op.label}/{info.name}" for info in flink.timer_states(operator))
    handles = snapshot.keyed_handles(op)
    keyed = []
    for state in meta.keyed_states:
        files: list = []
        for handle in handles:
            key_range = KeyGroupRange(handle.start, handle.end)
            encoder = RowEncoder(meta.keyed_key_type, state.declaration, None)
            target, relative = new_data_file(
                root, flink.checkpoint_id, f"{op.label}.{state.name}.kg{handle.start}-{handle.end}")
            written.append(target)
            entries = flink.entries(state.name, operator=operator, key_groups=key_range)
            files.append(write_keyed_file(target, relative, encoder.schema, key_range,
                                          encoder.encode(entries)))
        keyed.append(KeyedStateMeta.of(state.declaration, tuple(files)))
    operator_states = []
    for name, share in sorted(read_operator_states(snapshot, op).items()):
        target, relative = new_data_file(root, flink.checkpoint_id, f"{op.label}.op.{name}")
        written.append(target)
        tables = ((subtask, operator_state_table(share.mode, share.schemas, values).to_batches())
                  for subtask, values in enumerate(share.values))
        size, partitions = write_operator_state_file(
            target, operator_state_schema(share.mode, share.schemas), tables)
        operator_states.append(OperatorStateMeta(name, share.mode, share.schemas, relative, size,
                                                 partitions))
    return OperatorMeta(meta.uid, meta.parallelism, meta.max_parallelism,
                        meta.key_type if keyed else None, tuple(keyed), tuple(operator_states))


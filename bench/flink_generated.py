"""A large canonical Flink savepoint made by statesource's own writers, and its rows as Parquet.

The savepoint (operator ``gen``, String keys ``user-<i>``, VoidNamespace,
parallelism 4, max parallelism 128) holds three keyed states of ``entries // 3``
canonical pairs each:

- ``total``: a value state of Longs, one per key;
- ``recent``: a list state of Longs, two elements per key;
- ``tags``: a map state of String user keys to Longs, two per key (on half the keys).

It is written by building a statesource checkpoint straight from Arrow arrays
(the format's data-file writer) and exporting it (``export_flink``, the canonical
writers of :mod:`statesource.flink`), for the newest Flink or for ``flink_version``
(``1.20``: a Flink 1.x savepoint, ``_metadata`` version 4). The same rows, as every reader of either
returns them, go to one Parquet directory per state (four files each) for
Spark's baseline. Both are kept under the system's temp directory for later runs.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from statesource.flink.operations.export import export_flink
from statesource.format import CheckpointMeta, commit_checkpoint
from statesource.format.columns import KEY_GROUP, data_schema
from statesource.format.datafile import write_keyed_file
from statesource.format.ipc import MAX_ROWS_PER_BATCH
from statesource.format.keyed_state_meta import KeyedStateMeta
from statesource.format.metadata import OperatorMeta
from statesource.format.reader import Checkpoint
from statesource.format.storage import new_data_file, resolve
from statesource.keygroups import key_group_range_for_operator, key_groups
from statesource.model import StateDeclaration, StateKind
from statesource.schema import ValueSchema
from statesource.types import STRING, VOID

OPERATOR = "gen"
PARALLELISM = 4
MAX_PARALLELISM = 128
STATES = (
    StateDeclaration("total", StateKind.VALUE, VOID, {"value": ValueSchema.parse("long")}),
    StateDeclaration("recent", StateKind.LIST, VOID, {"element": ValueSchema.parse("long")}),
    StateDeclaration("tags", StateKind.MAP, VOID,
                     {"user_key": ValueSchema.parse("string"),
                      "user_value": ValueSchema.parse(["null", "long"])}),
)
ROWS_PER_ENTRY = {"total": 1, "recent": 2, "tags": 2}
"""Rows of one (key, namespace) entry of each state: what the generator writes."""


def _rows(declaration: StateDeclaration, pairs: int) -> pa.RecordBatch:
    """The state's rows sorted by key group, each entry's rows together."""
    per_entry = ROWS_PER_ENTRY[declaration.name]
    keys_count = pairs // per_entry if declaration.kind is StateKind.MAP else pairs
    ids = np.repeat(np.arange(keys_count), per_entry)
    keys = pc.binary_join_element_wise("user-", pa.array(ids).cast(pa.string()), "")
    groups = key_groups(keys, STRING, MAX_PARALLELISM)
    order = pc.sort_indices(pa.table({"g": groups, "i": pa.array(np.arange(len(ids)))}),
                            sort_keys=[("g", "ascending"), ("i", "ascending")])
    values = pa.array(np.arange(len(ids), dtype=np.int64) * 7)
    columns = [groups, keys, pa.nulls(len(ids))]
    if declaration.kind is StateKind.MAP:
        slot = np.tile(np.arange(per_entry), keys_count)
        columns.append(pc.binary_join_element_wise("tag-", pa.array(slot).cast(pa.string()), ""))
    columns.append(values)
    schema = data_schema(STRING, declaration)
    return pa.RecordBatch.from_arrays([c.take(order) for c in columns], schema=schema)


def build_checkpoint(root: Path, entries: int) -> None:
    """A statesource checkpoint under ``root`` of the three states, ``entries`` pairs in all."""
    location = resolve(str(root))
    states = []
    for declaration in STATES:
        batch = _rows(declaration, entries // len(STATES))
        per_entry = 1 if declaration.kind is StateKind.VALUE else ROWS_PER_ENTRY[declaration.name]
        bounds = np.searchsorted(batch.column(0).to_numpy(), np.arange(MAX_PARALLELISM + 1))
        files = []
        for subtask in range(PARALLELISM):
            owned = key_group_range_for_operator(MAX_PARALLELISM, PARALLELISM, subtask)
            target, relative = new_data_file(location, 1, f"{OPERATOR}.{declaration.name}")

            def per_group(owned=owned, batch=batch, bounds=bounds, per_entry=per_entry):
                for group in owned:
                    start, end = int(bounds[group]), int(bounds[group + 1])
                    if end > start:
                        yield group, [batch.slice(s, min(MAX_ROWS_PER_BATCH, end - s))
                                      for s in range(start, end, MAX_ROWS_PER_BATCH)], \
                            (end - start) // per_entry

            files.append(write_keyed_file(target, relative, batch.schema, owned, per_group()))
        states.append(KeyedStateMeta.of(declaration, tuple(files)))
    operator = OperatorMeta(OPERATOR, PARALLELISM, MAX_PARALLELISM, STRING,
                            tuple(sorted(states, key=lambda s: s.name)), ())
    commit_checkpoint(location, CheckpointMeta(1, 0, (operator,)))


def generated(entries: int, flink_version: str | None = None) -> tuple[Path, Path]:
    """The savepoint (for Flink ``flink_version``, default the newest) and the Parquet rows
    of ``entries`` pairs (made once, then reused)."""
    suffix = f"-flink-{flink_version}" if flink_version else ""
    root = Path(tempfile.gettempdir()) / f"statesource-bench-flink-generated-{entries}{suffix}"
    savepoint, parquet = root / "savepoint", root / "parquet"
    if savepoint.exists() and parquet.exists():
        return savepoint, parquet
    shutil.rmtree(root, ignore_errors=True)
    print(f"generating a canonical savepoint of {entries:,} pairs under {root} ...")
    checkpoint = root / "checkpoint"
    build_checkpoint(checkpoint, entries)
    export_flink(str(checkpoint), str(savepoint), flink_version=flink_version)
    source = Checkpoint.open(str(checkpoint))
    for declaration in STATES:
        table = pa.concat_tables(source.read_keyed_state(declaration.name, operator=OPERATOR))
        target = parquet / declaration.name
        target.mkdir(parents=True)
        groups = table.column(KEY_GROUP).to_numpy()
        for subtask in range(PARALLELISM):
            owned = key_group_range_for_operator(MAX_PARALLELISM, PARALLELISM, subtask)
            mask = (groups >= owned.start) & (groups <= owned.end)
            pq.write_table(table.filter(pa.array(mask)), target / f"part-{subtask}.parquet")
    shutil.rmtree(checkpoint)
    return savepoint, parquet

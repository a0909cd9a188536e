"""What a ``flinkstate`` scan reads: pushed-down filters, partitions, and the rows of one.

Kept free of pyspark classes so it can be tested, and reused by other readers,
without a SparkSession.

Partitions follow Flink's key-group ranges for the requested parallelism:
adjacent subtask ranges are merged until a partition holds about
``TARGET_ROWS`` rows (every Spark task costs a Python worker round trip), and a
larger subtask range is split at key-group boundaries.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from statesource.errors import StateSourceError
from statesource.format.columns import (
    KEY,
    KEY_GROUP,
    NAMESPACE,
    TTL_TIMESTAMP,
    VALUE_COLUMNS,
)
from statesource.format.entries import entry_starts
from statesource.format.ipc import ReadListener
from statesource.format.metadata import KeyedStateMeta, OperatorMeta
from statesource.format.storage import Location
from statesource.keyequality import key_canonicalizer
from statesource.keygroups import (
    KeyGroupRange,
    key_group_range_for_operator,
    key_groups,
    operator_index_for_key_group,
)
from statesource.model import StateKind
from statesource.spark.schema import OutputSchema
from statesource.spark.snapshots import open_snapshot
from statesource.types import BOOLEAN, BYTE, CHAR, INT, LONG, SHORT, STRING

TARGET_ROWS = 1 << 21
EXACT_KEY_TYPES = (STRING, INT, LONG, SHORT, BYTE, BOOLEAN, CHAR)
"""Key types whose Spark equality is Java equality (floats are not: Spark has 0.0 = -0.0)."""


@dataclass(frozen=True)
class ScanTarget:
    """The state a scan reads; small and picklable, as Spark ships it to every task."""

    location: Location
    checkpoint_id: int
    operator: str
    state: str
    parallelism: int
    max_parallelism: int
    output: OutputSchema
    filter_pushdown: bool


@dataclass
class Pushdown:
    """Restrictions accepted from Spark's filters, applied exactly by the scan."""

    key_groups: set[int] | None = None
    keys: list[Any] | None = None

    def restrict_key_groups(self, allowed: set[int]) -> None:
        self.key_groups = allowed if self.key_groups is None else self.key_groups & allowed

    def restrict_keys(self, allowed: list[Any]) -> None:
        if self.keys is None:
            self.keys = allowed
        else:
            self.keys = [k for k in self.keys if k in allowed]


@dataclass(frozen=True)
class KeyGroupSlice:
    """One Spark partition: a key-group range, optionally thinned to listed key groups."""

    start: int
    end: int
    only: tuple[int, ...] | None = field(default=None)

    def key_groups(self) -> KeyGroupRange | tuple[int, ...]:
        return KeyGroupRange(self.start, self.end) if self.only is None else self.only


def plan_slices(rows: Mapping[int, int], max_parallelism: int, parallelism: int,
                allowed: set[int] | None, cores: int | None = None) -> list[KeyGroupSlice]:
    """Contiguous key-group slices covering every (allowed) key group exactly once.

    ``rows`` weighs each non-empty key group (rows; a Flink snapshot's bytes).
    The slice count is the rows over ``TARGET_ROWS``, rounded up to a multiple
    of ``cores`` (default: this machine's) so that no wave of tasks runs
    half empty; slices end at subtask boundaries where they can.
    """
    total = sum(n for kg, n in rows.items() if allowed is None or kg in allowed)
    cores = cores or os.cpu_count() or 1
    count = -(-total // TARGET_ROWS)
    if count > 1:
        count = -(-count // cores) * cores
    target = max(1, -(-total // max(count, 1)))
    slices: list[KeyGroupSlice] = []
    pending: list[int] = []
    pending_rows = 0

    def flush() -> None:
        nonlocal pending, pending_rows
        if pending:
            whole = allowed is None or len(pending) == pending[-1] - pending[0] + 1
            slices.append(KeyGroupSlice(pending[0], pending[-1],
                                        None if whole else tuple(pending)))
        pending, pending_rows = [], 0

    for index in range(parallelism):
        owned = key_group_range_for_operator(max_parallelism, parallelism, index)
        for key_group in owned:
            if allowed is not None and key_group not in allowed:
                continue
            if pending_rows >= target:
                flush()
            pending.append(key_group)
            pending_rows += rows.get(key_group, 0)
        if pending_rows >= target:
            flush()
    flush()
    return slices


def accept_key_filter(op: OperatorMeta, values: tuple[Any, ...], pushdown: Pushdown) -> bool:
    """``key = v`` / ``key IN (...)``: prune to the keys' key groups and filter rows exactly."""
    key_type = op.key_type
    if key_type not in EXACT_KEY_TYPES:
        return False
    canonical = key_canonicalizer(key_type)
    valid = []
    for value in values:
        try:
            valid.append(canonical(value))
        except StateSourceError:
            continue  # a value no stored key can equal (wrong type, unstorable text) matches none
    groups = key_groups(valid, key_type, op.max_parallelism).tolist() if valid else []
    pushdown.restrict_key_groups(set(groups))
    pushdown.restrict_keys(valid)
    return True


def key_groups_matching(column: str, operator: str, bound: Any, op: OperatorMeta,
                        parallelism: int) -> set[int] | None:
    """Key groups whose ``key_group`` / ``operator_index`` satisfies ``column <operator> bound``."""
    limit = op.max_parallelism if column == KEY_GROUP else parallelism
    if operator == "in":
        if not all(type(v) is int for v in bound):
            return None
        accepted = {v for v in bound if 0 <= v < limit}
    else:
        if type(bound) is not int:
            return None
        tests = {"=": lambda v: v == bound, ">": lambda v: v > bound, ">=": lambda v: v >= bound,
                 "<": lambda v: v < bound, "<=": lambda v: v <= bound}
        accepted = {v for v in range(limit) if tests[operator](v)}
    if column == KEY_GROUP:
        return accepted
    return {kg for index in accepted
            for kg in key_group_range_for_operator(op.max_parallelism, parallelism, index)}


def read_slice(target: ScanTarget, part: KeyGroupSlice, keys: list[Any] | None,
               listener: ReadListener | None = None) -> Iterator[pa.RecordBatch]:
    """The rows of one partition, as batches in exactly the declared Spark schema."""
    checkpoint = open_snapshot(target.location.path, target.checkpoint_id,
                               target.location.filesystem)
    op = checkpoint.operator(target.operator)
    state = op.keyed_state(target.state) if target.output.nested else None
    key_type = op.keyed_key_type
    wanted = None if keys is None else key_type.to_arrow(keys)
    for table in checkpoint.read_keyed_state(target.state, operator=target.operator,
                                             key_groups=part.key_groups(), listener=listener):
        if wanted is not None:
            table = table.filter(pc.is_in(table.column(KEY), value_set=wanted))
            if not table.num_rows:
                continue
        yield from _output_table(target, state, table).to_batches()


def _output_table(target: ScanTarget, state: KeyedStateMeta | None, table: pa.Table) -> pa.Table:
    key_group = table.column(KEY_GROUP)[0].as_py()
    operator_index = operator_index_for_key_group(target.max_parallelism, target.parallelism,
                                                  key_group)
    output = target.output
    if output.nested:
        assert state is not None
        table = _nest(state, table)
    columns = [table.column(KEY_GROUP),
               pa.array(np.full(table.num_rows, operator_index, dtype=np.int32)),
               *(table.column(name) for name in output.arrow.names[2:])]
    return pa.Table.from_arrays(columns, schema=output.arrow).cast(output.spark_arrow)


def _nest(state: KeyedStateMeta, table: pa.Table) -> pa.Table:
    """One row per entry: list elements (or map entries) gathered into one array (or map)."""
    declaration = state.declaration
    starts = entry_starts(table.column(KEY), table.column(NAMESPACE))
    offsets = pa.array(starts, pa.int32())
    first_rows = table.take(pa.array(starts[:-1], pa.int64()))
    columns = {KEY_GROUP: first_rows.column(KEY_GROUP), KEY: first_rows.column(KEY),
               NAMESPACE: first_rows.column(NAMESPACE)}
    ttl = table.column(TTL_TIMESTAMP).combine_chunks() if declaration.ttl is not None else None
    if state.kind is StateKind.LIST:
        element = table.column(VALUE_COLUMNS[StateKind.LIST][0][0]).combine_chunks()
        columns["list_value"] = pa.ListArray.from_arrays(offsets, element)
        if ttl is not None:
            columns["ttl_timestamps"] = pa.ListArray.from_arrays(offsets, ttl)
    else:
        user_keys = table.column("user_key").combine_chunks()
        user_values = table.column("user_value").combine_chunks()
        columns["map_value"] = pa.MapArray.from_arrays(offsets, user_keys, user_values)
        if ttl is not None:
            columns["ttl_timestamps"] = pa.MapArray.from_arrays(offsets, user_keys, ttl)
    return pa.table(columns)

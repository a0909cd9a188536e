"""Rows of an operator-state data file: list elements, or broadcast map entries.

One file per operator state; each old subtask's share is one contiguous byte
range (its own record batches), so a rescale can read exactly the shares it
redistributes.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from statesource.schema import ValueSchema
from statesource.state.redistribution import DistributionMode

LIST_COLUMNS = (("list_element", "element"),)
BROADCAST_COLUMNS = (("user_key", "user_key"), ("user_value", "user_value"))


def _columns(mode: DistributionMode) -> tuple[tuple[str, str], ...]:
    return BROADCAST_COLUMNS if mode is DistributionMode.BROADCAST else LIST_COLUMNS


def operator_state_schema(mode: DistributionMode, schemas: dict[str, ValueSchema]) -> pa.Schema:
    return pa.schema([pa.field(column, schemas[role].arrow_type)
                      for column, role in _columns(mode)])


def operator_state_table(entry: Any) -> pa.Table:
    """One subtask's share of an operator state (a snapshot entry) as a table."""
    if entry.mode is DistributionMode.BROADCAST:
        columns = [list(entry.values.keys()), list(entry.values.values())]
    else:
        columns = [list(entry.values)]
    arrays = [entry.schemas[role].to_arrow(values)
              for (_, role), values in zip(_columns(entry.mode), columns)]
    return pa.Table.from_arrays(arrays, schema=operator_state_schema(entry.mode, entry.schemas))


def decode_operator_state(mode: DistributionMode, schemas: dict[str, ValueSchema],
                          batches: list[pa.RecordBatch]) -> list | dict:
    """A subtask's share back as a list (list, union) or a dict (broadcast)."""
    if not batches:
        return {} if mode is DistributionMode.BROADCAST else []
    table = pa.Table.from_batches(batches)
    values = [schemas[role].to_python(table.column(column)) for column, role in _columns(mode)]
    if mode is DistributionMode.BROADCAST:
        return dict(zip(values[0], values[1]))
    return values[0]

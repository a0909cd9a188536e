"""Rows of an operator-state data file: list elements, or broadcast map entries.

One file per operator state; each old subtask's share is one contiguous byte
range (its own record batches), so a rescale can read exactly the shares it
redistributes.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from statesource.format.columns import COLUMN_OF_ROLE
from statesource.model import DistributionMode, operator_state_roles
from statesource.schema import ValueSchema


def _columns(mode: DistributionMode) -> tuple[tuple[str, str], ...]:
    return tuple((COLUMN_OF_ROLE[role], role) for role in operator_state_roles(mode))


def operator_state_schema(mode: DistributionMode, schemas: Mapping[str, ValueSchema]) -> pa.Schema:
    return pa.schema([pa.field(column, schemas[role].arrow_type)
                      for column, role in _columns(mode)])


def operator_state_table(mode: DistributionMode, schemas: Mapping[str, ValueSchema],
                         share: list | dict) -> pa.Table:
    """One subtask's share of an operator state (a list, or a dict for broadcast) as a table."""
    if mode is DistributionMode.BROADCAST:
        assert isinstance(share, dict)
        columns = [list(share.keys()), list(share.values())]
    else:
        columns = [list(share)]
    arrays = [schemas[role].to_arrow(values)
              for (_, role), values in zip(_columns(mode), columns)]
    return pa.Table.from_arrays(arrays, schema=operator_state_schema(mode, schemas))


def decode_operator_state(mode: DistributionMode, schemas: Mapping[str, ValueSchema],
                          batches: list[pa.RecordBatch]) -> list | dict:
    """A subtask's share back as a list (list, union) or a dict (broadcast)."""
    if not batches:
        return {} if mode is DistributionMode.BROADCAST else []
    table = pa.Table.from_batches(batches)
    values = [schemas[role].to_python(table.column(column)) for column, role in _columns(mode)]
    if mode is DistributionMode.BROADCAST:
        return dict(zip(values[0], values[1]))
    return values[0]

"""What the ``flinkstate`` sources show of a snapshot beyond its keyed states' data schema.

Timer states (Flink's) and operator states have output schemas of their own;
everything else is planned through the :class:`~statesource.format.source.StateSource`
interface, whatever kind of snapshot it is.
"""

from __future__ import annotations

import pyarrow as pa

from statesource.format.columns import KEY, KEY_GROUP, NAMESPACE, TIMER_TIMESTAMP
from statesource.format.operator_columns import operator_state_schema
from statesource.format.source import StateSource
from statesource.model import DistributionMode
from statesource.schema import ValueSchema
from statesource.spark.schema import OPERATOR_INDEX, OutputSchema, spark_output


def timer_output(source: StateSource, operator: str | None, state: str | None
                 ) -> OutputSchema | None:
    """The schema of a timer state (``key``, ``namespace``, ``timestamp``), else None."""
    if state is None:
        return None
    for timer in source.timer_states(operator):
        if timer.name == state:
            return spark_output([pa.field(KEY_GROUP, pa.int32()),
                                 pa.field(OPERATOR_INDEX, pa.int32()),
                                 pa.field(KEY, timer.key_type.arrow_type),
                                 pa.field(NAMESPACE, timer.namespace_type.arrow_type),
                                 pa.field(TIMER_TIMESTAMP, pa.int64())])
    return None


def operator_state_output(mode: DistributionMode, schemas: dict[str, ValueSchema]
                          ) -> OutputSchema:
    """``operator_index`` (the owning subtask), then the format's operator-state columns."""
    stored = operator_state_schema(mode, schemas)
    return spark_output([pa.field(OPERATOR_INDEX, pa.int32()), *stored])

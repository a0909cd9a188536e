"""The write side: Flink's heap keyed-state backend and operator state, in Python."""

from statesource.state.descriptors import (
    AggregateFunction,
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    StateKind,
    ValueStateDescriptor,
)
from statesource.state.keyed_backend import KeyedBackendSnapshot, KeyedStateBackend
from statesource.state.operator_backend import OperatorStateBackend
from statesource.state.redistribution import DistributionMode
from statesource.state.ttl import (
    ManualClock,
    StateVisibility,
    SystemClock,
    TtlConfig,
    UpdateType,
)

__all__ = [
    "AggregateFunction",
    "AggregatingStateDescriptor",
    "DistributionMode",
    "KeyedBackendSnapshot",
    "KeyedStateBackend",
    "ListStateDescriptor",
    "ManualClock",
    "MapStateDescriptor",
    "OperatorStateBackend",
    "ReducingStateDescriptor",
    "StateDescriptor",
    "StateKind",
    "StateVisibility",
    "SystemClock",
    "TtlConfig",
    "UpdateType",
    "ValueStateDescriptor",
]

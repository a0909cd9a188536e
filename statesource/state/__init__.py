"""The write side: Flink's heap keyed-state backend and operator state, in Python."""

from statesource.model import DistributionMode, StateKind, StateVisibility, TtlConfig, UpdateType
from statesource.state.clock import Clock, ManualClock, SystemClock
from statesource.state.descriptors import (
    AggregateFunction,
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from statesource.state.keyed_backend import KeyedBackendSnapshot, KeyedStateBackend
from statesource.state.operator_backend import OperatorStateBackend

__all__ = [
    "AggregateFunction",
    "AggregatingStateDescriptor",
    "Clock",
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

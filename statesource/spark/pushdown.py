"""Spark's pushed filters, translated into a :class:`Pushdown`: one rule for every reader.

The state reader and the change-feed reader accept the same predicates on
``key`` (for key types whose Spark equality is Java's) and ``key_group``; the
state reader also on ``operator_index``. What is accepted is applied exactly by
the scan, so Spark need not filter those rows again.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
)

from statesource.format.columns import KEY
from statesource.format.metadata import OperatorMeta
from statesource.spark.planning import Pushdown, accept_key_filter, key_groups_matching

_COMPARISONS = {EqualTo: "=", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<",
                LessThanOrEqual: "<="}


def accept_filter(predicate: Filter, op: OperatorMeta, parallelism: int, pushdown: Pushdown,
                  key_group_columns: tuple[str, ...]) -> bool:
    """Whether ``predicate`` is taken into ``pushdown`` (else Spark keeps applying it).

    ``key_group_columns`` are the columns whose predicates select key groups:
    ``key_group``, and ``operator_index`` where the rows have it.
    """
    attribute = getattr(predicate, "attribute", None)
    if attribute is None or len(attribute) != 1:
        return False
    column = attribute[0]
    if column == KEY:
        if isinstance(predicate, EqualTo):
            return accept_key_filter(op, (predicate.value,), pushdown)
        if isinstance(predicate, In):
            return accept_key_filter(op, tuple(predicate.value), pushdown)
        return False
    if column not in key_group_columns:
        return False
    bound: Any
    if isinstance(predicate, In):
        operator, bound = "in", tuple(predicate.value)
    elif type(predicate) in _COMPARISONS:
        operator, bound = _COMPARISONS[type(predicate)], getattr(predicate, "value", None)
    else:
        return False
    matching = key_groups_matching(column, operator, bound, op, parallelism)
    if matching is None:
        return False
    pushdown.restrict_key_groups(matching)
    return True

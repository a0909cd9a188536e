"""Spark's pushed filters, translated into a :class:`Pushdown`: one rule for every reader.

The state reader and the change-feed reader accept the same predicates on
``key`` (for key types whose Spark equality is Java's) and ``key_group``; the
state reader also on ``operator_index``. What is accepted is applied exactly by
the scan, so Spark need not filter those rows again.
"""

from __future__ import annotations

from dataclasses import dataclass
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

from statesource.errors import StateSourceError
from statesource.format.columns import KEY, KEY_GROUP
from statesource.format.metadata import OperatorMeta
from statesource.keyequality import key_canonicalizer
from statesource.keygroups import key_group_range_for_operator, key_groups
from statesource.types import BOOLEAN, BYTE, CHAR, INT, LONG, SHORT, STRING

EXACT_KEY_TYPES = (STRING, INT, LONG, SHORT, BYTE, BOOLEAN, CHAR)
"""Key types whose Spark equality is Java equality (floats are not: Spark has 0.0 = -0.0)."""
_COMPARISONS = {EqualTo: "=", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<",
                LessThanOrEqual: "<="}


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

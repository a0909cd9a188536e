"""The ``sql`` fixture (SqlJob.java, a real Flink 2.3 SQL job) and the state its model says.

``expected.json`` is computed by generate.py from the job's rows alone. Here it is shaped
per state as the readers' rows are, so that a test compares ``{key: value}`` dicts: each key
is the JSON of the key row's fields (and the namespace, where the state has one), each value
the JSON form of the stored value (:func:`jsonable`: decimals in fixed notation, times in ISO
form, bytes in hex; a value row as its row kind and fields in order; a map as the sorted
``[user key, user value]`` pairs).
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

SQL = Path(__file__).resolve().parent / "fixtures" / "flink" / "sql"
KINDS = ("canonical", "native", "rocksdb")
AGGREGATE, JOIN, DEDUP, WINDOW = ("GroupAggregate[5]", "Join[11]", "Deduplicate[16]",
                                  "GlobalWindowAggregate[21]")
"""The SQL operators, by the names Flink gave them (what ``inspect`` shows)."""
STATES = {
    (AGGREGATE, "accState"): "value", (AGGREGATE, "distinctAcc_0"): "map",
    (AGGREGATE, "distinctAcc_0_null_state"): "value",
    (JOIN, "left-records"): "map", (JOIN, "right-records"): "map",
    (DEDUP, "waiting-to-emit-on-timer"): "value", (DEDUP, "already-emitted-state-boolean"): "value",
    (WINDOW, "window-aggs"): "value",
}
"""Every keyed state of the SQL operators, and its kind."""
TIMERS = {(DEDUP, "_timer_state/event_user-timers"), (DEDUP, "_timer_state/processing_user-timers"),
          (WINDOW, "_timer_state/event_window-timers"),
          (WINDOW, "_timer_state/processing_window-timers"),
          (AGGREGATE, "_timer_state/event_user-timers"),
          (AGGREGATE, "_timer_state/processing_user-timers")}
NULL_SERIALIZER_BYTE = "00"
"""What a state-backed ``MapView`` leaves in its accumulator row: the bytes of its ``RAW``
field, which ``NullSerializer`` writes as one zero byte (flink-table-runtime)."""


@cache
def truth() -> dict[str, Any]:
    return json.loads((SQL / "expected.json").read_text())


def jsonable(value: Any) -> Any:
    """A decoded value in the JSON form expected.json has."""
    if isinstance(value, Decimal):
        return f"{value:f}"
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).isoformat()  # an instant, in UTC
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def row_of(value: dict[str, Any]) -> list[Any]:
    """A value row (row kind, then fields in order) as a list."""
    return [jsonable(v) for v in value.values()]


def key_of(fields: Any, namespace: Any = None) -> str:
    """The dict key of a key row's fields (a Row's, or a struct's dict) and a namespace."""
    values = list(fields.values()) if isinstance(fields, dict) else list(fields)
    return json.dumps(jsonable(values + ([] if namespace is None else [namespace])))


def expected(operator: str, state: str) -> dict[str, Any]:
    """The model's content of one state (timers: the timestamps)."""
    model = truth()
    if state == "accState":
        return {key: ["+I", g["count"], g["sum"], g["max"], len(g["distinct"]),
                      NULL_SERIALIZER_BYTE] for key, g in model["aggregate"].items()}
    if state == "distinctAcc_0":  # a distinct item's bit set: seen by distinct aggregate 0
        return {key: sorted([item, 1] for item in g["distinct"])
                for key, g in model["aggregate"].items()}
    if state in ("left-records", "right-records"):
        side = model["join"][state.split("-")[0]]
        return {json.dumps([item]): sorted([["+I", *row], 1] for row in rows)
                for item, rows in side.items()}
    if state == "waiting-to-emit-on-timer":
        return {json.dumps([usr]): ["+I", *row] for usr, row in model["dedup"].items()}
    if state == "_timer_state/event_user-timers" and operator == DEDUP:
        return {json.dumps([usr]): ts for usr, ts in model["dedup_timers"].items()}
    if state == "window-aggs":
        return {json.dumps([usr, int(end)]): ["+I", *counts]
                for usr, windows in model["window"].items() for end, counts in windows.items()}
    if state == "_timer_state/event_window-timers":
        return {json.dumps([usr, int(end)]): int(end) - 1
                for usr, windows in model["window"].items() for end in windows}
    return {}  # the null-key distinct view, dedup's emitted flags, processing-time timers


def shaped(kind: str, entries: Any) -> dict[str, Any]:
    """``(key fields, namespace, stored)`` triples as :func:`expected` shapes a state of
    ``kind`` (``value``, ``map`` or ``timers``); one key twice is an error."""
    found: dict[str, Any] = {}
    for fields, namespace, stored in entries:
        key = key_of(fields, namespace)
        assert key not in found, key
        if kind == "map":
            found[key] = sorted([row_of(k) if isinstance(k, dict) else jsonable(k), v]
                                for k, v in stored.items())
        elif isinstance(stored, dict):
            found[key] = row_of(stored)
        else:
            found[key] = jsonable(stored)
    return found

"""The SQL fixture's job, run again from a savepoint in a real Flink 2.3, and a model of its output.

A SQL savepoint is checked the way a SQL user depends on it: restored in the *same* SQL job
(SqlJob.java's queries, hence its operator uids), fed more events, and the job's output compared
with a model of every event. ``run_sql_job`` compiles ``tests/flinkrestore/SqlRestoreRun.java``
with SqlJob.java (cached like the restore harness of :mod:`flink_restore`), runs it in one JVM
(a local MiniCluster) over events ``first .. last - 1`` and returns what each query emitted.
The input then ends, so its watermark fires every window and every waiting dedup row.

``expected_output`` is what the job must emit when its state holds events ``0 .. first - 1``
(the fixture's), minus the keys ``erased`` per query: computed from the rows alone
(generate.py's ``sql_event``, the model the fixture's expected state comes from). A restore
that lost or misplaced state shows: an aggregate whose count restarts (an ``+I`` where a
``+U`` belongs), a join missing its partners from the savepoint, a dedup row of a new event,
a window with fewer rows.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import os
import subprocess
import tempfile
from collections.abc import Iterable
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

from flink_restore import (
    JVM_FLAGS,
    LOG4J,
    STDERR_TAIL_LINES,
    TESTS,
    FlinkRestoreError,
    _tool,
    compiled_classes,
    flink_lib,
    missing_flink,
)

JOB = TESTS / "fixtures" / "flink" / "SqlJob.java"
HARNESS = TESTS / "flinkrestore" / "SqlRestoreRun.java"
FACTORIES = "META-INF/services/org.apache.flink.table.factories.Factory"
TABLES = ("agg_sink", "join_sink", "dedup_sink", "window_sink")
LEFT = ("id", "item", "usr", "price", "qty", "flag", "tiny", "small", "ratio", "score", "day", "at")
RIGHT = ("id", "big", "pts", "nanos", "ltz", "ltz3", "payload", "code", "info")
DEDUP = ("id", "usr", "item", "price", "ts", "payload")
WINDOW_MILLIS = 60_000


def run_sql_job(savepoint: str | Path | None, max_parallelism: int, first: int, last: int, *,
                backend: str = "hashmap", timeout: int = 180) -> dict[str, list[list[Any]]]:
    """Run SqlJob's queries from ``savepoint`` (None: empty state) with max parallelism
    ``max_parallelism`` over events ``first .. last - 1``; per sink table, its sink subtasks'
    rows in the order each received them, as ``[kind, fields]``."""
    reason = missing_flink()
    if reason is not None:
        raise FlinkRestoreError(reason)
    classes = compiled_classes([JOB, HARNESS])
    factories = classes / FACTORIES
    if not factories.exists():
        factories.parent.mkdir(parents=True, exist_ok=True)
        scratch = factories.with_name(f".{os.getpid()}.tmp")
        scratch.write_text("SqlRestoreRun$CollectFactory\n")
        os.replace(scratch, factories)
    with tempfile.TemporaryDirectory(prefix="flink-sql-run-") as work:
        work_dir = Path(work)
        log4j = work_dir / "log4j2.properties"
        log4j.write_text(LOG4J.format(log=work_dir / "flink.log"))
        out = work_dir / "out"
        out.mkdir()
        command = [_tool("java") or "java", *JVM_FLAGS, f"-Djava.io.tmpdir={work_dir}",
                   f"-Dlog4j2.configurationFile={log4j}",
                   "-cp", os.pathsep.join([str(classes), f"{flink_lib()}/*"]), "SqlRestoreRun",
                   backend, "" if savepoint is None else str(Path(savepoint).resolve()),
                   str(max_parallelism), str(first), str(last), str(out), str(timeout)]
        try:
            run = subprocess.run(command, capture_output=True, text=True, timeout=timeout + 30)
        except subprocess.TimeoutExpired:
            raise FlinkRestoreError(f"the SQL job did not end within {timeout + 30} s") from None
        if run.returncode != 0:
            tail = "\n".join(run.stderr.splitlines()[-STDERR_TAIL_LINES:])
            raise FlinkRestoreError(f"the SQL job from {savepoint} failed (exit"
                                    f" {run.returncode}):\n{tail}", run.returncode, run.stderr)
        return {table: [[line["kind"], line["row"]] for part in sorted(out.glob(f"{table}-*"))
                        for line in map(json.loads, part.read_text().splitlines())]
                for table in TABLES}


# ------------------------------------------------------------------------------ the model


@cache
def _generate() -> Any:
    """generate.py, whose ``sql_event`` is SqlJob's row ``i`` (the fixture's model)."""
    spec = importlib.util.spec_from_file_location(
        "sql_generate", TESTS / "fixtures" / "flink" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _instant(text: str) -> list[int]:
    micros = round(dt.datetime.fromisoformat(text).timestamp() * 10 ** 6)
    return [micros // 1000, micros % 1000 * 1000]


def event(i: int) -> dict[str, Any]:
    """Row ``i`` with its fields in the forms SqlRestoreRun writes them."""
    row = _generate().sql_event(i)
    at = dt.time.fromisoformat(row["at"])
    return {**row, "day": (dt.date.fromisoformat(row["day"]) - dt.date(1970, 1, 1)).days,
            "at": ((at.hour * 60 + at.minute) * 60 + at.second) * 1000 + at.microsecond // 1000,
            "ts": [row["ts_millis"], 0], "pts": [row["ts_millis"], 0],
            "nanos": [row["nanos"]["millisecond"], row["nanos"]["nano_of_millisecond"]],
            "ltz": _instant(row["ltz"]), "ltz3": _instant(row["ltz3"]),
            "info": [row["info"]["n"], row["info"]["tag"]]}


def expected_output(first: int, last: int, erased: dict[str, Iterable[tuple]] | None = None
                    ) -> dict[str, Any]:
    """What the job emits over events ``first .. last - 1`` when restored from the fixture's
    state (events ``0 .. first - 1``) without the keys ``erased`` (per sink table, key rows:
    ``(usr, grp)``, ``(item,)``, ``(usr,)``, ``(usr,)``), shaped as :func:`shaped`."""
    gone = {table: {tuple(key) for key in keys} for table, keys in (erased or {}).items()}
    old = [event(i) for i in range(first)]
    new = [event(i) for i in range(first, last)]

    def kept(table: str, key: tuple) -> bool:
        return key not in gone.get(table, ())

    totals: dict[tuple, dict] = {}
    for row in (r for r in old if kept("agg_sink", (r["usr"], r["grp"]))):
        _add(totals, row)
    changes: dict[str, list] = {}
    for row in new:
        key = (row["usr"], row["grp"])
        kind = "+U" if key in totals else "+I"
        total = _add(totals, row)
        changes.setdefault(json.dumps(key), []).append(
            [kind, [*key, total["count"], total["sum"], total["max"], len(total["items"])]])
    joined = []
    sides = ([(r, False) for r in old if kept("join_sink", (r["item"],))]
             + [(r, True) for r in new])
    left = [(r, fresh) for r, fresh in sides if r["id"] % 3]
    right = [(r, fresh) for r, fresh in sides if not r["id"] % 3]
    for o, o_new in left:
        for p, p_new in right:
            if o["item"] == p["item"] and (o_new or p_new):
                joined.append(["+I", [o[f] for f in LEFT] + [p[f] for f in RIGHT]])
    firsts: dict[str, dict] = {}
    windows: dict[tuple, list[int]] = {}
    for row in [r for r in old if kept("dedup_sink", (r["usr"],))] + new:
        if row["usr"] not in firsts or row["ts"] < firsts[row["usr"]]["ts"]:
            firsts[row["usr"]] = row
    for row in [r for r in old if kept("window_sink", (r["usr"],))] + new:
        start = row["ts_millis"] // WINDOW_MILLIS * WINDOW_MILLIS
        counts = windows.setdefault((row["usr"], start), [0, 0])
        counts[0] += 1
        counts[1] += row["qty"]
    return {"agg_sink": changes, "join_sink": sorted(joined, key=json.dumps),
            "dedup_sink": sorted((["+I", [r[f] for f in DEDUP]] for r in firsts.values()),
                                 key=json.dumps),
            "window_sink": sorted((["+I", [usr, [start, 0], [start + WINDOW_MILLIS, 0], *counts]]
                                   for (usr, start), counts in windows.items()), key=json.dumps)}


def _add(totals: dict[tuple, dict], row: dict[str, Any]) -> dict[str, Any]:
    total = totals.setdefault((row["usr"], row["grp"]),
                              {"count": 0, "sum": 0, "max": None, "items": set()})
    total["count"] += 1
    total["sum"] += row["qty"]
    if total["max"] is None or Decimal(row["price"]) > Decimal(total["max"]):
        total["max"] = row["price"]
    total["items"].add(row["item"])
    return total


def shaped(output: dict[str, list[list[Any]]]) -> dict[str, Any]:
    """The job's output as :func:`expected_output` shapes it: the aggregate's changes per key
    in the order emitted (a key's changes all come from one subtask), the other queries'
    rows sorted."""
    changes: dict[str, list] = {}
    for kind, row in output["agg_sink"]:
        changes.setdefault(json.dumps(row[:2]), []).append([kind, row])
    return {"agg_sink": changes,
            **{table: sorted(output[table], key=json.dumps) for table in TABLES[1:]}}

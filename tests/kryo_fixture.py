"""The ``kryo`` fixture (KryoJob.java, one job run by a real Flink 1.20 and by a real Flink 2.3,
generate.py ``--kryo-1x``): the job's source for each Flink, the job's model, computed here from
its events alone, and its states as a restore declares them (tests/flink_restore.py).

Event ``i`` has key ``i % KEYS`` and round ``i // KEYS``. Per key the job keeps (see
KryoJob.java): in ``profiles`` a POJO ``profile`` (``name``, ``visits``, ``tags``: the
last three tags, None for every 7th key, ``counts``: per ``c<i % 3>`` the sum of ids), a
``total`` of ids, ``per_tag`` (tag -> last id) and an event-time timer at ``i * 1000 +
1_000_000`` per event; in ``uuids`` ``last_uuid`` (``UUID.nameUUIDFromBytes("u<i>")``) and
``bag`` (``b<round % 4>`` -> count); in ``notes`` ``note`` (``Note("n<i>", i)``).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path
from typing import Any

KRYO = Path(__file__).resolve().parent / "fixtures" / "flink" / "kryo"
JOB = KRYO.parent / "KryoJob.java"
"""The job, written for Flink 2.3 (:func:`job_source` gives it for 1.x)."""
LEGACY_SOURCE = "import org.apache.flink.streaming.api.functions.source.{}SourceFunction;"
KEYS = 200
EVENTS = 600
"""Events in the savepoints; a job continuing on one is fed events EVENTS..MORE-1."""
MORE = 1000
MAX_PARALLELISM = 128
PARALLELISM = 2
UIDS = ("profiles", "uuids", "notes")


def job_source(directory: Path, flink_major: int = 2, job: Path = JOB) -> Path:
    """``job`` (KryoJob.java, or another job written for Flink 2.3 the same way, such as
    IncrementalJob.java) as ``flink_major`` compiles it: for 1.x, written into ``directory``
    with the one line that differs, the legacy ``SourceFunction``'s package (2.x moved it to
    ``legacy``)."""
    if flink_major >= 2:
        return job
    text = job.read_text()
    legacy = LEGACY_SOURCE.format("legacy.")
    if text.count(legacy) != 1:
        raise AssertionError(f"{job} does not import {legacy}")
    target = directory / f"flink-{flink_major}" / job.name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text.replace(legacy, LEGACY_SOURCE.format("")))
    return target


def job_uuid(i: int) -> str:
    """``UUID.nameUUIDFromBytes("u<i>")``: version 3 (MD5) of the bytes, without namespace."""
    return str(uuid.UUID(bytes=hashlib.md5(f"u{i}".encode()).digest(), version=3))


def java_text(value: Any) -> str:
    """Java's ``toString`` of the job's values: a list as ``[a, b]``, a map sorted as
    ``{k=v, k=v}`` (the job prints maps through a TreeMap), None as ``null``."""
    if value is None:
        return "null"
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={v}" for k, v in sorted(value.items())) + "}"
    return str(value)


def run(first: int, end: int, held: dict[int, dict] | None = None
        ) -> tuple[dict[int, dict], list[str]]:
    """Events ``first..end-1`` applied to ``held`` (key -> state; None: nothing yet): the
    state after them and the lines the job emits for them, sorted as the job writes them.
    The lines for timers are left to :func:`timer_lines` (they fire when the input ends)."""
    state: dict[int, dict] = json.loads(json.dumps(held or {}), object_hook=_int_keys)
    lines = []
    for i in range(first, end):
        key, round_ = i % KEYS, i // KEYS
        s = state.setdefault(key, {"profile": {"name": f"p{key}", "visits": 0, "counts": {},
                                               "tags": None if key % 7 == 0 else []},
                                   "total": 0, "per_tag": {}, "timers": [],
                                   "last_uuid": None, "bag": {}, "note": None})
        profile = s["profile"]
        profile["visits"] += 1
        tag = f"t{(round_ + key) % 5}"
        if profile["tags"] is not None:
            profile["tags"] = (profile["tags"] + [tag])[-3:]
        bucket = f"c{i % 3}"
        profile["counts"][bucket] = profile["counts"].get(bucket, 0) + i
        s["total"] += i
        s["per_tag"][tag] = i
        s["timers"].append(i * 1000 + 1_000_000)
        lines.append(f"P {key} {i} {profile['name']} {profile['visits']}"
                     f" {java_text(profile['tags'])} {java_text(profile['counts'])} {s['total']}"
                     f" {java_text(s['per_tag'])}")
        before, s["last_uuid"] = s["last_uuid"], job_uuid(i)
        bucket = f"b{round_ % 4}"
        s["bag"][bucket] = s["bag"].get(bucket, 0) + 1
        lines.append(f"U {key} {i} {java_text(before)} {java_text(s['bag'])}")
        s["note"] = f"Note(n{i}, {i})"
    return state, sorted(lines)


def timer_lines(state: dict[int, dict]) -> list[str]:
    """What the job emits when the input ends: every timer fires."""
    return sorted(f"T {key} {ts}" for key, s in state.items() for ts in s["timers"])


def _int_keys(obj: dict) -> dict:
    return {int(k) if k.isdigit() else k: v for k, v in obj.items()}


def expected() -> dict:
    """The state after EVENTS events, as generate.py writes it to ``expected.json``."""
    state, _ = run(0, EVENTS)
    return {"events": EVENTS, "keys": KEYS, "max_parallelism": MAX_PARALLELISM,
            "parallelism": PARALLELISM, "state": {str(k): v for k, v in sorted(state.items())}}


def truth() -> dict[int, dict]:
    """``expected.json``'s state, key -> state."""
    held = json.loads((KRYO / "expected.json").read_text())["state"]
    return {int(key): value for key, value in held.items()}


def spec(backend: str = "hashmap", operators: dict[str, list[str]] | None = None,
         timers: bool = True) -> dict:
    """A restore spec (tests/flink_restore.py) declaring the job's states as KryoJob.java
    does: ``operators`` maps a uid to the states to declare (default: all of them); operators
    left out are skipped by Flink (``ignore_unclaimed_state``)."""
    declared = {
        "profiles": {"profile": {"kind": "value", "value": {"pojo": "KryoJob$Profile"}},
                     "total": {"kind": "value", "value": "Long"},
                     "per_tag": {"kind": "map", "user_key": "String", "user_value": "Long"}},
        "uuids": {"last_uuid": {"kind": "value", "value": {"class": "java.util.UUID"}},
                  "bag": {"kind": "value", "value": {"generic": "java.util.HashMap"}}},
        "notes": {"note": {"kind": "value", "value": {"class": "KryoJob$Note"}}},
    }
    wanted = operators if operators is not None else {uid: list(declared[uid]) for uid in UIDS}
    ops = []
    for uid, states in wanted.items():
        op: dict[str, Any] = {"uid": uid, "key": "Long",
                              "keyed_states": [{"name": name, **declared[uid][name]}
                                               for name in states]}
        if uid == "profiles" and timers:
            op["timers"] = [{"name": "user-timers"}]
        ops.append(op)
    return {"max_parallelism": MAX_PARALLELISM, "parallelism": PARALLELISM,
            "state_backend": backend, "ignore_unclaimed_state": True, "operators": ops}


def java_map(text: str) -> dict[str, int]:
    """A ``HashMap<String, Integer>``'s ``toString`` (``{b0=1, b2=1}``, in hash order) as a dict."""
    inner = text.removeprefix("{").removesuffix("}")
    return {k: int(v) for k, v in (pair.split("=") for pair in inner.split(", ") if pair)}

"""The encoding fixture (EncodingJob.java, made by a real Flink 2.3) holds what the job wrote.

``encoding`` holds values at the edges of Flink's serializers, for the
encoders to be checked on: a String key with a String namespace (each followed
by its length in a canonical composite key), null map values, TTL values
wrapping a null, Rows of every kind, a POJO with null fields, strings with
NUL, surrogates and characters beyond the BMP, NaN and -0.0, timers at the
extremes of a long. Its canonical and native savepoints decode to
``expected.json`` (from the job's tables, in generate.py).
"""

from __future__ import annotations

import base64
import json
import math
import struct
from pathlib import Path
from typing import Any

import pytest

from statesource.flink.snapshot import FlinkSnapshot
from statesource.types import Row

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "flink"
ENCODING = FIXTURES / "encoding"


def _same(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to NaN and -0.0 not equal to 0.0 (floats compared by their bits)."""
    if isinstance(a, float) and isinstance(b, float):
        return (a != a and b != b) or struct.pack(">d", a) == struct.pack(">d", b)
    if isinstance(a, Row) and isinstance(b, Row):
        return a.kind is b.kind and _same(a.fields, b.fields)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


# -- the encoding fixture decodes to what the job wrote -------------------------------------

def _decoded(kind: str) -> dict[str, dict[Any, Any]]:
    """``state name -> {(key, namespace): stored}`` of the fixture's operator."""
    snapshot = FlinkSnapshot.open(str(ENCODING / kind))
    op = snapshot.operator("edges")
    header = snapshot.header(op)
    assert header is not None
    found: dict[str, dict[Any, Any]] = {info.name: {} for info in header.states}
    for _, states in snapshot.read_key_groups(op):
        for state_id, entries in states.items():
            held = found[header.states[state_id].name]
            for key, namespace, stored in zip(entries.keys, entries.namespaces, entries.stored):
                if header.states[state_id].is_timer:
                    held.setdefault(key, []).append([namespace, stored])
                else:
                    held[(key, namespace)] = stored
    return found


def _pojo(fields: dict[str, Any]) -> dict[str, Any]:
    raw = fields["raw"]
    return {**fields, "raw": None if raw is None else base64.b64decode(raw)}


@pytest.mark.parametrize("kind", ["canonical", "native"])
def test_the_encoding_fixture_holds_what_the_job_wrote(kind):
    expected = json.loads((ENCODING / "expected.json").read_text())["keys"]
    found = _decoded(kind)
    for key, want in expected.items():
        assert _same({ns: v for (k, ns), v in found["named"].items() if k == key}, want["named"])
        assert _same(found["nullable"][(key, None)], want["nullable"])
        assert _same({user_key: value for user_key, (value, _) in
                      found["ttl_map"][(key, None)].items()}, want["ttl_map"])
        row = found["rows"][(key, None)]
        assert isinstance(row, Row) and row.kind.short_string == want["rows"]["kind"]
        assert _same(list(row.fields), want["rows"]["fields"])
        assert _same(dict(found["pojo"][(key, None)]), _pojo(want["pojo"]))
        for name in ("texts", "doubles", "floats"):
            assert _same(found[name][(key, None)], want[name]), name
        assert sorted(found["_timer_state/event_edge-timers"][key]) == sorted(
            want["event_timers"])
        assert found["_timer_state/processing_edge-timers"][key] == want["processing_timers"]
    assert {k for k, _ in found["named"]} == set(expected)
    assert math.isnan(expected["k"]["doubles"][2])  # the tables made it into the JSON intact

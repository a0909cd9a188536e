"""``statesource jvm status`` names what the JVM reader serves and every case it hands to the
Python reader, as the planner decides them (the truth: :func:`jvm_layout` and
:func:`jvm_plan` on real snapshots)."""

from __future__ import annotations

from pathlib import Path

import pytest

from statesource.cli import main
from statesource.flink.jvm_layout import jvm_layout
from statesource.flink.reader import FlinkCheckpoint
from statesource.jvm.status import ShimStatus

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "flink"


@pytest.fixture
def status(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    """What ``jvm status`` prints where the shim is available (a jar is built)."""
    monkeypatch.setattr(ShimStatus, "built", property(lambda self: True))
    assert main(["jvm", "status"]) == 0
    return capsys.readouterr().out


def fallbacks(printed: str) -> list[str]:
    lines = printed.splitlines()
    start = next(i for i, line in enumerate(lines) if "fall back to the Python reader" in line)
    return [line.strip()[2:] for line in lines[start + 1:] if line.startswith("  - ")]


def test_native_snapshots_are_served_and_said_to_be(status: str) -> None:
    for layout in ("canonical", "native"):
        checkpoint = FlinkCheckpoint.open(str(FIXTURES / "mp256" / layout))
        assert not isinstance(jvm_layout(checkpoint, "stateful", "total"), str), layout
    served = next(line for line in status.splitlines() if "the JVM reader serves" in line)
    assert "canonical and native" in served and "heap checkpoints" in served
    assert not any("native Flink savepoint" in case for case in fallbacks(status))


def test_every_fallback_the_planner_makes_is_listed(status: str) -> None:
    cases = fallbacks(status)
    native = FlinkCheckpoint.open(str(FIXTURES / "types" / "native"))
    canonical = FlinkCheckpoint.open(str(FIXTURES / "types" / "canonical"))
    # An Avro state: refused in either layout; in a native one it takes its operator's
    # other states (here a POJO state the JVM decodes in the canonical layout) with it.
    assert "serializers the column decoders do not take" in jvm_layout(canonical, "typed",
                                                                       "score")
    assert not isinstance(jvm_layout(canonical, "typed", "point_pojo"), str)
    assert "every state's section" in jvm_layout(native, "typed", "point_pojo")
    (serializers,) = [c for c in cases if "Avro" in c]
    assert "native snapshot, every state of an operator" in serializers
    for words in ("not on the local file system (s3://", "inline in _metadata",
                  "the change feed, operator state", "flattenCollections=false",
                  "Arrow vectors", "delta runs"):
        assert any(words in case for case in cases), (words, cases)

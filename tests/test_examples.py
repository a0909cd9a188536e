"""Every script in examples/ runs (in this process, on the shared SparkSession)."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    sys.path.insert(0, str(EXAMPLES))
    from produce_and_checkpoint import produce

    yield produce(str(tmp_path_factory.mktemp("examples")))
    sys.path.remove(str(EXAMPLES))


@pytest.mark.parametrize("script", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_example_runs(script, checkpoint, spark, monkeypatch, capsys, tmp_path):
    target = str(tmp_path) if script == "produce_and_checkpoint.py" else checkpoint
    monkeypatch.setattr(sys, "argv", [script, target])
    runpy.run_path(str(EXAMPLES / script), run_name="__main__")
    assert capsys.readouterr().out.strip()


def test_restore_example_finds_the_hand_computed_total(checkpoint, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["restore_rescaled.py", checkpoint, "3"])
    runpy.run_path(str(EXAMPLES / "restore_rescaled.py"), run_name="__main__")
    # customer-7 receives every event i with i % 500 == 7 among 20,000: sum of 7 + 500k, k < 40
    assert "customer-7: total 390280, 40 orders" in capsys.readouterr().out


def test_rewrite_example_changes_what_it_says(checkpoint, spark, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["rewrite_state.py", checkpoint])
    runpy.run_path(str(EXAMPLES / "rewrite_state.py"), run_name="__main__")
    out = capsys.readouterr().out
    # customer-7's total was fixed to 0, then migrated into the record with a currency
    assert "customer-7: total {'total': 0, 'currency': 'EUR'}, 40 orders, tier gold" in out
    assert "customer-9: total None, 0 orders, tier gold" in out  # erased, then bootstrapped
    assert "customer-11: total {'total': 390440, 'currency': 'EUR'}, 40 orders" in out
    assert [line.split()[-1] for line in out.splitlines() if "checkpoint" in line][-4:] == [
        "3", "4", "5", "6"]

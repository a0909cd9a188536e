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
    out = capsys.readouterr().out
    for expected in EXPECTED_OUTPUT[script]:
        assert expected in out, (script, expected)


# What each example must print, computed by hand from produce_and_checkpoint.py: 20,000
# orders, order i of amount i to customer-(i % 500), 40 orders per customer. customer-c's
# total is 40 * c + 500 * (0 + 1 + ... + 39) = 40 * c + 390,000: 391,680 for customer-42,
# 409,960 for customer-499, the largest.
EXPECTED_OUTPUT = {
    "produce_and_checkpoint.py": ["checkpoint 1 written at", "checkpoint 2 written at"],
    "read_dataframes.py": ["|orders-by-customer|totals    |value|500    |500  |",
                           "|orders-by-customer|orders    |list |500    |20000|",
                           "|customer-499|NULL     |409960|", "|customer-498|NULL     |409920|",
                           "|customer-0 |40   |"],
    "sql_inspection.py": ["|orders-by-customer|", "subtask_if_parallelism_4"],
    "point_lookup.py": ["'key': 'customer-42'", "391680"],
    "restore_rescaled.py": ["customer-7: total 390280, 40 orders"],
    # rewrite_state.py works on a copy: customer-7's total fixed to 0, then migrated into a
    # record with a currency; customer-9 erased, then given a tier; checkpoints 3 to 6.
    "rewrite_state.py": ["customer-7: total {'total': 0, 'currency': 'EUR'}, 40 orders, tier gold",
                         "customer-9: total None, 0 orders, tier gold",
                         "customer-11: total {'total': 390440, 'currency': 'EUR'}, 40 orders",
                         "fixed totals in checkpoint 3", "erased customer-9 in checkpoint 4",
                         "new schema in checkpoint 5", "bootstrapped tiers in checkpoint 6"],
}

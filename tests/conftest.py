"""Test-session fixtures: one SparkSession for the whole run (starting one costs ~20 s).

Markers are applied here, not by hand (both are registered in pyproject.toml):

- ``spark``: the test needs a SparkSession / JVM: it uses the ``spark`` fixture, directly or
  through another fixture, or lives under tests/spark/ (the connector's tests, most of which
  start Spark, some in a subprocess). ``pytest -m "not spark"`` runs the rest without a JVM.
- ``golden``: the test reads Flink's output from ../shared: the vectors in flink-golden
  (tests/test_golden.py) or the savepoints in flink-savepoints (tests/flink/, and
  tests/spark/test_flink_snapshots.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
GOLDEN_FILES = {"test_golden.py", "test_shared_snapshots.py", "test_errors.py", "test_import.py",
                "test_flink_snapshots.py"}


@pytest.fixture(scope="session")
def spark():
    from statesource.spark import session

    spark = session("statesource-tests", master="local[2]", register_sources=False)
    yield spark
    spark.stop()


@pytest.hookimpl(tryfirst=True)  # before -m deselects anything
def pytest_collection_modifyitems(config, items):
    for item in items:
        path = Path(str(item.path)).resolve()
        relative = path.relative_to(TESTS).parts if path.is_relative_to(TESTS) else ()
        if "spark" in getattr(item, "fixturenames", ()) or relative[:1] == ("spark",):
            item.add_marker(pytest.mark.spark)
        if relative and relative[-1] in GOLDEN_FILES:
            item.add_marker(pytest.mark.golden)

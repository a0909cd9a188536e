"""Test-session fixtures: one SparkSession for the whole run (starting one costs ~20 s)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from statesource.spark import session

    spark = session("statesource-tests", master="local[2]", register_sources=False)
    yield spark
    spark.stop()

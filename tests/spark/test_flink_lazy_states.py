"""Lazily registered states through Spark: each key group read with its own file's header.

The ``lazy`` fixture (LazyJob.java by a real Flink 2.3; tests/flink/test_lazy_states.py)
has files that list different states and number them differently; Spark reads every state
exactly as the job's model says, with the shim too where it loads (it hands such
operators to the Python source), and the metadata view lists every state.
"""

from __future__ import annotations

import pytest
from lazy_fixture import LAZY, STATES, by_key, expected

pytestmark = pytest.mark.spark


def _read(spark, kind: str, state: str) -> dict:
    return by_key(state, (row.asDict() for row in spark.read.format("flinkstate")
                          .option("operator", "lazy").option("state", state)
                          .load(str(LAZY / kind)).collect()))


@pytest.mark.parametrize("kind", ["canonical", "rocksdb", "native"])
def test_every_state_reads_exactly(spark, kind):
    for state in STATES:
        found = _read(spark, kind, state)
        if STATES[state] == "list":  # rows of a list in no guaranteed order across tasks
            found = {key: sorted(elements) for key, elements in found.items()}
        assert found == expected(state), state


def test_the_metadata_view_lists_every_state(spark):
    rows = spark.read.format("flinkstate-metadata").load(str(LAZY / "rocksdb")).collect()
    named = {row["state_name"] for row in rows if row["operator_uid"] == "lazy"}
    assert set(STATES) <= named

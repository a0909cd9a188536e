"""Lazily registered states through Spark: each key group read with its own file's header.

The ``lazy`` fixture (LazyJob.java by a real Flink 2.3; tests/flink/test_lazy_states.py)
has files that list different states and number them differently; Spark reads every state
exactly as the job's model says, on both readers: the Python source, and the JVM reader,
which decodes each file with its own numbering (the plan's variants) and must do the read
itself, not hand it to the Python source. The metadata view lists every state.
"""

from __future__ import annotations

import pytest
from conftest import READ_PATHS
from lazy_fixture import JVM_KINDS, KINDS, LAZY, STATES, by_key, expected

pytestmark = pytest.mark.spark

JVM_SCAN = "Flink key groups"
"""What the JVM reader's scan of Flink key groups says in the executed plan."""


@pytest.mark.parametrize("kind", KINDS)
def test_every_state_reads_exactly(source_format, spark, kind):
    for state in STATES:
        df = (spark.read.format(source_format).option("operator", "lazy")
              .option("state", state).load(str(LAZY / kind)))
        executed = df._jdf.queryExecution().executedPlan().toString()
        on_jvm = source_format == READ_PATHS["jvm"] and kind in JVM_KINDS  # else Python's
        assert (JVM_SCAN in executed) == on_jvm, (state, executed)
        found = by_key(state, (row.asDict() for row in df.collect()))
        if STATES[state] == "list":  # rows of a list in no guaranteed order across tasks
            found = {key: sorted(elements) for key, elements in found.items()}
        assert found == expected(state), state


def test_the_metadata_view_lists_every_state(spark):
    rows = spark.read.format("flinkstate-metadata").load(str(LAZY / "rocksdb")).collect()
    named = {row["state_name"] for row in rows if row["operator_uid"] == "lazy"}
    assert set(STATES) <= named

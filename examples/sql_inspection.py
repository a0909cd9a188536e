"""Inspect a checkpoint with SQL: views over states and over the metadata.

    python examples/sql_inspection.py [CHECKPOINT_DIR]
"""

from __future__ import annotations

import sys

from produce_and_checkpoint import produce, scratch_dir

from statesource.spark import session

path = sys.argv[1] if len(sys.argv) > 1 else produce(scratch_dir())
spark = session()

# Views are registered from DataFrames, so the path is never pasted into SQL text.
spark.read.format("flinkstate-metadata").load(path).createOrReplaceTempView("checkpoint_states")
spark.sql("SELECT operator_uid, state_name, kind, entries, rows, bytes"
          " FROM checkpoint_states").show()

(spark.read.format("flinkstate").options(state="orders", parallelism="4").load(path)
 .createOrReplaceTempView("orders"))
spark.sql("""
    SELECT operator_index AS subtask_if_parallelism_4, count(DISTINCT key) AS customers,
           count(*) AS orders
    FROM orders GROUP BY operator_index ORDER BY subtask_if_parallelism_4
""").show()

"""Inspect a checkpoint with SQL: views over states and over the metadata.

    python examples/sql_inspection.py [CHECKPOINT_DIR]
"""

from __future__ import annotations

import sys
import tempfile

from produce_and_checkpoint import produce

from statesource.spark import session

path = sys.argv[1] if len(sys.argv) > 1 else produce(tempfile.mkdtemp(prefix="statesource-"))
spark = session()

spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW checkpoint_states USING `flinkstate-metadata`"
          f" OPTIONS (path '{path}')")
spark.sql("SELECT operator_uid, state_name, kind, entries, rows, bytes"
          " FROM checkpoint_states").show()

spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW orders USING flinkstate"
          f" OPTIONS (path '{path}', state 'orders', parallelism '4')")
spark.sql("""
    SELECT operator_index AS subtask_if_parallelism_4, count(DISTINCT key) AS customers,
           count(*) AS orders
    FROM orders GROUP BY operator_index ORDER BY subtask_if_parallelism_4
""").show()

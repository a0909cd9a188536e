"""Look up one key's state: with Spark (reading one key group) and without Spark.

    python examples/point_lookup.py [CHECKPOINT_DIR] [KEY]
"""

from __future__ import annotations

import sys

from produce_and_checkpoint import produce, scratch_dir
from pyspark.sql.functions import col

from statesource.format import Checkpoint
from statesource.keygroups import KeyGroupRange, assign_to_key_group
from statesource.spark import session

path = sys.argv[1] if len(sys.argv) > 1 else produce(scratch_dir())
key = sys.argv[2] if len(sys.argv) > 2 else "customer-42"

# Without Spark: compute the key's Flink key group and read only that key group's bytes.
checkpoint = Checkpoint.open(path)
operator = checkpoint.operator()
key_group = assign_to_key_group(key, operator.key_type, operator.max_parallelism)
for table in checkpoint.read_keyed_state("totals", key_groups=KeyGroupRange(key_group, key_group)):
    print([row for row in table.to_pylist() if row["key"] == key])

# With Spark: filterPushdown turns `key = ...` into that key group. Use a fresh DataFrame per
# lookup (see docs/SPARK.md, "Filter pushdown"). The key is a value, never pasted into SQL text.
spark = session()
lookup = (spark.read.format("flinkstate").option("state", "totals")
          .option("filterPushdown", "true").load(path).where(col("key") == key))
lookup.show()

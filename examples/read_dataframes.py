"""Read keyed state as Spark DataFrames.

    python examples/read_dataframes.py [CHECKPOINT_DIR]
"""

from __future__ import annotations

import sys

from produce_and_checkpoint import produce, scratch_dir

from statesource.spark import session

path = sys.argv[1] if len(sys.argv) > 1 else produce(scratch_dir())
spark = session()

totals = spark.read.format("flinkstate").option("state", "totals").load(path)
totals.printSchema()
totals.orderBy("value", ascending=False).show(3)

# List state: one row per element by default, or one array per key.
orders = spark.read.format("flinkstate").option("state", "orders")
orders.load(path).groupBy("key").count().orderBy("count", ascending=False).show(3)
orders.option("flattenCollections", "false").load(path).select("key", "list_value").show(3)

"""Read keyed state as Spark DataFrames: every keyed state a checkpoint holds, found in its
metadata and shown in the shape of its kind.

    python examples/read_dataframes.py [CHECKPOINT_DIR]

CHECKPOINT_DIR is any checkpoint, or directory of checkpoints (the newest is read): the
demo's (``statesource demo --output DIR``), a Flink savepoint, or, when none is given, the
orders that produce_and_checkpoint.py writes.
"""

from __future__ import annotations

import sys

from produce_and_checkpoint import produce, scratch_dir
from pyspark.sql import functions as F

from statesource.spark import session

KEYED_KINDS = ("value", "reducing", "aggregating", "list", "map")

path = sys.argv[1] if len(sys.argv) > 1 else produce(scratch_dir())
spark = session()

# What the checkpoint holds, from its metadata alone: one row per state.
states = spark.read.format("flinkstate-metadata").load(path)
states.select("operator_uid", "state_name", "kind", "entries", "rows").show(truncate=False)

for state in states.where(F.col("kind").isin(*KEYED_KINDS)).collect():
    reader = spark.read.format("flinkstate").options(operator=state.operator_uid,
                                                     state=state.state_name)
    rows = reader.load(path)
    print(f"-- {state.kind} state {state.state_name} of operator {state.operator_uid}")
    rows.printSchema()
    if state.kind in ("list", "map"):
        # One row per list element or map entry by default, or one collection per key.
        rows.groupBy("key").count().orderBy(F.desc("count"), "key").show(3, truncate=False)
        whole = "list_value" if state.kind == "list" else "map_value"
        reader.option("flattenCollections", "false").load(path) \
            .select("key", "namespace", whole).show(3, truncate=False)
    else:
        value = "accumulator" if state.kind == "aggregating" else "value"
        rows.orderBy(F.desc(value), "key").show(3, truncate=False)

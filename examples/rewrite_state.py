"""Rewrite checkpoints with Spark: fix values, erase a customer, change a schema, bootstrap.

    python examples/rewrite_state.py [CHECKPOINT_DIR]

Works on a copy of CHECKPOINT_DIR (in a temporary directory, removed at the
end); every step commits one new checkpoint and leaves the earlier ones as they
were.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from produce_and_checkpoint import produce, scratch_dir
from pyspark.sql import functions as F

from statesource import Checkpoint, restore_keyed_backend
from statesource.spark import rewrite, session, write_state
from statesource.state.descriptors import ListStateDescriptor, ValueStateDescriptor

source = sys.argv[1] if len(sys.argv) > 1 else produce(scratch_dir())
path = str(Path(scratch_dir("statesource-rewrite-")) / "checkpoints")
shutil.copytree(source, path)
spark = session()
op = "orders-by-customer"


def state(name: str):
    return spark.read.format("flinkstate").option("state", name).load(path)


# 1. Fix a bad value: customer-7's total is reset to 0; every other state is carried over.
totals = state("totals")
fixed = totals.withColumn(
    "value", F.when(F.col("key") == "customer-7", F.lit(0)).otherwise(F.col("value")))
print("fixed totals in checkpoint", write_state(fixed, path, op, "totals").checkpoint_id)

# 2. Erase customer-9 from every keyed state of the operator, in one checkpoint.
with rewrite(spark, path) as erase:
    for name in ("totals", "orders"):
        erase.replace(state(name).filter(F.col("key") != "customer-9"), op, name)
print("erased customer-9 in checkpoint", erase.info.checkpoint_id)

# 3. Add a field to a value schema: totals become a record {total, currency}.
record = {"type": "record", "name": "Total",
          "fields": [{"name": "total", "type": "long"}, {"name": "currency", "type": "string"}]}
with rewrite(spark, path) as migrate:
    migrate.drop(op, "totals")
    migrate.replace(
        state("totals").select("key", F.struct(F.col("value").alias("total"),
                                               F.lit("EUR").alias("currency")).alias("value")),
        op, "totals", kind="value", value_schemas={"value": record})
print("new schema in checkpoint", migrate.info.checkpoint_id)

# 4. Bootstrap a new state from a table: each customer's tier.
tiers = spark.createDataFrame([(f"customer-{i}", "gold" if i < 50 else "silver")
                               for i in range(500)], "key string, value string")
print("bootstrapped tiers in checkpoint", write_state(tiers, path, op, "tier",
                                                      kind="value").checkpoint_id)

# 5. Restore the result in the Python backend, at another parallelism.
checkpoint = Checkpoint.open(path)
for subtask in range(3):
    backend = restore_keyed_backend(checkpoint, subtask, 3)
    totals_state = backend.get_state(ValueStateDescriptor("totals", record))
    orders_state = backend.get_state(ListStateDescriptor("orders", "long"))
    tier_state = backend.get_state(ValueStateDescriptor("tier", "string"))
    for customer in ("customer-7", "customer-9", "customer-11"):
        try:
            backend.set_current_key(customer)
        except ValueError:
            continue  # another subtask owns it
        print(f"{customer}: total {totals_state.value()}, {len(orders_state.get())} orders,"
              f" tier {tier_state.value()} (subtask {subtask})")

"""Restore a program's state at another parallelism: what a rescaled job starts from.

    python examples/restore_rescaled.py [CHECKPOINT_DIR] [PARALLELISM]
"""

from __future__ import annotations

import sys

from produce_and_checkpoint import produce, scratch_dir

from statesource import Checkpoint, restore_keyed_backend
from statesource.keygroups import assign_to_key_group, operator_index_for_key_group
from statesource.state.descriptors import ListStateDescriptor, ValueStateDescriptor

path = sys.argv[1] if len(sys.argv) > 1 else produce(scratch_dir())
parallelism = int(sys.argv[2]) if len(sys.argv) > 2 else 3
customer = "customer-7"

checkpoint = Checkpoint.open(path)
operator = checkpoint.operator()
owner = operator_index_for_key_group(
    operator.max_parallelism, parallelism,
    assign_to_key_group(customer, operator.key_type, operator.max_parallelism))
for subtask in range(parallelism):
    # Each subtask reads only the byte ranges of the key groups Flink assigns it.
    backend = restore_keyed_backend(checkpoint, subtask, parallelism)
    print(f"subtask {subtask} of {parallelism} owns key groups {backend.key_group_range}")
    if subtask == owner:
        backend.set_current_key(customer)
        totals = backend.get_state(ValueStateDescriptor("totals", "long"))
        orders = backend.get_state(ListStateDescriptor("orders", "long"))
        print(f"  {customer}: total {totals.value()}, {len(orders.get())} orders")

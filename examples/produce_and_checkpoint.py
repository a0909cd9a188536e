"""Keep keyed state in a Python program and checkpoint it in the background.

    python examples/produce_and_checkpoint.py [CHECKPOINT_DIR]
"""

from __future__ import annotations

import atexit
import shutil
import sys
import tempfile

from statesource import CheckpointWriter
from statesource.state.descriptors import ListStateDescriptor, ValueStateDescriptor
from statesource.state.keyed_backend import KeyedStateBackend


def scratch_dir(prefix: str = "statesource-") -> str:
    """A temporary directory for an example's checkpoints, removed when the example ends."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, True)
    return path


def produce(checkpoint_dir: str, events: int = 20_000) -> str:
    backend = KeyedStateBackend("string", max_parallelism=128)
    totals = backend.get_state(ValueStateDescriptor("totals", "long"))
    orders = backend.get_state(ListStateDescriptor("orders", "long"))
    with CheckpointWriter(checkpoint_dir) as writer:
        for i in range(events):
            backend.set_current_key(f"customer-{i % 500}")
            totals.update((totals.value() or 0) + i)
            orders.add(i)
            if i == events // 2:
                first = writer.write_async(1, {"orders-by-customer": [backend]})
        # The program kept running while checkpoint 1 was written; it holds the state at
        # event 10,000, whatever happened after.
        print(f"checkpoint {first.result().checkpoint_id} written at {first.result().path}")
        last = writer.write(2, {"orders-by-customer": [backend]})
    print(f"checkpoint {last.checkpoint_id} written at {last.path}")
    return checkpoint_dir


if __name__ == "__main__":
    produce(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="statesource-"))

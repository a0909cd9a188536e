"""Full-snapshot TTL cleanup at the exact cutoff, through incremental checkpoints.

Flink's rule (``TtlUtils.expired``): a value last accessed at ``t`` with time-to-live
``ttl`` has expired at ``now`` exactly when ``t + ttl <= now``. A checkpoint taken with
full-snapshot cleanup holds no expired value, whether its key group was written again or
referenced from the checkpoint before.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from statesource.checkpointing import CheckpointWriter
from statesource.format import Checkpoint
from statesource.model import TtlConfig
from statesource.state.clock import ManualClock
from statesource.state.descriptors import ValueStateDescriptor
from statesource.state.keyed_backend import KeyedStateBackend

TTL_MS = 5_000
WRITTEN_AT = 1_000_000
CLEANED = ValueStateDescriptor(
    "cleaned", "long", ttl=TtlConfig(timedelta(milliseconds=TTL_MS), cleanup_full_snapshot=True))


def _keys(root: str, checkpoint_id: int) -> set[str]:
    checkpoint = Checkpoint.open(root, checkpoint_id=checkpoint_id)
    return {key for table in checkpoint.read_keyed_state("cleaned")
            for key in table.column("key").to_pylist()}


@pytest.mark.parametrize("incremental", [True, False])
@pytest.mark.parametrize("later, kept", [(TTL_MS - 1, {"a", "b"}), (TTL_MS, set())])
def test_a_value_expires_when_its_last_access_plus_ttl_reaches_now(tmp_path, incremental,
                                                                   later, kept):
    """Written at 1,000,000 with a 5 s TTL: still there at 1,004,999, gone at 1,005,000, in
    a checkpoint that references its key groups from the one before (nothing changed) as
    in one that writes everything."""
    clock = ManualClock(WRITTEN_AT)
    backend = KeyedStateBackend("string", 16, clock=clock)
    state = backend.get_state(CLEANED)
    for number, key in enumerate(("a", "b")):
        backend.set_current_key(key)
        state.update(number)
    root = str(tmp_path / "root")
    with CheckpointWriter(root, incremental=incremental) as writer:
        writer.write(1, {"op": [backend]})
        clock.set(WRITTEN_AT + later)
        writer.write(2, {"op": [backend]})
    assert _keys(root, 1) == {"a", "b"}
    assert _keys(root, 2) == kept

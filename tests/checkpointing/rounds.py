"""Rounds of random mutations and checkpoints (full, incremental, failing) of a :class:`Job`."""

from __future__ import annotations

import pytest

import statesource.checkpointing.writer as writer_module
from checkpointing.model import PARALLELISM, Job
from sample_state import dump, merged
from statesource.checkpointing import CheckpointWriter, restore_keyed_backend
from statesource.format import Checkpoint

NON_TTL_STATES = ("value", "windowed", "list", "map")


def restored(root: str, checkpoint_id: int, parallelism: int) -> dict:
    checkpoint = Checkpoint.open(root, checkpoint_id=checkpoint_id)
    return merged([dump(restore_keyed_backend(checkpoint, i, parallelism))
                   for i in range(parallelism)])


def check_restores(root: str, checkpoint_id: int, expected: dict) -> None:
    for parallelism in (PARALLELISM, 3):
        assert restored(root, checkpoint_id, parallelism) == expected, (
            f"checkpoint {checkpoint_id} at parallelism {parallelism}")


def fail_writing(*args, **kwargs):
    raise OSError("disk full (injected)")


def check_incremental(info, touched: set[tuple[str, int]]) -> None:
    """New files and runs hold only touched key groups; every other key group comes from
    older files. (A touched key group may get nothing new: an entry created and removed
    again since the last checkpoint, or one removed that never existed, changes nothing.)"""
    own = f"chk-{info.checkpoint_id}/"
    for state in info.metadata.operator().keyed_states:
        if state.name not in NON_TTL_STATES:
            continue
        pieces = [(f.path, loc) for f, loc in state.key_group_locations()]
        pieces += [(d.path, loc) for d in state.delta_files for loc in d.file.locations]
        for path, location in pieces:
            if path.startswith(own):
                assert (state.name, location.key_group) in touched, (state.name, location)


def run_rounds(root: str, seed: int, monkeypatch, rounds: int = 14,
               keys: int = 60, warmup: int = 0, **writer_options) -> dict[int, dict]:
    """Random rounds of mutations and checkpoints, after ``warmup`` writes; returns the
    expected content per id."""
    job = Job(seed, keys)
    job.mutate(warmup)
    committed: dict[int, dict] = {}
    modes = ["full"] + [job.rng.choice(["incremental", "incremental", "full", "failing",
                                        "restore"])
                        for _ in range(rounds - 1)]
    with CheckpointWriter(root, incremental=True, **writer_options) as writer:
        for checkpoint_id, mode in enumerate(modes, start=1):
            job.mutate(job.rng.randrange(1, 12), hot_keys=job.rng.randrange(1, 6))
            if mode == "restore":  # the program restarts from its newest checkpoint
                last = max(committed)
                job.restore(Checkpoint.open(root, checkpoint_id=last), committed[last],
                            job.rng.choice([PARALLELISM, 3]))
                continue
            expected = job.expected()
            with monkeypatch.context() as patch:
                if mode == "failing":
                    patch.setattr(writer_module, "write_keyed_file", fail_writing)
                    patch.setattr(writer_module, "write_delta_file", fail_writing)
                pending = writer.write_async(checkpoint_id, {"op": job.backends},
                                             incremental=mode != "full")
                if mode == "failing":
                    with pytest.raises(OSError, match="injected"):
                        pending.result()
                    continue
                info = pending.result()
            if mode == "incremental":
                check_incremental(info, job.touched)
            job.touched = set()
            committed[checkpoint_id] = expected
            check_restores(root, checkpoint_id, expected)
    return committed



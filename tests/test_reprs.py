"""What statesource returns prints short in a notebook: ids, counts and paths, never every
file or key, however large the checkpoint or the request."""

from __future__ import annotations

from pathlib import Path

import pytest

from statesource import Checkpoint, open_source, retain
from statesource.demo.clickstream import clicks
from statesource.demo.job import UserActivityJob
from statesource.flink.operations.edit import erase_keys

FLINK = Path(__file__).resolve().parent / "fixtures" / "flink" / "mp256" / "canonical"
SHORT = 200


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    job = UserActivityJob(str(root), parallelism=4, max_parallelism=128)
    info = job.run(clicks(20_000), 5_000, lambda position, pending: None).result()
    job.writer.close()
    return root, info


def test_the_demo_checkpoint_prints_its_id_location_and_counts(demo):
    root, info = demo
    files = len(info.metadata.referenced_files())
    assert files > 20  # the default repr would list every one, with every key group
    assert repr(info) == (f"CheckpointInfo(checkpoint_id=4, location='{root}/chk-4',"
                          f" operators=1, states=6, files={files})")
    assert repr(Checkpoint.open(str(root))) == (
        f"Checkpoint(checkpoint_id=4, location='{root}/chk-4')")


def test_a_retention_plan_counts_its_files(demo, tmp_path):
    root, _ = demo
    plan = retain(str(root), 1, dry_run=True)
    assert len(plan.deleted_files) > 20
    assert repr(plan) == (f"RetentionPlan(kept=(4,), retired=(1, 2, 3),"
                          f" deleted_files={len(plan.deleted_files)}, shared_files=0,"
                          " orphans=0, abandoned=0, pinned_files=0, expired_pins=0,"
                          " empty_dirs=0)")


def test_an_erasure_counts_the_keys_it_did_not_find(tmp_path):
    done = erase_keys(FLINK, tmp_path / "erased", "stateful", range(10_000, 20_000))
    assert len(done.missing) == 10_000
    assert "missing=10000 keys" in repr(done) and len(repr(done)) < SHORT


def test_a_flink_snapshot_prints_its_id_and_location():
    assert repr(open_source(FLINK / "_metadata")) == (
        f"FlinkCheckpoint(checkpoint_id=1, location='{FLINK}')")

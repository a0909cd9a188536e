"""A new max parallelism through Spark: every key re-keyed Flink-exactly, nothing else changed."""

from __future__ import annotations

import hashlib
from collections import Counter
from datetime import timedelta

import pytest

from sample_state import dump, merged
from statesource import (
    Checkpoint,
    CheckpointWriter,
    StateNotFoundError,
    SubtaskBackends,
    restore_keyed_backend,
    restore_operator_backend,
)
from statesource.cli import main
from statesource.errors import InvalidArgumentError
from statesource.keygroups import (
    assign_to_key_group,
    key_group_range_for_operator,
    operator_index_for_key_group,
)
from statesource.model import TtlConfig
from statesource.rescale import publish
from statesource.spark.write import rescale as spark_rescale
from statesource.spark.write.rescale import rescale_max_parallelism
from statesource.state import (
    ListStateDescriptor,
    MapStateDescriptor,
    OperatorStateBackend,
    ValueStateDescriptor,
)
from statesource.state.clock import ManualClock
from statesource.state.keyed_backend import KeyedStateBackend
from statesource.types import key_type

KEY_TYPE = key_type("tuple<string,int>")
KEYS = [(f"user-{i}", i % 7) for i in range(150)]
CLOCK = ManualClock(1_700_000_000_000)
DESCRIPTORS = [
    ValueStateDescriptor("windowed", "string", namespace_type="long"),
    ListStateDescriptor("ttl_list", "long", ttl=TtlConfig(timedelta(hours=1))),
    MapStateDescriptor("map", "string", "long"),
]


def populate(backend: KeyedStateBackend, keys) -> None:
    windowed, ttl_list, entries = (backend.get_state(d) for d in DESCRIPTORS)
    for i, key in enumerate(keys):
        backend.set_current_key(key)
        for window in (0, 60_000):
            backend.set_current_namespace(window)
            windowed.update(f"{key[0]}@{window}")
        ttl_list.add_all([i, i + 1, i - 1][: i % 3 + 1])
        entries.put_all({f"m{j}": j * i for j in range(i % 4)})


@pytest.fixture
def root(tmp_path):
    subtasks = []
    for index in range(2):
        owned = key_group_range_for_operator(128, 2, index)
        keyed = KeyedStateBackend(KEY_TYPE, 128, owned, clock=CLOCK)
        populate(keyed, [k for k in KEYS if assign_to_key_group(k, KEY_TYPE, 128) in owned])
        operator = OperatorStateBackend()
        operator.get_list_state("offsets", "long").update([index * 10 + j for j in range(3)])
        subtasks.append(SubtaskBackends(keyed=keyed, operator=operator))
    CheckpointWriter(str(tmp_path)).write(1, {"events": subtasks})
    return tmp_path


def fingerprint(root) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def restored(root, parallelism: int, max_parallelism: int) -> dict:
    checkpoint = Checkpoint.open(str(root))
    op = checkpoint.operator("events")
    assert (op.parallelism, op.max_parallelism) == (parallelism, max_parallelism)
    contents = []
    for index in range(parallelism):
        backend = restore_keyed_backend(checkpoint, index, parallelism, clock=CLOCK)
        content = dump(backend)
        for entries in content.values():
            for key, _ in entries:
                group = assign_to_key_group(key, KEY_TYPE, max_parallelism)
                assert operator_index_for_key_group(max_parallelism, parallelism, group) == index
        contents.append(content)
    return merged(contents)


@pytest.mark.parametrize(("parallelism", "max_parallelism"), [(1, 1), (3, 7), (4, 1000),
                                                              (2, 32768)])
def test_every_key_lands_where_flink_puts_it_and_nothing_changes(spark, root, parallelism,
                                                                  max_parallelism):
    original = merged([dump(restore_keyed_backend(Checkpoint.open(str(root)), i, 2, clock=CLOCK))
                       for i in range(2)])
    before = fingerprint(root)
    lines: list[str] = []
    info = rescale_max_parallelism(spark, str(root), None, max_parallelism,
                                   parallelism=parallelism, progress=lines.append)
    assert info.checkpoint_id == 2
    assert restored(root, parallelism, max_parallelism) == original
    assert {k: v for k, v in fingerprint(root).items() if not k.startswith("chk-2/")} == before
    assert any("re-keying state ttl_list" in line for line in lines)
    shares = Counter(e for i in range(parallelism) for e in restore_operator_backend(
        Checkpoint.open(str(root)), i, parallelism).get_list_state("offsets", "long").get())
    assert shares == Counter([0, 1, 2, 10, 11, 12])


def test_bad_requests_are_refused_before_any_job(spark, root):
    before = fingerprint(root)
    with pytest.raises(InvalidArgumentError, match="max parallelism 40000"):
        rescale_max_parallelism(spark, str(root), None, 40000)
    with pytest.raises(InvalidArgumentError, match="must not exceed the new max parallelism 4"):
        rescale_max_parallelism(spark, str(root), None, 4, parallelism=5)
    with pytest.raises(InvalidArgumentError, match="must not exceed the new max parallelism 1"):
        rescale_max_parallelism(spark, str(root), None, 1)  # the operator runs at parallelism 2
    with pytest.raises(StateNotFoundError, match="no operator named 'nope'"):
        rescale_max_parallelism(spark, str(root), None, 256, operator="nope")
    assert main(["rescale", str(root / "missing"), "--max-parallelism", "256"]) == 1
    assert fingerprint(root) == before


def test_a_failing_job_leaves_no_files_and_no_pin(spark, root, monkeypatch):
    """The plan pinned the source on the driver: a job failing before the commit removes
    that pin too (on the driver), not only the files written."""
    before = fingerprint(root)

    def fail(*args, **kwargs):
        raise OSError("executor lost (injected)")

    monkeypatch.setattr(spark_rescale, "write_state_files", fail)
    with pytest.raises(OSError, match="executor lost"):
        rescale_max_parallelism(spark, str(root), None, 256)
    assert fingerprint(root) == before
    assert not (root / "_pins").exists()


def test_a_failing_commit_leaves_nothing_visible_and_no_files(spark, root, monkeypatch):
    before = fingerprint(root)

    def refuse(*args, **kwargs):
        raise OSError("disk full (injected)")

    monkeypatch.setattr(publish, "commit_checkpoint", refuse)
    # The commit runs on the driver; here, in this process, so that the injected failure
    # applies to it (the Spark jobs before it still write their files).
    monkeypatch.setattr(spark_rescale, "commit_on_driver", lambda _, step, *args: step(*args))
    with pytest.raises(Exception, match="disk full"):
        rescale_max_parallelism(spark, str(root), None, 256)
    assert fingerprint(root) == before
    assert Checkpoint.open(str(root)).checkpoint_id == 1
